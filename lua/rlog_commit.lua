-- rlog_commit: commit every reservation <= through (idempotent; stream reader, §4).
-- KEYS[1] cset, KEYS[2] rlog hash {reserved, committed}, KEYS[3] lease hash,
--   KEYS[4] manifest prefix (reservation r is the zset prefix..r)
-- ARGV[1] through, ARGV[2] owner, ARGV[3] fencing token, ARGV[4] lease time in ms
-- Deletes the manifests; a member leaves the cset unless a later open reservation holds
-- it (it was re-added while in flight and reserved again: that is the re-delivery).
-- returns the last committed number after the call
fence(KEYS[3], ARGV[2], ARGV[3], ARGV[4])
local cset, rlog, prefix = KEYS[1], KEYS[2], KEYS[4]
local committed = tonumber(redis.call('HGET', rlog, 'committed') or 0)
local reserved = tonumber(redis.call('HGET', rlog, 'reserved') or 0)
local through = math.min(tonumber(ARGV[1]), reserved)
if through <= committed then return committed end
if through == reserved then  -- no later reservation holds anything: a server-side diff
  local closed = {}
  for r = committed + 1, through do closed[#closed + 1] = prefix .. r end
  redis.call('ZDIFFSTORE', cset, #closed + 1, cset, unpack(closed))
  redis.call('UNLINK', unpack(closed))  -- big manifests are freed in the background
  redis.call('HSET', rlog, 'committed', through)
  return through
end
for r = committed + 1, through do
  local gone = {}
  for _, m in ipairs(redis.call('ZRANGE', prefix .. r, 0, -1)) do
    local held = false
    for later = through + 1, reserved do
      if redis.call('ZSCORE', prefix .. later, m) then held = true; break end
    end
    if not held then gone[#gone + 1] = m end
  end
  zrem_all(cset, gone, 1, #gone)
  redis.call('UNLINK', prefix .. r)
end
redis.call('HSET', rlog, 'committed', through)
return through
