-- quarantine.lua: quarantine a leased page whose data the crawler process could
-- not read (meta that is not JSON, a URL it cannot parse). ARGV after the
-- header: id, host, token, reason, drop_extras ("1": the meta/validators were the
-- corrupt part and are deleted). Only while the page holds the lease `token`
-- (otherwise the lease moved on and the page is someone else's).
-- Returns 1 if the page is quarantined now, else 0.
local id, host, token, reason = ARGV[H + 1], ARGV[H + 2], tonumber(ARGV[H + 3]), ARGV[H + 4]
local drop_extras = ARGV[H + 5] == "1"
local s, problem = lib.load_checked(id, host)
if problem then return lib.finish(1) end
if s and s.leases == token and lib.has(s.flags, F_LEASED) then
  lib.quarantine(id, host, reason, redis.call("HGET", skey(id), id), drop_extras)
  return lib.finish(1)
end
return lib.finish(0)
