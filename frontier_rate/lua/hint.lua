-- hint.lua: claims about pages from sources other than fetching them (sitemaps,
-- feeds, pushes; frontier_rate/evidence.py states the rules, lua/signals.lua
-- holds the checks). ARGV after the header: groups of 4: id, host, claimed last
-- change time (seconds on the frontier's clock; "" = "changed, time unknown",
-- taken as now), source.
-- Per claim: a future date fails its source's check at once; a claim after a
-- fetch that found a change is checked against that change's window; a claim
-- "changed since the last fetch" is kept for the next fetch to check and, from a
-- trusted (host, source), makes the page due at once (due = the claimed change
-- time when earlier); "unchanged since the last fetch" from a trusted pair moves
-- the next fetch later (evidence.postponed_due). Gone, quarantined and unknown
-- pages are left alone (the caller may add unknown ones).
-- Returns {one byte per claim (evidence.OUTCOMES), SIG_EVENTS}.
local UNKNOWN, IGNORED_PAGE, NEW, DUE, HELD, POSTPONED, UNCHANGED, FUTURE, PENDING =
  0, 1, 2, 3, 4, 5, 6, 7, 8
local now = C.now
local out = {}
local received = 0
for i = H + 1, #ARGV, 4 do
  local id, host, claim, source = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2]), ARGV[i + 3]
  local c = claim or now
  local outcome
  local s, problem = load_state(id)
  if problem or (not s and redis.call("HEXISTS", BAD, id) == 1) then
    outcome = IGNORED_PAGE
  elseif not s then
    outcome = UNKNOWN
  elseif has(s.flags, F_GONE) then
    outcome = IGNORED_PAGE
  elseif c > now + FUTURE_SLACK then
    sig_check(host, source, false)
    outcome = FUTURE
  else
    received = received + 1
    local r = sig_get(id) or {claim = c, received = now, lo = 0, hi = 0, pending = false,
      open = false, source = source}
    if r.open and r.hi <= now then
      sig_check(host, source, c > r.lo)
      r.open = false
    end
    local trusted = sig_trusted(host, source)
    local leased = has(s.flags, F_LEASED)
    if s.fetches == 0 then
      r.claim, r.source, r.received, r.pending = c, source, now, false
      outcome = NEW
    elseif c > s.last_fetch then
      r.claim, r.source, r.received, r.pending = c, source, now, true
      if leased then
        outcome = PENDING
      elseif trusted then
        outcome = DUE
        local score = redis.call("ZSCORE", qkey(host), id)
        if score then
          local due = seconds(score)
          local moved = math.min(due, c, now)
          if moved < due then enqueue(host, id, moved) end
        end
      else
        outcome = HELD
      end
    else
      if r.pending then
        r.received = now
      else
        r.claim, r.source, r.received = c, source, now
      end
      if leased or not trusted then
        outcome = UNCHANGED
      else
        outcome = POSTPONED
        local score = redis.call("ZSCORE", qkey(host), id)
        if score then
          local due = seconds(score)
          local planned = planned_interval(s.weight, plan_rate(s), host_nu(host))
          local later = math.max(due, math.min(now + planned, s.last_fetch + POSTPONE_MAX * planned))
          if later > due then enqueue(host, id, later) end
        end
      end
    end
    sig_save(id, r)
  end
  out[#out + 1] = string.char(outcome)
end
if received > 0 then redis.call("HINCRBY", CNT, "claims", received) end
return finish({table.concat(out), SIG_EVENTS})
