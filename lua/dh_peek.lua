-- dh_peek: the elements of one dehydrator shard due first, changing nothing (read-only).
-- KEYS[1] due (sorted set id -> due ms), KEYS[2] elements (hash id -> element)
-- ARGV[1] N: how many (at most ITEMS_PER_CALL), ARGV[2] skip this many first (pages)
-- returns {id1, due1, element1, ...}, earliest due first
local n, skip = tonumber(ARGV[1]), tonumber(ARGV[2] or 0)
if n <= 0 then return {} end
local got = redis.call('ZRANGE', KEYS[1], skip, skip + n - 1, 'WITHSCORES')
if #got == 0 then return {} end
local ids = {}
for i = 1, #got, 2 do ids[#ids + 1] = got[i] end
local found = redis.call('HMGET', KEYS[2], unpack(ids))
local out = {}
for k = 1, #ids do
  out[#out + 1], out[#out + 2], out[#out + 3] = ids[k], got[2 * k], found[k] or ''
end
return out
