"""Sharding (docs/design.md §3): the shard function, routing, slots and nodes, the recorded
count."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pyspark_ick import Ick, IckConfigError, ShardCountError, ShardedIck, shard_of
from pyspark_ick.keys import shard_count_key, shard_names
from pyspark_ick.testing import RedisClusterServers

# CRC-32 (zlib, IEEE 802.3) of the UTF-8 bytes, computed with the bitwise reference below
# and cross-checked against the standard check value crc32(b"123456789") = 0xCBF43926.
VECTORS = {
    "doc:1": 4147342079,
    "doc:2": 1849310021,
    "doc:42": 1247254191,
    "user:émile": 2643404332,
    "123456789": 0xCBF43926,
    "": 0,
}


def reference_crc32(data: bytes) -> int:
    """CRC-32 bit by bit (reflected polynomial 0xEDB88320): independent of zlib."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0xEDB88320 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


@pytest.mark.parametrize("member", sorted(VECTORS))
@pytest.mark.parametrize("shards", [1, 2, 3, 8, 16])
def test_shard_function_known_vectors(member: str, shards: int) -> None:
    assert reference_crc32(member.encode()) == VECTORS[member]
    expected = VECTORS[member] % shards
    assert shard_of(member, shards) == expected
    assert shard_of(member.encode(), shards) == expected
    assert ShardedIck(None, "vectors", shards).shard_of(member) == expected


def test_shard_function_spot_values() -> None:
    assert [shard_of("doc:1", s) for s in (2, 3, 8, 16)] == [1, 2, 7, 15]
    assert [shard_of("user:émile", s) for s in (2, 3, 8, 16)] == [0, 1, 4, 12]


@settings(max_examples=40, deadline=None)
@given(member=st.text(max_size=20), shards=st.integers(1, 64))
def test_shard_function_matches_the_reference(member: str, shards: int) -> None:
    data = member.encode("utf-8", "surrogatepass")
    assert shard_of(data, shards) == reference_crc32(data) % shards


def test_shard_master_keys() -> None:
    assert shard_names("docs", 1) == ["docs"]
    assert shard_names("docs", 3) == ["docs:0", "docs:1", "docs:2"]
    assert ShardedIck(None, "docs", 1).shard(0).key == "docs"
    assert ShardedIck(None, "docs", 3).shard(2).key == "docs:2"


@pytest.mark.parametrize("shards", [0, -1, 16385, True, "4", 2.0])
def test_a_bad_shard_count_is_refused_before_redis(shards: Any) -> None:
    with pytest.raises(IckConfigError, match="shards must be an integer from 1 to 16384"):
        ShardedIck(None, "docs", shards)


def test_add_routes_each_member_to_its_shard(any_client: Any) -> None:
    sharded = ShardedIck(any_client, "routed", 4)
    members = {f"doc:{i}": float(i) for i in range(2500)}
    assert sharded.add(members, chunk=300) == (2500, 0)
    assert sharded.add({"doc:7": 1.0, "doc:8": 9.0, "new": 0.0}) == (1, 1)
    stats = sharded.stats()
    assert (stats["pset_size"], stats["cset_size"], stats["total_size"]) == (2501, 0, 2501)
    members.update({"doc:7": 1.0, "new": 0.0})
    for i in range(4):
        got = dict(sharded.shard(i).reserve(3000))
        assert got == {m: s for m, s in members.items() if shard_of(m, 4) == i}
        assert stats["shards"][i]["pset_size"] == len(got)


