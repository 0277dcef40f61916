-- dh_claim: move due elements of one shard into a NEW numbered claim (the source's
-- latestOffset, like rlog_reserve for Icks). Claimed elements leave the live store; the
-- claim keeps them until dh_commit, so a replay reads exactly the same elements. One call
-- claims at most ARGV[8] elements (bounded work: a big micro-batch is several claims).
-- KEYS[1] due (sorted set id -> due ms), KEYS[2] elements (hash id -> element),
--   KEYS[3] claim log hash {claimed, committed, size:<n> of each open claim n},
--   KEYS[4] lease hash, KEYS[5] claim ARGV[7] + 1 (a list: id1, due1, element1, ...)
-- ARGV[1] limit (-1: no limit), ARGV[2] after: the offset this batch starts from,
--   ARGV[3] owner, ARGV[4] fencing token, ARGV[5] lease time in ms (renewed here),
--   ARGV[6] now in ms, or "" for Redis server time (due times only; a test clock),
--   ARGV[7] head: the last claim number the caller knows, ARGV[8] elements per call,
--   ARGV[9] pending at that head as the caller's last call replied (-1: count it here)
-- Claims past `after` made earlier but never logged by Spark count against the limit.
-- returns {claimed, moved, pending}: the last claim number after the call, elements moved,
--   elements in the claims past `after`; moved and pending are -1 (nothing done) when the
--   log's head is not ARGV[7]: call again with the head returned
fence(KEYS[4], ARGV[3], ARGV[4], ARGV[5])
local clog = KEYS[3]
local head = log_head(clog, 'claimed', tonumber(ARGV[2]))
if head ~= tonumber(ARGV[7]) then return {head, -1, -1} end
local pending = tonumber(ARGV[9])
if pending < 0 then pending = open_size(clog, tonumber(ARGV[2]), head) end
local n = tonumber(ARGV[8])
if tonumber(ARGV[1]) >= 0 then n = math.min(n, tonumber(ARGV[1]) - pending) end
if n <= 0 then return {head, 0, pending} end
local got = redis.call('ZRANGE', KEYS[1], '-inf', time_ms(ARGV[6]), 'BYSCORE',
                       'LIMIT', 0, n, 'WITHSCORES')
if #got == 0 then return {head, 0, pending} end
local ids = {}
for i = 1, #got, 2 do ids[#ids + 1] = got[i] end
local entries = {}
for first = 1, #ids, ICK_CHUNK do
  local last = math.min(first + ICK_CHUNK - 1, #ids)
  local elements = redis.call('HMGET', KEYS[2], unpack(ids, first, last))
  for k = first, last do
    entries[3 * k - 2], entries[3 * k - 1] = ids[k], got[2 * k]
    entries[3 * k] = elements[k - first + 1]
  end
end
call_chunked('RPUSH', KEYS[5], entries, 1, #entries)
redis.call('ZREMRANGEBYRANK', KEYS[1], 0, #ids - 1)  -- they are the lowest ranks
call_chunked('HDEL', KEYS[2], ids, 1, #ids)
head = head + 1
redis.call('HSET', clog, 'claimed', head, 'size:' .. head, #ids)
return {head, #ids, pending + #ids}
