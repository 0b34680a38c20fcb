"""`harness` console script: dispatches to one module per command.

Each command module exposes `add_parser(subparsers)` that registers its sub-parser and sets
`func(args) -> int`. A command that takes an engine's raw flags (`sim`) sets `passthrough=True`
and receives the remaining argv unparsed. UserErrors print as plain lines and exit 2.
"""

from __future__ import annotations

import argparse
import errno
import importlib
import os
import sys

from harness import __version__
from harness.cli import help_format
from harness.errors import UserError

#: command name -> module path; the module adds its own parser.
COMMANDS = {
    "run": "harness.cli.run",
    "sim": "harness.cli.sim",
    "sweep": "harness.cli.sweep",
    "startup": "harness.cli.startup",
    "tune": "harness.cli.tune",
    "report": "harness.cli.report",
    "compare": "harness.cli.compare",
    "quality": "harness.cli.quality",
    "baseline": "harness.cli.baseline",
    "ui": "harness.cli.ui",
    "gh-summary": "harness.cli.gh_summary",
    "completion": "harness.cli.completion",
    "capacity": "harness.cli.capacity",
}


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole command line; `only`: just that command's sub-parser (its module alone is
    imported: `harness report` need not import what `harness run` does, ~0.45 CPU-s)."""
    parser = argparse.ArgumentParser(
        prog="harness",
        description="Benchmark LLM serving engines: per-token timing, engine telemetry, flag sweeps.",
    )
    parser.add_argument("--version", action="version", version=f"harness {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module_path in COMMANDS.items():
        if only is not None and name != only:
            continue
        try:
            module = importlib.import_module(module_path)
        except ModuleNotFoundError as exc:
            if exc.name == module_path:
                continue  # command not built yet
            raise
        module.add_parser(sub)
    help_format.apply(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        # imports the command's module (every command's for top-level help): a Ctrl-C in these
        # first moments is one line too
        parser = build_parser(argv[0] if argv and argv[0] in COMMANDS else None)
        args, rest = parser.parse_known_args(argv)
        if args.command is None:
            parser.print_help()
            return 2
        if rest and not getattr(args, "passthrough", False):
            parser.error(f"unrecognized arguments: {' '.join(rest)}")
        if getattr(args, "passthrough", False):
            args.rest = rest
        return int(args.func(args) or 0)
    except UserError as exc:
        for line in exc.lines:
            print(f"error: {line}", file=sys.stderr)
        return exc.exit_code
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
            return _internal(exc)
        # a full disk mid-sweep or mid-tune: what was written is kept, and --resume continues it
        print(
            f"error: disk full: {exc.filename or 'a results file'}: {exc.strerror}; what was written before is "
            "kept; free space, then continue a sweep, tune or startup benchmark with --resume DIR",
            file=sys.stderr,
        )
        return 1
    except KeyboardInterrupt as exc:
        from harness.signals import Terminated

        print(f"terminated ({exc.name})" if isinstance(exc, Terminated) else "interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # a bug: one line for the user, the traceback on request
        return _internal(exc)


def _internal(exc: Exception) -> int:
    if os.environ.get("HARNESS_DEBUG"):
        raise exc
    print(
        f"error: internal error: {type(exc).__name__}: {exc} (a bug in harness; "
        "HARNESS_DEBUG=1 shows the traceback; results already written are kept)",
        file=sys.stderr,
    )
    return 70  # EX_SOFTWARE


if __name__ == "__main__":
    sys.exit(main())
