-- delete_keys: remove the keys of one Ick or dehydrator shard in one call (the gem's
-- ickdel and ickunlink; Dehydrator.delete). UNLINK: big values are freed in the
-- background, so the call holds Redis for as long as it takes to unlink the names.
-- KEYS    every key to remove (all in one slot: the keys of one shard)
-- returns the number of keys removed
if #KEYS == 0 then return 0 end
return redis.call('UNLINK', unpack(KEYS))
