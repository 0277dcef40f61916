"""Binary-safe members and ids end to end: a member or id that is not UTF-8 (a Ruby producer's
``"a\\xffb".b``) is routed, committed, pulled and acknowledged by the client as the
surrogate-escaped text it hands out and as bytes; the readers deliver it with
``memberType=binary`` (``idType=binary``) and fail clearly without; the writers store
binary columns as they are."""

from __future__ import annotations

import zlib
from typing import Any

import pytest
from support import drain, failure_of

from pyspark_ick import Dehydrator, Ick, ShardedIck
from pyspark_ick.keys import IckKeys, shard_names, shard_of
from pyspark_ick.reservations import describe

RAW = b"a\xffb"  # not UTF-8
TEXT = RAW.decode("utf-8", "surrogateescape")  # what the client hands out: 'a\udcffb'


# --- the client ---------------------------------------------------------------------------


def test_shard_of_routes_the_escaped_text_and_the_bytes_alike(client):
    assert shard_of(TEXT, 7) == shard_of(RAW, 7) == zlib.crc32(RAW) % 7
    sharded = ShardedIck(client, "routed", 7)
    assert sharded.shard_of(TEXT) == sharded.shard_of(RAW) == zlib.crc32(RAW) % 7
    sharded.add({RAW: 1.0})
    sharded.add({TEXT: 2.0})  # the same Redis string: folded, lower score kept
    i = sharded.shard_of(RAW)
    assert client.zrange(IckKeys(shard_names("routed", 7)[i]).pset, 0, -1, withscores=True) == [
        (RAW, 1.0)
    ]
    assert sharded.stats()["total_size"] == 1


@pytest.mark.parametrize("form", [TEXT, RAW], ids=["text", "bytes"])
def test_ick_commit_and_exchange_take_what_reserve_handed_out(client, form):
    ick = Ick(client, "gem")
    ick.add({RAW: 1.0, "ok": 2.0})
    assert ick.reserve(5) == [(TEXT, 1.0), ("ok", 2.0)]
    assert ick.commit(form) == 1
    assert ick.stats()["cset_size"] == 1  # "ok" stays reserved
    ick.add({RAW: 3.0})
    assert ick.exchange(5, commit=["ok"]) == [(TEXT, 3.0)]
    assert ick.exchange(5, commit=[form]) == []
    assert ick.stats()["total_size"] == 0


@pytest.mark.parametrize("form", [TEXT, RAW], ids=["text", "bytes"])
def test_dehydrator_pull_look_update_and_xack_take_what_xpoll_handed_out(client, form):
    d = Dehydrator(client, "ids", 3)
    other = b"i\xfe" + RAW
    d.push(b"i\xffd", "one", 0)
    d.push(other, "two", 0)
    d.push("plain", "three", 0)
    ids = d.xpoll()
    assert sorted(ids) == sorted(["i\udcffd", other.decode("utf-8", "surrogateescape"), "plain"])
    id = b"i\xffd" if isinstance(form, bytes) else "i\udcffd"
    assert d.look(id) == "one"
    assert d.update(id, "uno") == "one"
    assert d.look(id) == "uno"
    assert d.pull(id) == "uno"
    assert d.look(id) is None
    twin = other if isinstance(form, bytes) else other.decode("utf-8", "surrogateescape")
    assert d.xack(twin, "plain", id) == ["two", "three", None]
    assert d.size() == 0


def test_the_dehydrator_routes_the_escaped_text_and_the_bytes_alike(client):
    d = Dehydrator(client, "routes", 5)
    assert d.shard_of("i\udcffd") == d.shard_of(b"i\xffd") == zlib.crc32(b"i\xffd") % 5
    d.park(["i\udcffd"], ["x"], [60_000])
    assert d.look(b"i\xffd") == "x"


# --- the readers --------------------------------------------------------------------------


@pytest.mark.slow  # 13 s at rest: a stream query that fails, then a binary one
def test_a_member_that_is_not_utf8_fails_the_string_reader_and_binary_delivers_it(
    spark, redis_url, client, tmp_path
):
    sharded = ShardedIck(client, "gem", 2)
    sharded.add({f"doc:{i}": float(i) for i in range(6)})
    shard = zlib.crc32(RAW) % 2  # the gem's producer writes the pset directly
    client.zadd(IckKeys(f"gem:{shard}").pset, {RAW: 2.5})
    ckpt = str(tmp_path / "ckpt")
    options = {"redis.url": redis_url, "ick": "gem", "shards": 2}
    query, sink = drain(spark, "ick", options, ckpt)
    message = failure_of(query, 120)
    assert f"Ick 'gem' shard {shard}" in message
    assert repr(RAW) in message and "memberType=binary" in message
    first = {r.member.encode() for r in sink.rows()}
    assert shard not in {r.shard for r in sink.rows()}  # nothing of that batch delivered
    log = describe(client, f"gem:{shard}")
    assert log["open_reservations"] >= 1 and log["open_members"] >= 1  # nothing committed
    assert client.zscore(IckKeys(f"gem:{shard}").cset, RAW) == 2.5  # still reserved

    query, sink = drain(spark, "ick", {**options, "memberType": "binary"}, ckpt)
    assert query.awaitTermination(120)
    rows = sink.rows()
    assert all(isinstance(r.member, bytearray | bytes) for r in rows)
    assert first | {bytes(r.member) for r in rows} == {RAW} | {
        f"doc:{i}".encode() for i in range(6)
    }
    assert [r.shard for r in rows if bytes(r.member) == RAW] == [shard]
    assert sharded.stats()["total_size"] == 0
    assert {describe(client, f"gem:{i}")["open_reservations"] for i in range(2)} == {0}


