-- rlog_commit: commit the reservations after the last committed one, through ARGV[1]
-- (stream reader, docs/design.md §4); idempotent. One call commits the reservations
-- whose manifests KEYS[5..] name, in order, while they hold at most ARGV[6] members
-- together (by the size:<r> fields; at least one): the caller calls again until the reply
-- reaches ARGV[1].
-- KEYS[1] cset, KEYS[2] rlog hash, KEYS[3] lease hash, KEYS[4] held hash,
--   KEYS[5..] manifests of reservations ARGV[5] + 1, ARGV[5] + 2, ...
-- ARGV[1] through, ARGV[2] owner, ARGV[3] fencing token, ARGV[4] lease time in ms,
--   ARGV[5] the last committed number the caller knows, ARGV[6] members per call (the
--   ARGV of every commit script: numbered_log.COMMIT_ARGV)
-- A member leaves the cset unless another open reservation holds it (re-added while in
-- flight and reserved again: that is the re-delivery).
-- returns {committed, done}: the last committed number after the call; done is -1
--   (nothing done) when the log's committed number is not ARGV[5]
local cset, rlog, lease, held = unpack(KEYS, 1, 4)
local through, owner, token, ttl_ms = tonumber(ARGV[1]), ARGV[2], ARGV[3], ARGV[4]
local known, budget = tonumber(ARGV[5]), tonumber(ARGV[6])
fence(lease, owner, token, ttl_ms)
local committed = tonumber(redis.call('HGET', rlog, 'committed') or 0)
through = math.min(through, tonumber(redis.call('HGET', rlog, 'reserved') or 0))
if through <= committed then return {committed, 0} end
if committed ~= known then return {committed, -1} end
local any_held = redis.call('EXISTS', held) == 1
local r = committed
for k = 5, #KEYS do
  local size = tonumber(redis.call('HGET', rlog, 'size:' .. (r + 1)) or 0)
  if r >= through or (k > 5 and size > budget) then break end
  r = r + 1
  local flat = redis.call('LRANGE', KEYS[k], 0, -1)
  if #flat == 0 then ick_fail(KEYS[k] .. ': reservation ' .. r .. ' is missing') end
  local gone = {}
  for i = 1, #flat, 2 do
    local more = any_held and tonumber(redis.call('HGET', held, flat[i]) or 0) or 0
    if more == 0 then gone[#gone + 1] = flat[i]
    elseif more == 1 then redis.call('HDEL', held, flat[i])
    else redis.call('HINCRBY', held, flat[i], -1) end
  end
  zrem_all(cset, gone, 1, #gone)
  redis.call('UNLINK', KEYS[k])
  redis.call('HDEL', rlog, 'size:' .. r)
  budget = budget - size
end
redis.call('HSET', rlog, 'committed', r)
return {r, 1}
