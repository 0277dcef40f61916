-- ick_requeue: hand every reserved member of one Ick shard back to its queue and close the
-- shard's reservation log (release.py: a dead query's reservations; reshard.py: before
-- the members move). One call either folds at most ARGV[5] members of the cset back into
-- the pset (the lower score wins, as in ickadd) or, once the cset is empty, closes the
-- open reservations whose manifests KEYS[7..] names (committed = their number); the
-- caller calls again until the reply says nothing is left. Fenced: only the holder of the
-- shard's lease (the operator's command) may.
-- KEYS[1] master, KEYS[2] pset, KEYS[3] cset, KEYS[4] rlog hash {reserved, committed,
--   size:<r>, repeated}, KEYS[5] held hash, KEYS[6] lease hash, KEYS[7] failed hash
--   (hand-backs: with the log closed, none is of an open reservation, so it goes),
--   KEYS[8..] manifests of reservations ARGV[4] + 1, ARGV[4] + 2, ... (at most
--   KEYS_PER_CALL; never past the log's last reservation)
-- ARGV[1] owner, ARGV[2] fencing token, ARGV[3] lease time in ms (renewed here),
--   ARGV[4] the last committed number the caller knows, ARGV[5] members per call
-- returns {committed, moved, left}: the last committed number after the call, members
--   folded back by it, 1 while work is left (0: cset empty, log closed); moved is -1
--   (nothing done) when the log's committed number is not ARGV[4]: call again with it
local master, pset, cset, rlog, held, lease, failed = unpack(KEYS, 1, 7)
local known, per_call = tonumber(ARGV[4]), tonumber(ARGV[5])
fence(lease, ARGV[1], ARGV[2], ARGV[3])
local committed = tonumber(redis.call('HGET', rlog, 'committed') or 0)
local reserved = tonumber(redis.call('HGET', rlog, 'reserved') or 0)
if ick_open(master, pset, cset, false) then
  local back = flip(redis.call('ZPOPMIN', cset, per_call))
  if #back > 0 then
    zadd_lt(pset, back, 1, #back)
    return {committed, #back / 2, 1}
  end
end
if committed ~= known then return {committed, -1, 1} end
local r = committed
for k = 8, #KEYS do
  if r >= reserved then break end
  r = r + 1
  redis.call('UNLINK', KEYS[k])
  redis.call('HDEL', rlog, 'size:' .. r)
end
if r > committed then redis.call('HSET', rlog, 'committed', r) end
if r < reserved then return {r, 0, 1} end
redis.call('UNLINK', held, failed)  -- no reservation open: nothing held twice or handed back
redis.call('HDEL', rlog, 'repeated')
return {r, 0, 0}
