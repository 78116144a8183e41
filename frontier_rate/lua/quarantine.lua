-- quarantine.lua: quarantine a leased page whose data the crawler process could
-- not read (meta that is not JSON, a URL it cannot parse). ARGV after the
-- header: id, host, token, reason, drop_extras ("1": the meta/validators were the
-- corrupt part and are deleted). Only while the page holds the lease `token`
-- (otherwise the lease moved on and the page is someone else's). The state itself is
-- sound here, so what the page adds to the policy cells, its host's pooled prior and the
-- count of sources leaves with it (a corrupt state, quarantined elsewhere, cannot say what
-- to subtract); a URL added again then starts afresh without being counted twice.
-- Returns 1 if the page is quarantined now, else 0.
local id, host, token, reason = ARGV[H + 1], ARGV[H + 2], tonumber(ARGV[H + 3]), ARGV[H + 4]
local drop_extras = ARGV[H + 5] == "1"
local s, problem = lib.load_checked(id, host)
if problem then return lib.finish(1) end
if s and s.leases == token and lib.has(s.flags, F_LEASED) then
  local rate = lib.plan_rate(s)
  if lib.in_aggregates(s) then lib.agg_add(s.weight, rate, -1, host) end
  lib.host_pool_move(host, lib.pooled_log_rate(s, rate), nil, lib.page_group(id, host))
  if lib.has(s.flags, F_SOURCE) then redis.call("HINCRBY", CNT, "sources", -1) end
  lib.quarantine(id, host, reason, redis.call("HGET", skey(id), id), drop_extras)
  return lib.finish(1)
end
return lib.finish(0)
