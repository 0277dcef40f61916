"""The checker of the nemesis soak: pure functions over its records.

Records (one JSON object a line in the run's directory; times are ``time.monotonic()``,
one clock for every process of the machine):

- ``adds.jsonl``: each add Redis acknowledged: ``member, score, shard, reserved`` (the
  shard's last reservation number, read in the same MULTI as the add), ``at`` (when the
  acknowledgement arrived) and ``kept`` (absent means true); an add that raised is not
  there. With --sentinel and --cluster every recorded add is kept by construction: it is
  recorded only once a replica confirmed it (the producers' clients wait,
  ``connect(url, wait_replicas=1)``); ``kept`` False comes from the ``--unwaited``
  producers (the control run) and from runs before that, whose producers recorded an add
  WAIT had not confirmed. ``node``: the port of the node a waited add ran on.
- ``deliveries.jsonl``: each foreachBatch call (replays included): ``batch`` (Spark's batch
  id), ``rows`` (``[member, score, shard, reservation]``, sorted), ``start`` (the sink call
  began) and ``end`` (its record was written, before the sink returned).
- ``faults.jsonl``: each fault: ``kind``, ``start``, ``end`` (and wall times, details).

Checks: I1 (each acknowledged add followed by a delivery of its member from a reservation
made after it, with a score <= the add's, by a sink call that ended after the add was
acknowledged; among kept adds: an unkept one may die with a primary killed before it
replicated, so those are counted apart, with how many were delivered anyway), I3 (every
delivery of a batch id has the same rows, and none is empty: on every topology, since the
readers wait for a replica of each reservation and commit with --sentinel and --cluster),
duplicates (rows delivered although their member was not added again since its last
delivery, replays aside), and the longest stretch without progress while an add waited,
outside the fault windows. ``python3 tests/nemesis --check DIR`` checks a recorded run again.
"""

from __future__ import annotations

import bisect
import json
import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from itertools import pairwise
from math import inf
from pathlib import Path
from typing import Any, NamedTuple

from faults_support import Add  # an add Redis acknowledged, as the soak records it


class Delivery(NamedTuple):
    """One foreachBatch call: batch id, rows ``(member, score, shard, reservation)``; with
    --poison the members it failed on and the wall time of its record (nemesis.fates)."""

    batch: int
    rows: list[tuple[str, float, int, int]]
    start: float
    end: float
    failed: tuple[str, ...] = ()
    wall: float = 0.0


class Window(NamedTuple):
    """A stretch of time excused from the progress check (a fault and its grace)."""

    kind: str
    start: float
    end: float


class Stall(NamedTuple):
    """A stretch with an add waiting and no sink call ending."""

    start: float
    end: float

    @property
    def seconds(self) -> float:
        return self.end - self.start


def add_of(record: dict[str, Any]) -> Add:
    return Add(
        str(record["member"]),
        float(record["score"]),
        int(record["shard"]),
        int(record["reserved"]),
        float(record["at"]),
        bool(record.get("kept", True)),
        int(record.get("node", 0)),
    )


def delivery_of(record: dict[str, Any]) -> Delivery:
    rows = [(str(m), float(s), int(sh), int(r)) for m, s, sh, r in record["rows"]]
    return Delivery(
        int(record["batch"]),
        rows,
        float(record["start"]),
        float(record["end"]),
        tuple(record.get("failed", ())),
        float(record.get("wall", 0.0)),
    )


# --- I1 -----------------------------------------------------------------------------------


def covering(
    adds: Sequence[Add], deliveries: Iterable[Delivery], by_score: bool = True
) -> list[float]:
    """For each add (in order), the end of the first sink call that delivered it (I1:
    its member, from a reservation > the add's R, a score <= the add's unless not
    ``by_score``, ending after the add was acknowledged); ``inf`` when none did: the add
    was lost."""
    # (shard, member) -> rows sorted by reservation: (reservation, score, end)
    seen: dict[tuple[int, str], list[tuple[int, float, float]]] = defaultdict(list)
    for d in deliveries:
        for member, score, shard, reservation in d.rows:
            seen[shard, member].append((reservation, score, d.end))
    for rows in seen.values():
        rows.sort()
    found = []
    for add in adds:
        rows = seen.get((add.shard, add.member), [])
        first = bisect.bisect_right(rows, (add.reserved, inf, inf))
        ends = [
            end for r, s, end in rows[first:] if (s <= add.score or not by_score) and end > add.at
        ]
        found.append(min(ends, default=inf))
    return found


def lost(adds: Sequence[Add], deliveries: Iterable[Delivery]) -> list[Add]:
    """The kept adds that I1 finds no delivery for (unkept ones: ``unkept``)."""
    kept = [a for a in adds if a.kept]
    return [a for a, at in zip(kept, covering(kept, deliveries), strict=True) if at == inf]


