"""`harness baseline save RUN_DIR --name NAME [--engine-config FILE]` and `harness baseline list`:
keep a deployment configuration's results (with its engine config) for later comparisons;
`harness compare baseline:NAME CANDIDATE` compares against one."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.errors import UserError


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "baseline",
        help="save a run or sweep as a named baseline (results/baselines/<name>/), list baselines",
        description="Baselines live in results/baselines/<name>/ (or $HARNESS_BASELINES, or --root): "
        "summary, histograms, scenario, per-request records and the engine config. "
        "Compare against one with `harness compare baseline:<name> CANDIDATE`.",
    )
    p.set_defaults(func=lambda args: _missing_action(p))
    actions = p.add_subparsers(dest="action", metavar="ACTION")

    s = actions.add_parser("save", help="save a run or sweep directory as baseline NAME")
    s.add_argument("dir", type=Path, metavar="RUN_DIR", help="a run directory or a sweep directory")
    s.add_argument("--name", required=True, help="baseline name, e.g. llama8b-h100-tp1")
    s.add_argument(
        "--engine-config",
        type=Path,
        default=None,
        metavar="FILE",
        help="the engine's config or launch file, kept beside the results",
    )
    s.add_argument("--force", action="store_true", help="replace an existing baseline of that name")
    s.add_argument("--root", type=Path, default=None, metavar="DIR", help="baseline store (default results/baselines)")
    s.set_defaults(func=_save)

    ls = actions.add_parser("list", help="list saved baselines")
    ls.add_argument("--root", type=Path, default=None, metavar="DIR", help="baseline store (default results/baselines)")
    ls.set_defaults(func=_list)


def _missing_action(p: argparse.ArgumentParser) -> int:
    raise UserError("harness baseline: give an action: `save RUN_DIR --name NAME` or `list`")


def _save(args: argparse.Namespace) -> int:
    from harness.report.baselines import save

    dest, notes = save(args.dir, args.name, args.engine_config, args.root, args.force)
    print(f"saved baseline {args.name!r} in {dest}")
    for n in notes:
        print(f"note: {n}")
    print(f"compare with: harness compare baseline:{args.name} CANDIDATE_DIR")
    return 0


def _list(args: argparse.Namespace) -> int:
    from harness.report.baselines import list_all, root_dir

    items = list_all(args.root)
    if not items:
        print(f"no baselines under {root_dir(args.root)}; save one with `harness baseline save RUN_DIR --name NAME`")
        return 0
    rows = [["NAME", "KIND", "SCENARIO", "SAVED", "ENGINE CONFIG", "FINGERPRINT"]]
    for m in items:
        fp = m.get("fingerprint")
        fpv = (
            fp.get("value", "")
            if isinstance(fp, dict) and "value" in fp
            else (f"{len(fp)} cells" if isinstance(fp, dict) else "")
        )
        rows.append(
            [
                str(m.get("name", "")),
                str(m.get("kind", "")),
                str(m.get("scenario", "")),
                str(m.get("saved_at", "")),
                str(m.get("engine_config") or "—"),
                str(fpv),
            ]
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
    print(f"({root_dir(args.root)})")
    return 0
