"""The stream reader's job ahead: while Spark runs batch N+1, a background thread commits
batch N and reserves N+2, so that Redis works while the executors read. The batch after a
backlog (nothing more to reserve) gets a job that only commits.

Its reservations are past the last offset Spark logged, as after a crash between reserve
and offset log: the next latestOffset delivers them (topped up to its limit), and nothing
is lost if the query stops first.
"""

from __future__ import annotations

import threading
from collections.abc import Callable


class Ahead:
    """The driver's background job (``job()`` returns items reserved per shard, None when
    it only commits): it commits through ``done`` and reserves past ``end``."""

    def __init__(
        self, job: Callable[[], list[int] | None], done: list[int], end: list[int]
    ) -> None:
        self.done, self.end = done, end
        self._sizes: list[int] | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(
            target=self._run, args=(job,), daemon=True, name="pyspark-ick-ahead"
        )
        self._thread.start()

    def _run(self, job: Callable[[], list[int] | None]) -> None:
        try:
            self._sizes = job()
        except BaseException as exc:  # noqa: BLE001 - re-raised by result()
            self._error = exc

    def result(self) -> list[int] | None:
        """Wait for the job; its sizes (None: it only committed), or its error raised
        here."""
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._sizes

    def past(self, after: list[int] | None) -> list[int] | None:
        """Wait for the job; the items it reserved past ``after`` (none if it reserved
        past another offset; None if it only committed)."""
        sizes = self.result()
        return None if sizes is None else sizes if after == self.end else []

    def covers(self, through: list[int]) -> bool:
        """Whether the job commits everything through ``through``."""
        return all(t <= d for t, d in zip(through, self.done, strict=True))
