-- ick_carry: take into one Ick shard the retries, attempt records and dead letters that
-- another shard kept of members whose shard this is (carry.py: a reshard, and re-drive
-- and retry-due meeting what an older reshard left behind). Folds with what this shard
-- holds, so that a copy written twice (a crash before ick_carried) is one: the earlier
-- retry wins, the attempt record with more attempts wins (this shard's on a tie), a dead
-- letter this shard holds already stays as it is. A member's other states stay side by
-- side, as in one shard (queued and dead: a producer added a dead letter again).
-- KEYS[1] master, KEYS[2] pset, KEYS[3] cset, KEYS[4] retry zset, KEYS[5] attempts hash,
--   KEYS[6] dead zset, KEYS[7] deadinfo hash
-- ARGV[1] one msgpack array: member, due, record, dead_at, dead_record, ... (ick_fates'
--   values, '' for none; at most carry.PER_CALL members)
-- returns how many members were taken in
local retry, attempts, dead, deadinfo = unpack(KEYS, 4, 7)
local flat = cmsgpack.unpack(ARGV[1])
if type(flat) ~= 'table' or #flat % 5 ~= 0 then
  ick_fail('ick_carry into ' .. KEYS[1] .. ': ARGV[1] is not a msgpack array of fives')
end
if #flat == 0 then return 0 end
ick_open(KEYS[1], KEYS[2], KEYS[3], true)
for i = 1, #flat, 5 do
  local member, due, record, dead_at, letter = unpack(flat, i, i + 4)
  if due ~= '' then redis.call('ZADD', retry, 'LT', due, member) end
  if record ~= '' then
    local mine = redis.call('HGET', attempts, member)
    if not mine or attempts_of(record) > attempts_of(mine) then
      redis.call('HSET', attempts, member, record)
    end
  end
  if dead_at ~= '' then
    if not redis.call('ZSCORE', dead, member) then
      redis.call('ZADD', dead, dead_at, member)
      if letter ~= '' then redis.call('HSET', deadinfo, member, letter) end
    end
  elseif letter ~= '' then
    redis.call('HSETNX', deadinfo, member, letter)
  end
end
return #flat / 5
