-- ickpeek: the lowest members of the pset and of the cset, changing nothing (read-only).
-- KEYS[1] master key, KEYS[2] pset, KEYS[3] cset
-- ARGV[1] N: how many of each set, ARGV[2] skip this many first (pages; default 0)
-- returns {{member1, score1, ...} of the pset, {...} of the cset}; both empty when no Ick
if not ick_open(KEYS[1], KEYS[2], KEYS[3], false) then return {{}, {}} end
local n, skip = tonumber(ARGV[1]), tonumber(ARGV[2] or 0)
if n <= 0 then return {{}, {}} end
return {redis.call('ZRANGE', KEYS[2], skip, skip + n - 1, 'WITHSCORES'),
        redis.call('ZRANGE', KEYS[3], skip, skip + n - 1, 'WITHSCORES')}
