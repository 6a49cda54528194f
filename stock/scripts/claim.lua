-- claim.lua: bind an operation ID on a SKU split into buckets to its kind,
-- buyer and items in the slot group's own hash tag, so the ID is unique per
-- slot group although the operation's marker lives in another bucket (an
-- order's in its buyer's home bucket, a restock's or write-off's in the
-- bucket of its ID).
--
-- KEYS[1]  the ID's operation key in bucket 0's tag  <p>:stock:v1:{g}:op:<order ID>
--          (the same key holds the marker of an order placed in bucket 0 or
--          on a SKU without buckets, and those are compared too)
-- ARGV[1]  buyer ID ("" for a restock or write-off)
-- ARGV[2]  items as deduct.lua describes them ("sku qty")
-- ARGV[3]  kind: "deduct" | "reserve" | "restock" | "writeoff", or "" to
--          compare buyer and items only (Confirm, Cancel and Refund)
-- ARGV[4]  "claim": record the claim when there is none; "check": compare
--          only
-- ARGV[5]  milliseconds the key must live at least, 1..2^53-1
--
-- Reply: {"ok", "", decided} or {"conflict", field} ("kind", "buyer",
-- "items"). decided is "decided" when the key holds a decision of the
-- operation itself (a marker: a refusal stored before the SKU existed, a
-- Cancel's tombstone, or an order placed in bucket 0), "" otherwise: the
-- caller then runs the operation in {g}, where that decision is replayed. A
-- conflict writes nothing; "ok" may write the claim fields ck, cb, ci and
-- lengthen the key's life, never shorten it.

local MAX = 9007199254740991
local buyer, desc, kind, mode = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local keep = tonumber(ARGV[5])
if mode ~= 'claim' and mode ~= 'check' then return {'invalid', 'mode'} end
if kind ~= 'deduct' and kind ~= 'reserve' and kind ~= 'restock' and kind ~= 'writeoff' and kind ~= '' then
  return {'invalid', 'kind'}
end
if not keep or keep ~= math.floor(keep) or keep < 1 or keep > MAX then return {'invalid', 'keep'} end

local m = redis.call('HMGET', KEYS[1], 'k', 'b', 'i', 'ck', 'cb', 'ci')
local hk, hb, hi = m[4] or m[1], m[5] or m[2], m[6] or m[3]
if hk then
  if kind ~= '' and hk ~= kind then return {'conflict', 'kind'} end
  if hb ~= buyer then return {'conflict', 'buyer'} end
  if hi ~= desc then return {'conflict', 'items'} end
end
local decided = m[1] and 'decided' or ''
if not m[4] and mode == 'claim' then
  redis.call('HSET', KEYS[1], 'ck', kind, 'cb', buyer, 'ci', desc)
elseif not hk then
  return {'ok', '', decided}
end
local ttl = redis.call('PTTL', KEYS[1])
if ttl >= 0 and ttl < keep or ttl == -1 then redis.call('PEXPIRE', KEYS[1], string.format('%d', keep)) end
return {'ok', '', decided}
