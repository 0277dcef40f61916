"""Signals to the soak's processes, by PID (only ours; support.descendants finds them)."""

from __future__ import annotations

import os


def signal_pid(pid: int, sig: int) -> bool:
    """Send ``sig`` to ``pid``; False when it is gone."""
    try:
        os.kill(pid, sig)
        return True
    except ProcessLookupError:
        return False


def signal_group(pgid: int, sig: int) -> bool:
    """Send ``sig`` to process group ``pgid`` (a consumer child's own); False if gone."""
    try:
        os.killpg(pgid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False
