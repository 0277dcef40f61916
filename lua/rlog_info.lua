-- rlog_info: the reservation log and lease of one shard, for operators (read-only).
-- KEYS[1] rlog hash {reserved, committed}, KEYS[2] lease hash, KEYS[3] manifest prefix
-- returns {reserved, committed, open_members, owner or "", expires_in_ms (-1: no lease)}
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local reserved = tonumber(redis.call('HGET', KEYS[1], 'reserved') or 0)
local committed = tonumber(redis.call('HGET', KEYS[1], 'committed') or 0)
local members = 0
for r = committed + 1, reserved do members = members + redis.call('ZCARD', KEYS[3] .. r) end
local h = redis.call('HMGET', KEYS[2], 'owner', 'expiry')
if not h[1] then return {reserved, committed, members, '', -1} end
return {reserved, committed, members, h[1], math.max(tonumber(h[2]) - now, 0)}
