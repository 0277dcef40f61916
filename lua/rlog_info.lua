-- rlog_info: the reservation log and lease of one shard, for operators (read-only).
-- KEYS[1] rlog hash {reserved, committed, size:<r>}, KEYS[2] lease hash
-- returns {reserved, committed, open_members, owner or "", expires_in_ms (-1: no lease),
--   members committed in all (the `done` counter of rlog_commit), ms since the lease was
--   last renewed (the heartbeat's age; -1: no lease)}
local reserved = tonumber(redis.call('HGET', KEYS[1], 'reserved') or 0)
local committed = tonumber(redis.call('HGET', KEYS[1], 'committed') or 0)
local members = open_size(KEYS[1], committed, reserved)
local done = tonumber(redis.call('HGET', KEYS[1], 'done') or 0)
local h = redis.call('HMGET', KEYS[2], 'owner', 'expiry', 'renewed')
if not h[1] then return {reserved, committed, members, '', -1, done, -1} end
local now = time_ms(nil)
return {reserved, committed, members, h[1], math.max(tonumber(h[2]) - now, 0), done,
        now - tonumber(h[3] or now)}
