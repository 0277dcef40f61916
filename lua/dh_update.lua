-- dh_update: replace the element of a parked id, keeping its due time (ReDe UPDATE).
-- KEYS[1] due (sorted set id -> due ms), KEYS[2] elements (hash id -> element)
-- ARGV[1] id, ARGV[2] new element
-- returns the old element; fails when the id is not parked
local old = redis.call('HGET', KEYS[2], ARGV[1])
if not old then ick_fail('dehydrator id ' .. ARGV[1] .. ' does not exist') end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
return old
