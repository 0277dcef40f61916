-- rlog_read: the manifests of reservations (start, end] of one shard (read-only).
-- KEYS[1] manifest prefix (reservation r is the zset prefix..r)
-- ARGV[1] start (exclusive), ARGV[2] end (inclusive)
-- returns {r1, {member, score, ...}, r2, {...}, ...} for the reservations that exist,
--   each manifest ordered by score
local out = {}
for r = tonumber(ARGV[1]) + 1, tonumber(ARGV[2]) do
  local flat = redis.call('ZRANGE', KEYS[1] .. r, 0, -1, 'WITHSCORES')
  if #flat > 0 then
    out[#out + 1] = r
    out[#out + 1] = flat
  end
end
return out
