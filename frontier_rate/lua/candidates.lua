-- candidates.lua: give expired leases back, then list dispatch candidates.
-- ARGV after the header: window (candidates to offer at most: ready hosts are looked at
-- in ready order until that many are found), look (pages per host),
-- early ("0": hosts whose head page is due; "1": hosts that may dispatch now
-- but whose pages are not due yet, for tokens no due page can use; pages in a
-- failure backoff are left to their retry time, and a page fetched less than its
-- shortest interval ago (lib.early_interval: min_interval, max_interval for a light
-- source read before, and never before a fetch of it is worth it, lib.worth_wait), or
-- that a trusted sitemap, feed or push says is unchanged since its last fetch
-- (lib.signal_says_fresh, lua/signals.lua), is never fetched early),
-- value_first_reads ("1" where every fetch takes a token, budget_first_fetches: a
-- source never read whose host has other pages queued is held while its index, w_eff, is
-- below its host's threshold, or while it weighs less than one page and either its host's
-- page fetches could not check its claims PROBATION times within max_interval or its host's
-- pages are expected to change less than once per max_interval; it is looked at again
-- max_interval later. A sitemap read costs a page fetch, a host whose pages are
-- known needs it for no discovery, and before its claims are trusted (PROBATION checks
-- against page fetches, lua/signals.lua) they move nothing: one that lists fewer pages than
-- a fetch is worth (the adapters' weight per listed page; 1 until it is read) on a host
-- whose pages are fetched that rarely buys nothing a page fetch would not, and on a quiet
-- host it has nothing to tell. A source alone on its host is read at once, as it is where
-- first fetches are free).
-- For each such host, returns the page with the highest index among its
-- `look` earliest-due ones: host, id, index. Where the namespace's default delay
-- is 0, a host whose delay is 0 may take several fetches at once, so each of those
-- `look` pages is a candidate (the engine ranks them all; lease.lua re-checks the
-- host's next dispatch per page).
-- Read-only apart from the lease reclaim and quarantining corrupt pages; a
-- page's state is peeked at (peek_queued: the fields the index needs) and
-- lease.lua re-checks everything.
-- Returns {one string of packed candidates, each "<dI2" index, length of host, then the
-- 8-byte id and the host (wire.candidates); NEWLY_QUARANTINED (url, reason pairs); the
-- shard's earliest time with work after this call (lib.lua earliest)}.
local window, look = tonumber(ARGV[H + 1]), tonumber(ARGV[H + 2])
local early = ARGV[H + 3] == "1"
local value_first_reads = ARGV[H + 4] == "1"
local now = C.now
local CHECK_LOOK = 8  -- pages of a host whose planned fetches too_few_checks sums
local now_us = lib.us(now)
lib.reclaim(now, 1000)
lib.finish(nil)  -- re-score the hosts of reclaimed pages before looking at them
local out = {}

-- Do the pages of `host` plan fewer than PROBATION fetches per max_interval (their planned
-- rates s.p, summed over the CHECK_LOOK earliest due; a source's fetches check nothing)?
local function too_few_checks(host)
  local planned = 0
  for _, other in ipairs(redis.call("ZRANGE", qkey(host), 0, CHECK_LOOK - 1)) do
    local o = lib.load_state(other)
    if o and not lib.has(o.flags, F_SOURCE) then planned = planned + o.p end
  end
  return planned * C.max_interval < PROBATION
end

-- Does source s expect less than one change of its host's pages per max_interval (its
-- planned rate is its host's pooled rate)? A light source there brings no news a page
-- fetch would not.
local function quiet(s)
  return lib.plan_rate(s) * C.max_interval < 1
end

-- Is page s (index g) a source never read that is held back (value_first_reads)? A held
-- source due now is queued again max_interval later, so that it does not keep its host at
-- the head of READY.
local function held_source(id, host, s, g)
  if not value_first_reads or s.fetches > 0 or not lib.has(s.flags, F_SOURCE)
      or redis.call("ZCARD", qkey(host)) < 2 then
    return false
  end
  if g >= lib.host_nu(host) and not (s.weight < 1 and (quiet(s) or too_few_checks(host))) then
    return false
  end
  if not early then lib.enqueue(host, id, now + C.max_interval) end
  return true
end

local hosts
if early then
  -- a host's ready score is max(head due, next allowed): past now, either may be the reason
  hosts = redis.call("ZRANGEBYSCORE", READY, "(" .. now_us, "+inf", "LIMIT", 0, window)
else
  hosts = redis.call("ZRANGEBYSCORE", READY, "-inf", now_us, "LIMIT", 0, window)
end
for _, host in ipairs(hosts) do
  if #out >= window then break end  -- a host with delay 0 offers up to `look` candidates
  local pages
  -- a host's own delay is read only where it matters: for early pages, or where the
  -- namespace's default delay is 0 (then a host without a delay of its own offers all
  -- its ranked pages); with a positive default every host offers one, as before
  local next_allowed, delay = 0, C.min_host_delay
  if early or delay == 0 then
    next_allowed, delay = lib.host_get(host)
    if delay < 0 then delay = C.min_host_delay end
  end
  if not early then
    pages = redis.call("ZRANGEBYSCORE", qkey(host), "-inf", now_us, "LIMIT", 0, look)
  elseif next_allowed <= now then
    pages = redis.call("ZRANGE", qkey(host), 0, look - 1)
  else
    pages = {}
  end
  local best, best_index = nil, -1
  for _, id in ipairs(pages) do
    local s = lib.peek_queued(id, host)
    -- a page waiting out a failure backoff, fetched within its shortest interval, or said
    -- to be unchanged by a trusted source, is never fetched early
    if s and not (early and (s.fails > 0 or now - s.last_fetch < lib.early_interval(s)
        or lib.signal_says_fresh(id, host, s.last_fetch))) then
      -- a trusted co-change event since its last fetch (lua/signals.lua) may raise it
      local g = max(lib.index(s, now), lib.cochange_value(id, host, s))
      if not held_source(id, host, s, g) then
        if delay == 0 then
          out[#out + 1] = struct.pack(CANDIDATE_FORMAT, g, #host) .. id .. host
        elseif g > best_index then
          best, best_index = id, g
        end
      end
    end
  end
  if best then
    out[#out + 1] = struct.pack(CANDIDATE_FORMAT, best_index, #host) .. best .. host
  end
end
local result = lib.finish({table.concat(out), NEWLY_QUARANTINED})
result[3] = lib.earliest()
return result
