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
local members = {}
for i = 1, #flat, 5 do members[#members + 1] = flat[i] end
local mine = redis.call('HMGET', attempts, unpack(members))
local buried = redis.call('ZMSCORE', dead, unpack(members))
local due, records, letters, infos = {}, {}, {}, {}
for k, member in ipairs(members) do
  local at, record, dead_at, letter = unpack(flat, 5 * k - 3, 5 * k)
  if at ~= '' then due[#due + 1], due[#due + 2] = at, member end
  if record ~= '' and (not mine[k] or attempts_of(record) > attempts_of(mine[k])) then
    records[#records + 1], records[#records + 2] = member, record
  end
  if not buried[k] then
    if dead_at ~= '' then letters[#letters + 1], letters[#letters + 2] = dead_at, member end
    if letter ~= '' then infos[#infos + 1], infos[#infos + 2] = member, letter end
  end
end
if #due > 0 then zadd_lt(retry, due, 1, #due) end
if #records > 0 then redis.call('HSET', attempts, unpack(records)) end
if #letters > 0 then redis.call('ZADD', dead, unpack(letters)) end
if #infos > 0 then redis.call('HSET', deadinfo, unpack(infos)) end
return #members
