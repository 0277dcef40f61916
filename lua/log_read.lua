-- log_read: the manifests of consecutive reservations (or claims) of one shard, each with
-- its deliveries: the first read of a manifest by a consumer run (a reader's token)
-- counts one delivery more, so a replay after a restart is delivery 2, and reading one
-- batch twice in one run is one delivery.
-- KEYS[1] the log hash {<head field>, committed, size:<n>, dlv:<n> "<deliveries> <token>",
--   att:<n> the failed attempts of the members of manifest n, msgpack, by position (an
--   Ick's, when any has one)}, KEYS[2..] the manifests (lists) of numbers ARGV[1] + 1,
--   ARGV[1] + 2, ... (only keys that exist: a read must work while its slot migrates)
-- ARGV[1] the number before the first manifest, ARGV[2] the log's head field ("reserved"
--   or "claimed"), ARGV[3] read manifests while they hold this many members (elements)
--   together, by the log's size:<n> fields (bounded work; at least one manifest is read),
--   ARGV[4] the reader's delivery token ("": count nothing)
-- A manifest that must exist and does not is an error, never an empty batch; a number
-- past the log's head was lost with writes Redis did not keep (a failover, a restore) and
-- reads as empty: its items are back where Redis kept them and are delivered again.
-- returns {n1, {items...}, deliveries1, {attempts...}, n2, ...} for the manifests read, in
--   order; attempts: the failed attempts of each member of the manifest ({}: none has any)
local log, token = KEYS[1], ARGV[4] or ''
allow_oom(log)  -- counting a delivery must not stop a consumer from draining a full Redis
local committed = tonumber(redis.call('HGET', log, 'committed') or 0)
local head = tonumber(redis.call('HGET', log, ARGV[2]) or 0)
local budget, first, out = tonumber(ARGV[3]), tonumber(ARGV[1]), {}
for k = 2, #KEYS do
  local n = first + k - 1
  local size = tonumber(redis.call('HGET', log, 'size:' .. n) or 0)
  if k > 2 and size > budget then break end
  local items = redis.call('LRANGE', KEYS[k], 0, -1)
  if #items == 0 and n <= head then
    if n <= committed then
      ick_fail(KEYS[k] .. ': number ' .. n .. ' was committed already (another consumer?)')
    end
    ick_fail(KEYS[k] .. ': number ' .. n .. ' is missing from ' .. KEYS[1])
  end
  local deliveries = delivery_of(log, n)
  if #items > 0 and token ~= '' then
    local field = redis.call('HGET', log, 'dlv:' .. n)
    if not field or string.match(field, ' (.*)$') ~= token then
      deliveries = deliveries + 1
      redis.call('HSET', log, 'dlv:' .. n, deliveries .. ' ' .. token)
    end
  end
  local packed = redis.call('HGET', log, 'att:' .. n)
  local attempts = packed and cmsgpack.unpack(packed) or {}
  out[#out + 1], out[#out + 2], out[#out + 3], out[#out + 4] = n, items, deliveries, attempts
  budget = budget - size
end
return out
