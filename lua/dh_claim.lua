-- dh_claim: move due elements of one shard into a NEW numbered claim (the source's
-- latestOffset, like rlog_reserve for Icks). Claimed elements leave the live store; the
-- claim keeps them until dh_commit, so a replay reads exactly the same elements. One call
-- claims at most ARGV[7] elements (bounded work: a big micro-batch is several claims).
-- KEYS[1] due (sorted set id -> due ms), KEYS[2] elements (hash id -> element),
--   KEYS[3] claim log hash {claimed, committed, size:<n> of each open claim n},
--   KEYS[4] lease hash, KEYS[5] claim ARGV[6] + 1 (a list: id1, due1, element1, ...)
-- ARGV[1..8] as rlog_reserve's (numbered_log.RESERVE_ARGV): ARGV[1] limit (-1: no
--   limit), ARGV[2] after: the offset this batch starts from, ARGV[3] owner, ARGV[4]
--   fencing token, ARGV[5] lease time in ms (renewed here), ARGV[6] head: the last claim
--   number the caller knows, ARGV[7] elements per call, ARGV[8] pending at that head as
--   the caller's last call replied (-1: count it here); ARGV[9] now in ms, or "" for
--   Redis server time (due times only; a test clock)
-- Claims past `after` made earlier but never logged by Spark count against the limit.
-- returns {claimed, moved, pending}: the last claim number after the call, elements moved,
--   elements in the claims past `after`; moved and pending are -1 (nothing done) when the
--   log's head is not ARGV[6]: call again with the head returned
local due, elements, clog, lease, claim = unpack(KEYS, 1, 5)
local limit, after = tonumber(ARGV[1]), tonumber(ARGV[2])
local owner, token, ttl_ms = ARGV[3], ARGV[4], ARGV[5]
local known, per_call, pending = tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8])
local now = ARGV[9]
fence(lease, owner, token, ttl_ms)
local head = log_head(clog, 'claimed', after)
if head ~= known then return {head, -1, -1} end
if pending < 0 then pending = open_size(clog, after, head) end
local n = per_call
if limit >= 0 then n = math.min(n, limit - pending) end
if n <= 0 then return {head, 0, pending} end
local got = redis.call('ZRANGE', due, '-inf', time_ms(now), 'BYSCORE',
                       'LIMIT', 0, n, 'WITHSCORES')
if #got == 0 then return {head, 0, pending} end
local ids = {}
for i = 1, #got, 2 do ids[#ids + 1] = got[i] end
local entries = {}
for first = 1, #ids, ICK_CHUNK do
  local last = math.min(first + ICK_CHUNK - 1, #ids)
  local found = redis.call('HMGET', elements, unpack(ids, first, last))
  for k = first, last do
    entries[3 * k - 2], entries[3 * k - 1] = ids[k], got[2 * k]
    entries[3 * k] = found[k - first + 1]
  end
end
call_chunked('RPUSH', claim, entries, 1, #entries)
redis.call('ZREMRANGEBYRANK', due, 0, #ids - 1)  -- they are the lowest ranks
call_chunked('HDEL', elements, ids, 1, #ids)
head = head + 1
redis.call('HSET', clog, 'claimed', head, 'size:' .. head, #ids)
return {head, #ids, pending + #ids}
