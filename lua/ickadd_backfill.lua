-- ickadd_backfill: add members to the pset in the backfill lane, scored with the Redis
-- server time plus ICK_BACKFILL (lanes.py), keeping the lower score (write-folding): a
-- member queued live stays live, and a live add later serves this one as live.
-- KEYS[1] master key (version flag), KEYS[2] pset, KEYS[3] cset
-- ARGV    member1, member2, ... (any number; chunked)
-- returns {new, changed}: members new to the pset, members whose score went down
ick_open(KEYS[1], KEYS[2], KEYS[3], true)
if #ARGV == 0 then return {0, 0} end
local t = redis.call('TIME')
-- %.3f: ms kept as text (tostring's 14 digits would drop them at this size)
local now = string.format('%.3f', ICK_BACKFILL + tonumber(t[1]) + tonumber(t[2]) / 1e6)
return add_at(KEYS[2], now, ARGV)