def test_the_snapshot_reader_takes_member_type(spark, redis_url, client):
    ShardedIck(client, "snap", 2).add({RAW: 1.0, "ok": 2.0})

    def read(**options: Any) -> Any:
        reader = (
            spark.read.format("ick")
            .option("redis.url", redis_url)
            .option("ick", "snap")
            .option("shards", 2)
        )
        for key, value in options.items():
            reader = reader.option(key, value)
        return reader

    assert read(memberType="binary").load().schema["member"].dataType.simpleString() == "binary"
    rows = read(memberType="binary").load().collect()
    assert sorted(bytes(r.member) for r in rows) == [RAW, b"ok"]
    with pytest.raises(Exception, match=r"Ick 'snap' shard \d.*b'a\\xffb'.*memberType=binary"):
        read().load().collect()


@pytest.mark.slow
def test_an_id_that_is_not_utf8_fails_the_string_source_and_id_type_binary_delivers_it(
    spark, redis_url, client, tmp_path
):
    d = Dehydrator(client, "raw_ids", 2)
    d.park([b"i\xffd", "plain"], ["one", "two"], [0, 0])
    ckpt = str(tmp_path / "ckpt")
    options = {"redis.url": redis_url, "dehydrator": "raw_ids", "shards": 2}
    query, _ = drain(spark, "dehydrator", options, ckpt)
    message = failure_of(query, 120)
    assert "dehydrator 'raw_ids' shard" in message
    assert repr(b"i\xffd") in message and "idType=binary" in message
    query, sink = drain(spark, "dehydrator", {**options, "idType": "binary"}, ckpt)
    assert query.awaitTermination(120)
    assert sorted((bytes(r.id), r.element) for r in sink.rows()) == [
        (b"i\xffd", "one"),
        (b"plain", "two"),
    ]
    assert d.size() == 0 and client.keys("raw_ids*/dh/*claim:*") == []


# --- the writers --------------------------------------------------------------------------


@pytest.mark.slow
def test_a_binary_member_column_is_written_as_it_is(spark, redis_url, client):
    members = [RAW, b"\x00\xfe", b"doc:1", "é".encode()]
    df = spark.createDataFrame(
        [(m, float(i)) for i, m in enumerate(members)], "member binary, score double"
    )
    df.write.format("ick").option("redis.url", redis_url).option("ick", "written").option(
        "shards", 3
    ).mode("append").save()
    sharded = ShardedIck(client, "written", 3)
    for i, member in enumerate(members):
        key = IckKeys(shard_names("written", 3)[sharded.shard_of(member)]).pset
        assert client.zscore(key, member) == float(i), member
    rows = (
        spark.read.format("ick")
        .option("redis.url", redis_url)
        .option("ick", "written")
        .option("shards", 3)
        .option("memberType", "binary")
        .load()
        .collect()
    )
    assert sorted((bytes(r.member), r.shard) for r in rows) == sorted(
        (m, sharded.shard_of(m)) for m in members
    )
    # without a score column: scored with Redis server time, the same routing
    df.select("member").write.format("ick").option("redis.url", redis_url).option(
        "ick", "timed"
    ).option("shards", 3).mode("append").save()
    timed = ShardedIck(client, "timed", 3)
    for member in members:
        key = IckKeys(shard_names("timed", 3)[timed.shard_of(member)]).pset
        assert client.zscore(key, member) is not None, member


def test_a_binary_id_column_is_parked_as_it_is(spark, redis_url, client):
    df = spark.createDataFrame([(b"i\xffd", "one"), (b"plain", "two")], "id binary, element string")
    df.write.format("dehydrator").option("redis.url", redis_url).option(
        "dehydrator", "bin_ids"
    ).option("shards", 3).option("delay", "1h").mode("append").save()
    d = Dehydrator(client, "bin_ids", 3)
    assert d.look(b"i\xffd") == "one" and d.look("plain") == "two"
    assert d.pull("i\udcffd") == "one"
