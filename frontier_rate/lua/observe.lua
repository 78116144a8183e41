-- observe.lua: one fetch result, as one atomic step (DESIGN §2-3).
-- ARGV after the header: id, host, token, fingerprint digest ("" = none),
-- not_modified ("1"/"0"), etag and last_modified ("-" = not given, "=" .. value),
-- u (uniform in (0, 1] for the exponential draw).
-- Accepted once per lease token: the page must hold an open lease with this
-- token. A replay of the token that was applied returns the same result and
-- changes nothing; any other token (an expired lease, re-leased or not) is
-- "stale" and changes nothing.
-- Returns {status, changed, estimate, next_due} with status ok | replay | stale | missing.
local id, host, token = ARGV[H + 1], ARGV[H + 2], tonumber(ARGV[H + 3])
local fp, not_modified = ARGV[H + 4], ARGV[H + 5] == "1"
local etag_arg, lm_arg, u = ARGV[H + 6], ARGV[H + 7], tonumber(ARGV[H + 8])
local now = C.now

local s = load(id)
if not s then return {"missing", 0, "0", "0"} end
local function current(status)
  local due = redis.call("ZSCORE", qkey(host), id) or "0"
  local changed = 0
  if has(s.flags, F_CHANGED) then changed = 1 end
  return {status, changed, fmt(reported(s)), due}
end
if s.leases ~= token or not has(s.flags, F_LEASED) then
  if s.leases == token and has(s.flags, F_APPLIED) then return current("replay") end
  return current("stale")
end

-- change indicator: the first fetch is no change; 304 is no change
local I = 0
if s.fetches > 0 and not not_modified and fp ~= "" and fp ~= s.fp then I = 1 end
if fp ~= "" then s.fp = fp end

local old_rate = plan_rate(s)
if s.fetches > 0 then
  update_estimate(s, I, s.p, now - s.last_fetch, s.fetches - 1)
end
s.fetches = s.fetches + 1
s.changes = s.changes + I
s.last_fetch = now
s.fails, s.notfound = 0, 0
local new_rate = plan_rate(s)
agg_move(s.weight, old_rate, s.weight, new_rate)

-- next due: exponential with the planned mean for lln/sa/sam (their Poisson
-- assumption, docs/ARCHITECTURE.md), the planned interval itself for `interval`
local mean = planned_interval(s.weight, new_rate)
local interval = mean
if C.estimator ~= "interval" then interval = -math.log(u) * mean end
s.p = 1 / mean
local due = now + interval

s.flags = set(set(set(s.flags, F_LEASED, false), F_APPLIED, true), F_CHANGED, I == 1)
save(id, s)
redis.call("ZREM", LEASES, id .. host)
enqueue(host, id, due)
redis.call("HINCRBY", CNT, "fetches", 1)
if I == 1 then redis.call("HINCRBY", CNT, "changes", 1) end

if etag_arg ~= "-" or lm_arg ~= "-" then
  local etag, last_modified, meta = xget(id)
  if etag_arg ~= "-" then etag = string.sub(etag_arg, 2) end
  if lm_arg ~= "-" then last_modified = string.sub(lm_arg, 2) end
  xset(id, etag, last_modified, meta)
end
return {"ok", I, fmt(reported(s)), fmt(due)}
