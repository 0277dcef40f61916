"""A first round trip on standalone Redis and on the cluster."""

from pyspark_ick import Ick, ShardedIck


def test_round_trip(any_client):
    ick = Ick(any_client, "smoke")
    assert ick.add({"a": 3, "b": 1}) == (2, 0)
    assert ick.reserve(5) == [("b", 1.0), ("a", 3.0)]
    assert ick.commit("a", "b") == 2
    assert ick.stats()["total_size"] == 0


def test_sharded_round_trip(any_client):
    sharded = ShardedIck(any_client, "smoke_sharded", 4)
    sharded.add({f"m{i}": float(i) for i in range(100)})
    assert sharded.stats()["pset_size"] == 100
