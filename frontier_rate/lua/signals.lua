-- signals.lua: change evidence that does not come from fetching the page
-- (sitemaps, feeds, pushes), prepended after lib.lua to hint.lua and observe.lua
-- by store.py. frontier_rate/evidence.py states the same rules in Python (tests
-- check the two agree); the constants are evidence.py's.
--   <prefix>sg  hash  page id -> the page's latest claim (SIG_RECORD), only for
--                     pages some source told about: O(1) per page
--   <prefix>st  hash  host .. "|" .. source -> "<dd" checks, failed checks
-- CNT field signal_sources_ignored counts the (host, source) pairs now ignored.

local SIG_PAGES, SIG_TRUST = PREFIX .. "sg", PREFIX .. "st"
local TRUST_RATIO, PROBATION, FUTURE_SLACK, POSTPONE_MAX = 10, 3, 60, 16
-- claim, received, win_lo, win_hi, flags (1 pending, 2 window open), then the source
local SIG_RECORD = "<ddddB"
local SIG_PENDING, SIG_WINDOW = 1, 2
local SIG_BECAME_IGNORED, SIG_BECAME_TRUSTED = 1, 2
-- host, source, transition of every trust change in this call (for the caller's log)
local SIG_EVENTS = {}

local function sig_get(id)
  local raw = redis.call("HGET", SIG_PAGES, id)
  if not raw or #raw <= struct.size(SIG_RECORD) then return nil end
  local claim, received, lo, hi, flags = struct.unpack(SIG_RECORD, raw)
  if received ~= received or lo ~= lo or hi ~= hi or flags >= 4 then return nil end
  return {claim = claim, received = received, lo = lo, hi = hi,
    pending = flags % 2 == 1, open = flags >= 2,
    source = string.sub(raw, struct.size(SIG_RECORD) + 1)}
end

local function sig_save(id, r)
  local flags = 0
  if r.pending then flags = flags + SIG_PENDING end
  if r.open then flags = flags + SIG_WINDOW end
  redis.call("HSET", SIG_PAGES, id,
    struct.pack(SIG_RECORD, r.claim, r.received, r.lo, r.hi, flags) .. r.source)
end

-- tallies read once per call, written at once (a call may check one pair many times)
local SIG_TALLIES = {}
local function sig_tally(host, source)
  local key = host .. "|" .. source
  local t = SIG_TALLIES[key]
  if not t then
    local raw = redis.call("HGET", SIG_TRUST, key)
    local checked, bad = 0, 0
    if raw and #raw == 16 then checked, bad = struct.unpack("<dd", raw) end
    if checked ~= checked or bad ~= bad or bad < 0 or checked < bad then checked, bad = 0, 0 end
    t = {checked, bad}
    SIG_TALLIES[key] = t
  end
  return t, key
end

local function sig_ignored(t) return t[2] * TRUST_RATIO > t[1] end
local function sig_trusted(host, source)
  local t = sig_tally(host, source)
  return t[1] >= PROBATION and not sig_ignored(t)
end

local function sig_check(host, source, good)
  local t, key = sig_tally(host, source)
  local before = sig_ignored(t)
  t[1] = t[1] + 1
  if not good then t[2] = t[2] + 1 end
  redis.call("HSET", SIG_TRUST, key, struct.pack("<dd", t[1], t[2]))
  local after = sig_ignored(t)
  local event = 0
  if after and not before then
    event = SIG_BECAME_IGNORED
    redis.call("HINCRBY", CNT, "signal_sources_ignored", 1)
  elseif before and not after then
    event = SIG_BECAME_TRUSTED
    redis.call("HINCRBY", CNT, "signal_sources_ignored", -1)
  end
  if event > 0 then
    SIG_EVENTS[#SIG_EVENTS + 1] = host
    SIG_EVENTS[#SIG_EVENTS + 1] = source
    SIG_EVENTS[#SIG_EVENTS + 1] = tostring(event)
  end
end

-- A fetch at `now` after one at `last_fetch` found change I (evidence.on_observe):
-- checks the page's pending claim, opens a change window; returns the age of a
-- dated change the estimator may learn (a trusted claim this fetch confirmed) or nil.
local function signal_observe(id, host, I, last_fetch, now)
  local r = sig_get(id)
  if not r then return nil end
  local since = nil
  if r.pending and r.claim < now then
    sig_check(host, r.source, I == 1)
    r.pending = false
    if I == 1 and sig_trusted(host, r.source) then since = now - r.claim end
  end
  if I == 1 then r.lo, r.hi, r.open = last_fetch, now, true end
  sig_save(id, r)
  return since
end

-- The due time of a queued page whose plan is recomputed (refresh.lua): a trusted
-- claim received since its last fetch still holds (evidence.hinted_due,
-- evidence.postponed_due), so a new threshold does not undo it.
local function signal_due(id, host, s, due, mean)
  local r = sig_get(id)
  if not r or r.received <= s.last_fetch or not sig_trusted(host, r.source) then return due end
  if r.pending then return math.min(due, r.claim) end
  return math.max(due, math.min(r.received + mean, s.last_fetch + POSTPONE_MAX * mean))
end

-- Whether a trusted source said, since the page's last fetch, that it has not changed
-- since then (candidates.lua: such a page is not fetched early to spend spare tokens).
local function signal_says_fresh(id, host, last_fetch)
  local r = sig_get(id)
  return r ~= nil and not r.pending and r.received > last_fetch and sig_trusted(host, r.source)
end