def unkept(adds: Sequence[Add], deliveries: Iterable[Delivery]) -> tuple[int, int]:
    """(adds no replica confirmed, how many of them I1 finds a delivery for anyway)."""
    rest = [a for a in adds if not a.kept]
    return len(rest), sum(at != inf for at in covering(rest, deliveries))


# --- I3 -----------------------------------------------------------------------------------


def replays(deliveries: Iterable[Delivery]) -> tuple[int, list[int]]:
    """(how many sink calls repeated a batch id, the batch ids whose repeats differ: I3)."""
    by_batch: dict[int, list[list[tuple[str, float, int, int]]]] = defaultdict(list)
    for d in deliveries:
        by_batch[d.batch].append(sorted(d.rows))
    repeated = sum(len(v) - 1 for v in by_batch.values())
    differ = sorted(b for b, v in by_batch.items() if any(x != v[0] for x in v[1:]))
    return repeated, differ


def empty_batches(deliveries: Iterable[Delivery]) -> list[int]:
    """Batch ids delivered without rows (a batch runs only when something was reserved)."""
    return sorted({d.batch for d in deliveries if not d.rows})


# --- duplicates ---------------------------------------------------------------------------


def duplicates(adds: Iterable[Add], deliveries: Iterable[Delivery]) -> tuple[int, int]:
    """(duplicate rows, rows), replays aside (the first call of each batch id counts).

    A row of member m from reservation r is a duplicate when the previous delivery of m
    (reservation p of the same shard) already covered every add of m before r: no add has
    p <= R < r, and the sink did not fail m at p (--poison: r is then its retry). Adds that
    Redis made but whose acknowledgement was lost are not in the
    record, so their deliveries count as duplicates too; members no recorded add names
    (the dehydrator's rehydrated ones) are left out."""
    marks: dict[tuple[int, str], list[int]] = defaultdict(list)
    for a in adds:
        marks[a.shard, a.member].append(a.reserved)
    for rs in marks.values():
        rs.sort()
    firsts: dict[int, Delivery] = {}
    for d in deliveries:
        firsts.setdefault(d.batch, d)
    got: dict[tuple[int, str], list[tuple[int, bool]]] = defaultdict(list)
    for d in firsts.values():
        for member, _score, shard, reservation in d.rows:
            got[shard, member].append((reservation, member in d.failed))
    dups = rows = 0
    for key, reservations in got.items():
        if key not in marks:
            continue
        rs = marks[key]
        previous, retry = -1, False
        for r, failed in sorted(reservations):
            rows += 1
            none_since = bisect.bisect_left(rs, r) == bisect.bisect_left(rs, previous)
            if none_since and not retry:  # no add in [p, r), and p did not fail it
                dups += 1
            previous, retry = r, failed
    return dups, rows


# --- progress -----------------------------------------------------------------------------


def stalls(adds: Sequence[Add], deliveries: Iterable[Delivery], until: float) -> list[Stall]:
    """Every stretch between two sink calls' ends (or after the last one, up to ``until``)
    during which an acknowledged add waited for its delivery, longest first."""
    covered = covering(adds, deliveries)
    ends = sorted({d.end for d in deliveries if d.rows})
    order = sorted(range(len(adds)), key=lambda i: adds[i].at)
    times = [adds[i].at for i in order]
    prefix_max: list[float] = []  # latest coverage among the adds acknowledged so far
    for i in order:
        prefix_max.append(max(prefix_max[-1] if prefix_max else -inf, covered[i]))
    found = []
    marks = [-inf, *ends, until]
    for before, after in pairwise(marks):
        if after <= before:
            continue
        k = bisect.bisect_right(times, before)  # adds acknowledged up to ``before``
        if k and prefix_max[k - 1] >= after:
            found.append(Stall(before, after))  # one waited across the whole gap
        elif k < len(times) and times[k] < after:
            found.append(Stall(times[k], after))  # waiting began inside the gap
    return sorted(found, key=lambda s: -s.seconds)


def outside(stall: Stall, windows: Iterable[Window]) -> list[Stall]:
    """The pieces of ``stall`` that no window covers."""
    pieces = [stall]
    for w in windows:
        cut = []
        for p in pieces:
            if w.end <= p.start or w.start >= p.end:
                cut.append(p)
                continue
            if w.start > p.start:
                cut.append(Stall(p.start, w.start))
            if w.end < p.end:
                cut.append(Stall(w.end, p.end))
        pieces = cut
    return pieces


