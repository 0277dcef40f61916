-- rlog_reserve: move the lowest members of the pset into a NEW numbered reservation
-- (stream reader, docs/design.md §4). One call moves at most ARGV[7] members (bounded
-- work: a big micro-batch is several reservations, made by several calls).
-- KEYS[1] master, KEYS[2] pset, KEYS[3] cset, KEYS[4] rlog hash {reserved, committed,
--   size:<r> of each open reservation r, att:<r> its members' failed attempts (msgpack,
--   by position; only when one has any), repeated: the last reservation that holds a
--   member an open one held already (one reader must fold them)}, KEYS[5] lease hash,
--   KEYS[6] held hash (member -> how many more open reservations hold it than the one
--   that put it in the cset),
--   KEYS[7] the manifest of reservation ARGV[6] + 1 (a list: member, score, ...),
--   KEYS[8] retry zset (member -> due ms), KEYS[9] attempts hash (member -> attempt record)
-- ARGV[1] limit (-1: no limit), ARGV[2] after: the offset this batch starts from,
--   ARGV[3] owner, ARGV[4] fencing token, ARGV[5] lease time in ms (renewed here),
--   ARGV[6] head: the last reservation number the caller knows, ARGV[7] members per call,
--   ARGV[8] pending at that head as the caller's last call replied (-1: count it here:
--   one HGET per open reservation, so a batch of many calls counts once); the ARGV of
--   every reserve script (numbered_log.RESERVE_ARGV), ARGV[9] now in ms ("": Redis time);
--   the Ick's own: ARGV[10] the backfill's share of the limit (a fraction; absent: none,
--   members are taken in score order), ARGV[11] backfill members in the reservations past
--   `after` (as the caller counted them), ARGV[12] "1": a reserve ahead of Spark (the job
--   ahead) takes no more backfill members than the share, leaving the rest of the room to
--   the next batch's top-up, so live members added meanwhile go first
-- Lanes (lanes.py): live members are taken first, but while backfill members wait the
-- batch keeps ceil(share * limit) of its room for them; what live members leave, the
-- backfill takes. A reservation holds its live members, then its backfill ones.
-- Reservations past `after` made earlier but never logged by Spark count against the limit.
-- With no reservation open, every member of the cset was reserved by someone else (a gem
-- consumer, Ick.reserve) that handed the shard over: it is adopted, folded back into the
-- pset (lower score wins) and so reserved like any queued member. Members whose retry is
-- due come back into the pset first (release_due), and a member reserved now has no
-- pending retry any more: this delivery is its next attempt.
-- returns {reserved, moved, pending, requeued, backfill}: the last reservation number
--   after the call, members moved, members in the reservations past `after`, members this
--   call put back into the pset (adopted, or retries released: the caller calls again),
--   backfill members among those moved; moved and
--   pending are -1 (nothing done) when the log's head is not ARGV[6]:
--   call again with the head returned (a replayed call gets that)
local master, pset, cset, rlog, lease, held, manifest, retry, attempts = unpack(KEYS, 1, 9)
local limit, after = tonumber(ARGV[1]), tonumber(ARGV[2])
local owner, token, ttl_ms = ARGV[3], ARGV[4], ARGV[5]
local known, per_call, pending = tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8])
fence(lease, owner, token, ttl_ms)
local head = log_head(rlog, 'reserved', after)
if head ~= known then return {head, -1, -1, 0} end
if pending < 0 then pending = open_size(rlog, after, head) end
if not ick_open(master, pset, cset, false) then return {head, 0, pending, 0} end
local n = per_call
if limit >= 0 then n = math.min(n, limit - pending) end
if n <= 0 then return {head, 0, pending, 0} end
local requeued = 0
if head == tonumber(redis.call('HGET', rlog, 'committed') or 0) then
  local orphans = flip(redis.call('ZPOPMIN', cset, n))
  zadd_lt(pset, orphans, 1, #orphans)
  redis.call('UNLINK', held)  -- no open reservation: nothing is held twice either
  requeued = #orphans / 2
  n = n - requeued  -- one call touches at most per_call members
end
local released = release_due(retry, attempts, pset, cset, time_ms(ARGV[9]), n)
requeued, n = requeued + released, n - released
if n <= 0 then return {head, 0, pending, requeued} end
local share, backfill = tonumber(ARGV[10] or ''), 0
local live = redis.call('ZCOUNT', pset, '-inf', '(' .. ICK_BACKFILL)
local got
if share and limit >= 0 then
  local waiting = redis.call('ZCARD', pset) - live
  local owed = math.min(math.ceil(share * limit) - tonumber(ARGV[11] or 0), waiting)
  local take = math.min(live, n, math.max(limit - pending - math.max(owed, 0), 0))
  backfill = math.min(waiting, n - take)
  if ARGV[12] == '1' then backfill = math.min(backfill, math.max(owed, 0)) end
  got = take > 0 and redis.call('ZRANGE', pset, 0, take - 1, 'WITHSCORES') or {}
  if backfill > 0 then
    local more = redis.call('ZRANGE', pset, live, live + backfill - 1, 'WITHSCORES')
    redis.call('ZREMRANGEBYRANK', pset, live, live + backfill - 1)
    for i = 1, #more do got[#got + 1] = more[i] end
  end
  if take > 0 then redis.call('ZREMRANGEBYRANK', pset, 0, take - 1) end
else
  got = redis.call('ZRANGE', pset, 0, n - 1, 'WITHSCORES')
  if #got > 0 then redis.call('ZREMRANGEBYRANK', pset, 0, #got / 2 - 1) end
  backfill = math.max(#got / 2 - live, 0)
end
if #got == 0 then return {head, 0, pending, requeued, 0} end
local members = {}
for i = 1, #got, 2 do members[#members + 1] = got[i] end
if redis.call('EXISTS', retry) == 1 then zrem_all(retry, members, 1, #members) end
local failed_before = nil  -- each member's failed attempts, for the reader (att:<n>)
if redis.call('EXISTS', attempts) == 1 then
  local records = redis.call('HMGET', attempts, unpack(members))
  for i = 1, #members do
    local n = attempts_of(records[i])
    if n > 0 then
      failed_before = failed_before or {}
      failed_before[i] = n
    end
  end
  if failed_before then
    for i = 1, #members do failed_before[i] = failed_before[i] or 0 end
  end
end
local again = false
if redis.call('EXISTS', cset) == 1 then  -- a member in flight, re-added and reserved again
  for first = 1, #members, ICK_CHUNK do
    local last = math.min(first + ICK_CHUNK - 1, #members)
    local in_flight = redis.call('ZMSCORE', cset, unpack(members, first, last))
    for k = first, last do
      if in_flight[k - first + 1] then
        redis.call('HINCRBY', held, members[k], 1)
        again = true
      end
    end
  end
end
zadd_lt(cset, flip(got), 1, #got)
call_chunked('RPUSH', manifest, got, 1, #got)
head = head + 1
redis.call('HSET', rlog, 'reserved', head, 'size:' .. head, #got / 2)
if failed_before then redis.call('HSET', rlog, 'att:' .. head, cmsgpack.pack(failed_before)) end
if again then redis.call('HSET', rlog, 'repeated', head) end
return {head, #got / 2, pending + #got / 2, requeued, backfill}
