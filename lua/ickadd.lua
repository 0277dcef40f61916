-- ickadd: add (score, member) pairs to the pset, keeping the lower score (write-folding).
-- KEYS[1] master key (version flag), KEYS[2] pset, KEYS[3] cset
-- ARGV    score1, member1, score2, member2, ... (any number; chunked)
-- returns {new, changed}: members new to the pset, members whose score went down
ick_open(KEYS[1], KEYS[2], KEYS[3], true)
if #ARGV == 0 then return {0, 0} end
local before = redis.call('ZCARD', KEYS[2])
local ch = zadd_lt(KEYS[2], ARGV, 1, #ARGV)
local new = redis.call('ZCARD', KEYS[2]) - before
return {new, ch - new}
