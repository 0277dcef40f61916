"""The soak's processes: found through /proc, signalled by PID (only ours)."""

from __future__ import annotations

import os


def process_table() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, command line) of every process we can read."""
    table = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{name}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, ValueError, IndexError):
            continue
        table[int(name)] = (ppid, cmd)
    return table


def descendants(root: int) -> dict[int, str]:
    """pid -> command line of every live descendant of ``root`` (not ``root`` itself)."""
    table = process_table()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    found: dict[int, str] = {}
    todo = list(children.get(root, []))
    while todo:
        pid = todo.pop()
        if pid not in found:
            found[pid] = table[pid][1]
            todo += children.get(pid, [])
    return found


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
