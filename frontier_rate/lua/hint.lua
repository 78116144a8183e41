-- hint.lua: claims about pages from sources other than fetching them (sitemaps,
-- feeds, pushes; frontier_rate/math/evidence.py states the rules, lua/signals.lua
-- holds the checks). ARGV after the header: groups of 4 (wire.hint_args): id, host,
-- claimed last change time (seconds on Redis's clock; "" = "changed, time unknown",
-- taken as now), source.
-- Per claim: a future date fails its source's check at once; a claim after a
-- fetch that found a change is checked against that change's window; a claim
-- "changed since the last fetch" is kept for the next fetch to check and, from a
-- trusted (host, source), makes the page due at once (due = the claimed change
-- time when earlier); "unchanged since the last fetch" from a trusted pair moves
-- the next fetch later (lib.postponed_due). Gone, quarantined and unknown
-- pages are left alone (the caller may add unknown ones).
-- Returns {one byte per claim (evidence.OUTCOMES: wire.hint_outcomes), SIGNAL_EVENTS}.
local UNKNOWN, IGNORED_PAGE, NEW, DUE, HELD, POSTPONED, UNCHANGED, FUTURE, PENDING =
  0, 1, 2, 3, 4, 5, 6, 7, 8
local now = C.now

-- A "changed since the last fetch" claim `c` about a fetched page (record r).
local function changed_claim(id, host, s, r, c, source, trusted)
  r.claim, r.source, r.received, r.pending = c, source, now, true
  if lib.has(s.flags, F_LEASED) then return PENDING end
  if not trusted then return HELD end
  local score = redis.call("ZSCORE", qkey(host), id)
  if score then
    local due = lib.seconds(score)
    local moved = min(due, c, now)  -- evidence.hinted_due
    if moved < due then lib.enqueue(host, id, moved) end
  end
  return DUE
end

-- An "unchanged since the last fetch" claim `c` about a fetched page (record r).
local function unchanged_claim(id, host, s, r, c, source, trusted)
  if r.pending then  -- a pending claim of another fetch stays pending
    r.received = now
  else
    r.claim, r.source, r.received = c, source, now
  end
  if lib.has(s.flags, F_LEASED) or not trusted then return UNCHANGED end
  local score = redis.call("ZSCORE", qkey(host), id)
  if score then
    local due = lib.seconds(score)
    local planned = lib.planned_interval(s.weight, lib.plan_rate(s), lib.host_nu(host))
    local later = lib.postponed_due(due, planned, s.last_fetch, now)
    if later > due then lib.enqueue(host, id, later) end
  end
  return POSTPONED
end

local out = {}
local received = 0
for i = H + 1, #ARGV, 4 do
  local id, host, claim, source = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2]), ARGV[i + 3]
  local c = claim or now
  local outcome
  local s, problem = lib.load_state(id)
  if problem or (not s and redis.call("HEXISTS", BAD, id) == 1) then
    outcome = IGNORED_PAGE
  elseif not s then
    outcome = UNKNOWN
  elseif lib.has(s.flags, F_GONE) then
    outcome = IGNORED_PAGE
  elseif c > now + FUTURE_SLACK then
    lib.signal_check(host, source, false)
    outcome = FUTURE
  else
    received = received + 1
    local r = lib.signal_get(id) or {claim = c, received = now, lo = 0, hi = 0,
      pending = false, open = false, source = source}
    if r.open and r.hi <= now then
      lib.signal_check(host, source, c > r.lo)
      r.open = false
    end
    local trusted = lib.signal_trusted(host, source)
    if s.fetches == 0 then
      r.claim, r.source, r.received, r.pending = c, source, now, false
      outcome = NEW
    elseif c > s.last_fetch then
      outcome = changed_claim(id, host, s, r, c, source, trusted)
    else
      outcome = unchanged_claim(id, host, s, r, c, source, trusted)
    end
    lib.signal_save(id, r)
  end
  out[#out + 1] = string.char(outcome)
end
if received > 0 then redis.call("HINCRBY", CNT, "claims", received) end
return lib.finish({table.concat(out), SIGNAL_EVENTS})
