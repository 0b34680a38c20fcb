"""docs/kubernetes/: the master and worker manifests parse, their container arguments are real
`harness` commands and flags, and the two agree (worker count, service name, port, config map)."""

from __future__ import annotations

from pathlib import Path

import yaml

from harness.cli.main import build_parser

K8S = Path(__file__).resolve().parents[1] / "docs" / "kubernetes"


def _docs(name: str) -> dict[str, dict]:
    return {d["kind"]: d for d in yaml.safe_load_all((K8S / name).read_text())}


def _container(job: dict) -> dict:
    (container,) = job["spec"]["template"]["spec"]["containers"]
    return container


def test_manifests_agree_and_their_commands_parse() -> None:
    master, workers = _docs("master.yaml"), _docs("workers.yaml")
    parser = build_parser()
    m_args = parser.parse_args(_container(master["Job"])["args"])
    w_args = parser.parse_args(_container(workers["Job"])["args"])
    assert m_args.command == "run" and m_args.remote_workers and m_args.distributed >= 1
    assert w_args.command == "worker"
    # as many worker pods as the master waits for
    assert workers["Job"]["spec"]["parallelism"] == workers["Job"]["spec"]["completions"] == m_args.distributed
    # the workers reach the master by its Service, on the port it listens on
    service = master["Service"]
    assert w_args.master_host == service["metadata"]["name"]
    assert w_args.master_port == m_args.master_port == service["spec"]["ports"][0]["port"]
    assert service["spec"]["selector"] == master["Job"]["spec"]["template"]["metadata"]["labels"]
    # the scenario comes from the config map, the run directory goes to the claim
    volumes = {v["name"]: v for v in master["Job"]["spec"]["template"]["spec"]["volumes"]}
    mounts = {m["name"]: m["mountPath"] for m in _container(master["Job"])["volumeMounts"]}
    assert volumes["scenario"]["configMap"]["name"] == "harness-scenario"
    assert m_args.scenario.startswith(mounts["scenario"] + "/")
    assert (
        volumes["results"]["persistentVolumeClaim"]["claimName"] == master["PersistentVolumeClaim"]["metadata"]["name"]
    )
    assert str(m_args.out).startswith(mounts["results"] + "/")
    # one load process per worker pod: exactly one CPU each
    res = _container(workers["Job"])["resources"]
    assert res["requests"]["cpu"] == res["limits"]["cpu"] == "1"
