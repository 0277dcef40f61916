-- dh_take: due elements of one shard, earliest due first (ReDe POLL and XPOLL).
-- KEYS[1] due (sorted set id -> due ms), KEYS[2] elements (hash id -> element)
-- ARGV[1] now in ms, or "" for Redis server time
-- ARGV[2] at most this many (bounded work per call)
-- ARGV[3] "poll": remove them, return elements | "xpoll": return ids, remove nothing
-- ARGV[4] xpoll: skip this many due ids first (pages); poll: 0
-- ARGV[5] "due": with each due time (to merge shards) | "": without (a quarter of the
--         Redis time of a poll goes to formatting due times)
-- returns {due1, x1, due2, x2, ...} (or {x1, x2, ...}) with x the element (poll) or the
--   id (xpoll)
local now, due = time_ms(ARGV[1]), ARGV[5] == 'due'
local range = {'ZRANGE', KEYS[1], '-inf', now, 'BYSCORE', 'LIMIT', tonumber(ARGV[4] or 0),
               tonumber(ARGV[2])}
if due then range[#range + 1] = 'WITHSCORES' end
local got = redis.call(unpack(range))
local step = due and 2 or 1
if ARGV[3] == 'xpoll' or #got == 0 then return due and flip(got) or got end
local ids = {}
for i = 1, #got, step do ids[#ids + 1] = got[i] end
local elements = redis.call('HMGET', KEYS[2], unpack(ids))
redis.call('ZREMRANGEBYRANK', KEYS[1], 0, #ids - 1)  -- they are the lowest ranks
redis.call('HDEL', KEYS[2], unpack(ids))
if not due then return elements end
for k = 1, #ids do got[2 * k - 1] = got[2 * k] end  -- {due, element, ...} in place
for k = 1, #ids do got[2 * k] = elements[k] end
return got
