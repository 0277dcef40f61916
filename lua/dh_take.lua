-- dh_take: due elements of one shard, earliest due first (ReDe POLL and XPOLL).
-- KEYS[1] due (sorted set id -> due ms), KEYS[2] elements (hash id -> element)
-- ARGV[1] now in ms, or "" for Redis server time
-- ARGV[2] at most this many (bounded work per call)
-- ARGV[3] "poll": remove them, return elements | "xpoll": return ids, remove nothing
-- ARGV[4] xpoll: skip this many due ids first (pages); poll: 0
-- returns {due1, x1, due2, x2, ...} with x the element (poll) or the id (xpoll)
local now = time_ms(ARGV[1])
local got = redis.call('ZRANGE', KEYS[1], '-inf', now, 'BYSCORE', 'LIMIT',
                       tonumber(ARGV[4] or 0), tonumber(ARGV[2]), 'WITHSCORES')
if ARGV[3] == 'xpoll' or #got == 0 then return flip(got) end
local ids = {}
for i = 1, #got, 2 do ids[#ids + 1] = got[i] end
local elements = redis.call('HMGET', KEYS[2], unpack(ids))
redis.call('ZREMRANGEBYRANK', KEYS[1], 0, #ids - 1)  -- they are the lowest ranks
redis.call('HDEL', KEYS[2], unpack(ids))
for k = 1, #ids do got[2 * k - 1] = got[2 * k] end  -- {due, element, ...} in place
for k = 1, #ids do got[2 * k] = elements[k] end
return got
