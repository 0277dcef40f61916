-- Shared helpers: lua.py prepends to each script of this folder the blocks it uses.
-- ick_open(master, pset, cset, create): checks the version flag of one Ick.
--   Returns true when the Ick exists, false when it does not (and create is false).
--   Raises when `master` holds something other than "ick.v1", when a pset/cset
--   exists without the flag, or when the pset/cset is not a sorted set (never
--   repaired silently). With create, writes the flag.
-- Errors: every refusal a script raises is "ICK <message>" (ick_fail), parsed in one
-- place, redis_errors.translate: "ICK LEASE busy|lost <expires_in_ms> <ms_since_renewal>
-- <renewed_at_ms> <gone_after_ms> <owner>" (lease_fail) becomes LeaseBusy / LeaseLost,
-- any other "ICK <message>" (naming its keys) IckScriptError.
local function ick_fail(msg)
  error('ICK ' .. msg, 0)
end

local function ick_open(master, pset, cset, create)
  local t = redis.call('TYPE', master)['ok']
  if t == 'none' then
    if redis.call('EXISTS', pset, cset) > 0 then
      ick_fail(master .. ' has a pset or cset but no version flag')
    end
    if create then redis.call('SET', master, 'ick.v1') end
    return create
  end
  if t ~= 'string' then
    ick_fail(master .. ' is a ' .. t .. ', not an Ick version flag')
  end
  local ver = redis.call('GET', master)
  if ver ~= 'ick.v1' then
    ick_fail(master .. ' holds ' .. ver .. ', expected ick.v1')
  end
  for _, key in ipairs({pset, cset}) do
    local kt = redis.call('TYPE', key)['ok']
    if kt ~= 'zset' and kt ~= 'none' then
      ick_fail(key .. ' is a ' .. kt .. ', not a sorted set')
    end
  end
  return true
end

-- call_chunked(command, key, list, first, last, flags): redis.call(command, key,
-- flags..., list[i..j]) over list[first..last] in chunks below Lua's unpack limit
-- (ICK_CHUNK is even: pairs stay whole); flags: nil or two words. Returns the sum of the
-- integer replies.
local ICK_CHUNK = 4000
local function call_chunked(command, key, list, first, last, flags)
  local n, i = 0, first
  while i <= last do
    local j = math.min(i + ICK_CHUNK - 1, last)
    if flags then
      n = n + redis.call(command, key, flags[1], flags[2], unpack(list, i, j))
    else
      n = n + redis.call(command, key, unpack(list, i, j))
    end
    i = j + 1
  end
  return n
end

-- zadd_lt(key, flat, first, last): ZADD key LT CH over flat[first..last] (score, member
-- pairs): the lower score wins. Returns the CH count (added + changed).
local function zadd_lt(key, flat, first, last)
  return call_chunked('ZADD', key, flat, first, last, {'LT', 'CH'})
end

