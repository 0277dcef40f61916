-- dh_ttn: ms until the next element of one shard is due (ReDe TTN).
-- KEYS[1] due (sorted set id -> due ms)
-- ARGV[1] now in ms, or "" for Redis server time
-- returns 0 when one is due, -1 when the shard is empty
local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
if #first == 0 then return -1 end
return math.max(0, tonumber(first[2]) - time_ms(ARGV[1]))
