"""The soak's summary: every check of a run (nemesis.check, and the parks of
--dehydrator), the restarts by cause, the failovers, and the table printed at the end."""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import asdict
from typing import Any

from nemesis import check as nc
from nemesis import fates as nf
from nemesis.poison import is_poison
from nemesis.records import Journal
from nemesis.settings import (
    ALL_KINDS,
    CLUSTER_FAILOVERS,
    CLUSTER_STALE,
    FAILOVERS,
    LONG_GRACE,
    OUTAGE,
    STALE,
    ZOMBIE,
    Settings,
)
from pyspark_ick.keys import shard_of


def classify(cause: str) -> str:
    """A short name for a restart cause (the raw text stays in restarts.jsonl)."""
    rules = [
        ("does it speak only TLS", "reset taken for TLS (connect)"),
        ("did not answer within redis.retryTimeout", "retryTimeout exceeded"),
        ("lost its lease", "lease lost"),
        ("is consumed by another query", "lease busy"),
        ("EOFException", "EOFException (worker died)"),
        ("XXKST", "XXKST (no cause message: the source runner died)"),
        ("killed by SIGKILL", "killed -9"),
        ("hung", "hung"),
        ("Py4J", "py4j (JVM gone)"),
        ("Connection refused", "py4j (JVM gone)"),
        ("Answer from Java side is empty", "py4j (JVM gone)"),
        ("JAVA_GATEWAY_EXITED", "JVM died while starting"),
    ]
    for needle, name in rules:
        if needle in cause:
            return name
    return cause.splitlines()[0][:100] if cause else "unknown"


def check_parks(
    parks: list[dict[str, Any]], dh: list[dict[str, Any]], deliveries: list[dict[str, Any]]
) -> dict[str, Any]:
    """Each acknowledged park released by a dehydrator sink call that ended after the park
    was acknowledged, none begun before the park was sent plus its delay (less 0.1 s of
    clock slack), and its element delivered by the Ick stream; lost and not in the Ick
    count kept parks only, unkept ones apart (records of runs before the parker's client
    waited: with --sentinel and --cluster every recorded park is on a replica now)."""
    calls: dict[str, list[tuple[float, float]]] = {}
    for d in dh:
        for ident, _element, _shard in d["rows"]:
            calls.setdefault(ident, []).append((d["start"], d["end"]))
    members = {row[0] for d in deliveries for row in d["rows"]}
    kept = [p for p in parks if p.get("kept", True)]
    lost = [p["id"] for p in kept if not any(end > p["at"] for _, end in calls.get(p["id"], []))]
    early = [
        p["id"]
        for p in parks
        if any(
            start < p["sent"] + p["delay_ms"] / 1000 - 0.1 for start, _ in calls.get(p["id"], [])
        )
    ]
    unrehydrated = [p["id"] for p in kept if f"dh:{p['id']}" not in members]
    return {
        "parks": len(parks),
        "unkept": len(parks) - len(kept),
        "lost": len(lost),
        "lost_examples": lost[:5],
        "early": len(early),
        "early_examples": early[:5],
        "not_in_ick": len(unrehydrated),
        "not_in_ick_examples": unrehydrated[:5],
        "dh_sink_calls": len(dh),
    }


def summarize(
    settings: Settings,
    journals: dict[str, Journal],
    deliveries: list[Any],
    dh: list[Any],
    events: list[Any],
    stuck: dict[str, Any],
    *,
    origin: float,
    until: float,
    **more: Any,
) -> dict[str, Any]:
    """Every check of the run and the counts of the summary table."""
    writes, dead = more.pop("writes", []), more.pop("dead_letters", [])
    adds = [nc.add_of(r) for r in journals["adds"].records]
    faults = journals["faults"].records
    grace = {k: settings.restart_grace if k in LONG_GRACE else settings.grace for k in ALL_KINDS}
    windows = nc.windows_of(faults, grace, settings.grace)
    calls = [nc.delivery_of(d) for d in deliveries]
    result = nc.check(adds, calls, windows, until, origin)
    restarts: Counter[str] = Counter()
    for r in journals["restarts"].records:
        restarts[f"process: {classify(r['cause'])}"] += 1
    for e in events:
        if e["kind"] == "query_failed":
            restarts[f"query: {classify(e['cause'])}"] += 1
    by_kind: dict[str, dict[str, int]] = {}
    for f in faults:
        entry = by_kind.setdefault(f["kind"], {"drawn": 0, "hit": 0})
        entry["drawn"] += 1
        entry["hit"] += bool(f.get("hit"))
        if f.get("in_sink"):
            entry["in_sink"] = entry.get("in_sink", 0) + 1
    summary = {
        "mode": "cluster" if settings.cluster else "sentinel" if settings.sentinel else "proxy",
        "wait_replicas": settings.wait_replicas if settings.sentinel or settings.cluster else None,
        "waiting": "writers and readers" if settings.sentinel or settings.cluster else "",
        "unwaited": settings.unwaited,
        "settings": {**asdict(settings), "every": list(settings.every)},
        **result,
        "stuck": stuck,
        "ok": result["ok"] and not any(stuck.values()) and more.get("drained", False),
        "faults": len(faults),
        "faults_by_kind": by_kind,
        "restarts_by_cause": dict(restarts.most_common()),
        "origin": origin,
        "until": until,
        "faulty_minutes": round((faults[-1]["end"] - origin) / 60, 2) if faults else 0.0,
        "windows": [list(w) for w in windows],
        "recovery": nc.recoveries(faults, calls),
        **more,
    }
    if settings.sentinel or settings.cluster:
        summary["failovers"] = failovers(
            faults,
            (*CLUSTER_FAILOVERS, *CLUSTER_STALE) if settings.cluster else (*FAILOVERS, *STALE),
        )
    summary.update(actors(settings, adds, deliveries, writes, dead, faults, events))
    for part in ("fates", "writer", "zombie", "outage"):
        if part in summary:
            summary["ok"] = summary["ok"] and summary[part]["ok"]
    if settings.dehydrator:
        summary["dehydrator"] = check_parks(journals["parks"].records, dh, deliveries)
        d = summary["dehydrator"]
        summary["ok"] = summary["ok"] and not (d["lost"] or d["early"] or d["not_in_ick"])
    return summary


