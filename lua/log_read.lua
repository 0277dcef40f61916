-- log_read: the manifests of consecutive reservations (or claims) of one shard (read-only).
-- KEYS[1] the log hash {<head field>, committed}, KEYS[2..] the manifests (lists) of
--   numbers ARGV[1] + 1, ARGV[1] + 2, ...
-- ARGV[1] the number before the first manifest, ARGV[2] the log's head field ("reserved"
--   or "claimed"), ARGV[3] read manifests while they hold this many members (elements)
--   together, by the log's size:<n> fields (bounded work; at least one manifest is read)
-- A manifest that must exist and does not is an error, never an empty batch; a number
-- past the log's head was lost with writes Redis did not keep (a failover, a restore) and
-- reads as empty: its items are back where Redis kept them and are delivered again.
-- returns {n1, {items...}, n2, {...}, ...} for the manifests read, in order
local committed = tonumber(redis.call('HGET', KEYS[1], 'committed') or 0)
local head = tonumber(redis.call('HGET', KEYS[1], ARGV[2]) or 0)
local budget, first, out = tonumber(ARGV[3]), tonumber(ARGV[1]), {}
for k = 2, #KEYS do
  local n = first + k - 1
  local size = tonumber(redis.call('HGET', KEYS[1], 'size:' .. n) or 0)
  if k > 2 and size > budget then break end
  local items = redis.call('LRANGE', KEYS[k], 0, -1)
  if #items == 0 and n <= head then
    if n <= committed then
      ick_fail(KEYS[k] .. ': number ' .. n .. ' was committed already (another consumer?)')
    end
    ick_fail(KEYS[k] .. ': number ' .. n .. ' is missing from ' .. KEYS[1])
  end
  out[#out + 1], out[#out + 2] = n, items
  budget = budget - size
end
return out
