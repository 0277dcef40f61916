-- ickstats: sizes and score ranges of one Ick (the gem's fields).
-- KEYS[1] master key, KEYS[2] pset, KEYS[3] cset
-- returns nil when there is no Ick, else flat {name1, value1, ...}:
--   ver, key, pset_key, cset_key, pset_size, cset_size,
--   total_size (pset_size + cset_size, as in the gem),
--   pset_min, pset_max, cset_min, cset_max (left out when that set is empty),
--   backfill_size (pset members in the backfill lane: scores from ICK_BACKFILL on),
--   backfill_min (the lowest of them; left out when there is none)
if not ick_open(KEYS[1], KEYS[2], KEYS[3], false) then return nil end
local out = {'ver', redis.call('GET', KEYS[1]), 'key', KEYS[1],
             'pset_key', KEYS[2], 'cset_key', KEYS[3]}
local total = 0
for i, name in ipairs({'pset', 'cset'}) do
  local key = KEYS[i + 1]
  local size = redis.call('ZCARD', key)
  total = total + size
  table.insert(out, name .. '_size'); table.insert(out, size)
  if size > 0 then
    local lo = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
    local hi = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
    table.insert(out, name .. '_min'); table.insert(out, lo[2])
    table.insert(out, name .. '_max'); table.insert(out, hi[2])
  end
end
table.insert(out, 'total_size'); table.insert(out, total)
local backfill = redis.call('ZCOUNT', KEYS[2], ICK_BACKFILL, '+inf')
table.insert(out, 'backfill_size'); table.insert(out, backfill)
if backfill > 0 then
  local first = redis.call('ZRANGE', KEYS[2], ICK_BACKFILL, '+inf', 'BYSCORE', 'LIMIT', 0, 1,
                           'WITHSCORES')
  table.insert(out, 'backfill_min'); table.insert(out, first[2])
end
return out
