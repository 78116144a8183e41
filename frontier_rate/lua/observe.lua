-- observe.lua: fetch results, each one atomic step (DESIGN §2-3): change
-- indicator, estimator update, next due time, re-queue.
-- ARGV after the header: groups of 9: id, host, token, fetched_at, fingerprint
-- digest ("" = none), not_modified ("1"/"0"), etag and last_modified ("-" = not
-- given, "=" .. value), u (uniform in (0, 1] for the exponential draw).
-- Accepted once per lease token: the page must hold an open lease with this
-- token. A replay of the token that was applied returns the same result and
-- changes nothing; any other token (an expired lease, re-leased or not) is
-- "stale" and changes nothing.
-- Returns per group: status (ok | replay | stale | missing), changed, estimate, next_due.

local function observe_one(id, host, token, now, fp, not_modified, etag_arg, lm_arg, u)
  local s = load(id)
  if not s then return "missing", 0, "0", "0" end
  if s.leases ~= token or not has(s.flags, F_LEASED) then
    local status = "stale"
    if s.leases == token and has(s.flags, F_APPLIED) then status = "replay" end
    local changed = 0
    if has(s.flags, F_CHANGED) then changed = 1 end
    return status, changed, fmt(reported(s)), redis.call("ZSCORE", qkey(host), id) or "0"
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

  if etag_arg ~= "-" or lm_arg ~= "-" then
    local etag, last_modified, meta = xget(id)
    if etag_arg ~= "-" then etag = string.sub(etag_arg, 2) end
    if lm_arg ~= "-" then last_modified = string.sub(lm_arg, 2) end
    xset(id, etag, last_modified, meta)
  end
  return "ok", I, fmt(reported(s)), fmt(due)
end

local out = {}
local fetches, changes = 0, 0
for i = H + 1, #ARGV, 9 do
  local status, changed, est, due = observe_one(ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2]),
    tonumber(ARGV[i + 3]), ARGV[i + 4], ARGV[i + 5] == "1", ARGV[i + 6], ARGV[i + 7],
    tonumber(ARGV[i + 8]))
  if status == "ok" then
    fetches = fetches + 1
    changes = changes + changed
  end
  out[#out + 1] = status
  out[#out + 1] = changed
  out[#out + 1] = est
  out[#out + 1] = due
end
if fetches > 0 then redis.call("HINCRBY", CNT, "fetches", fetches) end
if changes > 0 then redis.call("HINCRBY", CNT, "changes", changes) end
return finish(out)
