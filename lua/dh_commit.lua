-- dh_commit: delete every claim <= through (idempotent; the source's commit).
-- KEYS[1] claim log hash {claimed, committed}, KEYS[2] lease hash,
--   KEYS[3] claim prefix (claim n is the list prefix..n)
-- ARGV[1] through, ARGV[2] owner, ARGV[3] fencing token, ARGV[4] lease time in ms
-- returns the last committed number after the call (never above the last claim)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local h = redis.call('HMGET', KEYS[2], 'owner', 'token')
if h[1] ~= ARGV[2] or h[2] ~= ARGV[3] then ick_fail('LEASE ' .. (h[1] or '')) end
redis.call('HSET', KEYS[2], 'expiry', now + tonumber(ARGV[4]), 'renewed', now)
local committed = tonumber(redis.call('HGET', KEYS[1], 'committed') or 0)
local claimed = tonumber(redis.call('HGET', KEYS[1], 'claimed') or 0)
local through = math.min(tonumber(ARGV[1]), claimed)
if through <= committed then return committed end
for n = committed + 1, through do redis.call('DEL', KEYS[3] .. n) end
redis.call('HSET', KEYS[1], 'committed', through)
return through
