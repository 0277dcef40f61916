-- dh_info: one dehydrator shard for operators (read-only): how many elements are parked
-- and due, the next due time, the claim log and the lease.
-- KEYS[1] due (sorted set id -> due ms), KEYS[2] claim log hash {claimed, committed,
--   size:<n> of each open claim n}, KEYS[3] lease hash
-- ARGV[1] now in ms, or "" for Redis server time
-- returns {parked, due now, ms to the next due time (-1: nothing parked, 0: one is due),
--   last claim number, last committed claim number, elements in open claims, lease owner
--   or "", ms until the lease expires (-1: no lease), elements committed in all (the
--   `done` counter of dh_commit), ms since the first due time (0: nothing is due), ms
--   since the lease was last renewed (-1: no lease)}
local due, clog, lease = KEYS[1], KEYS[2], KEYS[3]
local now = time_ms(ARGV[1])
local first = redis.call('ZRANGE', due, 0, 0, 'WITHSCORES')
local next_ms = -1
if #first > 0 then next_ms = math.max(0, tonumber(first[2]) - now) end
local claimed = tonumber(redis.call('HGET', clog, 'claimed') or 0)
local committed = tonumber(redis.call('HGET', clog, 'committed') or 0)
local h = redis.call('HMGET', lease, 'owner', 'expiry', 'renewed')
local expires, idle = -1, -1
if h[1] then
  local clock = time_ms(nil)
  expires = math.max(tonumber(h[2] or 0) - clock, 0)
  idle = clock - tonumber(h[3] or clock)
end
local overdue = 0
if #first > 0 then overdue = math.max(0, now - tonumber(first[2])) end
return {redis.call('ZCARD', due), redis.call('ZCOUNT', due, '-inf', now), next_ms,
        claimed, committed, open_size(clog, committed, claimed), h[1] or '', expires,
        tonumber(redis.call('HGET', clog, 'done') or 0), overdue, idle}
