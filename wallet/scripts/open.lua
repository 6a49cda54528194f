-- open: create an account, or confirm an existing one with the same
-- settings. Runs after lib.lua.
--
-- KEYS[1] account hash  <prefix>:wallet:v2:{<group>}:acct:<account>
-- KEYS[2] journal       <prefix>:wallet:v2:{<group>}:journal:<account>
-- KEYS[3] holds hash    <prefix>:wallet:v2:{<group>}:holds:<account>
-- KEYS[4] hold index    <prefix>:wallet:v2:{<group>}:hidx:<account>
-- ARGV[1] currency code
-- ARGV[2] overdraft limit, decimal 0..9007199254740991
--
-- Reply: {status, field}: "ok" (created), "exists" (same settings),
-- "closed" (the account was closed; it cannot be reopened), or "conflict"
-- with field "currency" or "overdraft".

local cur, od = ARGV[1], ARGV[2]
if od ~= '0' and not amount(od) then return invalid('overdraft ' .. tostring(od)) end

local a = account(KEYS[1])
if a then
  if a.closed then return {'closed', ''} end
  if a.cur ~= cur then return {'conflict', 'currency'} end
  if str(a.od) ~= od then return {'conflict', 'overdraft'} end
  return {'exists', ''}
end
redis.call('HSET', KEYS[1], 'cur', cur, 'od', od, 'posted', '0', 'held', '0', 'closed', '0',
           'cr', '0', 'db', '0', 'tin', '0', 'tout', '0', 'ck', '', 'ho', '0')
journal(KEYS[1], KEYS[2], '', 'open', '0', '0', 0, 0, '', '')
-- Holds refused before the account existed keep their keys' expiry (one
-- window after the last refusal): no hold of the account is open yet.
return {'ok', ''}
