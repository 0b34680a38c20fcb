"""The optional native reader (harness/client/_native.c), built at install time.

Everything else about the package is in pyproject.toml. The extension is optional: where it
cannot be built (no C compiler, no Python headers, not Linux) the install still succeeds and the
harness reads streams with its pure-Python reader (harness.client.http_stream.ResponseParser);
summary.json's `client.reader` says which one ran.
"""

import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


class OptionalBuildExt(build_ext):
    """A failed build of the native reader is a warning, never a failed install."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:  # e.g. no compiler found at all
            self._skip(exc)

    def build_extension(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
        except Exception as exc:  # compile or link error
            self._skip(exc)

    @staticmethod
    def _skip(exc: Exception) -> None:
        print(f"warning: the native reader was not built ({exc}); the pure-Python reader will be used", file=sys.stderr)


ext_modules = []
if sys.platform.startswith("linux"):
    ext_modules.append(
        Extension(
            "harness.client._native",
            ["harness/client/_native.c"],
            optional=True,
            extra_compile_args=["-O2", "-std=c11", "-Wall"],
        )
    )

setup(ext_modules=ext_modules, cmdclass={"build_ext": OptionalBuildExt})
