-- retry_due: hand one Ick shard's due retries to any consumer (`pyspark-ick retry-due`,
-- for the redis-ick gem's consumers, whose scripts never release retries). Moves at most
-- ARGV[1] due retries into the pset (release_due); when fewer were due, looks at ARGV[1]
-- pending retries from rank ARGV[3]: a member queued or reserved meanwhile (a gem
-- producer re-added it) loses its pending retry, as Python's reserve drops it: that
-- delivery is its next attempt. Attempt records stay (a later failure counts on).
-- KEYS[1] master, KEYS[2] pset, KEYS[3] cset, KEYS[4] retry zset, KEYS[5] attempts hash
-- ARGV[1] members per call, ARGV[2] now in ms ("": Redis server time), ARGV[3] the rank
--   in the retry zset the look-up starts from
-- returns {released, dropped, next rank (-1: the end of the retry zset)}
local master, pset, cset, retry, attempts = unpack(KEYS, 1, 5)
local n, start = tonumber(ARGV[1]), tonumber(ARGV[3])
if redis.call('EXISTS', retry) == 0 then return {0, 0, -1} end
if not ick_open(master, pset, cset, false) then return {0, 0, -1} end  -- no Ick: ickdel
local released = release_due(retry, attempts, pset, cset, time_ms(ARGV[2]), n)
if released >= n then return {released, 0, start} end  -- more may be due: no look-up yet
local pending = redis.call('ZRANGE', retry, start, start + n - 1)
if #pending == 0 then return {released, 0, -1} end
local queued = redis.call('ZMSCORE', pset, unpack(pending))
local reserved = redis.call('ZMSCORE', cset, unpack(pending))
local gone = {}
for i, member in ipairs(pending) do
  if queued[i] or reserved[i] then gone[#gone + 1] = member end
end
if #gone > 0 then zrem_all(retry, gone, 1, #gone) end
local after = start + #pending - #gone
if #pending < n then after = -1 end
return {released, #gone, after}
