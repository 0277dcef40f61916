-- ickadd: add (score, member) pairs to the pset, keeping the lower score (write-folding).
-- KEYS[1] master key (version flag), KEYS[2] pset, KEYS[3] cset
-- ARGV[1] the pairs, packed (pyspark_ick.ick.pack_pairs): per member a little-endian
--         double score, a uint32 byte length, the member's bytes; any number (chunked).
--         One argument instead of two per member: cheaper to send and to parse.
-- returns {new, changed}: members new to the pset, members whose score went down
ick_open(KEYS[1], KEYS[2], KEYS[3], true)
local packed, flat, pos = ARGV[1] or '', {}, 1
while pos <= #packed do
  local n = #flat
  flat[n + 1], flat[n + 2], pos = struct.unpack('<dI4c0', packed, pos)
end
if #flat == 0 then return {0, 0} end
local before = redis.call('ZCARD', KEYS[2])
local ch = zadd_lt(KEYS[2], flat, 1, #flat)
local new = redis.call('ZCARD', KEYS[2]) - before
return {new, ch - new}
