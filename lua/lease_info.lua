-- lease_info: who holds one shard's consumer lease, for operators' checks (read-only).
-- KEYS[1] lease hash {owner, token, expiry, renewed, beat} (lua/lease.lua)
-- returns {owner or "", expires in ms (negative: expired), ms since the last renewal,
--   ms after its last renewal that the holder counts as gone (gone_after), the last
--   fencing token}
local h = redis.call('HMGET', KEYS[1], 'owner', 'token', 'expiry', 'renewed', 'beat')
local now = time_ms(nil)
return {h[1] or '', tonumber(h[3] or now) - now, now - tonumber(h[4] or now),
        gone_after(h[5]), tonumber(h[2] or 0)}
