"""Locust's `--csv` files as of the end of the test, not of its last one-second tick.

Locust (2.47) rewrites <prefix>_stats.csv, _failures.csv and _exceptions.csv once a second from a
greenlet and, at exit, only closes them: the rows hold whatever was counted at the last tick. A
harness test ends the moment its last in-flight request is recorded, so the requests of the final
second were missing from the file while Locust's console table and summary.json had them (CI: the
Aggregated row said 354 where summary.json counted 402 measured requests; issue 25, N16).

Locust's main() builds its writer as `locust.stats.StatsCSVFileWriter(...)` after the locustfile is
imported and keeps it in a local (headless, nothing else holds it): the locustfile calls install(),
so the writer Locust builds is this subclass, which writes every file once more from the final
stats (and the history file's final row) when Locust closes them at exit.
"""

from __future__ import annotations

import logging
import time

import locust.stats
from locust.stats import StatsCSVFileWriter

log = logging.getLogger("harness.web")


class FinalRowsCSVWriter(StatsCSVFileWriter):
    """Locust's CSV writer, plus the final rows at close."""

    def close_files(self) -> None:
        self.write_final()
        super().close_files()

    def write_final(self) -> None:
        """Rewrite the request, failure and exception files from the current stats."""
        if self.requests_csv_filehandle.closed:
            return
        try:
            for handle, writer, columns, rows in (
                (
                    self.requests_csv_filehandle,
                    self.requests_csv_writer,
                    self.requests_csv_columns,
                    self._requests_data_rows,
                ),
                (
                    self.failures_csv_filehandle,
                    self.failures_csv_writer,
                    self.failures_columns,
                    self._failures_data_rows,
                ),
                (
                    self.exceptions_csv_filehandle,
                    self.exceptions_csv_writer,
                    self.exceptions_columns,
                    self._exceptions_data_rows,
                ),
            ):
                handle.seek(0)
                writer.writerow(columns)
                rows(writer)
                handle.truncate()
                handle.flush()
            self._stats_history_data_rows(self.stats_history_csv_writer, time.time())
            self.stats_history_flush()
        except (OSError, ValueError):  # a CSV is never worth a failed exit: say so, exit as measured
            log.exception("harness: could not write Locust's final CSV rows")


def install() -> None:
    """Have Locust's main() build FinalRowsCSVWriter for `--csv` (call at locustfile import)."""
    locust.stats.StatsCSVFileWriter = FinalRowsCSVWriter  # type: ignore[misc]  # a patch: main() builds this class
