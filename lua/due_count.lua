-- due_count: how many members of a sorted set of due times are due now: a dehydrator
-- shard's elements (Trigger.AvailableNow's budget), an Ick shard's retries.
-- KEYS[1] the sorted set (member -> due ms)
-- ARGV[1] now in ms, or "" for Redis server time
-- returns the count
return redis.call('ZCOUNT', KEYS[1], '-inf', time_ms(ARGV[1]))
