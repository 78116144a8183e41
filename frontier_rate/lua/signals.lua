-- signals.lua: change evidence that does not come from fetching the page
-- (sitemaps, feeds, pushes), prepended after lib.lua to the scripts of
-- store.SIGNAL_SCRIPTS (hint, observe, refresh, candidates); its functions are
-- fields of lib like lib.lua's. frontier_rate/math/evidence.py states the same rules in
-- Python (tests check the two agree); the constants are evidence.py's, the stored
-- layouts wire.py's (SIGNAL_TALLY).
--   SIGNAL_PAGES  <prefix>sg  hash  page id -> the page's latest claim (SIGNAL_RECORD),
--                                   only for pages some source told about: O(1) per page
--   SIGNAL_TRUST  <prefix>st  hash  host .. "|" .. source -> "<dd" checks, failed checks
-- CNT field signal_sources_ignored counts the (host, source) pairs now ignored.
-- A namespace that was never told anything has neither hash: every function below
-- then finds no record and changes nothing.

-- TRUST_RATIO, PROBATION, FUTURE_SLACK, POSTPONE_MAX: the prelude (evidence.py)
-- claim, received, win_lo, win_hi, flags (1 pending, 2 window open), then the source
-- (SIGNAL_RECORD_SIZE: the prelude)
local SIGNAL_PENDING, SIGNAL_WINDOW = 1, 2
-- host, source, transition of every trust change in this call, for the caller's log
-- (wire.signal_events); hint.lua and observe.lua return it
local SIGNAL_EVENTS = {}
-- host|source -> {checks, failed checks}: tallies read once per call, written at once
-- (a call may check one pair many times)
local SIGNAL_TALLIES = {}
-- host or group -> its co-change record (lib.cochange_get), read once per call, written at
-- once; and "\0" .. page id -> {the key of the page's record, its URL group}
-- (lib.cochange_key), worked out once per call (no host or group starts with "\0")
local COCHANGE_READ = {}
-- per call: begin (lua/lib.lua says what this block may hold) ----------------
-- the two tables above, emptied (lib.lua's emptied: no allocation while they stay unused)
SIGNAL_EVENTS, SIGNAL_TALLIES = emptied(SIGNAL_EVENTS), emptied(SIGNAL_TALLIES)
COCHANGE_READ = emptied(COCHANGE_READ)
-- Whether this shard holds any claim: one EXISTS per call, so a shard never told
-- anything (the common case) pays no HGET per page.
local SIGNAL_PAGES_EXIST = nil
-- per call: end -------------------------------------------------------------

-- The page's latest claim (evidence.Record), or nil when none (or an unreadable one).
function lib.signal_get(id)
  if SIGNAL_PAGES_EXIST == nil then
    SIGNAL_PAGES_EXIST = redis.call("EXISTS", SIGNAL_PAGES) == 1
  end
  if not SIGNAL_PAGES_EXIST then return nil end
  local raw = redis.call("HGET", SIGNAL_PAGES, id)
  if not raw or #raw <= SIGNAL_RECORD_SIZE then return nil end
  local claim, received, lo, hi, flags = sunpack(SIGNAL_RECORD_FORMAT, raw)
  if received ~= received or lo ~= lo or hi ~= hi or flags >= 4 then return nil end
  return {claim = claim, received = received, lo = lo, hi = hi,
    pending = flags % 2 == 1, open = flags >= 2,
    source = string.sub(raw, SIGNAL_RECORD_SIZE + 1)}
end

function lib.signal_save(id, r)
  local flags = 0
  if r.pending then flags = flags + SIGNAL_PENDING end
  if r.open then flags = flags + SIGNAL_WINDOW end
  redis.call("HSET", SIGNAL_PAGES, id,
    spack(SIGNAL_RECORD_FORMAT, r.claim, r.received, r.lo, r.hi, flags) .. r.source)
  SIGNAL_PAGES_EXIST = true
end

-- The tally of (host, source) (evidence.Tally) and its field in SIGNAL_TRUST.
function lib.signal_tally(host, source)
  local key = host .. "|" .. source
  local t = SIGNAL_TALLIES[key]
  if not t then
    local raw = redis.call("HGET", SIGNAL_TRUST, key)
    local checked, bad = 0, 0
    if raw and #raw == 16 then checked, bad = sunpack(SIGNAL_TALLY_FORMAT, raw) end
    if checked ~= checked or bad ~= bad or bad < 0 or checked < bad then checked, bad = 0, 0 end
    t = {checked, bad}
    SIGNAL_TALLIES[key] = t
  end
  return t, key
end

function lib.signal_ignored(t) return t[2] * TRUST_RATIO > t[1] end

-- Whether the claims of `source` about `host`'s pages move schedules (evidence.Tally.trusted).
function lib.signal_trusted(host, source)
  local t = lib.signal_tally(host, source)
  return t[1] >= PROBATION and not lib.signal_ignored(t)
end

-- One check of (host, source): `good` when what a fetch found agrees with the claim
-- (evidence.Tally.check); a change of the pair's ignored state is counted in CNT and
-- listed in SIGNAL_EVENTS.
function lib.signal_check(host, source, good)
  local t, key = lib.signal_tally(host, source)
  -- lib.tally_check's 1 and 2 are evidence.BECAME_IGNORED and BECAME_TRUSTED
  local event = lib.tally_check(t, good, TRUST_RATIO, "signal_sources_ignored")
  redis.call("HSET", SIGNAL_TRUST, key, spack(SIGNAL_TALLY_FORMAT, t[1], t[2]))
  if event > 0 then
    SIGNAL_EVENTS[#SIGNAL_EVENTS + 1] = host
    SIGNAL_EVENTS[#SIGNAL_EVENTS + 1] = source
    SIGNAL_EVENTS[#SIGNAL_EVENTS + 1] = tostring(event)
  end
end

-- The next fetch after a trusted "unchanged as of `received`" claim (evidence.postponed_due).
function lib.postponed_due(due, planned, last_fetch, received)
  return max(due, min(received + planned, last_fetch + POSTPONE_MAX * planned))
end

-- A fetch at `now` after one at `last_fetch` found change I (evidence.on_observe):
-- checks the page's pending claim, opens a change window; returns the age of a
-- dated change the estimator may learn (a trusted claim this fetch confirmed) or nil.
function lib.signal_observe(id, host, I, last_fetch, now)
  local r = lib.signal_get(id)
  if not r then return nil end
  local since = nil
  if r.pending and r.claim < now then
    lib.signal_check(host, r.source, I == 1)
    r.pending = false
    if I == 1 and lib.signal_trusted(host, r.source) then since = now - r.claim end
  end
  if I == 1 then r.lo, r.hi, r.open = last_fetch, now, true end
  lib.signal_save(id, r)
  return since
end

-- The due time of a queued page whose plan is recomputed (refresh.lua): a trusted
-- claim received since its last fetch still holds (evidence.hinted_due,
-- evidence.postponed_due), so a new threshold does not undo it.
function lib.signal_due(id, host, s, due, mean)
  local r = lib.signal_get(id)
  if not r or r.received <= s.last_fetch or not lib.signal_trusted(host, r.source) then
    return due
  end
  if r.pending then return min(due, r.claim) end
  return lib.postponed_due(due, mean, s.last_fetch, r.received)
end

-- Whether a trusted source said, since the page's last fetch, that it has not changed
-- since then (candidates.lua: such a page is not fetched early to spend spare tokens).
function lib.signal_says_fresh(id, host, last_fetch)
  local r = lib.signal_get(id)
  return r ~= nil and not r.pending and r.received > last_fetch
    and lib.signal_trusted(host, r.source)
end

-- Co-change (issue 62): a change seen on one page of a URL group (its host and path template,
-- lib.url_template) as evidence that the group's other pages changed; a page whose group
-- holds fewer than COCHANGE_GROUP_MIN pages counts with its host instead (a site's terms and
-- privacy pages are groups of one). frontier_rate/math/cochange.py states the rules (Tally,
-- value, pulled, record_key) and why. COCHANGE <prefix>cc hash: the record's key (a host,
-- or host .. template: a template starts with "/", which no host holds) -> "<ddddddd" event
-- lo, event hi, checks, hits, expected, confirmed events, hi of the latest confirmed
-- (COCHANGE_FORMAT), O(1) per key; the field "" (lib.cochange_population: no host is named "", a
-- URL has a host) the shard's population tally (lo = hi = 0) that every check also goes into
-- and every tally is shrunk toward (cochange.pooled). A group's pages are indexed by their
-- last fetch in the sorted set <prefix>cg:<host><template> (gkey), so a change event pulls
-- the group's oldest copies, not the host's earliest due. Only with the header's `cochange`
-- (C.cochange).
-- (no local for "": a script's main function may hold 200 locals, the prelude's constants
-- among them)
function lib.cochange_population() return lib.cochange_get("") end

-- The key of page `id`'s co-change record (cochange.record_key): its URL group once the
-- group's index holds COCHANGE_GROUP_MIN pages, its host otherwise.
-- Also returns the page's URL group (nil: no URL), read with it.
function lib.cochange_key(id, host)
  local kept = COCHANGE_READ["\0" .. id]
  if kept then return kept[1], kept[2] end
  local key = host
  local group = lib.cochange_group(id, host)
  if group and redis.call("ZCARD", lib.gkey(group)) >= COCHANGE_GROUP_MIN then key = group end
  COCHANGE_READ["\0" .. id] = {key, group}
  return key, group
end

-- The co-change record under `host` (a host or a group; cochange.Tally); an unreadable one
-- reads as none.
function lib.cochange_get(host)
  local t = COCHANGE_READ[host]
  if t then return t end
  t = {lo = 0, hi = 0, checks = 0, hits = 0, expected = 0, events = 0, confirmed = 0}
  local raw = redis.call("HGET", COCHANGE, host)
  if raw and #raw == COCHANGE_SIZE then
    local lo, hi, checks, hits, expected, events, confirmed = sunpack(COCHANGE_FORMAT, raw)
    if lo == lo and hi == hi and checks == checks and hits == hits and expected == expected
        and events == events and confirmed == confirmed
        and hits >= 0 and checks >= hits and expected >= 0 and events >= 0 then
      t = {lo = lo, hi = hi, checks = checks, hits = hits, expected = expected,
           events = events, confirmed = confirmed}
    end
  end
  COCHANGE_READ[host] = t
  return t
end

-- cochange.pooled: the host's checks, hits and expected plus COCHANGE_POOL_STRENGTH checks at
-- the population's rates, once the population holds COCHANGE_POOL_MIN decayed checks and the
-- host COCHANGE_POOL_EVENTS confirmed events.
function lib.cochange_shrunk(t)
  local p = lib.cochange_population()
  if p.checks < COCHANGE_POOL_MIN - 1e-9 or t.events < COCHANGE_POOL_EVENTS - 1e-9 then
    return t.checks, t.hits, t.expected
  end
  local m = COCHANGE_POOL_STRENGTH / p.checks
  return t.checks + COCHANGE_POOL_STRENGTH, t.hits + m * p.hits, t.expected + m * p.expected
end

-- cochange.Tally.trusted of cochange.pooled(t, population)
function lib.cochange_trusted(t)
  local checks, hits, expected = lib.cochange_shrunk(t)
  return checks >= COCHANGE_PROBATION - 1e-9 and hits >= COCHANGE_MIN_SHARE * checks
    and hits >= COCHANGE_LIFT * expected
end

-- A fetch at `now` of a page of `host` last fetched at `last_fetch` (plan rate `rate`) that
-- found change I (cochange.Tally.observe): a check when the host's event is news to that
-- copy, then, when it changed, the event narrowed (a window that overlaps it) or a new one.
-- Returns whether this is a new event of a trusted host (its other pages may come forward).
function lib.cochange_observe(host, I, last_fetch, now, rate)
  local t = lib.cochange_get(host)
  local write = false
  if t.hi > last_fetch then
    local f = COCHANGE_FORGET
    local e = -lib.expm1(-max(rate, 0) * max(now - last_fetch, 0))
    t.checks = t.checks * f + 1
    t.hits = t.hits * f + I
    t.expected = t.expected * f + e
    if I == 1 and t.confirmed < t.hi then  -- the event's first confirmation
      t.events, t.confirmed = t.events + 1, t.hi
    end
    -- the same check into the shard's population (cochange.observe_population)
    local p, g = lib.cochange_population(), COCHANGE_POOL_FORGET
    p.checks, p.hits, p.expected = p.checks * g + 1, p.hits * g + I, p.expected * g + e
    p.dirty = true
    write = true
  end
  local new = false
  if I == 1 then
    if last_fetch < t.hi then  -- the same event, its window narrowed
      t.lo = max(t.lo, last_fetch)
    else
      t.lo, t.hi, new = last_fetch, now, true
    end
    write = true
  end
  if write then t.dirty = true end  -- written once per call (lib.cochange_flush)
  return new and lib.cochange_trusted(t)
end

-- Write the co-change records this call changed: one HSET per host, however many of its
-- pages the call observed (observe.lua, before lib.finish).
function lib.cochange_flush()
  local fields = {}
  for host, t in pairs(COCHANGE_READ) do
    if type(t) == "table" and t.dirty then
      fields[#fields + 1] = host
      fields[#fields + 1] = spack(COCHANGE_FORMAT, t.lo, t.hi, t.checks, t.hits, t.expected,
        t.events, t.confirmed)
      t.dirty = false
    end
  end
  for i = 1, #fields, 1000 do
    redis.call("HSET", COCHANGE, unpack(fields, i, math.min(i + 999, #fields)))
  end
end

-- What a fetch of queued page s of `host` is worth by its host's co-change evidence
-- (cochange.value: q * w_eff while the host is trusted and its event is news to the copy; 0
-- otherwise, and for a page never fetched or a source).
function lib.cochange_value(id, host, s)
  if not C.cochange or s.fetches == 0 or lib.has(s.flags, F_SOURCE) then return 0 end
  local t = lib.cochange_get(lib.cochange_key(id, host))
  if t.hi <= s.last_fetch or not lib.cochange_trusted(t) then return 0 end
  local checks, hits = lib.cochange_shrunk(t)
  return hits / checks * lib.eff_weight(s.weight, lib.plan_rate(s))
end

-- After a change of page `id` of `host` at `now` that is a trusted new event of its record
-- `key`: the other pages that the event makes worth their host's threshold are due at once
-- (cochange.pulled): of a group, the COCHANGE_GROUP_LOOK with the oldest copies (the event
-- is news to them; a leased one is passed over, one no longer in the frontier leaves the
-- index); of a host, its COCHANGE_PULL_LOOK earliest due. Returns how many.
function lib.cochange_pull(key, host, id, now)
  local nu = lib.host_nu(host)
  local look
  local grouped = key ~= host
  if grouped then
    -- fetched (a score of 0: never; such a page has no copy to bring up to date), before now
    look = redis.call("ZRANGEBYSCORE", lib.gkey(key), "(0", "(" .. lib.us(now), "LIMIT", 0,
      COCHANGE_GROUP_LOOK)
  else
    look = redis.call("ZRANGE", qkey(host), 0, COCHANGE_PULL_LOOK - 1)
  end
  local pulled = 0
  for _, other in ipairs(look) do
    if other ~= id then
      -- only a queued page (a leased one is not in its host's queue) is read as one
      local due = redis.call("ZSCORE", qkey(host), other)
      local s = due and lib.seconds(due) > now and lib.peek_queued(other, host)
      if not due and grouped and redis.call("HEXISTS", skey(other), other) == 0 then
        redis.call("ZREM", lib.gkey(key), other)  -- gone from the frontier: out of its group too
      elseif s and s.fails == 0 and lib.cochange_value(other, host, s) >= nu then
        lib.enqueue(host, other, now)
        pulled = pulled + 1
      end
    end
  end
  return pulled
end
