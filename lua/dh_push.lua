-- dh_push: park elements until they are due (ReDe PUSH; the sink's writes).
-- KEYS[1] due (sorted set id -> due ms), KEYS[2] elements (hash id -> element)
-- ARGV[1] for an id already parked: "error" (fail, write nothing) | "keep" | "replace"
--         (replace sets the new element and due time; ids repeated in ARGV count too)
-- ARGV[2] now in ms, or "" for Redis server time (a test clock passes it)
-- ARGV[3] "delay": each time is ms from now | "at": each time is a due time in epoch ms
-- ARGV[4] the rows (pyspark_ick.packing.plain_chunks): one msgpack array of strings,
--         time1, id1, element1, time2, ...; any number (chunked). Decoded in C; a due
--         time is formatted once per distinct time (a sink's delay is one for all rows).
-- returns {new, existing}: ids that were not parked, ids that were (kept or replaced)
local mode, delay = ARGV[1], ARGV[3] == 'delay'
local now = delay and time_ms(ARGV[2]) or 0
local rows = (ARGV[4] or '') == '' and {} or cmsgpack.unpack(ARGV[4])
if type(rows) ~= 'table' or #rows % 3 ~= 0 then
  ick_fail('dh_push into ' .. KEYS[1] .. ': ARGV[4] is not a msgpack array of rows')
end
local n, zargs, hargs, last, due = #rows / 3, {}, {}, nil, nil
for k = 1, n do
  local t, id = rows[3 * k - 2], rows[3 * k - 1]
  if t ~= last then
    local ms = tonumber(t)
    if not ms or ms - ms ~= 0 or (delay and ms < 0) then
      ick_fail('dehydrator id ' .. id .. ': time must be a number >= 0, got ' .. t)
    end
    last, due = t, delay and string.format('%.17g', now + ms) or t
  end
  zargs[2 * k - 1], zargs[2 * k] = due, id
  hargs[2 * k - 1], hargs[2 * k] = id, rows[3 * k]
end
if n == 0 then return {0, 0} end
-- One row (Dehydrator.push, gidpush): HSETNX is the check and the write at once, two
-- commands instead of HMGET + ZADD + HSET (docs/sizing.md has the Redis time of each)
if n == 1 and mode ~= 'replace' then
  if redis.call('HSETNX', KEYS[2], hargs[1], hargs[2]) == 0 then
    if mode == 'error' then ick_fail('dehydrator id ' .. hargs[1] .. ' already exists') end
    return {0, 1}
  end
  redis.call('ZADD', KEYS[1], zargs[1], zargs[2])
  return {1, 0}
end
-- parked[k]: whether id k was parked before this call (HMGET in chunks)
local function parked()
  local out = {}
  for i = 1, #hargs, ICK_CHUNK do
    local ids = {}
    for m = i, math.min(i + ICK_CHUNK - 1, #hargs), 2 do ids[#ids + 1] = hargs[m] end
    local got = redis.call('HMGET', KEYS[2], unpack(ids))
    for m = 1, #got do out[#out + 1] = got[m] end
  end
  return out
end
if mode == 'keep' then
  -- ZADD NX parks the due times of new ids only; when some id was not new (parked, or
  -- repeated in this call) only the first occurrence of a new id sets its element
  local added = 0
  for i = 1, #zargs, ICK_CHUNK do
    added = added + redis.call('ZADD', KEYS[1], 'NX',
                               unpack(zargs, i, math.min(i + ICK_CHUNK - 1, #zargs)))
  end
  if added < n then
    local before, seen, fresh = parked(), {}, {}
    for k = 1, n do
      local id = hargs[2 * k - 1]
      if not before[k] and not seen[id] then
        fresh[#fresh + 1], fresh[#fresh + 2] = id, hargs[2 * k]
      end
      seen[id] = true
    end
    hargs = fresh
  end
  call_chunked('HSET', KEYS[2], hargs, 1, #hargs)
  return {added, n - added}
end
if mode == 'error' then  -- fail before writing when an id is parked or repeated
  local before, seen = parked(), {}
  for k = 1, n do
    local id = hargs[2 * k - 1]
    if before[k] or seen[id] then ick_fail('dehydrator id ' .. id .. ' already exists') end
    seen[id] = true
  end
end
call_chunked('ZADD', KEYS[1], zargs, 1, #zargs)
local new = call_chunked('HSET', KEYS[2], hargs, 1, #hargs)
return {new, n - new}
