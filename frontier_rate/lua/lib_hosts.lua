-- lib_hosts.lua: hosts, their pooled prior and the write-back of a call's deltas (part
-- of lua/lib.lua's library; store.LIB_FILES gives the order).

-- Pooled prior per host (empirical Bayes) ------------------------------------
-- <prefix>hr hash: host -> "<dd" count, sum of log planned rates of the host's
-- pages with at least one observed interval (fetches >= 2). A page's prior
-- log-rate is the mean over the *other* such pages of its host, shrunk towards
-- the namespace prior by PRIOR_PAGES pseudo-pages: pages of a host tend to
-- change alike, so a page fetched only a few times learns from its siblings.
-- A host's pool is read once per script call and written back once by lib.finish().

function lib.host_pool(host)
  local pool = HOST_POOLS[host]
  if pool then return pool end
  local n, sum = 0, 0
  local raw = redis.call("HGET", HOST_PRIOR, host)
  if raw and #raw == 16 then
    n, sum = sunpack(HOST_POOL_FORMAT, raw)
    if n ~= n or sum ~= sum or n < 0 or sum == huge or sum == -huge then
      n, sum = 0, 0
    end
  end
  pool = {n, sum, false}
  HOST_POOLS[host] = pool
  return pool
end

-- The page's contribution to its host's pool (nil: none yet); rate = plan_rate(s),
-- which the caller has at hand.
function lib.pooled_log_rate(s, rate)
  if s.fetches < 2 or lib.has(s.flags, F_SOURCE) then return nil end
  return log(rate)
end

