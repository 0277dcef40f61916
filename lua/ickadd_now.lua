-- ickadd_now: add members to the pset scored with the Redis server time (write-folding),
-- so that producers with skewed clocks cannot reorder first-dirty times.
-- KEYS[1] master key (version flag), KEYS[2] pset, KEYS[3] cset
-- ARGV    member1, member2, ... (any number; chunked)
-- returns {new, changed}: members new to the pset, members whose score went down
ick_open(KEYS[1], KEYS[2], KEYS[3], true)
if #ARGV == 0 then return {0, 0} end
local t = redis.call('TIME')
local now = t[1] .. '.' .. string.format('%06d', tonumber(t[2]))
return add_at(KEYS[2], now, ARGV)