def actors(
    settings: Settings,
    adds: list[nc.Add],
    deliveries: list[Any],
    writes: list[dict[str, Any]],
    dead: list[dict[str, Any]],
    faults: list[dict[str, Any]],
    events: list[dict[str, Any]],
) -> dict[str, Any]:
    """The checks of --poison (fates: processed or a dead letter), --writer (its committed
    batches' members likewise), --zombie (each fenced) and --outage (each ended by the
    clear error)."""
    found: dict[str, Any] = {}
    calls = [nc.delivery_of(d) for d in deliveries]
    letters = [nf.dead_letter_of(d) for d in dead]

    def poison(member: str) -> bool:
        return is_poison(settings.seed, settings.poison, member)

    if settings.poison or dead:
        found["fates"] = nf.fates(adds, calls, letters, poison, settings.max_attempts)
    if settings.writer:
        written, wrong = nf.writer_adds(
            writes, settings.writer_rate, lambda m: shard_of(m, settings.shards)
        )
        result = nf.fates(written, calls, letters, poison, settings.max_attempts)
        found["writer"] = {
            **result,
            "ok": result["ok"] and not wrong and bool(written),
            "batches": len({w["batch"] for w in writes}),
            "batches_not_matching": wrong,
        }
    failed = [e for e in events if e["kind"] == "query_failed"]

    def after(f: dict[str, Any], needle: str, within: float) -> list[dict[str, Any]]:
        return [
            e
            for e in failed
            if f["start"] <= e["at"] <= f["end"] + within and needle in e.get("cause", "")
        ]

    zombies = [f for f in faults if f["kind"] == ZOMBIE]
    if settings.zombie:
        hit = [f for f in zombies if f.get("hit")]
        fenced = sum(
            any(e["pid"] == f.get("pid") for e in after(f, "lost its lease", 60)) for f in hit
        )
        found["zombie"] = {
            "ok": fenced == len(hit),
            "drawn": len(zombies),
            "hit": len(hit),
            "fenced": fenced,
        }
    outages = [f for f in faults if f["kind"] == OUTAGE]
    if settings.outage:
        clear = "did not answer within redis.retryTimeout"
        failing = [f for f in outages if f.get("hit")]  # batches flowed when it began
        clear_ones = sum(bool(after(f, clear, 30)) for f in failing)
        found["outage"] = {
            "ok": clear_ones == len(failing),
            "drawn": len(outages),
            "failing": len(failing),
            "clear_error": clear_ones,
            "causes": sorted({classify(e["cause"]) for f in outages for e in after(f, "", 30)}),
            "example": next((e["cause"][:300] for f in outages for e in after(f, clear, 30)), None),
        }
    return found


def failovers(faults: list[dict[str, Any]], kinds: tuple[str, ...] = FAILOVERS) -> dict[str, Any]:
    """--sentinel, --cluster: per failover kind, how many were drawn, how many promoted a
    replica, and the seconds until the primary (of a slot hit) took a write again (each,
    and the median and max)."""
    found: dict[str, Any] = {}
    for kind in kinds:
        mine = [f for f in faults if f["kind"] == kind]
        times = sorted(f["answered_after"] for f in mine if "answered_after" in f)
        found[kind] = {
            "drawn": len(mine),
            "hit": sum(bool(f.get("hit")) for f in mine),
            "promoted": sum(bool(f.get("promoted")) for f in mine),
            "answered_after": [f.get("answered_after") for f in mine],
            "median": round(statistics.median(times), 2) if times else None,
            "max": times[-1] if times else None,
        }
    return found