-- The population level of the pooled prior (issue 35). The shard's pages with an observed
-- interval pool their log planned rates under the field POPULATION of HOST_PRIOR (no host is
-- named "": a URL has a host), kept with every host's pool (lib.host_pool_move). A host's
-- pool shrinks towards this one, and this one towards the namespace's prior_rate by
-- POPULATION_PAGES pseudo-pages: a host with few pages starts from what the crawl has seen
-- elsewhere (most pages of a real crawl never change), not from prior_rate; an empty
-- namespace starts there. Hosts are spread over shards by hash, so each shard's pool samples
-- the population. Hierarchical empirical Bayes on log rates (docs/MATH.md, "The population
-- prior"). A shard with fewer than POPULATION_MIN observed pages is not trusted yet.
local POPULATION, POPULATION_PAGES, POPULATION_MIN = "", 2, 4

function lib.population_log_prior(own)
  local pool = lib.host_pool(POPULATION)
  local n, sum = pool[1], pool[2]
  if own then n, sum = n - 1, sum - own end
  if n < POPULATION_MIN - 0.5 then return C.log_prior_rate end
  return (sum + POPULATION_PAGES * C.log_prior_rate) / (n + POPULATION_PAGES)
end

-- Prior log-rate of a page of `host` whose own contribution is `own` (or nil): its
-- host's pool shrunk towards the shard's pool (lib.population_log_prior).
function lib.host_log_prior(host, own)
  local pool = lib.host_pool(host)
  local n, sum = pool[1], pool[2]
  if own then n, sum = n - 1, sum - own end
  local base = lib.population_log_prior(own)
  if n < 0.5 then return base end
  return (sum + PRIOR_PAGES * base) / (n + PRIOR_PAGES)
end

-- Pooled prior per URL group (issue 62 item 2, C.group_prior; math/lookalike.py) -------
-- A page's group is its host and its URL's path template (lib.url_template); the group's
-- pool is the field host .. template of HOST_PRIOR (a template starts with "/", which no host
-- holds), "<dd" as a host's, moved with the host's pool (lib.host_pool_move) and written back
-- by lib.finish(). Its pool is shrunk towards the host's prior by GROUP_PAGES pseudo-pages
-- once it holds GROUP_MIN pages other than the page itself (lookalike.group_log_prior).

-- lookalike._segment: a variable path segment is "*" (plus its extension).
local function template_segment(seg, leaf)
  local suffix = string.match(seg, "%.%a%a?%a?%a?%a?$") or ""
  local stem = string.sub(seg, 1, #seg - #suffix)
  local _, separators = string.gsub(stem, "[-_ ]", "")
  if leaf or string.find(stem, "%d") or separators >= 2 or #stem > 24 then
    return "*" .. suffix
  end
  return seg
end

-- lookalike.url_template: the path template of `url`.
function lib.url_template(url)
  local rest = string.match(url, "^[^#]*")
  local at = string.find(rest, "://", 1, true)
  if at then
    rest = string.sub(rest, at + 3)
    local cut = string.find(rest, "[/?]")
    if cut then rest = string.sub(rest, cut) else rest = "" end
  end
  local q = string.find(rest, "?", 1, true)
  local path = rest
  if q then path = string.sub(rest, 1, q - 1) end
  local segs = {}
  for seg in string.gmatch(path, "[^/]+") do segs[#segs + 1] = seg end
  local n = #segs
  for i = 1, n do segs[i] = template_segment(segs[i], i == n and n >= 2) end
  local t = "/" .. table.concat(segs, "/")
  if q then t = t .. "?" end
  return string.sub(t, 1, TEMPLATE_MAX)
end

-- The group field of a page of `host` with URL `url` (nil when C.group_prior is off).
function lib.url_group(host, url)
  if not C.group_prior or not url then return nil end
  return host .. lib.url_template(url)
end

-- The group field of the stored page `id` (its URL read once; nil when off).
function lib.page_group(id, host)
  if not C.group_prior then return nil end
  return lib.url_group(host, redis.call("HGET", ukey(id), id))
end

-- Co-change groups (issue 62, C.cochange; lua/signals.lua keeps their records): a
-- group's pages indexed by last fetch in <prefix>cg:<host><template>.
-- The group index of page `id` of `host` (its host .. template), nil when it has no URL.
function lib.cochange_group(id, host)
  local url = redis.call("HGET", ukey(id), id)
  if not url then return nil end
  return host .. lib.url_template(url)
end

-- Index page `id` of `host` in its URL group by its last fetch `last_fetch` (0: never);
-- `group`: the group when the caller has read it already (lib.cochange_key), else nil.
function lib.cochange_track(id, host, last_fetch, group)
  group = group or lib.cochange_group(id, host)
  if group then redis.call("ZADD", lib.gkey(group), lib.us(last_fetch), id) end
end

-- Take page `id` of `host` out of its URL group's index (it is gone: its group no longer
-- counts it toward GROUP_MIN, and a pull never looks at it).
function lib.cochange_forget(id, host)
  local group = lib.cochange_group(id, host)
  if group then redis.call("ZREM", lib.gkey(group), id) end
end

-- lookalike.group_log_prior: the prior log-rate of a page of `host` in `group` (nil: none)
-- whose own contribution is `own` (or nil).
function lib.group_log_prior(host, group, own)
  local base = lib.host_log_prior(host, own)
  if not group then return base end
  local pool = lib.host_pool(group)
  local n, sum = pool[1], pool[2]
  if own then n, sum = n - 1, sum - own end
  if n < GROUP_MIN - 0.5 then return base end
  return (sum + GROUP_PAGES * base) / (n + GROUP_PAGES)
end

-- The (est, aux) a page of `host` (of `group`, or nil) starts from: its pooled prior as the
-- pools stand now, in the estimator's terms (wire.initial_state with x0 = that prior).
function lib.prior_state(host, group)
  local log_prior = lib.group_log_prior(host, group, nil)
  if INTERVAL then return log_prior, 0 end
  if C.estimator == "sam" then return exp(log_prior), exp(log_prior) end
  return exp(log_prior), 0
end

-- A page without an observed interval (fetches <= 1: its state is still its start)
-- follows its host's pooled prior as the pool moves: it takes lib.prior_state now, not the
-- pool as it stood when the page was added (pages added together, before any of their
-- host's pages was observed, would otherwise plan with the namespace prior until their
-- second fetch, max_interval away at a low budget). Returns true when s changed; the
-- caller moves the aggregates and saves. `group`: the page's group (lib.page_group; nil
-- when off).
function lib.follow_prior(s, host, group)
  if s.fetches > 1 then return false end
  local e0, a0 = lib.prior_state(host, group)
  if e0 == s.est and a0 == s.aux then return false end
  s.est, s.aux = e0, a0
  return true
end

-- Move a page's contribution from `old` to `new` (log rates, nil: none) in its host's pool,
-- the population's and, when `group` is given, its group's.
local function pool_shift(field, old, new)
  local pool = lib.host_pool(field)
  if old then pool[1], pool[2] = pool[1] - 1, pool[2] - old end
  if new then pool[1], pool[2] = pool[1] + 1, pool[2] + new end
  pool[3] = true
end

function lib.host_pool_move(host, old, new, group)
  if old == new then return end
  pool_shift(host, old, new)
  pool_shift(POPULATION, old, new)
  if group then pool_shift(group, old, new) end
end

-- Hosts ---------------------------------------------------------------------

-- A host's (next_allowed, delay) (wire.HOST_RECORD); a malformed value reads as the
-- default (0, -1) and is overwritten by the next host_set.
function lib.host_get(host)
  local raw = redis.call("HGET", HOSTS, host)
  if not raw or #raw ~= 16 then return 0, -1 end
  local next_allowed, delay = sunpack(HOST_RECORD_FORMAT, raw)
  if next_allowed ~= next_allowed or delay ~= delay or delay == huge then return 0, -1 end
  return next_allowed, delay
end

function lib.host_set(host, next_allowed, delay)
  redis.call("HSET", HOSTS, host, spack(HOST_RECORD_FORMAT, next_allowed, delay))
end

-- Host page index, so that the re-solve reads the cells of the few hosts that may
-- exceed their politeness cap, not of every host (threshold.host_candidates):
-- HOST_PAGES zset host -> its pages; HOST_SWEEP zset host -> pages x its own delay, for
-- hosts with a delay of their own above 0: the seconds it needs to fetch each of its
-- pages once. A host's pages can ask for more than its cap only when its sweep is longer
-- than the shortest interval any page plans. Kept by lib.finish() and host_delay.lua once
-- lua/host_index.lua has built it (CNT "hi"; a namespace from before the index has none).
function lib.index_sweep(host, pages)
  local _, delay = lib.host_get(host)
  if pages >= 0.5 and delay > 0 then
    redis.call("ZADD", HOST_SWEEP, lib.fmt(pages * delay), host)
  else
    redis.call("ZREM", HOST_SWEEP, host)
  end
end
function lib.index_pages(host, delta)
  local pages = tonumber(redis.call("ZINCRBY", HOST_PAGES, delta, host))
  if pages < 0.5 then redis.call("ZREM", HOST_PAGES, host) end
  lib.index_sweep(host, pages)
end

-- Re-score a host in the ready zset: max(head due, next allowed); drop it when empty.
-- host_rescore: the same when the host's next_allowed is known.
function lib.host_rescore(host, next_allowed)
  local head = redis.call("ZRANGE", qkey(host), 0, 0, "WITHSCORES")
  if #head == 0 then
    redis.call("ZREM", READY, host)
    return
  end
  redis.call("ZADD", READY, lib.us(max(lib.seconds(head[2]), next_allowed)), host)
end
function lib.host_refresh(host)
  lib.host_rescore(host, lib.host_get(host))
end

-- Queue a page at `due`; its due time as stored (whole microseconds). A batch
-- re-queueing several pages of one host reads the host's head (QUEUE_HEADS) once;
-- only pages enqueued behind the head keep it (the host's ready time is unchanged),
-- and quarantine (the other way a script here takes a page out of a queue it also
-- enqueues into) forgets it. Hosts whose head may have changed are re-scored by
-- lib.finish() (DIRTY_HOSTS).
function lib.enqueue(host, id, due)
  local score = lib.us(due)
  local at = floor(due * 1e6 + 0.5)  -- tonumber(score), without parsing it back
  if DIRTY_HOSTS[host] then  -- lib.finish() re-scores the host from its real head anyway
    redis.call("ZADD", qkey(host), score, id)
    return at / 1e6
  end
  local head = QUEUE_HEADS[host]
  if head == nil then
    local first = redis.call("ZRANGE", qkey(host), 0, 0, "WITHSCORES")
    head = #first > 0 and {first[1], tonumber(first[2])}
  end
  redis.call("ZADD", qkey(host), score, id)
  -- behind the current head (and not the head itself): the host's ready time is unchanged
  if not head or head[1] == id or at < head[2] then
    DIRTY_HOSTS[host] = true
    QUEUE_HEADS[host] = nil
  else
    QUEUE_HEADS[host] = head
  end
  return at / 1e6
end

-- Write the deferred aggregate deltas and host scores; every script returns through it.
function lib.finish(result)
  for c, d in pairs(AGG_DELTA) do
    local id = sformat("%d", c)
    if d[1] ~= 0 then redis.call("HINCRBY", AGG, "n:" .. id, d[1]) end
    if d[2] ~= 0 then redis.call("HINCRBYFLOAT", AGG, "l:" .. id, lib.fmt(d[2])) end
    if d[3] ~= 0 then redis.call("HINCRBYFLOAT", AGG, "w:" .. id, lib.fmt(d[3])) end
  end
  AGG_DELTA = emptied(AGG_DELTA)
  -- a host's cells are read with one HMGET and written with one HSET (and one HDEL)
  local by_host = {}
  for field, d in pairs(HOST_DELTA) do lib.push(by_host, d[4], field) end
  for host, fields in pairs(by_host) do
    local raws = redis.call("HMGET", HOST_AGG, unpack(fields))
    local writes, drops, pages = {}, {}, 0
    for i, field in ipairs(fields) do
      local d, raw = HOST_DELTA[field], raws[i]
      pages = pages + d[1]
      local n, l, w = 0, 0, 0
      if raw and #raw == 24 then n, l, w = sunpack(HOST_AGG_FORMAT, raw) end
      n, l, w = n + d[1], max(l + d[2], 0), max(w + d[3], 0)
      if n < 0.5 then
        drops[#drops + 1] = field
      else
        writes[#writes + 1] = field
        writes[#writes + 1] = spack(HOST_AGG_FORMAT, n, l, w)
      end
    end
    if #writes > 0 then redis.call("HSET", HOST_AGG, unpack(writes)) end
    if #drops > 0 then redis.call("HDEL", HOST_AGG, unpack(drops)) end
    if HOST_INDEX and pages ~= 0 then lib.index_pages(host, pages) end
  end
  HOST_DELTA = emptied(HOST_DELTA)
  for host, pool in pairs(HOST_POOLS) do
    if pool[3] then
      if pool[1] < 0.5 then
        redis.call("HDEL", HOST_PRIOR, host)
      else
        redis.call("HSET", HOST_PRIOR, host, spack(HOST_POOL_FORMAT, pool[1], pool[2]))
      end
    end
  end
  HOST_POOLS = emptied(HOST_POOLS)
  for host in pairs(DIRTY_HOSTS) do lib.host_refresh(host) end
  DIRTY_HOSTS = emptied(DIRTY_HOSTS)
  QUEUE_HEADS = emptied(QUEUE_HEADS)
  return result
end

-- The earliest time this shard may have work: its first ready host or its first
-- lease deadline (µs, "inf" when it has neither), for the namespace's due summary
-- (due.lua). Called after lib.finish(), so that re-scored hosts count.
function lib.earliest()
  local t = huge
  local head = redis.call("ZRANGE", READY, 0, 0, "WITHSCORES")
  if #head > 0 then t = tonumber(head[2]) end
  head = redis.call("ZRANGE", LEASES, 0, 0, "WITHSCORES")
  if #head > 0 then t = min(t, tonumber(head[2])) end
  if t == huge then return "inf" end
  return lib.fmt(t)
end
