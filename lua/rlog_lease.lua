-- rlog_lease: acquire, renew or release a consumer lease (I5), for any source's shards.
-- KEYS[1] lease hash {owner, token, expiry, renewed, beat} (times: Redis TIME in ms)
-- ARGV[1] "acquire" | "renew" | "release", ARGV[2] owner id, ARGV[3] fencing token
--   (renew, release), ARGV[4] lease time in ms (acquire, renew), ARGV[5] (acquire) how
--   often the caller will renew, in ms
-- A holder that has not renewed for 3 of its renewal periods and a second is gone (its
-- query crashed): acquire takes the lease over at once, as it takes an expired one.
-- returns {1, token} when the caller holds the lease (acquire gives a NEW token, also to
--   the same owner, so a zombie of a restarted query is fenced), or
--   {0, owner, expires_in_ms, ms_since_renewal, renewed_at_ms, gone_after_ms} when another
--   owner holds it (or, for renew, {0, owner or "", ...} when the caller lost it);
--   release returns {1, 0}
local lease, mode, owner = KEYS[1], ARGV[1], ARGV[2]
allow_oom(lease)  -- a full Redis must not lock the consumer out
local now = time_ms(nil)
local h = redis.call('HMGET', lease, 'owner', 'token', 'expiry', 'renewed', 'beat')
local expiry, renewed = tonumber(h[3] or 0), tonumber(h[4] or 0)
local gone_after = 3 * tonumber(h[5] or 1000) + 1000
local function refused()
  return {0, h[1] or '', math.max(expiry - now, 0), now - renewed, renewed, gone_after}
end
if mode == 'acquire' then
  if h[1] and h[1] ~= owner and expiry > now and now - renewed < gone_after then
    return refused()
  end
  local token = redis.call('HINCRBY', lease, 'token', 1)
  redis.call('HSET', lease, 'owner', owner, 'expiry', now + tonumber(ARGV[4]),
             'renewed', now, 'beat', tonumber(ARGV[5] or 1000))
  return {1, token}
end
if h[1] ~= owner or h[2] ~= ARGV[3] then return refused() end
if mode == 'renew' then
  redis.call('HSET', lease, 'expiry', now + tonumber(ARGV[4]), 'renewed', now)
  return {1, tonumber(ARGV[3])}
end
redis.call('HDEL', lease, 'owner', 'expiry', 'renewed', 'beat')  -- keep the token counter
return {1, 0}
