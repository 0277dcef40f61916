-- dh_backlog: how many elements of one shard are due now (Trigger.AvailableNow's budget).
-- KEYS[1] due (sorted set id -> due ms)
-- ARGV[1] now in ms, or "" for Redis server time
-- returns the count
return redis.call('ZCOUNT', KEYS[1], '-inf', time_ms(ARGV[1]))
