-- lib_pages.lua: quarantine, extras, bucket growth, the change pattern and the start of
-- every shard script (part of lua/lib.lua's library; store.LIB_FILES gives the order).

-- Quarantine ------------------------------------------------------------------
-- A page whose stored data cannot be used leaves its host queue and the lease
-- set; its state moves to the BAD hash as "<I2I2" lengths of host and reason,
-- then host, reason and the raw corrupt value (wire.unpack_quarantine). Counters:
-- pages -1, quarantined +1 (so pages + quarantined stays the number of pages added).
-- The URL, meta and validators stay (unless drop_extras: they were the corrupt part);
-- add.lua gives a quarantined page a fresh state.
function lib.quarantine(id, host, reason, raw, drop_extras)
  redis.call("ZREM", qkey(host), id)
  redis.call("ZREM", LEASES, id .. host)
  DIRTY_HOSTS[host] = true
  QUEUE_HEADS[host] = nil
  if drop_extras then redis.call("HDEL", xkey(id), id) end
  redis.call("HDEL", skey(id), id)
  if raw == "" and redis.call("HEXISTS", BAD, id) == 1 then return end  -- a leftover entry
  local record = spack(LENGTHS_FORMAT, #host, #reason) .. host .. reason .. raw
  if redis.call("HSET", BAD, id, record) == 1 then
    redis.call("HINCRBY", CNT, "pages", -1)
    redis.call("HINCRBY", CNT, "quarantined", 1)
  end
  NEWLY_QUARANTINED[#NEWLY_QUARANTINED + 1] = redis.call("HGET", ukey(id), id) or ""
  NEWLY_QUARANTINED[#NEWLY_QUARANTINED + 1] = reason
end

-- The reason stored in a page's quarantine record, or nil when it is not quarantined.
function lib.quarantine_reason(id)
  local record = redis.call("HGET", BAD, id)
  if not record then return nil end
  if #record < 4 then return "unreadable quarantine record" end
  local lh, lr = sunpack(LENGTHS_FORMAT, record)
  return string.sub(record, 5 + lh, 4 + lh + lr)
end

-- The usable state of a page that `host`'s queue or lease set refers to. A
-- corrupt state, or none at all (the page was lost), is quarantined: then nil
-- and the reason.
function lib.load_checked(id, host)
  local s, problem, raw = lib.load_state(id)
  if s then return s end
  if not problem then problem, raw = "state missing", "" end
  lib.quarantine(id, host, problem, raw, false)
  return nil, problem
end

-- lib.load_checked for a page found in `host`'s queue: a queued page is never leased
-- or gone (lease.lua takes it out of the queue, fail.lua never re-queues a gone
-- page), so either flag means the state contradicts the queue; left alone, such
-- a page would be offered as its host's candidate forever and refused by lease.
function lib.load_queued(id, host)
  local s, problem = lib.load_checked(id, host)
  if not s then return nil, problem end
  if lib.has(s.flags, F_LEASED) or lib.has(s.flags, F_GONE) then
    problem = "queued but marked leased or gone"
    lib.quarantine(id, host, problem, redis.call("HGET", skey(id), id), false)
    return nil, problem
  end
  return s
end

-- The fields of a queued page's state that ranking it needs (weight, est,
-- last_fetch, fetches, fails), read without unpacking and checking the whole
-- state: candidates.lua looks at several pages per lease it hands out. Anything
-- unusual in those fields (or a state of the wrong size, leased or gone) takes
-- the full lib.load_queued path, which quarantines a corrupt page; lease.lua checks
-- the whole state of the page it leases.
function lib.peek_queued(id, host)
  local raw = redis.call("HGET", skey(id), id)
  if raw and #raw == STATE_SIZE then
    local weight, est = sunpack("<fd", raw)
    local last_fetch, fetches = sunpack("<dI4", raw, 25)
    local flags, fails = sunpack("BB", raw, 47)
    local has, number_problem = lib.has, lib.number_problem
    if flags < FLAGS_END and not has(flags, F_LEASED) and not has(flags, F_GONE)
        and not number_problem("weight", weight, true)
        and not number_problem("estimate", est, RATE_EST)
        and not number_problem("last_fetch", last_fetch, false) then
      return {weight = weight, est = est, last_fetch = last_fetch, fetches = fetches,
              fails = fails % 16, flags = flags}
    end
  end
  return lib.load_queued(id, host)
end

-- Give expired leases back to their host queues (due now), at most `limit`.
function lib.reclaim(now, limit)
  local expired = redis.call("ZRANGEBYSCORE", LEASES, "-inf", lib.us(now), "LIMIT", 0, limit)
  for _, member in ipairs(expired) do
    redis.call("ZREM", LEASES, member)
    local id, host = string.sub(member, 1, 8), string.sub(member, 9)
    local s = lib.load_checked(id, host)
    if s and lib.has(s.flags, F_LEASED) then
      s.flags = lib.set(lib.set(s.flags, F_LEASED, false), F_APPLIED, false)
      lib.save(id, s)
      lib.enqueue(host, id, now)
    end
  end
  return #expired
end

-- Extras: etag, last_modified and the JSON meta, packed as
-- "<I2I2" lengths of etag and last_modified, then the three strings (meta verbatim).
-- lib.xget returns nil for a malformed value (wire.unpack_extras checks the same).
function lib.xget(id)
  local raw = redis.call("HGET", xkey(id), id)
  if not raw then return "", "", "" end
  if #raw < 4 then return nil end
  local le, ll = sunpack(LENGTHS_FORMAT, raw)
  if 4 + le + ll > #raw then return nil end
  return string.sub(raw, 5, 4 + le), string.sub(raw, 5 + le, 4 + le + ll),
    string.sub(raw, 5 + le + ll)
end

function lib.xset(id, etag, last_modified, meta)
  if etag == "" and last_modified == "" and meta == "" then
    redis.call("HDEL", xkey(id), id)
    return
  end
  redis.call("HSET", xkey(id), id,
    spack(LENGTHS_FORMAT, #etag, #last_modified) .. etag .. last_modified .. meta)
end

-- Growth --------------------------------------------------------------------
-- Split bucket SPLIT into SPLIT and SPLIT + NB (linear hashing) while the shard
-- holds more than GROW_LOAD pages per bucket, at most `limit` splits per call
-- (an old namespace far over the load catches up over several calls). A split
-- moves the pages whose h mod 2NB is the new bucket, in all four per-bucket
-- hashes, inside this one atomic script: every other script reads the layout
-- when it starts, so no page is ever looked for in the wrong bucket.
function lib.grow(limit)
  local pages = tonumber(redis.call("HGET", CNT, "pages") or "0") or 0
  local splits = 0
  while splits < limit and pages > GROW_LOAD * (NB + SPLIT) do
    local from, to = SPLIT, SPLIT + NB
    for _, kind in ipairs({"s:", "u:", "x:", "m:"}) do
      local entries = redis.call("HGETALL", bkey(kind, from))
      local moved, ids = {}, {}
      for i = 1, #entries, 2 do
        if sunpack(">I4", entries[i]) % (2 * NB) == to then
          moved[#moved + 1] = entries[i]
          moved[#moved + 1] = entries[i + 1]
          ids[#ids + 1] = entries[i]
        end
      end
      if #ids > 0 then
        redis.call("HSET", bkey(kind, to), unpack(moved))
        redis.call("HDEL", bkey(kind, from), unpack(ids))
      end
    end
    LAST_LAYOUT = {}  -- the next call works the layout out again from CNT (lib.lua)
    SPLIT = SPLIT + 1
    if SPLIT == NB then LEVEL, SPLIT, NB = LEVEL + 1, 0, NB * 2 end
    splits = splits + 1
  end
  if splits > 0 then redis.call("HSET", CNT, "bl", LEVEL, "bs", SPLIT) end
  return splits
end

-- Change pattern: rhythm and bursts (frontier_rate/math/pattern.py, step by step) ----
-- <prefix>m:<b> hash id -> PATTERN "<dffffffffffff": last dated change, W, A,
-- (C, S) per period of PERIODS, follow-up pending, follow-ups, changes they
-- found, changes Poisson expected on them (decayed, pattern.py).

-- The page's pattern state (nil when it has none, or it is unreadable: then
-- the constant-rate schedule stands and the next dated change starts afresh).
function lib.pattern_get(id)
  local raw = redis.call("HGET", mkey(id), id)
  if not raw or #raw ~= PATTERN_SIZE then return nil end
  local m = {sunpack(PATTERN, raw)}
  for i = 1, 13 do
    if m[i] ~= m[i] or m[i] == huge or m[i] == -huge then return nil end
  end
  return m
end

function lib.pattern_save(id, m)
  redis.call("HSET", mkey(id), id, spack(PATTERN, unpack(m, 1, 13)))
end

-- pattern.update: one more dated change at time t.
function lib.pattern_update(m, t)
  m = m or {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
  local kept = DECAY * m[2]
  local age = 0
  if m[2] > 0 then age = kept * (m[3] + max(t - m[1], 0)) / (kept + 1) end
  m[1], m[2], m[3] = t, kept + 1, age
  for k, period in ipairs(PERIODS) do
    local p = period / C.server_clock_rate
    local theta = TWO_PI * math.fmod(t, p) / p
    m[2 + 2 * k] = DECAY * m[2 + 2 * k] + math.cos(theta)
    m[3 + 2 * k] = DECAY * m[3 + 2 * k] + math.sin(theta)
  end
  return m
end

-- pattern.aligned_due: `planned` moved onto the page's rhythm, if it has one.
function lib.aligned_due(m, planned, earliest)
  if not m or m[2] < MIN_WEIGHT then return planned end
  local best_r, period, mean = nil, nil, nil
  for k, p in ipairs(PERIODS) do
    p = p / C.server_clock_rate
    local c, s = m[2 + 2 * k], m[3 + 2 * k]
    local len = math.sqrt(c * c + s * s) / m[2]
    if m[3] >= p and len >= MIN_R then
      best_r, period, mean = len, p, math.atan2(s, c)
    end
  end
  if not best_r then return planned end
  local margin = min(math.sqrt(max(-2 * log(best_r), 0)), math.pi / 2)
  local target = ((mean + margin) % TWO_PI) * period / TWO_PI
  local start = max(planned - period / 2, earliest)
  return target + math.ceil((start - target) / period) * period
end

-- pattern.follow_up_outcome: a follow-up's result against the Poisson chance.
function lib.follow_up_outcome(m, I, tau, rate)
  if not m or m[10] == 0 then return m end
  m[10] = 0
  m[11] = DECAY * m[11] + 1
  m[12] = DECAY * m[12] + I
  m[13] = DECAY * m[13] - lib.expm1(-rate * tau)
  return m
end

-- pattern.burst_due: a follow-up after a change just seen, while follow-ups pay.
function lib.burst_due(m, due, now, since, rate)
  if not m or not since or since * rate >= BURST_RECENT then return due end
  if m[11] >= BURST_TRIALS and m[12] < BURST_LIFT * m[13] + 0.5 then return due end
  local follow = now + max(C.min_interval, BURST_WAIT * since)
  if follow >= due then return due end
  m[10] = 1
  return follow
end

-- Start of every shard script ------------------------------------------------
-- The namespace marker: CNT "id" holds the id the namespace was created with
-- (frontier_rate/store/namespace.py), and the engine sends the id it opened in the
-- header. A shard whose marker is gone (FLUSHDB, a restart without persistence,
-- eviction) or different (the namespace was created anew, or marked damaged
-- after an eviction: "x...") refuses the call before it reads or writes
-- anything else: "FRLOST <shard> <marker found>" (errors.py). An empty id in the
-- header skips the check (a namespace from before markers, opened read-only).
-- A script that writes then probes with a write that changes nothing and that
-- Redis refuses exactly when it would refuse a write growing memory (maxmemory
-- reached, a read-only replica, MISCONF): Redis checks memory only before a
-- script's first write and lets every later one through, and HDEL or ZREM (which
-- it never refuses) came first in some scripts. So a refused script changed
-- nothing, and an accepted one runs whole. A function (Redis >= 7) is refused before it
-- runs under each of those, so the library's start lines pass writes = false
-- (scripting.start_line).
function lib.start(writes)
  if C.namespace_id ~= "" and LAYOUT[4] ~= C.namespace_id then
    return redis.error_reply("FRLOST " .. SHARD .. " " .. (LAYOUT[4] or ""))
  end
  if writes then redis.call("SETRANGE", PROBE, 0, "") end
  return nil
end
