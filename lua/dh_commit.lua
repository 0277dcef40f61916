-- dh_commit: delete every claim <= through (idempotent; the source's commit).
-- KEYS[1] claim log hash {claimed, committed}, KEYS[2] lease hash,
--   KEYS[3] claim prefix (claim n is the list prefix..n)
-- ARGV[1] through, ARGV[2] owner, ARGV[3] fencing token, ARGV[4] lease time in ms
-- returns the last committed number after the call (never above the last claim)
fence(KEYS[2], ARGV[2], ARGV[3], ARGV[4])
local committed = tonumber(redis.call('HGET', KEYS[1], 'committed') or 0)
local claimed = tonumber(redis.call('HGET', KEYS[1], 'claimed') or 0)
local through = math.min(tonumber(ARGV[1]), claimed)
if through <= committed then return committed end
for n = committed + 1, through do redis.call('DEL', KEYS[3] .. n) end
redis.call('HSET', KEYS[1], 'committed', through)
return through
