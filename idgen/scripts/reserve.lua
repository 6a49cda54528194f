-- Reserves the range [last-step+1, last] of an ID counter, always above a floor.
-- KEYS[1]  the counter: a string holding an integer (absent = 0)
-- ARGV[1]  step: how many values to reserve, 1..2^53-1
-- ARGV[2]  floor: the highest value the caller has issued (0 if none); when the
--          counter is behind it (a failover lost writes, the key was deleted or
--          restored from an old backup, or set below zero) the counter is set
--          to floor + step instead of incremented
-- Reply:   last, the highest value of the range
--          error "IDGEN_EXHAUSTED" when last would pass 2^53-1
--          error "IDGEN_NOTINT" when the key holds anything but an integer within ±(2^53-1)
--          written as Redis writes integers
local max = 9007199254740991
local step = tonumber(ARGV[1])
local floor = tonumber(ARGV[2])
if not step or step < 1 or step > max or step % 1 ~= 0 then
  return redis.error_reply('ERR idgen: step out of range')
end
if not floor or floor < 0 or floor > max or floor % 1 ~= 0 then
  return redis.error_reply('ERR idgen: floor out of range')
end
local cur = 0
local raw = redis.call('GET', KEYS[1])
if raw then
  cur = tonumber(raw)
  -- Only the form INCRBY accepts (no sign on zero, no leading zero, no "+"):
  -- "-0" or "007" would pass tonumber and then fail INCRBY with Redis's own error.
  local canonical = raw == '0' or string.match(raw, '^%-?[1-9]%d*$')
  if not cur or cur % 1 ~= 0 or cur < -max or cur > max or not canonical then
    return redis.error_reply('IDGEN_NOTINT counter does not hold an integer')
  end
end
local base = cur
if floor > base then base = floor end
if base > max - step then
  return redis.error_reply('IDGEN_EXHAUSTED counter would pass 2^53-1')
end
local last = base + step
-- Integers go to redis.call as strings formatted here: how Redis turns a Lua
-- number into an argument differs between versions. A counter moved up is
-- SET to the end of the range, never incremented by a difference, which for
-- a counter far below zero would pass 2^53 and be rounded.
if base == cur then
  redis.call('INCRBY', KEYS[1], string.format('%d', step))
else
  redis.call('SET', KEYS[1], string.format('%d', last))
end
return last
