-- dh_pull: remove elements by id, due or not (ReDe PULL).
-- KEYS[1] due (sorted set id -> due ms), KEYS[2] elements (hash id -> element)
-- ARGV    id1, id2, ... (at most 4000)
-- returns {element1 or nil, ...}
if #ARGV == 0 then return {} end
local elements = redis.call('HMGET', KEYS[2], unpack(ARGV))
redis.call('ZREM', KEYS[1], unpack(ARGV))
redis.call('HDEL', KEYS[2], unpack(ARGV))
return elements
