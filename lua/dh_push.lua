-- dh_push: park elements until they are due (ReDe PUSH; the sink's writes).
-- KEYS[1] due (sorted set id -> due ms), KEYS[2] elements (hash id -> element)
-- ARGV[1] for an id already parked: "error" (fail, write nothing) | "keep" | "replace"
--         (replace sets the new element and due time; ids repeated in ARGV count too)
-- ARGV[2] now in ms, or "" for Redis server time (a test clock passes it)
-- ARGV[3] "delay": each time is ms from now | "at": each time is a due time in epoch ms
-- ARGV[4] the rows, packed (pyspark_ick.dehydrator.pack_rows): per row a little-endian
--         double time, uint32 id length, uint32 element length, the id's bytes, the
--         element's bytes; any number (chunked). One argument: cheap to send and parse.
-- returns {new, existing}: ids that were not parked, ids that were (kept or replaced)
local mode, delay = ARGV[1], ARGV[3] == 'delay'
local now = delay and time_ms(ARGV[2]) or 0
local packed, pos, n = ARGV[4] or '', 1, 0
local zargs, hargs, sub, unpack_head = {}, {}, string.sub, struct.unpack
while pos <= #packed do
  local t, a, b
  t, a, b, pos = unpack_head('<dI4I4', packed, pos)
  local id = sub(packed, pos, pos + a - 1)
  n = n + 1
  if t ~= t or (delay and t < 0) then
    ick_fail('dehydrator id ' .. id .. ': time must be a number >= 0, got ' .. tostring(t))
  end
  zargs[2 * n - 1], zargs[2 * n] = delay and now + t or t, id
  hargs[2 * n - 1], hargs[2 * n] = id, sub(packed, pos + a, pos + a + b - 1)
  pos = pos + a + b
end
if n == 0 then return {0, 0} end
-- One row (Dehydrator.push, gidpush): HSETNX is the check and the write at once, two
-- commands instead of HMGET + ZADD + HSET (33 us against 50 us of Redis time, bench_calls)
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
