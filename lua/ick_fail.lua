-- ick_fail: a plain client's consumer failed on members it reserved (Ick.reserve): each
-- leaves the cset and gets a retry or becomes a dead letter (fail_member), atomically.
-- KEYS[1] master, KEYS[2] pset, KEYS[3] cset, KEYS[4] retry zset, KEYS[5] attempts hash,
--   KEYS[6] dead zset, KEYS[7] deadinfo hash
-- ARGV[1] the retry policy (policy_of), ARGV[2] the most bytes of an error kept,
--   ARGV[3..] member, error, member, error, ...
-- returns {retried, dead, not_reserved}
if not ick_open(KEYS[1], KEYS[2], KEYS[3], false) then return {0, 0, (#ARGV - 2) / 2} end
allow_oom(KEYS[5])  -- the consumer's call (on a hash): a full Redis must not stop it
local fates = {KEYS[4], KEYS[5], KEYS[6], KEYS[7]}
local policy, most = policy_of(ARGV[1]), tonumber(ARGV[2])
local counts = {retry = 0, dead = 0}
local stray = 0
for i = 3, #ARGV, 2 do
  local member = ARGV[i]
  local score = redis.call('ZSCORE', KEYS[3], member)
  if score then
    redis.call('ZREM', KEYS[3], member)
    local fate = fail_member(fates, member, score, string.sub(ARGV[i + 1], 1, most), policy)
    counts[fate] = counts[fate] + 1
  else
    stray = stray + 1
  end
end
return {counts.retry, counts.dead, stray}
