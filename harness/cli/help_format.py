"""`--help` that shows each option's default, for every command and sub-command.

Like argparse.ArgumentDefaultsHelpFormatter, but quiet where a default says nothing (None,
False of a switch, an empty list) or the help text already names it, so no line reads
"(default 8089) (default: 8089)".
"""

from __future__ import annotations

import argparse


class DefaultsHelpFormatter(argparse.HelpFormatter):
    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        silent = default is None or default is argparse.SUPPRESS or isinstance(default, bool) or default in ("", [])
        if (
            silent
            or "default" in text.lower()
            or not action.option_strings
            or isinstance(action, argparse._VersionAction)
        ):
            return text
        return f"{text} (default: %(default)s)"


def apply(parser: argparse.ArgumentParser) -> None:
    """Set the formatter on `parser` and every sub-parser below it."""
    parser.formatter_class = DefaultsHelpFormatter
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                apply(sub)
