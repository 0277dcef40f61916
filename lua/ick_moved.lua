-- ick_moved: remove from one Ick shard's pset the members a reshard has copied to their
-- shard under the new count (reshard.py: ickadd into the new shard first, then this, so a
-- crash in between leaves a copy that the next run folds). A member whose score a
-- producer lowered since the copy stays, and the reshard copies it again. Fenced: only the
-- holder of the shard's lease (the reshard) may.
-- KEYS[1] master, KEYS[2] pset, KEYS[3] cset, KEYS[4] lease hash
-- ARGV[1] owner, ARGV[2] fencing token, ARGV[3] lease time in ms (renewed here),
--   ARGV[4] the pairs copied, as ickadd takes them (pyspark_ick.packing: one msgpack
--   array of strings, score1, member1, ...; at most ITEMS_PER_CALL members)
-- returns {removed, {score1, member1, ...}}: how many members were removed, and the
--   members kept because their score is lower now than the copy's, with that score (the
--   caller copies them again)
local master, pset, cset, lease = unpack(KEYS, 1, 4)
fence(lease, ARGV[1], ARGV[2], ARGV[3])
local flat = cmsgpack.unpack(ARGV[4])
if type(flat) ~= 'table' or #flat % 2 ~= 0 then
  ick_fail('ick_moved of ' .. pset .. ': ARGV[4] is not a msgpack array of score, member')
end
if #flat == 0 or not ick_open(master, pset, cset, false) then return {0, {}} end
local members = {}
for i = 2, #flat, 2 do members[#members + 1] = flat[i] end
local gone, kept = {}, {}
for first = 1, #members, ICK_CHUNK do
  local last = math.min(first + ICK_CHUNK - 1, #members)
  local now = redis.call('ZMSCORE', pset, unpack(members, first, last))
  for k = first, last do
    local score = now[k - first + 1]
    if score and tonumber(score) >= tonumber(flat[2 * k - 1]) then
      gone[#gone + 1] = members[k]
    elseif score then
      kept[#kept + 1], kept[#kept + 2] = score, members[k]
    end
  end
end
return {zrem_all(pset, gone, 1, #gone), kept}