def table(s: dict[str, Any]) -> str:
    """The summary as a plain-text table."""
    stall, out = s["longest_stall"], s["longest_stall_outside_faults"]
    rows = [
        ("result", "OK" if s["ok"] else "FAILED"),
        (
            "mode",
            s.get("mode", "proxy")
            + (
                f", {s.get('waiting') or 'adds'} wait for {s['wait_replicas']} replica(s)"
                if s.get("wait_replicas")
                else ""
            )
            + (f", {s['unwaited']} producer(s) not (unkept)" if s.get("unwaited") else ""),
        ),
        ("faults", f"{s['faults']} in {s['faulty_minutes']} min"),
        *[
            (
                f"  {k}",
                f"{v['drawn']} ({v['hit']} hit"
                + (f", {v['in_sink']} inside foreachBatch)" if "in_sink" in v else ")"),
            )
            for k, v in sorted(s["faults_by_kind"].items())
        ],
        ("acknowledged adds", s["adds"]),
        *(
            [
                (f"  on {s.get('wait_replicas')} replica(s) (recorded once confirmed)", s["kept"]),
                ("  unkept (delivered anyway)", f"{s['unkept']} ({s['unkept_delivered']})"),
            ][: 1 + bool(s["unkept"])]  # no unkept add since the producers wait (connect)
            if s.get("mode") in ("sentinel", "cluster")
            else []
        ),
        (
            "lost (I1)" + (", kept adds" if s.get("unkept") else ""),
            s["lost"],
        ),
        ("sink calls / batches", f"{s['sink_calls']} / {s['batches']}"),
        ("replays (differing: I3)", f"{s['replays']} ({len(s['replays_differing'])})"),
        ("empty batches (I3: a failure on every topology)", len(s["empty_batches"])),
        (
            "duplicate rows",
            f"{s['duplicate_rows']} of {s['rows']} ({100 * s['duplicate_ratio']:.2f}%)",
        ),
        ("stuck after drain", ", ".join(f"{k} {v}" for k, v in s["stuck"].items())),
        ("drain", f"{s['drain_seconds']:.1f} s" + ("" if s["drained"] else " (NOT drained)")),
        ("longest stall", "-" if not stall else f"{stall['seconds']} s at t+{stall['from']}"),
        ("  outside faults", "-" if not out else f"{out['seconds']} s at t+{out['from']}"),
        ("delivering again after a fault (s: median, max)", ""),
        *[
            (
                f"  {k}",
                f"{v['median']}, {v['max']}" + (f" ({v['never']} never)" if v["never"] else ""),
            )
            for k, v in s.get("recovery", {}).items()
        ],
        ("restarts", sum(s["restarts_by_cause"].values())),
        *[(f"  {k}", v) for k, v in s["restarts_by_cause"].items()],
    ]
    if "failovers" in s:
        rows.append(("failovers (promoted of drawn; s to a write: median, max)", ""))
        rows += [
            (
                f"  {kind}",
                f"{f['promoted']} of {f['drawn']}"
                + (f"; {f['median']}, {f['max']}" if f["max"] is not None else ""),
            )
            for kind, f in s["failovers"].items()
        ]
    rows += actor_rows(s)
    if "dehydrator" in s:
        d = s["dehydrator"]
        rows += [
            ("parks", d["parks"]),
            *([("  unkept (no replica confirmed)", d["unkept"])] if d.get("unkept") else []),
            ("  lost", d["lost"]),
            ("  released early", d["early"]),
            ("  not in Ick", d["not_in_ick"]),
        ]
    rows = [(str(k) if len(str(k)) <= 60 else str(k)[:57] + "...", v) for k, v in rows]
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)


def actor_rows(s: dict[str, Any]) -> list[tuple[str, Any]]:
    """The table rows of --poison, --writer, --zombie and --outage."""
    rows: list[tuple[str, Any]] = []
    if "fates" in s:
        f = s["fates"]
        rows += [
            ("fates of acknowledged adds", "OK" if f["ok"] else "FAILED"),
            ("  processed", f["processed"]),
            ("  dead-lettered (poison)", f["dead_lettered"]),
            ("  lost (neither)", f["lost"]),
            ("  rows handed back (retry_later)", f["failed_rows"]),
            (
                "  dead letters (good members among them)",
                f"{f['dead_letters']} ({len(f['dead_good_members'])})",
            ),
            (
                "  dead letters without error / attempts",
                f"{f['dead_without_error']} / {f['dead_attempts_not_max']}",
            ),
        ]
    if "writer" in s:
        w = s["writer"]
        rows += [
            ("writer (writeStream.format(ick))", "OK" if w["ok"] else "FAILED"),
            ("  committed batches / members", f"{w['batches']} / {w['adds']}"),
            (
                "  lost (processed, dead-lettered)",
                f"{w['lost']} ({w['processed']}, {w['dead_lettered']})",
            ),
        ]
    if "zombie" in s:
        z = s["zombie"]
        rows.append(
            ("zombie consumers (holding leases: fenced of them)", f"{z['fenced']} of {z['hit']}")
        )
    if "outage" in s:
        o = s["outage"]
        rows.append(
            (
                "outages > retryTimeout (queries running, clear error)",
                f"{o['drawn']} ({o['failing']}, {o['clear_error']})",
            )
        )
    return rows
