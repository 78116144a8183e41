-- add.lua: add pages or update their weight / meta.
-- ARGV after the header: initial estimate, initial aux, then groups of 7
-- (weight already rounded to float32 by the caller; wire.add_page):
--   id, host, url, weight, meta (JSON text, "" = none), due (seconds: when a new
--   page is first due; the caller orders pages added together by priority with it),
--   source ("1": a sitemap or feed, flag F_SOURCE, counted in CNT "sources" and left out
--   of the cell aggregates (lib.in_aggregates); a page once a source stays one, "0"
--   changes nothing)
-- A page whose state is corrupt is quarantined, and a quarantined page is
-- given a fresh state (counted as new): adding it again is the way out.
-- New pages may grow the shard's bucket layout (lib.lua grow).
-- Returns {number of pages that were new, NEWLY_QUARANTINED (url, reason pairs)}.
local est0, aux0 = tonumber(ARGV[H + 1]), tonumber(ARGV[H + 2])
local added, sources = 0, 0
for i = H + 3, #ARGV, 7 do
  local id, host, url, weight, meta = ARGV[i], ARGV[i + 1], ARGV[i + 2],
    tonumber(ARGV[i + 3]), ARGV[i + 4]
  local due, source = tonumber(ARGV[i + 5]), ARGV[i + 6] == "1"
  local s, problem, raw = lib.load_state(id)
  if problem then lib.quarantine(id, host, problem, raw, false) end
  if s then
    if not lib.has(s.flags, F_GONE) then
      local changed = false
      if s.weight ~= weight then
        if lib.in_aggregates(s) then
          lib.agg_move(s.weight, lib.plan_rate(s), weight, lib.plan_rate(s), host)
        end
        s.weight, changed = weight, true
      end
      if source and not lib.has(s.flags, F_SOURCE) then
        -- a source pools nothing (lib.pooled_log_rate): what it pooled as a page leaves
        local pooled = lib.pooled_log_rate(s, lib.plan_rate(s))
        lib.agg_add(s.weight, lib.plan_rate(s), -1, host)  -- and leaves the cells
        s.flags, changed = s.flags + F_SOURCE, true
        lib.host_pool_move(host, pooled, nil, lib.url_group(host, url))
        sources = sources + 1
      end
      if changed then lib.save(id, s) end
    end
  else
    if redis.call("HDEL", BAD, id) == 1 then redis.call("HINCRBY", CNT, "quarantined", -1) end
    -- a new page starts from its host's pooled prior, or its URL group's (C.group_prior,
    -- lib.group_log_prior); est0 / aux0: the namespace prior
    local e0, a0 = est0, aux0
    local group = lib.url_group(host, url)
    if lib.group_log_prior(host, group, nil) ~= C.log_prior_rate then
      e0, a0 = lib.prior_state(host, group)
    end
    s = {weight = weight, est = e0, aux = a0, p = 0, last_fetch = 0, fetches = 0,
         changes = 0, leases = 0, fp = string.rep("\0", 4), flags = 0, fails = 0, notfound = 0,
         x1 = 0, x2 = 0}
    if source then s.flags, sources = F_SOURCE, sources + 1 end
    lib.save(id, s)
    redis.call("HSET", ukey(id), id, url)
    if lib.in_aggregates(s) then lib.agg_add(weight, lib.plan_rate(s), 1, host) end
    redis.call("HINCRBY", CNT, "pages", 1)
    lib.enqueue(host, id, due)
    if C.cochange and not source then lib.cochange_track(id, host, 0) end  -- its URL group
    added = added + 1
  end
  if meta ~= "" then
    local etag, last_modified = lib.xget(id)
    if etag == nil then etag, last_modified = "", "" end  -- malformed: replaced
    lib.xset(id, etag, last_modified, meta)
  end
end
if sources > 0 then redis.call("HINCRBY", CNT, "sources", sources) end
lib.grow(64)
return lib.finish({added, NEWLY_QUARANTINED})
