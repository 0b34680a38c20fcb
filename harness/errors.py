"""Errors a user can act on.

A UserError carries one line that names the field or input at fault and the fix. The CLI prints
it without a traceback and exits with the error's exit code (2 = unusable input).
"""

from __future__ import annotations


class UserError(Exception):
    """Bad input: printed as one line per problem, never as a traceback."""

    exit_code = 2

    def __init__(self, *lines: str) -> None:
        self.lines = [line for line in lines if line]
        super().__init__("\n".join(self.lines))


class TargetError(UserError):
    """The target endpoint cannot be used (unreachable, unknown model, rejects the request)."""


class RunFailed(UserError):
    """The run started but could not measure (its engine died, no load process reported): exit 1."""

    exit_code = 1
