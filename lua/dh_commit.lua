-- dh_commit: delete the claims after the last committed one, through ARGV[1] (the source's
-- commit); idempotent. One call deletes the claims KEYS[3..] names (the caller calls again
-- until the reply reaches ARGV[1]).
-- KEYS[1] claim log hash {claimed, committed, size:<n>, dlv:<n>}, KEYS[2] lease hash, KEYS[3..] claims ARGV[5] + 1, ARGV[5] + 2, ...
-- ARGV[1] through, ARGV[2] owner, ARGV[3] fencing token, ARGV[4] lease time in ms,
--   ARGV[5] the last committed number the caller knows, ARGV[6] items per call (the ARGV
--   of every commit script, numbered_log.COMMIT_ARGV; unused: deleting a claim is one
--   UNLINK whatever its size)
-- Adds the elements of the claims it deletes to the log's `done` field (a counter for
-- operators: throughput).
-- returns {committed, done}: the last committed number after the call (never above the
--   last claim); done is -1 (nothing done) when the log's committed number is not ARGV[5]
local clog, lease = KEYS[1], KEYS[2]
local through, owner, token, ttl_ms = tonumber(ARGV[1]), ARGV[2], ARGV[3], ARGV[4]
local known = tonumber(ARGV[5])
fence(lease, owner, token, ttl_ms)
local committed = tonumber(redis.call('HGET', clog, 'committed') or 0)
through = math.min(through, tonumber(redis.call('HGET', clog, 'claimed') or 0))
if through <= committed then return {committed, 0} end
if committed ~= known then return {committed, -1} end
local n, closed = committed, 0
for k = 3, math.min(#KEYS, 2 + through - committed) do
  n = n + 1
  closed = closed + tonumber(redis.call('HGET', clog, 'size:' .. n) or 0)
  redis.call('UNLINK', KEYS[k])
  redis.call('HDEL', clog, 'size:' .. n, 'dlv:' .. n)
end
redis.call('HSET', clog, 'committed', n)
redis.call('HINCRBY', clog, 'done', closed)
return {n, 1}
