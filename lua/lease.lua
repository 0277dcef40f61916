-- lease: acquire, renew or release a consumer lease (I5), for any source's shards.
-- KEYS[1] lease hash {owner, token, expiry, renewed, beat} (times: Redis TIME in ms)
-- ARGV[1] "acquire" | "renew" | "release", ARGV[2] owner id, ARGV[3] fencing token
--   (renew, release), ARGV[4] lease time in ms (acquire, renew), ARGV[5] (acquire) how
--   often the caller will renew, in ms
-- A holder that has not renewed for 3 of its renewal periods and a second is gone (its
-- query crashed): acquire takes the lease over at once, as it takes an expired one.
-- returns the fencing token: acquire gives a NEW one (also to the same owner, so a zombie
--   of a restarted query is fenced): one more than the last, the first one Redis time in
--   ms, so a lease deleted with its Ick never hands out a token twice; release returns 1
--   when the caller held the lease
-- raises ICK LEASE busy|lost ... (lease_fail) when another owner holds it (or, for renew,
--   the caller lost it)
local lease, mode, owner = KEYS[1], ARGV[1], ARGV[2]
allow_oom(lease)  -- a full Redis must not lock the consumer out
local now = time_ms(nil)
local h = redis.call('HMGET', lease, 'owner', 'token', 'expiry', 'renewed', 'beat')
local holds = h[1] == owner and h[2] == ARGV[3]
if mode == 'release' then
  if holds then redis.call('HDEL', lease, 'owner', 'expiry', 'renewed', 'beat') end
  return holds and 1 or 0  -- the token counter stays
end
if mode == 'acquire' then
  local expiry, renewed = tonumber(h[3] or 0), tonumber(h[4] or 0)
  if h[1] and h[1] ~= owner and expiry > now and now - renewed < gone_after(h[5]) then
    lease_fail('busy', lease)
  end
  local token = now  -- a first token is the time in ms: above any of a deleted lease's
  if h[2] then token = redis.call('HINCRBY', lease, 'token', 1) end
  redis.call('HSET', lease, 'token', token, 'owner', owner, 'expiry', now + tonumber(ARGV[4]),
             'renewed', now, 'beat', tonumber(ARGV[5] or 1000))
  return token
end
if not holds then lease_fail('lost', lease) end
redis.call('HSET', lease, 'expiry', now + tonumber(ARGV[4]), 'renewed', now)
return tonumber(ARGV[3])
