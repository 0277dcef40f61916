"""A plain Python producer (no Spark): marks ids dirty in the same sharded Ick.

Services outside Spark shard exactly like the Spark writer (zlib CRC-32 of the UTF-8 id,
modulo the shard count), so ShardedIck.add is all they need:

    REDIS_URL=redis://localhost:6379/0 python examples/producer.py dirty_docs 8 doc:1 doc:2
"""

from __future__ import annotations

import os
import sys
import time

from pyspark_ick import ShardedIck, connect


def main(argv: list[str]) -> int:
    if len(argv) < 3:
        print("usage: producer.py ICK SHARDS ID [ID ...]", file=sys.stderr)
        return 2
    name, shards, ids = argv[0], int(argv[1]), argv[2:]
    ick = ShardedIck(connect(os.environ.get("REDIS_URL", "redis://localhost:6379/0")), name, shards)
    now = time.time()  # first-dirty time: re-adding keeps the lower score
    new, changed = ick.add(dict.fromkeys(ids, now))
    print(
        f"{len(ids)} ids marked dirty: {new} new, {changed} moved earlier, "
        f"{len(ids) - new - changed} folded"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
