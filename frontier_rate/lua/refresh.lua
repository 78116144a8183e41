-- refresh.lua: re-plan queued pages under the current threshold nu (docs/MATH.md:
-- due times go stale when nu moves), at most `limit` pages per call.
-- ARGV after the header: limit.
-- The cursor hash <prefix>cursor is shared by all processes: c = HSCAN cursor over the hosts
-- hash, p = hosts of the current HSCAN batch still to do ("\n"-separated),
-- o = rank offset reached in the first of them, s = 1 while a sweep is under way.
-- A queued, fetched page keeps its standardised draw E = (due - last_fetch) * p
-- and gets due = last_fetch + E * mean(nu), p = 1 / mean(nu) (for the periodic
-- `interval` estimator due = last_fetch + mean(nu), moved onto the page's rhythm;
-- a pending burst follow-up keeps its time; a trusted claim of a sitemap, feed or push
-- since the last fetch still applies: lib.signal_due, lua/signals.lua). Never-fetched and
-- retrying pages keep their due times. A page without an observed interval (fetched at most
-- once) first takes its host's pooled prior as the pool stands now (lib.follow_prior).
-- A queued page whose state is corrupt is quarantined.
-- Returns {pages looked at, pages moved, 1 if this call finished a sweep of the shard,
-- NEWLY_QUARANTINED (url, reason pairs)}.
local limit, cursor_key = tonumber(ARGV[H + 1]), PREFIX .. "cursor"
local cur = redis.call("HMGET", cursor_key, "c", "p", "o", "s")
local scan, offset, in_sweep = cur[1] or "0", tonumber(cur[3] or "0"), cur[4] == "1"
local pending = {}
for h in string.gmatch(cur[2] or "", "[^\n]+") do pending[#pending + 1] = h end
local seen, moved, wrapped = 0, 0, 0

local function replan(h, from, count)
  local queued = redis.call("ZRANGE", qkey(h), from, from + count - 1, "WITHSCORES")
  local nu_h = lib.host_nu(h)
  for j = 1, #queued, 2 do
    local id, due = queued[j], lib.seconds(queued[j + 1])
    local s = lib.load_queued(id, h)
    if s then
      -- a page without an observed interval follows its host's pooled prior (lib.follow_prior)
      local stored_rate = lib.plan_rate(s)
      local group = nil  -- its URL group's pool (C.group_prior), read only where it counts
      if s.fetches <= 1 then group = lib.page_group(id, h) end
      if lib.follow_prior(s, h, group) then
        if lib.in_aggregates(s) then
          lib.agg_move(s.weight, stored_rate, s.weight, lib.plan_rate(s), h)
        end
        lib.save(id, s)
      end
    end
    if s and s.fetches > 0 and s.fails == 0 and s.p > 0 then
      local mean = lib.page_interval(s, lib.plan_rate(s), nu_h)
      if math.abs(mean * s.p - 1) > 1e-6 then
        local new_due
        if C.estimator == "interval" then
          local m = lib.pattern_get(id)
          new_due = lib.aligned_due(m, s.last_fetch + mean, s.last_fetch + C.min_interval)
          if m and m[10] ~= 0 then new_due = due end  -- a burst follow-up keeps its time
          new_due = lib.signal_due(id, h, s, new_due, mean)  -- a sitemap's word still holds
        else
          new_due = s.last_fetch + (due - s.last_fetch) * s.p * mean
        end
        -- a page brought forward by its group's trusted co-change event keeps its time
        if new_due > due and lib.cochange_value(id, h, s) >= nu_h then new_due = due end
        s.p = 1 / mean
        lib.save(id, s)
        redis.call("ZADD", qkey(h), lib.us(new_due), id)
        moved = moved + 1
      end
    end
  end
  if #queued > 0 then lib.host_refresh(h) end
  return #queued / 2
end

while seen < limit do
  if #pending == 0 then
    if scan == "0" and in_sweep then
      wrapped, in_sweep = 1, false
      break
    end
    local reply = redis.call("HSCAN", HOSTS, scan, "COUNT", 16)
    scan, in_sweep, offset = reply[1], true, 0
    for j = 1, #reply[2], 2 do pending[#pending + 1] = reply[2][j] end
  else
    local want = limit - seen
    local n = replan(pending[1], offset, want)
    seen = seen + n
    if n >= want then
      offset = offset + n
    else
      table.remove(pending, 1)
      offset = 0
    end
  end
end
local flag = "0"
if in_sweep then flag = "1" end
redis.call("HSET", cursor_key, "c", scan, "p", table.concat(pending, "\n"), "o", offset,
  "s", flag)
return lib.finish({seen, moved, wrapped, NEWLY_QUARANTINED})
