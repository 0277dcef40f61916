-- dh_xack: remove and return the due elements among the given ids (ReDe XACK).
-- KEYS[1] due (sorted set id -> due ms), KEYS[2] elements (hash id -> element)
-- ARGV[1] now in ms, or "" for Redis server time
-- ARGV[2..] id1, id2, ...
-- returns {element or nil per id}: nil where the id is missing or not due yet
local now = time_ms(ARGV[1])
local out = {}
for i = 2, #ARGV do
  local due = redis.call('ZSCORE', KEYS[1], ARGV[i])
  local element = false
  if due and tonumber(due) <= now then
    element = redis.call('HGET', KEYS[2], ARGV[i])
    redis.call('ZREM', KEYS[1], ARGV[i])
    redis.call('HDEL', KEYS[2], ARGV[i])
  end
  out[i - 1] = element
end
return out
