"""Distributed load across separate hosts: a master and two workers, each in its own network
namespace with its own address on a private LAN (veth pairs to a bridge), the target in a fourth.

Nothing here goes over loopback: the workers reach the master and the target by their LAN
addresses, as on separate machines. Needs root and iproute2 (`.ci/run` runs as root and installs
it); skipped with the reason elsewhere.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SUBNET = "10.77.0"
ADDR = {"master": f"{SUBNET}.1", "w1": f"{SUBNET}.2", "w2": f"{SUBNET}.3", "target": f"{SUBNET}.10"}


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True, timeout=30)


def _why_no_netns() -> str | None:
    if not sys.platform.startswith("linux"):
        return "network namespaces are Linux-only"
    if os.geteuid() != 0:
        return "making network namespaces needs root (.ci/run runs as root)"
    if shutil.which("ip") is None:
        return "iproute2 (the ip command) is not installed"
    probe = f"hp{uuid.uuid4().hex[:8]}"
    try:
        _ip("netns", "add", probe)
        _ip("netns", "del", probe)
    except subprocess.CalledProcessError as exc:
        return f"cannot make a network namespace here: {exc.stderr.strip()[:200]}"
    return None


pytestmark = pytest.mark.skipif(_why_no_netns() is not None, reason=str(_why_no_netns()))


class Lan:
    """Namespaces on one bridge: every host its own address, no route to anything else."""

    def __init__(self) -> None:
        self.tag = uuid.uuid4().hex[:6]
        self.names = {role: f"h{self.tag}{role}" for role in ADDR}
        self.switch = f"h{self.tag}sw"

    def __enter__(self) -> Lan:
        _ip("netns", "add", self.switch)
        _ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
        _ip("-n", self.switch, "link", "set", "br0", "up")
        for i, (role, ns) in enumerate(self.names.items()):
            _ip("netns", "add", ns)
            host_end, switch_end = f"v{self.tag}{i}a", f"v{self.tag}{i}b"
            _ip("link", "add", host_end, "type", "veth", "peer", "name", switch_end)
            _ip("link", "set", host_end, "netns", ns)
            _ip("link", "set", switch_end, "netns", self.switch)
            _ip("-n", self.switch, "link", "set", switch_end, "master", "br0", "up")
            _ip("-n", ns, "addr", "add", f"{ADDR[role]}/24", "dev", host_end)
            _ip("-n", ns, "link", "set", host_end, "up")
            _ip("-n", ns, "link", "set", "lo", "up")
        return self

    def __exit__(self, *_exc: object) -> None:
        for ns in [*self.names.values(), self.switch]:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=30)

    def popen(self, role: str, argv: list[str], **kw) -> subprocess.Popen[str]:
        """Start `argv` on that host (ip netns exec execs it: the pid is the program's)."""
        return subprocess.Popen(
            ["ip", "netns", "exec", self.names[role], *argv], text=True, cwd=ROOT, env=dict(os.environ), **kw
        )

    def run(self, role: str, argv: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["ip", "netns", "exec", self.names[role], *argv],
            text=True,
            cwd=ROOT,
            env=dict(os.environ),
            capture_output=True,
            timeout=timeout,
        )


def _stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


@pytest.fixture(scope="module")
def lan(tmp_path_factory):
    """The LAN, with the simulated engine serving on the target host."""
    log = tmp_path_factory.mktemp("netns") / "sim.log"
    with Lan() as net, open(log, "w") as out:
        sim = net.popen(
            "target",
            [sys.executable, "-m", "harness.sim", "--host", ADDR["target"], "--port", "8000", "--max-num-seqs", "64"],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        try:
            probe = (
                f"import urllib.request; urllib.request.urlopen('http://{ADDR['target']}:8000/v1/models', "
                "timeout=2).read()"
            )
            deadline = time.monotonic() + 60
            while net.run("master", [sys.executable, "-c", probe], timeout=30).returncode != 0:
                assert sim.poll() is None, log.read_text()[-2000:]
                assert time.monotonic() < deadline, "the simulated engine did not answer within 60 s"
                time.sleep(0.5)
            # the LAN is the only way there: from this (the root) namespace the target is unreachable
            assert (
                subprocess.run(
                    [sys.executable, "-c", probe.replace("timeout=2", "timeout=1")], capture_output=True, timeout=30
                ).returncode
                != 0
            )
            yield net
        finally:
            _stop(sim)


def _scenario(path: Path, load: dict) -> Path:
    path.write_text(
        json.dumps(
            {
                "name": "hosts",
                "load": load,
                "warmup": {"requests": 4},
                "telemetry": {"enabled": False},
                "sampling": {"extra_body": {"itl_ms": 2}},
                "workload": {"classes": [{"name": "a", "input_tokens": 16, "output_tokens": 12}]},
            }
        )
    )
    return path


def _distributed_run(net: Lan, tmp_path: Path, load: dict, on_running=None):
    out = tmp_path / "run"
    master = net.popen(
        "master",
        [
            sys.executable,
            "-m",
            "harness.cli.main",
            "run",
            str(_scenario(tmp_path / "s.yaml", load)),
            "--distributed",
            "2",
            "--remote-workers",
            "--master-bind-host",
            ADDR["master"],
            "--master-port",
            "5557",
            "--target",
            f"http://{ADDR['target']}:8000",
            "--out",
            str(out),
            "--no-report",
            "--quiet",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    workers = [
        net.popen(
            w,
            [
                sys.executable,
                "-m",
                "harness.cli.main",
                "worker",
                "--master-host",
                ADDR["master"],
                "--master-port",
                "5557",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for w in ("w1", "w2")
    ]
    try:
        if on_running is not None:
            on_running(out, workers)
        _stdout, stderr = master.communicate(timeout=240)
    finally:
        for w in workers:
            _stop(w)
        _stop(master)
    return master.returncode, stderr, out, workers


def _lines(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "requests.jsonl").read_text().splitlines() if line.strip()]


def test_master_and_two_workers_on_separate_hosts(lan: Lan, tmp_path: Path) -> None:
    rc, stderr, out, workers = _distributed_run(lan, tmp_path, {"concurrency": 6, "requests": 60})
    assert rc == 0, stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "complete" and summary["client"]["processes"] == 2
    results = [json.loads((out / f"load_result.w{k}.json").read_text()) for k in (0, 1)]
    # each worker host sent its share (request ids end with the sending process's pid)
    lines = [r for r in _lines(out) if not r["warmup"]]
    pids = {r["id"].rsplit("-", 1)[1] for r in lines}
    assert pids == {str(w.pid) for w in workers}
    # merged losslessly: the summary is the sum of the two hosts' histograms and counts
    ok = [r for r in lines if r["error"] is None]
    per_worker = [res["metrics"]["_all"]["counts"]["completed"] for res in results]
    assert summary["requests"]["completed"] == sum(per_worker) == len(ok) == 60 and all(per_worker)
    assert summary["latency_ms"]["ttft"]["count"] == 60
    assert summary["tokens"]["output_total"] == sum(r["output_tokens"] for r in ok)


@pytest.mark.slow
def test_a_worker_lost_mid_run_is_reported_and_its_requests_kept(lan: Lan, tmp_path: Path) -> None:
    lost: dict[str, int] = {}

    def kill_one_worker(out: Path, workers: list[subprocess.Popen[str]]) -> None:
        victim = workers[1]
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # until the master has the victim's requests in hand
            path = out / "requests.jsonl"
            mine = (
                [r for r in _lines(out) if r["id"].endswith(f"-{victim.pid}") and not r["warmup"]]
                if path.exists()
                else []
            )
            if len(mine) >= 20:
                break
            time.sleep(0.3)
        os.kill(victim.pid, signal.SIGKILL)  # the host is gone: no final result, no goodbye
        lost["pid"] = victim.pid

    rc, stderr, out, _workers = _distributed_run(lan, tmp_path, {"concurrency": 6, "duration_s": 25}, kill_one_worker)
    assert rc == 1, stderr[-3000:]  # the run says it went badly ...
    assert "lost mid-run" in stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "partial" and summary["client"]["lost_workers"]
    assert any("lost mid-run" in w for w in summary["validity"]["warnings"])
    # ... and keeps what the lost worker had finished and reported: in requests.jsonl and in the
    # merged histograms alike
    lines = [r for r in _lines(out) if not r["warmup"]]
    ok = [r for r in lines if r["error"] is None]
    from_lost = [r for r in ok if r["id"].endswith(f"-{lost['pid']}")]
    assert len(from_lost) >= 20
    assert summary["requests"]["completed"] == len(ok)
    assert summary["latency_ms"]["ttft"]["count"] == len(ok)
    k = summary["client"]["lost_workers"][0]
    kept = json.loads((out / f"load_result.w{k}.json").read_text())
    assert kept["lost"] and kept["metrics"]["_all"]["counts"]["completed"] == len(from_lost)
