-- rlog_reserve: reserve from the pset into a NEW numbered reservation (stream reader, §4).
-- KEYS[1] master, KEYS[2] pset, KEYS[3] cset, KEYS[4] rlog hash {reserved, committed},
--   KEYS[5] lease hash, KEYS[6] manifest prefix (reservation r is the zset prefix..r)
-- ARGV[1] limit (-1: no limit), ARGV[2] after: the offset this batch starts from,
--   ARGV[3] owner, ARGV[4] fencing token, ARGV[5] lease time in ms (renewed here)
-- Reservations past `after` made earlier but never logged by Spark count against the
-- limit. Moves up to the rest, lowest scores first, into manifest r = reserved + 1 and
-- into the cset (lower score wins); the pset keeps nothing of them.
-- returns {reserved, moved}: the last reservation number after the call, members moved
fence(KEYS[5], ARGV[3], ARGV[4], ARGV[5])
local rlog, prefix = KEYS[4], KEYS[6]
local after = tonumber(ARGV[2])
local reserved = log_head(rlog, 'reserved', after)
if not ick_open(KEYS[1], KEYS[2], KEYS[3], false) then return {reserved, 0} end
local limit = tonumber(ARGV[1])
if limit < 0 then limit = redis.call('ZCARD', KEYS[2]) end
for r = after + 1, reserved do limit = limit - redis.call('ZCARD', prefix .. r) end
if limit <= 0 then return {reserved, 0} end
-- server-side copies (no Lua tables): fast for big reservations
local manifest = prefix .. (reserved + 1)
local moved = redis.call('ZRANGESTORE', manifest, KEYS[2], 0, limit - 1)
if moved == 0 then return {reserved, 0} end
redis.call('ZREMRANGEBYRANK', KEYS[2], 0, moved - 1)
if redis.call('EXISTS', KEYS[3]) == 0 then  -- the usual case: nothing else in flight
  redis.call('COPY', manifest, KEYS[3])  -- a few times faster than a union into nothing
else
  redis.call('ZUNIONSTORE', KEYS[3], 2, KEYS[3], manifest, 'AGGREGATE', 'MIN')
end
reserved = redis.call('HINCRBY', rlog, 'reserved', 1)
return {reserved, moved}
