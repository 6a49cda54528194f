-- consumed.lua: acknowledge the entries a consumer was handed, but only
-- those it still holds. An entry another consumer took over (this one
-- stalled past the idle time) is the other's to acknowledge: acknowledging
-- it here would let newer entries be handed out while the other still
-- handles it (see consume.lua).
--
-- KEYS[1]  journal stream  <p>:stock:v1:{g}:journal:<sku>
-- ARGV[1]  consumer group
-- ARGV[2]  consumer
-- ARGV[3..] the entry IDs handed out, oldest first
--
-- Reply: the number of entries acknowledged.

if #ARGV < 3 then return 0 end
local want = {}
for i = 3, #ARGV do want[ARGV[i]] = true end
-- The consumer's pending entries between the first and the last: the
-- handed-out entries it still holds (it holds no others there).
local ids = {}
for _, p in ipairs(redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[3], ARGV[#ARGV], #ARGV - 2, ARGV[2])) do
  if want[p[1]] then ids[#ids + 1] = p[1] end
end
if #ids == 0 then return 0 end
return redis.call('XACK', KEYS[1], ARGV[1], unpack(ids))
