-- shardcount: record the shard count of a logical Ick or dehydrator on first use.
-- KEYS[1] the shard-count key of the logical name
-- ARGV[1] the shard count this client was given
-- returns the recorded count (ARGV[1] when it was not recorded before)
local recorded = redis.call('GET', KEYS[1])
if recorded then return tonumber(recorded) end
redis.call('SET', KEYS[1], ARGV[1])
return tonumber(ARGV[1])
