"""The nemesis soak: hours (or minutes) of mixed faults against a stream of a sharded Ick,
then a check that nothing acknowledged was lost (``check``).

    python3 tests/nemesis --minutes 30 --seed 1 --out DIR [--dehydrator] [--poison 0.02]
        [--writer] [--zombie] [--outage] [--sentinel | --cluster]
    python3 tests/nemesis --check DIR    # the checker again, on a recorded run

- A durable redis-server (AOF, ``appendfsync always``) on a free loopback port, reached by
  producers and consumer through a FaultProxy (tests/fault_proxy.py), as through a load
  balancer. A second, plain redis-server that no fault touches holds the records.
- Producers (threads) add members with scores = time, ~``--rate`` adds/s, recording each
  add Redis acknowledged with the shard's last reservation number read in the same MULTI
  (``DIR/adds.jsonl``).
- A consumer: a child process (its own process group) running
  ``readStream.format("ick") -> foreachBatch`` from a checkpoint on ``local[2,4]`` (a
  killed Python worker is a task retry); the sink records each call (batch id, rows,
  start, end) in the record Redis before it returns. A failed query is restarted in the
  same JVM; a dead child is restarted from the same checkpoint by a supervisor; both
  record the cause (``DIR/restarts.jsonl``).
- A nemesis (seeded) draws a fault every ``--every`` seconds: Redis kill -9 and restart,
  Redis SIGSTOP, proxy reset of every connection, proxy blackhole (half-open), kill -9 of
  the consumer's driver, of its JVM, of a Python worker mid-read, of its stream-source
  runner, and SIGSTOP of the whole consumer (``DIR/faults.jsonl``).
- ``--sentinel``: the Ick lives on a Sentinel set instead (pyspark_ick.testing.start_sentinels:
  a primary, 2 replicas, 3 sentinels, with that function's server settings: nothing
  persisted) and producers and consumer use its ``redis+sentinel://`` URL. Writers and
  readers wait for a replica through the connector itself: the producers' and parker's
  clients are ``connect(url, wait_replicas=1)`` (each add's MULTI, with the read of the
  reservation number, and its WAIT on one pinned connection: ``producers.add_waited``),
  and every query of the consumer (both readStreams, the dehydrator sink's write, the
  writer) has ``redis.waitReplicas`` 1 and ``redis.waitTimeout`` 2 s, waited for again
  until its retryTimeout (a killed primary is back as a replica within seconds). So an
  add is recorded only once a replica has it (every recorded add is kept, by
  construction; one that raised a ReplicationError or IckConnectionError is a producer
  error, not acknowledged), and no batch is delivered on a reservation a replica lacks:
  an empty or changed replay is a failure here as everywhere. "On a replica" is not
  "survives every failover": with ``--wait-replicas 1`` a SENTINEL FAILOVER (or a primary
  paused past its failover) can lose what the replica not promoted confirmed while it
  still followed the old primary (turned over, it discards it), as long as the sentinels
  named no other (after that the write runs again on the new one: replication.py);
  ``--durable --wait-replicas 2`` is what survives them all (docs/deploying.md).
  ``--unwaited 1`` makes one producer add without waiting (its adds counted apart): the
  control that shows a fault losing what no replica had. Its faults: kill -9 of the
  primary (restarted a few seconds after Sentinel promoted a replica: it rejoins as a
  replica), SENTINEL FAILOVER, SIGSTOP of the primary 0.5-8 s (a failover when longer
  than the sentinels' 1 s down-after), and the consumer's kinds; each failover records
  how long until the primary the sentinels name answered a write again.
- ``--cluster``: the Ick on a Redis Cluster instead (tests/cluster_faults.py's
  start_cluster_with_replicas: 3 primaries, a replica each, cluster-node-timeout 2 s,
  nothing persisted); producers and consumer use a URL listing every node, and wait for
  a replica as with --sentinel (the connector WAITs on the connection to each primary a
  write touched; an add's MULTI goes to its slot's primary). Its faults: kill -9 of a
  primary (its replica is promoted; the killed node restarted 2-6 s later rejoins as a
  replica), CLUSTER FAILOVER on a replica, SIGSTOP 0.5-8 s of a node (a primary two times
  in three: a failover when longer than the node timeout), migration of a shard's slot to
  another primary (MIGRATE a key at a time, 0.1-1 s apart; then until the target's
  replica has the keys), and the consumer's kinds; failovers record how long until the
  slot's primary took a write. No proxy faults: MOVED, ASK and CLUSTER SLOTS name the
  nodes' own ports, so a proxy per node needs ``cluster-announce-port`` pointing at it
  (left for later).
- ``--dehydrator``: a parker parks elements with delays of 0-2 s; the consumer's second
  query, ``readStream.format("dehydrator")``, writes each released element into the Ick
  (``df.write.format("ick")``) before recording it; checked: every acknowledged park is
  released after its ack and its element reaches the Ick's deliveries.
- ``--poison SHARE``: the consumer's sink fails for good on SHARE of the members (a seeded
  hash, ``nemesis.poison``) and at their first attempt on 2 x SHARE more, handing them
  back with ``pyspark_ick.spark.retry_later`` (maxAttempts 3, retryBackoff 200 ms to 1 s);
  each call records the members it failed on. After the drain the dead letters are read
  (``DIR/dead_letters.jsonl``); checked (``fates``): every acknowledged add processed
  after it or a dead letter, only poison dead-lettered, each dead letter with its error
  and 3 attempts, nothing waiting for a retry and no attempt record left.
- ``--writer``: the consumer's third query, a rate source (4 rows/s) into
  ``writeStream.format("ick")``: value n is member ``w<n>``; each batch the query's
  progress reports (after its commit) is recorded with its offsets (``writes``), from
  which the checker knows its members; checked like adds (processed or dead-lettered);
  --sentinel, --cluster: its writes wait for a replica (``redis.waitReplicas`` 1).
- ``--zombie``: draws ``zombie_consumer``: SIGSTOP of the whole consumer until its leases
  are a gone holder's, a rival takes each over and gives it back, SIGCONT: fenced, its
  query fails with "lost its lease" and starts again (checked: each hit one fenced).
- ``--outage``: draws ``outage``: Redis down 5-15 s longer than ``redis.retryTimeout``
  (killed; --sentinel, --cluster: every data node SIGSTOPped, a partition); the queries
  fail with the error that says so and start again (checked: the text).
- At the end: the nemesis stops, every fault heals, producers stop, the consumer drains
  (deadline), stops, and the checker runs; a summary table is printed and written with
  every check to ``DIR/summary.json``.

Bounded (every loop has a deadline), seeded (the fault schedule and the members), loopback
only, never port 6379 or 26379, and it signals only processes it started, by PID (the
consumer's process group is its own).

The modules, one job each: ``cli`` (the command line), ``settings`` (what a soak does, the
fault kinds), ``topology`` (where the Ick lives: behind the proxy, a Sentinel set or a
Redis Cluster), ``producers``, ``consumer`` (the child process and its Spark queries),
``poison`` (which members the sink fails on), ``supervisor`` (runs and restarts the
child), ``faults``, ``failovers`` and ``cluster_failovers`` (the nemesis), ``processes``
(signalling ours), ``records`` (the run's JSON lines), ``soak`` (one run, start to end),
``summary`` (its checks and table), ``check`` (the checker, pure functions over the
records) and ``fates`` (its part for --poison and --writer). They import one another as
``nemesis.*`` with tests/ on sys.path (as under pytest; ``__main__`` puts it there).
"""
