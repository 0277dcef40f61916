-- ickadd: add (score, member) pairs to the pset, keeping the lower score (write-folding).
-- KEYS[1] master key (version flag), KEYS[2] pset, KEYS[3] cset
-- ARGV[1] the pairs (pyspark_ick.packing.pack_pairs): one msgpack array of strings, score1,
--         member1, score2, member2, ...; any number (chunked). Decoded in C, and ZADD
--         parses the scores as it parses a client's: no Lua loop, no float conversion.
-- returns {new, changed}: members new to the pset, members whose score went down
local flat = (ARGV[1] or '') == '' and {} or cmsgpack.unpack(ARGV[1])
if type(flat) ~= 'table' or #flat % 2 ~= 0 then  -- refused before anything is written
  ick_fail('ickadd of ' .. KEYS[2] .. ': ARGV[1] is not a msgpack array of score, member')
end
ick_open(KEYS[1], KEYS[2], KEYS[3], true)
if #flat == 0 then return {0, 0} end
local before = redis.call('ZCARD', KEYS[2])
local ch = zadd_lt(KEYS[2], flat, 1, #flat)
local new = redis.call('ZCARD', KEYS[2]) - before
return {new, ch - new}
