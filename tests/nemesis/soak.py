"""One soak, start to end: the servers, producers, consumer and nemesis; the faulty
phase, the heal, the drain and the checks (nemesis.summary)."""

from __future__ import annotations

import atexit
import contextlib
import json
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis
from faults_support import drained

from nemesis.faults import Nemesis
from nemesis.producers import make_parker, make_producer
from nemesis.records import Journal, write_jsonl
from nemesis.settings import DEHYDRATOR, ICK, Settings
from nemesis.summary import summarize, table
from nemesis.supervisor import Supervisor
from nemesis.topology import start_target
from pyspark_ick import Dehydrator, ShardedIck
from pyspark_ick.dead_letters import DeadLetters
from pyspark_ick.keys import IckKeys, shard_names
from pyspark_ick.reservations import describe
from pyspark_ick.testing import start_binary, wait_until


@dataclass
class Run:
    """What a soak started, for cleanup: every stop function, latest first."""

    cleanups: list[Callable[[], None]] = field(default_factory=list)

    def on_exit(self, fn: Callable[[], None]) -> None:
        self.cleanups.append(fn)

    def close(self) -> None:
        while self.cleanups:
            fn = self.cleanups.pop()
            with contextlib.suppress(Exception):
                fn()


def soak(settings: Settings, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Run one soak; returns the summary (also in ``out/summary.json``)."""
    out = Path(settings.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("*.jsonl"):
        old.unlink()
    run = Run()
    atexit.register(run.close)
    origin = time.monotonic()
    try:
        record_server = start_binary()
        run.on_exit(record_server.stop)
        assert record_server.port not in (6379, 26379)
        target = start_target(settings, run.on_exit)
        server, proxy, sentinels, direct = (
            target.server,
            target.proxy,
            target.sentinels,
            target.direct,
        )
        record = record_server.client()
        journals = {
            name: Journal(out / f"{name}.jsonl") for name in ("adds", "faults", "restarts", "parks")
        }
        for j in journals.values():
            run.on_exit(j.close)
        arm_file = out / "worker.arm"
        cfg = {
            "url": target.url,
            "shards": settings.shards,
            "record_port": record_server.port,
            "checkpoint": str(out / "checkpoint"),
            "arm_file": str(arm_file),
            "sink_arm": str(out / "sink.arm"),
            "stop_file": str(out / "stop"),
            "heartbeat": str(out / "heartbeat"),
            "max_per_trigger": settings.max_per_trigger,
            "trigger": settings.trigger,
            "retry_timeout": settings.retry_timeout,
            "consumer_id": settings.consumer_id,
            "dehydrator": settings.dehydrator,
            "cluster": settings.cluster,
            "wait_replicas": settings.wait_replicas if settings.sentinel or settings.cluster else 0,
            "wait_timeout": settings.wait_timeout,
            "seed": settings.seed,
            "poison": settings.poison,
            "max_attempts": settings.max_attempts,
            "retry_backoff": settings.retry_backoff,
            "retry_backoff_max": settings.retry_backoff_max,
            "writer": settings.writer,
            "writer_rate": settings.writer_rate,
        }
        for stale in ("stop", "stop-writer", "heartbeat", "worker.arm", "sink.arm"):
            with contextlib.suppress(FileNotFoundError):
                (out / stale).unlink()
        for name in ("checkpoint-ick", "checkpoint-dh", "checkpoint-w"):
            shutil.rmtree(out / name, ignore_errors=True)

        clients = [target.client() for _ in range(settings.producers + 1)]
        for c in clients:
            run.on_exit(c.close)
        producers = [
            make_producer(clients[i], journals["adds"], settings, i)
            for i in range(settings.producers)
        ]
        loops = list(producers)
        dehydrator = None
        if settings.dehydrator:
            dehydrator = Dehydrator(clients[-1], DEHYDRATOR, settings.shards)
            loops.append(make_parker(dehydrator, journals["parks"], settings))
        supervisor = Supervisor(settings, cfg, out, journals["restarts"])
        run.on_exit(lambda: supervisor.finish(timeout=20))
        nemesis = Nemesis(
            settings,
            server,
            proxy,
            supervisor,
            journals["faults"],
            arm_file,
            sentinels,
            cluster=target.cluster,
        )
        nemesis.sink_calls = lambda: int(record.llen("deliveries"))
        run.on_exit(nemesis.heal)
        run.on_exit(lambda: nemesis.stop(timeout=30))

        log(
            f"soak: {target.where}, records on {record_server.port}, "
            f"{settings.minutes} min, seed {settings.seed}, out {out}"
        )
        supervisor.start()
        for loop in loops:
            loop.start()
            run.on_exit(lambda loop=loop: loop.stop())
        # Faults start once the consumer delivered its first batch (a cold JVM start), and
        # with --dehydrator its dehydrator query its first too.
        wait_until(
            lambda: (
                record.llen("deliveries") > 0
                and (dehydrator is None or record.llen("dh_deliveries") > 0)
            ),
            timeout=300,  # a cold JVM on a loaded machine
            interval=0.5,
            what="the consumer's first batch",
        )
        started = time.monotonic()
        log(f"soak: first batch after {started - origin:.1f} s; faults for {settings.minutes} min")
        nemesis.start()
        end = started + settings.minutes * 60
        while time.monotonic() < end:
            time.sleep(min(10.0, max(0.0, end - time.monotonic())))
            log(
                f"  t+{time.monotonic() - started:6.0f}s adds {len(journals['adds'].records)}"
                f" batches {record.llen('deliveries')} faults "
                f"{len(journals['faults'].records)} restarts "
                f"{len(journals['restarts'].records)}"
            )
        nemesis.stop()
        nemesis.heal()
        for loop in loops:
            loop.stop()
        if settings.writer:
            stop_writer(record, out / "stop-writer", log)
        faults_end = time.monotonic()
        log(f"soak: faults over; draining (at most {settings.drain_timeout:.0f} s)")

        def is_drained() -> bool:
            if not drained(direct, ICK, settings.shards) or any(retries_left(direct, settings)):
                return False
            return dehydrator is None or not any(dehydrator_left(direct, settings))

        drain_deadline = time.monotonic() + settings.drain_timeout
        emptied = False
        while time.monotonic() < drain_deadline:
            try:
                if is_drained():
                    emptied = True
                    break
            except redis.RedisError:
                pass
            time.sleep(0.5)
        # The dehydrator's last rehydrated members may land in the Ick just before the
        # dehydrator empties: one more look at the Ick.
        if emptied and dehydrator is not None:
            with contextlib.suppress(TimeoutError):
                wait_until(
                    lambda: (
                        drained(direct, ICK, settings.shards)
                        and not any(retries_left(direct, settings))
                    ),
                    timeout=60,
                    interval=0.5,
                    what="the Ick drained",
                )
        drain_seconds = time.monotonic() - faults_end
        supervisor.finish()
        until = time.monotonic()
        stuck = stuck_state(direct, settings, dehydrator is not None)
        for j in journals.values():
            j.sync()
        events = [json.loads(x) for x in record.lrange("events", 0, -1)]
        deliveries = [json.loads(x) for x in record.lrange("deliveries", 0, -1)]
        dh = [json.loads(x) for x in record.lrange("dh_deliveries", 0, -1)]
        write_jsonl(out / "deliveries.jsonl", deliveries)
        write_jsonl(out / "dh_deliveries.jsonl", dh)
        write_jsonl(out / "events.jsonl", events)
        writes = [json.loads(x) for x in record.lrange("writes", 0, -1)]
        write_jsonl(out / "writes.jsonl", writes)
        dead = dead_letters(direct, settings)
        write_jsonl(out / "dead_letters.jsonl", dead)
        summary = summarize(
            settings,
            journals,
            deliveries,
            dh,
            events,
            stuck,
            origin=started,
            until=until,
            drain_seconds=drain_seconds,
            drained=emptied,
            proxy_resets=proxy.resets if proxy is not None else 0,
            nemesis_errors=nemesis.errors,
            servers=target.servers,
            producer_errors=sum(len(p.errors) for p in loops),
            producer_error_examples=sorted({e[:200] for p in loops for e in p.errors})[:5],
            writes=writes,
            dead_letters=dead,
        )
        (out / "summary.json").write_text(json.dumps(summary, indent=2))
        log(table(summary))
        return summary
    finally:
        run.close()
        atexit.unregister(run.close)


def stop_writer(record: Any, stop: Path, log: Callable[[str], None]) -> None:
    """--writer: ask the consumer to stop its writer query (before the drain, as the
    producers stop) and wait until it says it did (a child started after that starts none)."""
    since = time.monotonic()
    stop.write_text("stop")

    def stopped() -> bool:
        events = [json.loads(x) for x in record.lrange("events", 0, -1)]
        return any(e["kind"] == "writer_stopped" and e["at"] > since for e in events)

    try:
        wait_until(stopped, timeout=120, interval=0.5, what="the writer query stopped")
    except TimeoutError as exc:
        log(f"soak: {exc}; draining anyway")


def stuck_state(client: Any, settings: Settings, with_dehydrator: bool) -> dict[str, Any]:
    """What is left in Redis after the drain: members queued or reserved, open
    reservations per shard (and the dehydrator's size)."""
    stats = ShardedIck(client, ICK, settings.shards).stats()
    state = {
        "members": int(stats["total_size"]),
        "open_reservations": sum(
            describe(client, k)["open_reservations"] for k in shard_names(ICK, settings.shards)
        ),
    }
    if with_dehydrator:
        state["dehydrator"], state["open_claims"] = dehydrator_left(client, settings)
    state["retrying"], state["attempt_records"], state["handed_back"] = retries_left(
        client, settings
    )
    return state


def retries_left(client: Any, settings: Settings) -> tuple[int, int, int]:
    """(members waiting for a retry, attempt records, hand-backs no commit decided yet) of
    the soak's Ick (retries.py's keys): all 0 once every member is done or a dead letter."""
    parts = [IckKeys(name) for name in shard_names(ICK, settings.shards)]
    return (
        sum(client.zcard(k.retry) for k in parts),
        sum(client.hlen(k.attempts) for k in parts),
        sum(client.hlen(k.failed) for k in parts),
    )


def dead_letters(client: Any, settings: Settings) -> list[dict[str, Any]]:
    """The soak's dead letters (nemesis.fates.dead_letter_of reads them back)."""
    return [
        {
            "member": d.member,
            "shard": d.shard,
            "dead_at_ms": d.dead_at_ms,
            "attempts": d.attempts,
            "error": d.error,
        }
        for d in DeadLetters(ShardedIck(client, ICK, settings.shards)).read()
    ]


def dehydrator_left(client: Any, settings: Settings) -> tuple[int, int]:
    """(elements parked, claims not committed) of the soak's dehydrator."""
    dh = Dehydrator(client, DEHYDRATOR, settings.shards)
    claims = 0
    for i in range(settings.shards):
        head, committed = dh.claim_log(i).counters()
        claims += head - committed
    return dh.size(), claims
