-- refresh.lua: re-plan queued pages under the current threshold nu (DESIGN §3:
-- due times go stale when nu moves). ARGV after the header: pairs host, id.
-- A queued, fetched page keeps its standardised draw E = (due - last_fetch) * p
-- and gets due = last_fetch + E * mean(nu), p = 1 / mean(nu) (for `interval`
-- E is 1). Leased, gone, never-fetched and retrying pages are left alone.
-- Returns the number of pages whose due time moved.
local moved = 0
for i = H + 1, #ARGV, 2 do
  local host, id = ARGV[i], ARGV[i + 1]
  local s = load(id)
  local due = redis.call("ZSCORE", qkey(host), id)
  if s and due and s.fetches > 0 and s.fails == 0 and s.p > 0
      and not has(s.flags, F_LEASED) and not has(s.flags, F_GONE) then
    local mean = planned_interval(s.weight, plan_rate(s))
    if math.abs(mean * s.p - 1) > 1e-12 then
      local e = (tonumber(due) - s.last_fetch) * s.p
      if C.estimator == "interval" then e = 1 end
      s.p = 1 / mean
      save(id, s)
      redis.call("ZADD", qkey(host), fmt(s.last_fetch + e * mean), id)
      host_refresh(host)
      moved = moved + 1
    end
  end
end
return moved
