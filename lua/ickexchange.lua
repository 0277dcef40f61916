-- ickexchange: commit, optionally backwash, then reserve (the gem's ickexchange;
-- reserve = exchange with nothing to commit, commit = exchange with N = 0).
-- KEYS[1] master key, KEYS[2] pset, KEYS[3] cset, KEYS[4] retry zset and KEYS[5]
--   attempts hash (pyspark-ick's retries; the gem passes neither): committed members'
--   attempt records and pending retries go, retries that are due come back into the pset
--   (at most N) before the reserve, and a reserved member has no retry pending;
--   KEYS[6] freshness hash (pyspark-ick's; fresh_count): each committed member's wait,
--   from its score in the cset (a member not in the cset, committed before, counts nothing)
-- ARGV[1] N: reserve until the cset holds N members or the pset is empty
-- ARGV[2] "1" to fold the cset back into the pset (lower score wins) before reserving
-- ARGV[3..] members to commit (removed from the cset only), before anything else
-- returns {committed, {member1, score1, ...}}: how many of ARGV[3..] left the cset,
--   and the N lowest members of the cset
if not ick_open(KEYS[1], KEYS[2], KEYS[3], false) then return {0, {}} end
local pset, cset = KEYS[2], KEYS[3]
local n = tonumber(ARGV[1])
local committed = 0
local tracked = #KEYS >= 5
if #ARGV >= 3 then
  if KEYS[6] then
    local scores = {}
    for first = 3, #ARGV, ICK_CHUNK do
      local last = math.min(first + ICK_CHUNK - 1, #ARGV)
      for _, score in ipairs(redis.call('ZMSCORE', cset, unpack(ARGV, first, last))) do
        if score then scores[#scores + 1] = score end
      end
    end
    fresh_count(KEYS[6], {{scores, 1, 1}})
  end
  committed = zrem_all(cset, ARGV, 3, #ARGV)
  if tracked then
    local done = {}
    for i = 3, #ARGV do done[#done + 1] = ARGV[i] end
    forget_attempts(KEYS[4], KEYS[5], done)
  end
end
if ARGV[2] == '1' then
  local held = flip(redis.call('ZRANGE', cset, 0, -1, 'WITHSCORES'))
  zadd_lt(pset, held, 1, #held)
  redis.call('DEL', cset)
end
if n <= 0 then return {committed, {}} end
if tracked then release_due(KEYS[4], KEYS[5], pset, cset, time_ms(nil), n) end
local need = n - redis.call('ZCARD', cset)
while need > 0 do
  local popped = flip(redis.call('ZPOPMIN', pset, need))
  if #popped == 0 then break end
  zadd_lt(cset, popped, 1, #popped)
  if tracked and redis.call('EXISTS', KEYS[4]) == 1 then  -- reserved now: no retry pending
    for i = 2, #popped, 2 do redis.call('ZREM', KEYS[4], popped[i]) end
  end
  need = n - redis.call('ZCARD', cset)
end
return {committed, redis.call('ZRANGE', cset, 0, n - 1, 'WITHSCORES')}
