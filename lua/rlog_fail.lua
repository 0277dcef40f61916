-- rlog_fail: record the members of an open reservation that the sink failed on, with
-- the delivery they failed in and the error (a sink's hand-back: spark/failures.py).
-- rlog_commit then gives each a retry or makes it a dead letter, in the commit itself, so
-- a crash before the commit loses nothing and counts no attempt: the replay is a new
-- delivery, and failures recorded in an earlier one are not counted.
-- KEYS[1] rlog hash, KEYS[2] the manifest of reservation ARGV[1], KEYS[3] the failed hash
--   ("<reservation> <member>" -> "<delivery> <error>")
-- ARGV[1] reservation, ARGV[2] delivery (the batch's deliveries column), ARGV[3] the most
--   bytes of an error kept, ARGV[4..] member, error, member, error, ...
-- returns {recorded, not_in_reservation, late}: late counts members of a reservation that
--   is committed already or of an earlier delivery than the latest (nothing recorded)
local rlog, manifest, failed = KEYS[1], KEYS[2], KEYS[3]
local r, delivery, most = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local given = (#ARGV - 3) / 2
allow_oom(rlog)  -- a hand-back keeps a consumer going when Redis is full
if r <= tonumber(redis.call('HGET', rlog, 'committed') or 0)
    or delivery < delivery_of(rlog, r) then
  return {0, 0, given}
end
local held = {}
local flat = redis.call('LRANGE', manifest, 0, -1)
for i = 1, #flat, 2 do held[flat[i]] = true end
local recorded, stray = 0, 0
for i = 4, #ARGV, 2 do
  if held[ARGV[i]] then
    redis.call('HSET', failed, r .. ' ' .. ARGV[i],
               delivery .. ' ' .. string.sub(ARGV[i + 1], 1, most))
    recorded = recorded + 1
  else
    stray = stray + 1
  end
end
return {recorded, stray, 0}
