-- rlog_snapshot: both sets of one Ick and its open reservations, atomically (read-only).
-- KEYS[1] master, KEYS[2] pset, KEYS[3] cset, KEYS[4] rlog hash, KEYS[5] manifest prefix
-- returns {pset {member, score, ...}, cset {member, score, ...}, open {r1, {members}, ...}}
--   (empty lists when there is no Ick)
if not ick_open(KEYS[1], KEYS[2], KEYS[3], false) then return {{}, {}, {}} end
local open = {}
local reserved = tonumber(redis.call('HGET', KEYS[4], 'reserved') or 0)
for r = tonumber(redis.call('HGET', KEYS[4], 'committed') or 0) + 1, reserved do
  open[#open + 1] = r
  open[#open + 1] = redis.call('ZRANGE', KEYS[5] .. r, 0, -1)
end
return {redis.call('ZRANGE', KEYS[2], 0, -1, 'WITHSCORES'),
        redis.call('ZRANGE', KEYS[3], 0, -1, 'WITHSCORES'), open}
