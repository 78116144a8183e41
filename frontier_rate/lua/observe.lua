-- observe.lua: fetch results, each one atomic step (docs/MATH.md): change
-- indicator, estimator update, next due time, re-queue.
-- ARGV after the header: one packed string per fetch (wire.observation):
-- "<c8I2dBdc4I2I2I2d" = id, token, fetched_at, bits (1 not_modified,
-- 2 fingerprint given, 4 etag given, 8 last_modified given, 16 changed_at
-- given, 32 a confirmed claim of a trusted source (lua/signals.lua) may date the
-- change: wire.CLAIM_DATES, 64 the new copy is F_UNSETTLED until settle.lua:
-- wire.SETTLE_LATER), u (uniform in (0, 1] for the exponential draw), fingerprint digest, lengths of host, etag, last_modified, changed_at (the page's
-- last change time the server told: Last-Modified or a sitemap lastmod); then those
-- three strings.
-- Accepted once per lease token: the page must hold an open lease with this
-- token. A replay of the token that was applied returns the same result and
-- changes nothing; any other token (an expired lease, re-leased or not) is
-- "stale" and changes nothing.
-- A page whose state is corrupt is quarantined (and the observation dropped);
-- the other fetches of the batch go on.
-- Returns {one string: per fetch a packed "<BBddBI2": status (0 ok, 1 replay, 2 stale,
-- 3 missing, 4 quarantined), changed (1 also for a page unsettle.lua marked), estimate,
-- next_due (0 when not queued), date bits (1 the change time was learned, 2 this fetch
-- made the host's dates ignored, 4 trusted again, 8 the change time came from a claim:
-- sitemap, feed, push), length of the reason, then the reason (when quarantined); SIGNAL_EVENTS
-- (lua/signals.lua: trust changes of (host, source) pairs)} (wire.observe_replies).

local OK, REPLAY, STALE, MISSING, QUARANTINED = 0, 1, 2, 3, 4

-- Change dates (Last-Modified) per host: DATES hash, host -> "<dd" dates
-- checked, dates contradicted. A date is checked against the content: it must
-- say "changed since the previous fetch" exactly when the fingerprint changed,
-- and lie before the fetch (not in the future, not "now": servers that stamp
-- every answer with the current time give an age of 0, dates.change_time). A host whose
-- contradicted dates exceed 1 in DATE_TRUST is ignored (counted in CNT
-- date_hosts_ignored) until its record is clean again; a date that fails its
-- own check is never used.
-- DATE_TRUST: the prelude (contract.DATE_TRUST)
local DATE_USED, DATES_IGNORED, DATES_TRUSTED, DATE_CLAIMED = 1, 2, 4, 8

local function host_dates(host)
  local raw = redis.call("HGET", DATES, host)
  if not raw or #raw ~= 16 then return 0, 0 end
  local checked, bad = struct.unpack(DATE_TALLY_FORMAT, raw)
  if checked ~= checked or bad ~= bad or bad < 0 or checked < bad then return 0, 0 end
  return checked, bad
end

-- Check a change date of `host`; returns the time from the change to `now`
-- when it may be learned (nil otherwise) and the date bits of the reply.
local function check_date(host, changed_at, I, last_fetch, now)
  local says_changed = changed_at > last_fetch
  local good = says_changed == (I == 1) and changed_at < now
  local tally = {host_dates(host)}
  local event = lib.tally_check(tally, good, DATE_TRUST, "date_hosts_ignored")
  redis.call("HSET", DATES, host, struct.pack(DATE_TALLY_FORMAT, tally[1], tally[2]))
  local trusted = tally[2] * DATE_TRUST <= tally[1]
  local bits = 0
  if event == 1 then bits = DATES_IGNORED elseif event == 2 then bits = DATES_TRUSTED end
  if good and trusted and I == 1 then
    return now - changed_at, bits + DATE_USED
  end
  return nil, bits
end

-- lease set members of the pages observed, removed with one ZREM at the end
local FINISHED_LEASES, finished = {}, 0

