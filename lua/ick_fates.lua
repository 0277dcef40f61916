-- ick_fates: what one Ick shard keeps of each member named besides its queue (carry.py
-- reads it before it carries the members to their own shard).
-- KEYS[1] retry zset, KEYS[2] attempts hash, KEYS[3] dead zset, KEYS[4] deadinfo hash
-- ARGV[1..] members (at most carry.PER_CALL: a record holds up to a 1,000 byte error)
-- returns {due, record, dead_at, dead_record, ...}: four per member in ARGV's order (its
--   retry's due time, attempt record, dead letter's time and record), '' for what the
--   shard does not hold
if #ARGV == 0 then return {} end
local due = redis.call('ZMSCORE', KEYS[1], unpack(ARGV))
local records = redis.call('HMGET', KEYS[2], unpack(ARGV))
local dead = redis.call('ZMSCORE', KEYS[3], unpack(ARGV))
local letters = redis.call('HMGET', KEYS[4], unpack(ARGV))
local out = {}
for i = 1, #ARGV do
  out[#out + 1] = due[i] or ''
  out[#out + 1] = records[i] or ''
  out[#out + 1] = dead[i] or ''
  out[#out + 1] = letters[i] or ''
end
return out
