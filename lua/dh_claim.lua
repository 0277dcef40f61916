-- dh_claim: move due elements of one shard into a NEW numbered claim (the source's
-- latestOffset, like rlog_reserve for Icks). Claimed elements leave the live store; the
-- claim keeps them until dh_commit, so a replay reads exactly the same elements.
-- KEYS[1] due (sorted set id -> due ms), KEYS[2] elements (hash id -> element),
--   KEYS[3] claim log hash {claimed, committed}, KEYS[4] lease hash,
--   KEYS[5] claim prefix (claim n is the list prefix..n: id1, due1, element1, ...)
-- ARGV[1] limit (-1: no limit), ARGV[2] after: the offset this batch starts from,
--   ARGV[3] owner, ARGV[4] fencing token, ARGV[5] lease time in ms (renewed here),
--   ARGV[6] now in ms, or "" for Redis server time (due times only; a test clock)
-- Claims past `after` made earlier but never logged by Spark count against the limit.
-- returns {claimed, moved}: the last claim number after the call, elements moved
fence(KEYS[4], ARGV[3], ARGV[4], ARGV[5])
local clog, prefix = KEYS[3], KEYS[5]
local after = tonumber(ARGV[2])
local claimed = log_head(clog, 'claimed', after)
local limit = tonumber(ARGV[1])
for n = after + 1, claimed do limit = limit - redis.call('LLEN', prefix .. n) / 3 end
if tonumber(ARGV[1]) < 0 then limit = -1 elseif limit <= 0 then return {claimed, 0} end
local got = redis.call('ZRANGE', KEYS[1], '-inf', time_ms(ARGV[6]), 'BYSCORE',
                       'LIMIT', 0, limit, 'WITHSCORES')
if #got == 0 then return {claimed, 0} end
claimed = redis.call('HINCRBY', clog, 'claimed', 1)
for first = 1, #got, ICK_CHUNK do
  local ids = {}
  for i = first, math.min(first + ICK_CHUNK - 1, #got), 2 do ids[#ids + 1] = got[i] end
  local elements = redis.call('HMGET', KEYS[2], unpack(ids))
  local entries = {}
  for k = 1, #ids do
    entries[3 * k - 2], entries[3 * k - 1] = ids[k], got[first + 2 * k - 1]
    entries[3 * k] = elements[k]
  end
  redis.call('RPUSH', prefix .. claimed, unpack(entries))
  redis.call('ZREM', KEYS[1], unpack(ids))
  redis.call('HDEL', KEYS[2], unpack(ids))
end
return {claimed, #got / 2}