local function observe_one(id, host, token, now, fp, not_modified, etag_arg, lm_arg, u,
    changed_at, claim_dates, settle_later)
  local s, problem, raw = lib.load_state(id)
  if problem then
    lib.quarantine(id, host, problem, raw, false)
    return QUARANTINED, 0, 0, 0, 0, problem
  end
  if not s then
    local reason = lib.quarantine_reason(id)
    if reason then return QUARANTINED, 0, 0, 0, 0, reason end
    return MISSING, 0, 0, 0, 0
  end
  if s.leases ~= token or not lib.has(s.flags, F_LEASED) then
    local status = STALE
    if s.leases == token and lib.has(s.flags, F_APPLIED) then status = REPLAY end
    local changed = 0
    if lib.has(s.flags, F_CHANGED) then changed = 1 end
    local queued = redis.call("ZSCORE", qkey(host), id) or "0"
    return status, changed, lib.reported(s), lib.seconds(queued), 0
  end

  -- change indicator: the first fetch is no change; 304 is no change
  local I = 0
  if s.fetches > 0 and not not_modified and fp ~= "" and fp ~= s.fp then I = 1 end
  -- the last copy never got through the crawler (unsettle.lua): reported changed, so that
  -- the crawler processes this one; the estimator still learns I
  local reported = I
  if lib.has(s.flags, F_UNSETTLED) then reported = 1 end
  if fp ~= "" then s.fp = fp end
  local since, date_bits = nil, 0
  if changed_at and s.fetches > 0 then
    since, date_bits = check_date(host, changed_at, I, s.last_fetch, now)
  end
  if s.fetches > 0 then
    -- claims of sitemaps, feeds and pushes about this page, checked by this fetch
    local claimed = lib.signal_observe(id, host, I, s.last_fetch, now)
    if claimed and not since and claim_dates then
      since = claimed
      date_bits = date_bits + DATE_USED + DATE_CLAIMED
    end
  end

  local stored_rate = lib.plan_rate(s)
  local old_rate = stored_rate
  local group = lib.page_group(id, host)  -- its URL group's pool (nil: C.group_prior off)
  -- no observed interval yet: the pooled prior as it is now
  if lib.follow_prior(s, host, group) then old_rate = lib.plan_rate(s) end
  -- co-change (lua/signals.lua, math/cochange.py): a page's fetch checks its group's (or
  -- host's) last change event; a change is the group's new event, and on a trusted group
  -- brings its other pages forward (below, once this page is queued)
  local pull = false
  if C.cochange and not lib.has(s.flags, F_SOURCE) then
    local key, cc_group = lib.cochange_key(id, host)
    if s.fetches > 0 then pull = lib.cochange_observe(key, I, s.last_fetch, now, old_rate) end
    lib.cochange_track(id, host, now, cc_group)  -- its group's index (the key is kept per call)
  end
  local old_pooled = lib.pooled_log_rate(s, old_rate)
  local tau = now - s.last_fetch
  if s.fetches > 0 then
    lib.update_estimate(s, I, s.p, tau, s.fetches - 1, lib.group_log_prior(host, group, old_pooled),
      since)
  end
  s.fetches = s.fetches + 1
  s.changes = s.changes + I
  s.last_fetch = now
  s.fails, s.notfound = 0, 0
  local new_rate = lib.plan_rate(s)
  if lib.in_aggregates(s) then lib.agg_move(s.weight, stored_rate, s.weight, new_rate, host) end
  lib.host_pool_move(host, old_pooled, lib.pooled_log_rate(s, new_rate), group)

  -- next due: exponential with the planned mean for lln/sa/sam (their Poisson
  -- assumption, docs/MATH.md "Inside the engine"); for `interval` the planned interval
  -- itself, moved onto the page's rhythm or followed up after a burst when its
  -- dated changes show one (pattern.py)
  local mean = lib.page_interval(s, new_rate, lib.host_nu(host))
  s.p = 1 / mean
  local due
  if C.estimator == "interval" then
    local m = lib.pattern_get(id)
    if m or since then
      m = lib.follow_up_outcome(m, I, tau, old_rate)
      if since then m = lib.pattern_update(m, now - since) end
      due = lib.aligned_due(m, now + mean, now + C.min_interval)
      due = lib.burst_due(m, due, now, since, new_rate)
      lib.pattern_save(id, m)
    else
      due = now + mean
    end
  else
    due = now - math.log(u) * mean
  end

  -- leased, changed and unsettled cleared, gone and source kept, applied set, changed = I;
  -- a new copy the crawler has yet to process is unsettled until settle.lua
  local source = 0
  if lib.has(s.flags, F_SOURCE) then source = F_SOURCE end
  if settle_later and not not_modified then source = source + F_UNSETTLED end
  s.flags = s.flags % 4 - s.flags % 2 + F_APPLIED + F_CHANGED * I + source
  lib.save(id, s)
  finished = finished + 1
  FINISHED_LEASES[finished] = id .. host
  due = lib.enqueue(host, id, due)
  if pull then
    local pulled = lib.cochange_pull(lib.cochange_key(id, host), host, id, now)
    if pulled > 0 then redis.call("HINCRBY", CNT, "cochange_pulls", pulled) end
  end

  -- validators: a 304 keeps those it does not send again; any other answer replaces both,
  -- so one the server stopped sending is not sent back (issue 60)
  if etag_arg or lm_arg or not not_modified then
    local etag, last_modified, meta = lib.xget(id)
    local malformed = etag == nil
    if malformed then etag, last_modified, meta = "", "", "" end  -- malformed: replaced
    local new_etag, new_lm = etag_arg or "", lm_arg or ""
    if not_modified then new_etag, new_lm = etag_arg or etag, lm_arg or last_modified end
    if malformed or new_etag ~= etag or new_lm ~= last_modified then
      lib.xset(id, new_etag, new_lm, meta)
    end
  end
  return OK, reported, lib.reported(s), due, date_bits, nil, I
end

local out, n_out = {}, 0
local fetches, changes, dated = 0, 0, 0
for i = H + 1, #ARGV do
  local arg = ARGV[i]
  local id, token, now, bits, u, fp, lh, le, ll, changed_at =
    struct.unpack(OBSERVATION_FORMAT, arg)
  local host = string.sub(arg, 46, 45 + lh)
  local etag, last_modified = nil, nil
  if bits % 8 >= 4 then etag = string.sub(arg, 46 + lh, 45 + lh + le) end
  if bits % 16 >= 8 then last_modified = string.sub(arg, 46 + lh + le, 45 + lh + le + ll) end
  if bits % 4 < 2 then fp = "" end
  if bits % 32 < 16 or changed_at ~= changed_at then changed_at = nil end
  local status, changed, est, due, date_bits, reason, learned = observe_one(id, host, token,
    now, fp, bits % 2 == 1, etag, last_modified, u, changed_at, bits % 64 >= 32, bits >= 64)
  if status == OK then
    fetches = fetches + 1
    changes = changes + learned
    dated = dated + date_bits % 2
  end
  n_out = n_out + 1
  if reason then
    out[n_out] = struct.pack(OBSERVE_REPLY_FORMAT, status, changed, est, due, date_bits, #reason) .. reason
  else
    out[n_out] = struct.pack(OBSERVE_REPLY_FORMAT, status, changed, est, due, date_bits, 0)
  end
end
for i = 1, finished, 1000 do
  redis.call("ZREM", LEASES, unpack(FINISHED_LEASES, i, math.min(i + 999, finished)))
end
if fetches > 0 then redis.call("HINCRBY", CNT, "fetches", fetches) end
if changes > 0 then redis.call("HINCRBY", CNT, "changes", changes) end
if dated > 0 then redis.call("HINCRBY", CNT, "dated_changes", dated) end
if C.cochange then lib.cochange_flush() end
return lib.finish({table.concat(out), SIGNAL_EVENTS})
