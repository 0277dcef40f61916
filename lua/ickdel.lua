-- ickdel: remove every key of one Ick (the gem's ickdel and ickunlink).
-- KEYS    every key of the Ick (master, pset, cset and this project's extra keys)
-- ARGV[1] "DEL" or "UNLINK"
-- returns the number of keys removed
if #KEYS == 0 then return 0 end
return redis.call(ARGV[1], unpack(KEYS))
