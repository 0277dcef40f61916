-- layout: record the layout version of a logical Ick or dehydrator (layout.py), raising
-- an older one (or none: release 0.1's layout 1) to this release's; never lowering it.
-- KEYS[1] the layout key of the logical name
-- ARGV[1] the layout version this release writes
-- returns the version recorded now: above ARGV[1] when a newer release wrote it (then
--   nothing changed, and the caller refuses)
local recorded = tonumber(redis.call('GET', KEYS[1]) or 1)
local mine = tonumber(ARGV[1])
if recorded >= mine then return recorded end
redis.call('SET', KEYS[1], ARGV[1])
return mine
