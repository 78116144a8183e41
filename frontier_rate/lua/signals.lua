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
local SIGNAL_RECORD = SIGNAL_RECORD_FORMAT
local SIGNAL_PENDING, SIGNAL_WINDOW = 1, 2
-- host, source, transition of every trust change in this call, for the caller's log
-- (wire.signal_events); hint.lua and observe.lua return it
local SIGNAL_EVENTS = {}
-- host|source -> {checks, failed checks}: tallies read once per call, written at once
-- (a call may check one pair many times)
local SIGNAL_TALLIES = {}
-- per call: begin (lua/lib.lua says what this block may hold) ----------------
-- the two tables above, emptied (lib.lua's emptied: no allocation while they stay unused)
SIGNAL_EVENTS, SIGNAL_TALLIES = emptied(SIGNAL_EVENTS), emptied(SIGNAL_TALLIES)
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
  local claim, received, lo, hi, flags = sunpack(SIGNAL_RECORD, raw)
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
    spack(SIGNAL_RECORD, r.claim, r.received, r.lo, r.hi, flags) .. r.source)
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
