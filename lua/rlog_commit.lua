-- rlog_commit: commit the reservations after the last committed one, through ARGV[1]
-- (stream reader, docs/design.md §4); idempotent. One call commits the reservations
-- whose manifests KEYS[10..] name, in order, while they hold at most ARGV[6] members
-- together (by the size:<r> fields; at least one): the caller calls again until the reply
-- reaches ARGV[1]. A member the sink handed back in the delivery being committed (the
-- failed hash, written by rlog_fail) gets a retry or becomes a dead letter in the same
-- call (fail_member, docs/design.md §11); any other member is done, and its attempt
-- record and pending retry go.
-- KEYS[1] cset, KEYS[2] rlog hash, KEYS[3] lease hash, KEYS[4] held hash, KEYS[5] retry
--   zset, KEYS[6] attempts hash, KEYS[7] dead zset, KEYS[8] deadinfo hash, KEYS[9] failed
--   hash ("<r> <member>" -> "<delivery> <error>"), KEYS[10] freshness hash (fresh_count),
--   KEYS[11..] the manifests of reservations ARGV[5] + 1, ARGV[5] + 2, ...
-- ARGV[1] through, ARGV[2] owner, ARGV[3] fencing token, ARGV[4] lease time in ms,
--   ARGV[5] the last committed number the caller knows, ARGV[6] members per call (the
--   ARGV of every commit script: numbered_log.COMMIT_ARGV), ARGV[7] the retry policy
--   (policy_of; its defaults when absent)
-- A member leaves the cset unless another open reservation holds it (re-added while in
-- flight and reserved again: that is the re-delivery). With no reservation left open,
-- what the failed hash still holds is of reservations committed without it (by release
-- 0.1, after a rollback): it goes.
-- Each call adds the members it closed to the log's `done` field (a counter for
-- operators: throughput), and the wait of each member done (not handed back) to the
-- freshness histogram: a replayed commit closes nothing and counts nothing.
-- returns {committed, done, retried, dead}: the last committed number after the call;
--   done is -1 (nothing done) when the log's committed number is not ARGV[5]
local cset, rlog, lease, held = unpack(KEYS, 1, 4)
local fates, failed, fresh = {KEYS[5], KEYS[6], KEYS[7], KEYS[8]}, KEYS[9], KEYS[10]
local through, owner, token, ttl_ms = tonumber(ARGV[1]), ARGV[2], ARGV[3], ARGV[4]
local known, budget = tonumber(ARGV[5]), tonumber(ARGV[6])
local policy = policy_of(ARGV[7])
fence(lease, owner, token, ttl_ms)
local committed = tonumber(redis.call('HGET', rlog, 'committed') or 0)
local reserved = tonumber(redis.call('HGET', rlog, 'reserved') or 0)
through = math.min(through, reserved)
if through <= committed then
  if committed == reserved then redis.call('UNLINK', failed) end
  return {committed, 0, 0, 0}
end
if committed ~= known then return {committed, -1, 0, 0} end
local any_held = redis.call('EXISTS', held) == 1
local tracked = redis.call('EXISTS', fates[1], fates[2]) > 0
local handed_back = redis.call('EXISTS', failed) == 1
local counts = {retry = 0, dead = 0}
local r, closed, counted = committed, 0, {}
for k = 11, #KEYS do
  local size = tonumber(redis.call('HGET', rlog, 'size:' .. (r + 1)) or 0)
  if r >= through or (k > 11 and size > budget) then break end
  r = r + 1
  local flat = redis.call('LRANGE', KEYS[k], 0, -1)
  if #flat == 0 then ick_fail(KEYS[k] .. ': reservation ' .. r .. ' is missing') end
  local errors = {}
  if handed_back then
    local fields = {}
    for i = 1, #flat, 2 do fields[#fields + 1] = r .. ' ' .. flat[i] end
    local found, delivery = redis.call('HMGET', failed, unpack(fields)), delivery_of(rlog, r)
    for i, record in ipairs(found) do
      local d, err = string.match(record or '', '^(%d+) (.*)$')
      if d and tonumber(d) == delivery then errors[2 * i - 1] = err end
    end
    call_chunked('HDEL', failed, fields, 1, #fields)
  end
  local gone, done, scores = {}, {}, {}
  for i = 1, #flat, 2 do
    local member = flat[i]
    if errors[i] then
      local fate = fail_member(fates, member, flat[i + 1], errors[i], policy)
      counts[fate], tracked = counts[fate] + 1, true
    else
      if handed_back then scores[#scores + 1] = flat[i + 1] end
      if tracked then done[#done + 1] = member end
    end
    local more = any_held and tonumber(redis.call('HGET', held, member) or 0) or 0
    if more == 0 then gone[#gone + 1] = member
    elseif more == 1 then redis.call('HDEL', held, member)
    else redis.call('HINCRBY', held, member, -1) end
  end
  counted[#counted + 1] = handed_back and {scores, 1, 1} or {flat, 2, 2}
  forget_attempts(fates[1], fates[2], done)
  zrem_all(cset, gone, 1, #gone)
  redis.call('UNLINK', KEYS[k])
  redis.call('HDEL', rlog, 'size:' .. r, 'dlv:' .. r, 'att:' .. r)
  budget, closed = budget - size, closed + #flat / 2
end
redis.call('HSET', rlog, 'committed', r)
redis.call('HINCRBY', rlog, 'done', closed)
fresh_count(fresh, counted)
if r == reserved then redis.call('UNLINK', failed) end
return {r, 1, counts.retry, counts.dead}