-- add_at(pset, score, members): every member of `members` into `pset` at `score` (text),
-- the lower score winning. Returns {new, changed}: members new to the pset, members whose
-- score went down.
local function add_at(pset, score, members)
  local flat = {}
  for i = 1, #members do
    flat[2 * i - 1], flat[2 * i] = score, members[i]
  end
  local before = redis.call('ZCARD', pset)
  local ch = zadd_lt(pset, flat, 1, #flat)
  local new = redis.call('ZCARD', pset) - before
  return {new, ch - new}
end

-- zrem_all(key, list, first, last): ZREM key list[first..last]; returns how many left.
local function zrem_all(key, list, first, last)
  return call_chunked('ZREM', key, list, first, last)
end

-- flip(flat): {member, score, ...} (a ZRANGE/ZPOPMIN reply) -> {score, member, ...} (ZADD args)
local function flip(flat)
  local out = {}
  for i = 1, #flat, 2 do
    out[i], out[i + 1] = flat[i + 1], flat[i]
  end
  return out
end

-- time_ms(arg): tonumber(arg) when a test clock passed one, else Redis server time in ms.
local function time_ms(arg)
  if arg and arg ~= '' then return tonumber(arg) end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- allow_oom(key): let this script write when Redis is full (maxmemory, noeviction), as the
-- consumer must: it is what frees memory. Redis refuses a script under maxmemory at its
-- first write if that command may grow memory (denyoom); HDEL of no field is a write that
-- may not, so the writes after it run. Works on Redis 6.2, 7 and 8 and Valkey alike (Redis
-- 7's `#!lua flags=allow-oom` shebang says the same, but 6.2 rejects shebangs).
local function allow_oom(key)
  redis.call('HDEL', key, '-')
end

-- gone_after(beat): ms after its last renewal that a holder renewing every `beat` ms
-- (nil: 1000) counts as gone: 3 renewal periods and a second.
local function gone_after(beat)
  return 3 * tonumber(beat or 1000) + 1000
end

-- lease_fail(kind, lease): raise ICK LEASE <kind> with the holder of lease hash `lease`
-- ("busy": someone else holds it; "lost": the caller's owner or token no longer does).
local function lease_fail(kind, lease)
  local h = redis.call('HMGET', lease, 'owner', 'expiry', 'renewed', 'beat')
  local now, renewed = time_ms(nil), tonumber(h[3] or 0)
  ick_fail(string.format('LEASE %s %d %d %d %d %s', kind,
    math.max(tonumber(h[2] or 0) - now, 0), now - renewed, renewed, gone_after(h[4]),
    h[1] or ''))
end

-- fence(lease, owner, token, ttl_ms): raise ICK LEASE lost unless (owner, token) holds
-- the lease hash `lease` (I5 fencing); else renew it for ttl_ms from Redis server time.
-- Runs first in the consumer's scripts, so they write even when Redis is full (allow_oom).
local function fence(lease, owner, token, ttl_ms)
  allow_oom(lease)
  local h = redis.call('HMGET', lease, 'owner', 'token')
  if h[1] ~= owner or h[2] ~= token then lease_fail('lost', lease) end
  local now = time_ms(nil)
  redis.call('HSET', lease, 'expiry', now + tonumber(ttl_ms), 'renewed', now)
end

-- log_head(log, field, after): the last number made in the reservation or claim log hash
-- `log` (field `field`), never below `after`, Spark's offset: a log deleted under a
-- running query restarts there (committed too), so numbers are never reused.
local function log_head(log, field, after)
  local n = tonumber(redis.call('HGET', log, field) or 0)
  if n < after then
    redis.call('HSET', log, field, after, 'committed', after)
    n = after
  end
  return n
end

-- open_size(log, after, head): items in the open reservations (or claims) numbered after
-- `after` (and after the last committed one) through `head`: the size:<n> fields of the
-- log hash `log`
local function open_size(log, after, head)
  local committed = tonumber(redis.call('HGET', log, 'committed') or 0)
  local n = 0
  for r = math.max(after, committed) + 1, head do
    n = n + tonumber(redis.call('HGET', log, 'size:' .. r) or 0)
  end
  return n
end

-- attempts_of(record): the failed attempts that an attempt record holds: records are
-- "<attempts> <failed_at_ms> <score> <error>" (an Ick's attempts and deadinfo hashes);
-- 0 for nil
local function attempts_of(record)
  return record and tonumber(string.match(record, '^(%d+) ')) or 0
end

-- policy_of(arg): a RetryPolicy's ARGV ("<max attempts> <first backoff ms> <longest
-- backoff ms> <jitter seed>", retries.RetryPolicy.arg) as {max, base_ms, cap_ms, seed};
-- its defaults for nil
local function policy_of(arg)
  local max, base, cap, seed = string.match(arg or '', '^(%d+) (%d+) (%d+) (%S*)$')
  return {max = tonumber(max or 25), base_ms = tonumber(base or 1000),
          cap_ms = tonumber(cap or 3600000), seed = seed or ''}
end

-- fail_member(keys, member, score, err, policy): one more failed attempt of member, whose
-- delivery with score failed with err: a retry after a backoff that grows with its
-- attempts (exponential, half of it jitter), or a dead letter once policy.max failed.
-- keys: {retry zset, attempts hash, dead zset, deadinfo hash}; policy: policy_of's.
-- Returns 'retry' or 'dead'.
local function fail_member(keys, member, score, err, policy)
  local retry, attempts, dead, deadinfo = keys[1], keys[2], keys[3], keys[4]
  local n = attempts_of(redis.call('HGET', attempts, member)) + 1
  local now = time_ms(nil)
  local record = n .. ' ' .. now .. ' ' .. score .. ' ' .. err
  if n >= policy.max then
    redis.call('ZADD', dead, now, member)
    redis.call('HSET', deadinfo, member, record)
    redis.call('HDEL', attempts, member)
    redis.call('ZREM', retry, member)
    return 'dead'
  end
  local delay = math.min(policy.cap_ms, policy.base_ms * 2 ^ (n - 1))
  local jitter = tonumber(string.sub(redis.sha1hex(policy.seed .. member), 1, 8), 16)
  redis.call('ZADD', retry, now + math.floor(delay / 2 + delay / 2 * jitter / 4294967296),
             member)
  redis.call('HSET', attempts, member, record)
  return 'retry'
end

-- release_due(retry, attempts, pset, cset, now, n): move at most n members whose retry is
-- due by now (ms) from the retry zset back into the pset, with the score of their failed
-- delivery (lower score wins; the time now without a record). A due member that is in the
-- cset (re-added and reserved meanwhile by a consumer that keeps retries, the redis-ick
-- gem) only loses its retry: that delivery is its next attempt. Returns how many.
local function release_due(retry, attempts, pset, cset, now, n)
  if n <= 0 or redis.call('EXISTS', retry) == 0 then return 0 end
  local due = redis.call('ZRANGE', retry, '-inf', now, 'BYSCORE', 'LIMIT', 0, n)
  if #due == 0 then return 0 end
  local records = redis.call('HMGET', attempts, unpack(due))
  local reserved = redis.call('ZMSCORE', cset, unpack(due))
  local flat = {}
  for i, member in ipairs(due) do
    if not reserved[i] then
      local score = records[i] and string.match(records[i], '^%d+ %d+ (%S+)')
      flat[#flat + 1], flat[#flat + 2] = score or tostring(now / 1000), member
    end
  end
  if #flat > 0 then zadd_lt(pset, flat, 1, #flat) end
  zrem_all(retry, due, 1, #due)
  return #due
end

-- forget_attempts(retry, attempts, list): the members of list were delivered and done:
-- their attempt records and pending retries go (nothing to do when neither key exists)
local function forget_attempts(retry, attempts, list)
  if #list == 0 then return end
  if redis.call('EXISTS', attempts) == 1 then call_chunked('HDEL', attempts, list, 1, #list) end
  if redis.call('EXISTS', retry) == 1 then zrem_all(retry, list, 1, #list) end
end

-- delivery_of(log, n): the deliveries counted for manifest n of a log hash (its dlv:<n>
-- field: "<deliveries> <token>"), 0 before the first read
local function delivery_of(log, n)
  local field = redis.call('HGET', log, 'dlv:' .. n)
  return field and tonumber(string.match(field, '^(%d+)')) or 0
end

-- ICK_BACKFILL: the lane offset (lanes.py): a score at or above it is the backfill's,
-- its member's own time plus the offset.
local ICK_BACKFILL = 1e13

-- ICK_FRESH: the freshness histogram's bucket upper bounds in seconds (freshness.BUCKETS),
-- then '+Inf' (ICK_FRESH_S: the same as numbers); FRESH_SLOTS: its rolling one-minute
-- slots (freshness.SLOTS).
local ICK_FRESH = {'0.1', '0.25', '0.5', '1', '2.5', '5', '10', '30', '60', '120', '300',
                   '600', '1800', '3600', '+Inf'}
local ICK_FRESH_S = {0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600}
local FRESH_SLOTS = 5

-- fresh_count(fresh, parts): count the wait (Redis time now minus its own time) of each
-- member committed with score list[first], list[first + step], ... of each {list, first,
-- step} of parts, in the freshness hash `fresh` under its lane (ICK_BACKFILL): a count per bucket
-- ("<lane>:<le>") and the sum in ms ("<lane>:sum_ms"), the same counts in the slot of
-- this minute ("m<slot>:<lane>:<le>", cleared when "m<slot>", its minute, is older), and
-- a score that is no Unix time in [1e9, 1e10) s (lanes.is_time) in "<lane>:untimed".
-- The members are tallied in Lua first: one HINCRBY per touched field.
local function fresh_count(fresh, parts)
  if #parts == 0 then return end
  local t = redis.call('TIME')
  local now = tonumber(t[1]) + tonumber(t[2]) / 1e6
  local live = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, sum = 0, untimed = 0}
  local back = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, sum = 0, untimed = 0}
  local tally = {live = live, backfill = back}
  local b, lo, hi = 15, 3600, math.huge  -- the last member's bucket (lo, hi]: a manifest
  for _, part in ipairs(parts) do       -- is in score order, so it seldom changes
    local scores = part[1]
    for i = part[2], #scores, part[3] do
      local own, counts = scores[i] + 0, live  -- a number: cheaper than tonumber()
      if own >= ICK_BACKFILL then own, counts = own - ICK_BACKFILL, back end
      if own >= 1e9 and own < 1e10 then
        local wait = now - own
        if wait <= lo or wait > hi then
          if wait < 0 then wait = 0 end
          b = 1
          while b <= 14 and wait > ICK_FRESH_S[b] do b = b + 1 end
          lo, hi = ICK_FRESH_S[b - 1] or 0, ICK_FRESH_S[b] or math.huge
        end
        counts[b], counts.sum = counts[b] + 1, counts.sum + wait
      else
        counts.untimed = counts.untimed + 1
      end
    end
  end
  local minute = math.floor(now / 60)
  local slot = 'm' .. (minute % FRESH_SLOTS)
  if tonumber(redis.call('HGET', fresh, slot) or -1) ~= minute then
    local old = {}
    for _, lane in ipairs({'live', 'backfill'}) do
      for _, le in ipairs(ICK_FRESH) do old[#old + 1] = slot .. ':' .. lane .. ':' .. le end
    end
    redis.call('HDEL', fresh, unpack(old))
    redis.call('HSET', fresh, slot, minute)
  end
  for lane, counts in pairs(tally) do
    for k = 1, 15 do
      local n = counts[k]
      if n > 0 then
        redis.call('HINCRBY', fresh, lane .. ':' .. ICK_FRESH[k], n)
        redis.call('HINCRBY', fresh, slot .. ':' .. lane .. ':' .. ICK_FRESH[k], n)
      end
    end
    if counts.sum > 0 then
      redis.call('HINCRBY', fresh, lane .. ':sum_ms', string.format('%.0f', counts.sum * 1000))
    end
    if counts.untimed > 0 then redis.call('HINCRBY', fresh, lane .. ':untimed', counts.untimed) end
  end
end