def test_add_sends_one_call_per_chunk_per_shard(client: Any) -> None:
    sharded = ShardedIck(client, "calls", 3)
    members = [f"m{i}" for i in range(3000)]
    per_shard = [sum(1 for m in members if shard_of(m, 3) == i) for i in range(3)]
    sharded.add(dict.fromkeys(members, 1.0))  # records the count and loads the script
    client.config_resetstat()
    sharded.add(dict.fromkeys(members, 0.5), chunk=400)
    calls = client.info("commandstats")["cmdstat_evalsha"]["calls"]
    assert calls == sum(-(-n // 400) for n in per_shard)


def _slot_owners(cluster: RedisClusterServers) -> dict[int, int]:
    """slot -> port of the primary that serves it."""
    with cluster.nodes[0].client() as c:
        ranges = c.execute_command("CLUSTER", "SLOTS")
    return {slot: int(r[2][1]) for r in ranges for slot in range(int(r[0]), int(r[1]) + 1)}


def _keyslot(cluster: RedisClusterServers, key: str) -> int:
    with cluster.nodes[0].client() as c:
        return int(c.execute_command("CLUSTER", "KEYSLOT", key))


def test_each_shard_keeps_its_keys_on_one_slot(
    cluster_client: Any, redis_cluster_nodes: RedisClusterServers
) -> None:
    sharded = ShardedIck(cluster_client, "slots", 8)
    for i in range(8):
        keys = sharded.shard(i).keys
        names = [*keys.fixed_keys(), keys.reservation(1), keys.reservation(10**6)]
        assert len({_keyslot(redis_cluster_nodes, k) for k in names}) == 1, names


def test_shards_spread_over_the_cluster_nodes(
    cluster_client: Any, redis_cluster_nodes: RedisClusterServers
) -> None:
    sharded = ShardedIck(cluster_client, "spread", 8)
    owners = _slot_owners(redis_cluster_nodes)
    ports = {owners[_keyslot(redis_cluster_nodes, sharded.shard(i).key)] for i in range(8)}
    assert ports == {node.port for node in redis_cluster_nodes.nodes}
    sharded.add({f"doc:{i}": float(i) for i in range(1000)})
    for i in range(8):  # each shard's data sits on the node that owns its slot
        ick = sharded.shard(i)
        port = owners[_keyslot(redis_cluster_nodes, ick.key)]
        node = next(n for n in redis_cluster_nodes.nodes if n.port == port)
        with node.client() as c:
            assert c.get(ick.keys.master) == b"ick.v1"
            assert c.zcard(ick.keys.pset) == sharded.stats()["shards"][i]["pset_size"] > 0


def test_a_mismatched_shard_count_is_refused(any_client: Any) -> None:
    ShardedIck(any_client, "counted", 4).add({"a": 1.0})
    other = ShardedIck(any_client, "counted", 8)
    for call in (lambda: other.add({"b": 1.0}), other.stats):
        with pytest.raises(ShardCountError, match=r"4 shards recorded.*but 8 were given"):
            call()
    assert ShardedIck(any_client, "counted", 4).stats()["pset_size"] == 1
    ShardedIck(any_client, "counted", 4).delete()
    assert ShardedIck(any_client, "counted", 8).add({"b": 1.0}) == (1, 0)


def test_the_first_write_records_the_count_and_a_read_does_not(any_client: Any) -> None:
    fresh = ShardedIck(any_client, "fresh", 3)
    stats = fresh.stats()
    assert stats["shards"] == [None, None, None]
    assert stats["total_size"] == 0
    assert any_client.get(shard_count_key("fresh")) is None  # a reading call wrote nothing
    fresh.add({"a": 1.0})
    assert any_client.get(shard_count_key("fresh")) == b"3"
    with pytest.raises(ShardCountError, match=r"3 shards.*2 were given"):
        ShardedIck(any_client, "fresh", 2).add({"a": 1.0})


@pytest.mark.parametrize("count", [1, 2, 3, 8])
def test_a_count_other_producers_used_is_found_before_it_is_recorded(
    any_client: Any, count: int
) -> None:
    """Producers outside Spark (the Ruby gem) record no count: the keys tell it."""
    members = {f"doc:{i}": float(i) for i in range(200)}
    for i in range(4):  # what a gem producer of 4 shards leaves: w4:0 .. w4:3, no count
        Ick(any_client, f"w4:{i}").add({m: s for m, s in members.items() if shard_of(m, 4) == i})
    wrong = ShardedIck(any_client, "w4", count)
    with pytest.raises(ShardCountError, match=f"Ick 'w4'.*{count}"):
        wrong.stats()
    with pytest.raises(ShardCountError):
        wrong.add({"x": 1.0})
    assert any_client.get(shard_count_key("w4")) is None
    right = ShardedIck(any_client, "w4", 4)
    assert right.stats()["pset_size"] == 200
    right.check_shards()
    assert any_client.get(shard_count_key("w4")) == b"4"


@pytest.mark.parametrize("how", ["delete", "unlink"])
def test_delete_removes_every_shard_and_the_count(client: Any, how: str) -> None:
    sharded = ShardedIck(client, "doomed", 4)
    sharded.add({f"doc:{i}": 1.0 for i in range(100)})
    sharded.shard(0).reserve(5)
    assert getattr(sharded, how)() == 4 * 2 + 1 + 1  # master + pset per shard, 1 cset, count
    assert client.dbsize() == 0
