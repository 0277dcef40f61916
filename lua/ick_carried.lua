-- ick_carried: remove from one Ick shard the retries, attempt records and dead letters
-- that ick_carry took into the members' own shard (carry.py: copied first, then removed
-- here, so a crash in between leaves a copy that the next carry folds). Each is removed
-- only as it was copied: one that changed meanwhile stays, for the next carry.
-- KEYS[1] retry zset, KEYS[2] attempts hash, KEYS[3] dead zset, KEYS[4] deadinfo hash
-- ARGV[1] the msgpack array ick_carry took (member, due, record, dead_at, dead_record, ...)
-- returns how many members were carried off (something of theirs removed here)
local flat = cmsgpack.unpack(ARGV[1])
if type(flat) ~= 'table' or #flat % 5 ~= 0 then
  ick_fail('ick_carried of ' .. KEYS[1] .. ': ARGV[1] is not a msgpack array of fives')
end
local function same_score(key, member, score)
  local now = redis.call('ZSCORE', key, member)
  return score ~= '' and now and tonumber(now) == tonumber(score)
end
local function same_field(key, member, value)
  return value ~= '' and redis.call('HGET', key, member) == value
end
local gone = 0
for i = 1, #flat, 5 do
  local member, due, record, dead_at, letter = unpack(flat, i, i + 4)
  local n = 0
  if same_score(KEYS[1], member, due) then n = n + redis.call('ZREM', KEYS[1], member) end
  if same_field(KEYS[2], member, record) then n = n + redis.call('HDEL', KEYS[2], member) end
  if same_score(KEYS[3], member, dead_at) then n = n + redis.call('ZREM', KEYS[3], member) end
  if same_field(KEYS[4], member, letter) then n = n + redis.call('HDEL', KEYS[4], member) end
  if n > 0 then gone = gone + 1 end
end
return gone
