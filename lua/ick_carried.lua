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
if #flat == 0 then return 0 end
local members = {}
for i = 1, #flat, 5 do members[#members + 1] = flat[i] end
local gone = {}
for part = 1, 4 do  -- retry, attempts, dead, deadinfo: ARGV's values 2..5 of each five
  local key, scored = KEYS[part], part % 2 == 1
  local now = redis.call(scored and 'ZMSCORE' or 'HMGET', key, unpack(members))
  local same = {}
  for k, member in ipairs(members) do
    local carried = flat[5 * k - 4 + part]
    if carried ~= '' and now[k] and (scored and tonumber(now[k]) == tonumber(carried)
                                     or now[k] == carried) then
      same[#same + 1], gone[member] = member, true
    end
  end
  if #same > 0 then redis.call(scored and 'ZREM' or 'HDEL', key, unpack(same)) end
end
local n = 0
for _ in pairs(gone) do n = n + 1 end
return n
