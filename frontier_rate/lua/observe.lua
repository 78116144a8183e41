-- observe.lua: fetch results, each one atomic step (DESIGN §2-3): change
-- indicator, estimator update, next due time, re-queue.
-- ARGV after the header: one packed string per fetch (engine.OBSERVATION):
-- "<c8I2dBdc4I2I2I2" = id, token, fetched_at, bits (1 not_modified,
-- 2 fingerprint given, 4 etag given, 8 last_modified given), u (uniform in
-- (0, 1] for the exponential draw), fingerprint digest, lengths of host, etag,
-- last_modified; then those three strings.
-- Accepted once per lease token: the page must hold an open lease with this
-- token. A replay of the token that was applied returns the same result and
-- changes nothing; any other token (an expired lease, re-leased or not) is
-- "stale" and changes nothing.
-- A page whose state is corrupt is quarantined (and the observation dropped);
-- the other fetches of the batch go on.
-- Returns per fetch a packed "<BBdd": status (0 ok, 1 replay, 2 stale, 3 missing,
-- 4 quarantined), changed, estimate, next_due (0 when not queued), followed by
-- the reason when quarantined.

local OK, REPLAY, STALE, MISSING, QUARANTINE = 0, 1, 2, 3, 4

local function observe_one(id, host, token, now, fp, not_modified, etag_arg, lm_arg, u)
  local s, problem, raw = load_state(id)
  if problem then
    quarantine(id, host, problem, raw, false)
    return QUARANTINE, 0, 0, 0, problem
  end
  if not s then
    local reason = quarantine_reason(id)
    if reason then return QUARANTINE, 0, 0, 0, reason end
    return MISSING, 0, 0, 0
  end
  if s.leases ~= token or not has(s.flags, F_LEASED) then
    local status = STALE
    if s.leases == token and has(s.flags, F_APPLIED) then status = REPLAY end
    local changed = 0
    if has(s.flags, F_CHANGED) then changed = 1 end
    return status, changed, reported(s), seconds(redis.call("ZSCORE", qkey(host), id) or "0")
  end

  -- change indicator: the first fetch is no change; 304 is no change
  local I = 0
  if s.fetches > 0 and not not_modified and fp ~= "" and fp ~= s.fp then I = 1 end
  if fp ~= "" then s.fp = fp end

  local old_rate = plan_rate(s)
  local old_pooled = pooled_log_rate(s)
  if s.fetches > 0 then
    update_estimate(s, I, s.p, now - s.last_fetch, s.fetches - 1, host_log_prior(host, old_pooled))
  end
  s.fetches = s.fetches + 1
  s.changes = s.changes + I
  s.last_fetch = now
  s.fails, s.notfound = 0, 0
  local new_rate = plan_rate(s)
  agg_move(s.weight, old_rate, s.weight, new_rate, host)
  host_pool_move(host, old_pooled, pooled_log_rate(s))

  -- next due: exponential with the planned mean for lln/sa/sam (their Poisson
  -- assumption, docs/ARCHITECTURE.md), the planned interval itself for `interval`
  local mean = planned_interval(s.weight, new_rate, host_nu(host))
  local interval = mean
  if C.estimator ~= "interval" then interval = -math.log(u) * mean end
  s.p = 1 / mean
  local due = now + interval

  s.flags = set(set(set(s.flags, F_LEASED, false), F_APPLIED, true), F_CHANGED, I == 1)
  save(id, s)
  redis.call("ZREM", LEASES, id .. host)
  due = enqueue(host, id, due)

  if etag_arg or lm_arg then
    local etag, last_modified, meta = xget(id)
    if etag == nil then etag, last_modified, meta = "", "", "" end  -- malformed: replaced
    xset(id, etag_arg or etag, lm_arg or last_modified, meta)
  end
  return OK, I, reported(s), due
end

local out = {}
local fetches, changes = 0, 0
for i = H + 1, #ARGV do
  local arg = ARGV[i]
  local id, token, now, bits, u, fp, lh, le, ll = struct.unpack("<c8I2dBdc4I2I2I2", arg)
  local host = string.sub(arg, 38, 37 + lh)
  local etag, last_modified = nil, nil
  if bits % 8 >= 4 then etag = string.sub(arg, 38 + lh, 37 + lh + le) end
  if bits >= 8 then last_modified = string.sub(arg, 38 + lh + le, 37 + lh + le + ll) end
  if bits % 4 < 2 then fp = "" end
  local status, changed, est, due, reason = observe_one(id, host, token, now, fp,
    bits % 2 == 1, etag, last_modified, u)
  if status == OK then
    fetches = fetches + 1
    changes = changes + changed
  end
  out[#out + 1] = struct.pack("<BBdd", status, changed, est, due) .. (reason or "")
end
if fetches > 0 then redis.call("HINCRBY", CNT, "fetches", fetches) end
if changes > 0 then redis.call("HINCRBY", CNT, "changes", changes) end
return finish(out)
