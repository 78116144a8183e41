-- fail.lua: a fetch that gave no observation (5xx, timeout, DNS error, 404/410).
-- ARGV after the header: id, host, token, not_found ("1" for 404/410),
-- backoff base (s), gone_after (consecutive 404/410 that mark the page gone).
-- Not an observation: the estimator is untouched. The page is retried after
-- base * 2^(n-1) seconds (n = consecutive failures), capped by max_interval;
-- after gone_after consecutive 404/410 it is marked gone and leaves the queues.
-- A corrupt state is quarantined. Returns {status, next_due} with status
-- retry | gone | stale | missing, or {"quarantined", reason}.
local id, host, token = ARGV[H + 1], ARGV[H + 2], tonumber(ARGV[H + 3])
local not_found, base, gone_after = ARGV[H + 4] == "1", tonumber(ARGV[H + 5]),
  tonumber(ARGV[H + 6])
local now = C.now

local s, problem, raw = lib.load_state(id)
if problem then
  lib.quarantine(id, host, problem, raw, false)
  return lib.finish({"quarantined", problem})
end
if not s then
  local reason = lib.quarantine_reason(id)
  if reason then return lib.finish({"quarantined", reason}) end
  return lib.finish({"missing", "0"})
end
if s.leases ~= token or not lib.has(s.flags, F_LEASED) then return lib.finish({"stale", "0"}) end

s.fails = math.min(s.fails + 1, 15)
if not_found then s.notfound = math.min(s.notfound + 1, 15) else s.notfound = 0 end
-- consumed, not an observation
s.flags = lib.set(lib.set(s.flags, F_LEASED, false), F_APPLIED, false)
redis.call("ZREM", LEASES, id .. host)
if not_found and s.notfound >= gone_after then
  s.flags = lib.set(s.flags, F_GONE, true)
  lib.save(id, s)
  if lib.in_aggregates(s) then lib.agg_add(s.weight, lib.plan_rate(s), -1, host) end
  redis.call("HINCRBY", CNT, "gone", 1)
  if C.cochange and not lib.has(s.flags, F_SOURCE) then lib.cochange_forget(id, host) end
  if lib.has(s.flags, F_SOURCE) then redis.call("HINCRBY", CNT, "sources", -1) end
  return lib.finish({"gone", "0"})
end
lib.save(id, s)
local due = now + math.min(base * 2 ^ (s.fails - 1), C.max_interval)
due = lib.enqueue(host, id, due)
return lib.finish({"retry", lib.fmt(due)})
