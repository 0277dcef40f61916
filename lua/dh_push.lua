-- dh_push: park elements until they are due (ReDe PUSH; the sink's writes).
-- KEYS[1] due (sorted set id -> due ms), KEYS[2] elements (hash id -> element)
-- ARGV[1] for an id already parked: "error" (fail, write nothing) | "keep" | "replace"
--         (replace sets the new element and due time; ids repeated in ARGV count too)
-- ARGV[2] now in ms, or "" for Redis server time (a test clock passes it)
-- ARGV[3] "delay": each time is ms from now | "at": each time is a due time in epoch ms
-- ARGV[4..] id1, time1, element1, id2, time2, element2, ... (any number; chunked)
-- returns {new, existing}: ids that were not parked, ids that were (kept or replaced)
local mode, delay = ARGV[1], ARGV[3] == 'delay'
local now = delay and time_ms(ARGV[2]) or 0
local n = (#ARGV - 3) / 3
local zargs, hargs = {}, {}
for k = 1, n do
  local j = 3 * k + 1
  local t = tonumber(ARGV[j + 1])
  if not t or (delay and t < 0) then
    ick_fail('dehydrator id ' .. ARGV[j] .. ': time must be a number >= 0, got ' .. ARGV[j + 1])
  end
  zargs[2 * k - 1], zargs[2 * k] = delay and now + t or ARGV[j + 1], ARGV[j]
  hargs[2 * k - 1], hargs[2 * k] = ARGV[j], ARGV[j + 2]
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
