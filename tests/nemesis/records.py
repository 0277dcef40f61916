"""The soak's records: JSON lines appended and fsynced as they happen, and files replaced
at once."""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from pathlib import Path
from typing import Any


class Journal:
    """Appends JSON lines to a file, flushed at once and fsynced, from any thread."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file = path.open("a")
        self._lock = threading.Lock()
        self.records: list[dict[str, Any]] = []

    def write(self, record: dict[str, Any], sync: bool = True) -> None:
        line = json.dumps(record) + "\n"
        with self._lock:
            self.records.append(record)
            self._file.write(line)
            self._file.flush()
            if sync:
                os.fsync(self._file.fileno())

    def sync(self) -> None:
        with self._lock:
            self._file.flush()
            os.fsync(self._file.fileno())

    def close(self) -> None:
        with self._lock, contextlib.suppress(OSError, ValueError):
            self._file.flush()
            os.fsync(self._file.fileno())
            self._file.close()


def write_atomically(path: Path, text: str) -> None:
    """Replace ``path``'s content at once (a reader never sees it half written)."""
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def stamp() -> dict[str, float]:
    """Monotonic and wall time now."""
    return {"mono": time.monotonic(), "wall": time.time()}


def write_jsonl(path: Path, records: list[dict[str, Any]]) -> None:
    with path.open("w") as f:
        for r in records:
            f.write(json.dumps(r) + "\n")
        f.flush()
        os.fsync(f.fileno())