def longest_outside(found: Iterable[Stall], windows: Sequence[Window]) -> Stall | None:
    """The longest piece of the stalls outside every window (None: there is none)."""
    pieces = [p for s in found for p in outside(s, windows)]
    return max(pieces, key=lambda p: p.seconds, default=None)


def recoveries(faults: Iterable[dict[str, Any]], deliveries: Sequence[Delivery]) -> dict[str, Any]:
    """Per fault kind, the seconds from each fault's end to the end of the first sink call
    with rows that began after it (the pipeline delivering again), with their median and
    max; a fault after which nothing was delivered counts as ``never``."""
    done = sorted((d.start, d.end) for d in deliveries if d.rows)
    starts = [start for start, _ in done]
    found: dict[str, list[float]] = defaultdict(list)
    never: Counter[str] = Counter()
    for f in faults:
        k = bisect.bisect_right(starts, float(f["end"]))
        if k == len(done):
            never[f["kind"]] += 1
        else:
            found[f["kind"]].append(done[k][1] - float(f["end"]))
    return {
        kind: {
            "count": len(found[kind]),
            "median": round(statistics.median(found[kind]), 2) if found[kind] else None,
            "max": round(max(found[kind]), 2) if found[kind] else None,
            "never": never[kind],
        }
        for kind in sorted(set(found) | set(never))
    }


# --- the whole check ----------------------------------------------------------------------


def check(
    adds: Sequence[Add],
    deliveries: Sequence[Delivery],
    windows: Sequence[Window],
    until: float,
    origin: float = 0.0,
) -> dict[str, Any]:
    """Every check of a run; ``ok`` is True when no kept add was lost, every replay was
    identical and no batch was empty, on every topology: with --sentinel and --cluster the
    readers wait for a replica (``redis.waitReplicas``), so a failover keeps every
    reservation a batch was planned on and its replay reads the same rows; an empty or
    changed one is a failure. Stalls count from ``origin`` on (the first batch),
    and times in the result are seconds from it; they and I1 look at kept adds only
    (an unkept add lost with its primary would be a stall to the end), duplicates at all."""
    missing = lost(adds, deliveries)
    not_kept, not_kept_delivered = unkept(adds, deliveries)
    kept = [a for a in adds if a.kept]
    repeated, differ = replays(deliveries)
    empty = empty_batches(deliveries)
    dups, rows = duplicates(adds, deliveries)
    found = [
        Stall(max(s.start, origin), s.end)
        for s in stalls(kept, deliveries, until)
        if s.end > origin
    ]  # from the first batch on (a cold start is not a stall)
    found.sort(key=lambda s: -s.seconds)
    worst = found[0] if found else None
    out = longest_outside(found, windows)

    def shown(s: Stall | None) -> dict[str, float] | None:
        return (
            None
            if s is None
            else {
                "seconds": round(s.seconds, 2),
                "from": round(s.start - origin, 2),
                "to": round(s.end - origin, 2),
            }
        )

    return {
        "ok": not missing and not differ and not empty,
        "adds": len(adds),
        "kept": len(kept),
        "unkept": not_kept,
        "unkept_delivered": not_kept_delivered,
        "lost": len(missing),
        "lost_examples": [a._asdict() for a in missing[:5]],
        "sink_calls": len(deliveries),
        "batches": len({d.batch for d in deliveries}),
        "replays": repeated,
        "replays_differing": differ,
        "empty_batches": empty,
        "rows": rows,
        "duplicate_rows": dups,
        "duplicate_ratio": round(dups / rows, 5) if rows else 0.0,
        "longest_stall": shown(worst),
        "longest_stall_outside_faults": shown(out),
    }


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """The records of a JSON-lines file (a line cut short by a crash is skipped)."""
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return out


def windows_of(
    faults: Iterable[dict[str, Any]], grace: dict[str, float], default_grace: float
) -> list[Window]:
    """Fault records as windows: from the fault's start to its end plus the grace of its
    kind (the time a consumer needs to come back from it)."""
    return [
        Window(f["kind"], float(f["start"]), float(f["end"]) + grace.get(f["kind"], default_grace))
        for f in faults
    ]


def main(argv: list[str]) -> int:
    """Check the run recorded in directory ``argv[0]`` again; prints the result."""
    directory = Path(argv[0])
    summary = json.loads((directory / "summary.json").read_text())
    adds = [add_of(r) for r in read_jsonl(directory / "adds.jsonl")]
    deliveries = [delivery_of(r) for r in read_jsonl(directory / "deliveries.jsonl")]
    windows = [Window(*w) for w in summary["windows"]]
    result = check(adds, deliveries, windows, summary["until"], summary["origin"])
    result["recovery"] = recoveries(read_jsonl(directory / "faults.jsonl"), deliveries)
    print(json.dumps(result, indent=2))
    return 0 if result["ok"] else 1
