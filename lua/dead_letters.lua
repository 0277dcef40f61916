-- dead_letters: re-drive dead letters back into the Ick (their attempts start again) or
-- purge them, for operators (DeadLetters.redrive and purge).
-- KEYS[1] master, KEYS[2] pset, KEYS[3] cset, KEYS[4] dead zset, KEYS[5] deadinfo hash
-- ARGV[1] "redrive" | "purge", ARGV[2] how many of the oldest when ARGV[3..] names none
--   (bounded work: the caller calls again until none is left), ARGV[3..] members
-- A re-driven member goes back into the pset with the score of its last failed delivery
-- (lower score wins), as a producer's add would put it.
-- returns how many dead letters were re-driven or purged
local dead, info = KEYS[4], KEYS[5]
local members = {}
if #ARGV > 2 then
  for i = 3, #ARGV do members[#members + 1] = ARGV[i] end
else
  members = redis.call('ZRANGE', dead, 0, tonumber(ARGV[2]) - 1)
end
if #members == 0 then return 0 end
local records = redis.call('HMGET', info, unpack(members))
local found, flat = {}, {}
for i, member in ipairs(members) do
  if records[i] then
    found[#found + 1] = member
    local score = string.match(records[i], '^%d+ %d+ (%S+)')
    flat[#flat + 1], flat[#flat + 2] = score, member
  end
end
if #found == 0 then return 0 end
if ARGV[1] == 'redrive' then
  ick_open(KEYS[1], KEYS[2], KEYS[3], true)
  zadd_lt(KEYS[2], flat, 1, #flat)
end
zrem_all(dead, found, 1, #found)
call_chunked('HDEL', info, found, 1, #found)
return #found
