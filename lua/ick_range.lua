-- ick_range: one page of a sorted set's members in a score range, changing nothing.
-- KEYS[1] the sorted set (an Ick shard's pset or cset)
-- ARGV[1] min, ARGV[2] max: the range as ZRANGE BYSCORE takes it ("1.5", "(1.5", "-inf")
-- ARGV[3] the most members returned
-- ARGV[4], ARGV[5] (later pages) the score and the member that ended the page before: the
--   page starts after them in the set's order (score, then member bytes), wherever members
--   before them went meanwhile, so a member in the range for the whole read is returned
-- returns {member1, score1, ...} in the set's order; fewer than ARGV[3] members: the end
local key, count = KEYS[1], tonumber(ARGV[3])

-- whether member a sorts after member b (bytewise, as Redis orders equal scores; Lua's
-- string comparison follows the server's locale)
local function after(a, b)
  for i = 1, math.min(#a, #b) do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x > y end
  end
  return #a > #b
end

local function exclusive(bound)
  if string.sub(bound, 1, 1) == '(' then return string.sub(bound, 2) end
  return '(' .. bound
end

local first
if ARGV[5] then
  local score, member = ARGV[4], ARGV[5]
  if redis.call('ZSCORE', key, member) == score then
    first = redis.call('ZRANK', key, member) + 1
  else  -- gone or moved: the first rank of a member past (score, member), by bisection
    local lo = redis.call('ZCOUNT', key, '-inf', '(' .. score)
    local hi = redis.call('ZCOUNT', key, '-inf', score)
    while lo < hi do
      local mid = math.floor((lo + hi) / 2)
      if after(redis.call('ZRANGE', key, mid, mid)[1], member) then hi = mid else lo = mid + 1 end
    end
    first = lo
  end
  first = math.max(first, redis.call('ZCOUNT', key, '-inf', exclusive(ARGV[1])))
else
  first = redis.call('ZCOUNT', key, '-inf', exclusive(ARGV[1]))
end
local last = math.min(redis.call('ZCOUNT', key, '-inf', ARGV[2]), first + count) - 1
if last < first then return {} end
return redis.call('ZRANGE', key, first, last, 'WITHSCORES')
