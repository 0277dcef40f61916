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
local ids = {}
for i = 4, #ARGV, 3 do ids[#ids + 1] = ARGV[i] end
local parked = {}
for i = 1, #ids, ICK_CHUNK do
  local got = redis.call('HMGET', KEYS[2], unpack(ids, i, math.min(i + ICK_CHUNK - 1, #ids)))
  for k = 1, #got do parked[i + k - 1] = got[k] end
end
local zargs, hargs, seen = {}, {}, {}
local new, existing = 0, 0
for k, id in ipairs(ids) do
  local j = 4 + 3 * (k - 1)
  local t = tonumber(ARGV[j + 1])
  if not t or (delay and t < 0) then
    ick_fail('dehydrator id ' .. id .. ': time must be a number >= 0, got ' .. ARGV[j + 1])
  end
  local old = parked[k] or seen[id]
  if old and mode == 'error' then ick_fail('dehydrator id ' .. id .. ' already exists') end
  if not old or mode == 'replace' then
    zargs[#zargs + 1] = delay and now + t or ARGV[j + 1]
    zargs[#zargs + 1] = id
    hargs[#hargs + 1] = id
    hargs[#hargs + 1] = ARGV[j + 2]
  end
  if old then existing = existing + 1 else new = new + 1 end
  seen[id] = true
end
call_chunked('ZADD', KEYS[1], zargs, 1, #zargs)
call_chunked('HSET', KEYS[2], hargs, 1, #hargs)
return {new, existing}
