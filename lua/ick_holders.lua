-- ick_holders: which open reservations of one Ick shard hold given members (read-only).
-- KEYS[1] the reservation log (hash: size:<n>), KEYS[2..] the manifests (lists: member,
--   score, ...) of numbers ARGV[1] + 1, ARGV[1] + 2, ...
-- ARGV[1] the number before the first manifest, ARGV[2] read manifests while they hold
--   this many members together, by the log's size:<n> fields (bounded work; at least one
--   manifest is read), ARGV[3..] the members looked for
-- A manifest that is gone (committed since the caller listed it) holds nothing.
-- returns {last number read, {member1, number1, ...}}: each member looked for that a
--   manifest read holds, with the highest number holding it
local first, budget = tonumber(ARGV[1]), tonumber(ARGV[2])
local wanted, found, last = {}, {}, first
for i = 3, #ARGV do wanted[ARGV[i]] = true end
for k = 2, #KEYS do
  local n = first + k - 1
  local size = tonumber(redis.call('HGET', KEYS[1], 'size:' .. n) or 0)
  if k > 2 and size > budget then break end
  local items = redis.call('LRANGE', KEYS[k], 0, -1)
  for i = 1, #items, 2 do
    if wanted[items[i]] then found[items[i]] = n end
  end
  last, budget = n, budget - size
end
local out = {}
for member, n in pairs(found) do
  out[#out + 1] = member
  out[#out + 1] = n
end
return {last, out}
