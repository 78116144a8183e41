-- lib.lua: what every shard script shares, prepended to each by store.py (Scripts).
--
-- Every shard script gets the same KEYS (frontier_rate/store.py Keys.shard_keys):
--   KEYS[1] <prefix>ready   zset  host -> time the host may next dispatch (microseconds)
--   KEYS[2] <prefix>hosts   hash  host -> struct "<dd": next_allowed, delay (-1 = default)
--   KEYS[3] <prefix>leases  zset  id..host -> lease deadline (microseconds)
--   KEYS[4] <prefix>agg     hash  "n:c" / "l:c" / "w:c" per policy cell c
--   KEYS[5] <prefix>cnt     hash  pages, gone, fetches, changes, quarantined
-- and derives the per-bucket and per-host keys below from the same prefix
-- (they carry the shard's hash tag, so every key lies in one cluster slot):
--   <prefix>s:<b>  hash id -> packed page state (STATE below)
--   <prefix>u:<b>  hash id -> url
--   <prefix>x:<b>  hash id -> etag, last_modified and JSON meta (see xget)
--   <prefix>q:<host> zset id -> due time (microseconds)
--   <prefix>bad    hash id -> quarantine record (see quarantine)
--   <prefix>m:<b>  hash id -> change pattern of pages with dated changes (PATTERN)
--   <prefix>sg     hash id -> latest claim of a sitemap, feed or push (lua/signals.lua)
--   <prefix>st     hash host|source -> whether that source is believed (lua/signals.lua)
-- ARGV[1..H] is the header (C below); a script's own arguments follow.
-- Every script starts with lib.start() (store.py puts the call in front of its own code).
--
-- Redis runs a script's whole text on every call (EVALSHA), so everything this file
-- defines is made anew each time: about 55 closures and a few tables, some 20 µs of a
-- call's set-up (docs/ARCHITECTURE.md, the Lua boundary). The functions are fields of
-- one table, `lib`, so that a script names what it takes from here (lib.finish, ...);
-- the locals they capture are declared in the order that keeps closing over them
-- cheap (the library and the standard functions last). Each function says which
-- Python code it mirrors; frontier_rate/wire.py is the Python side of every format.


-- Keys ------------------------------------------------------------------------
local PREFIX = string.sub(KEYS[1], 1, -6)   -- strip "ready"
local READY, HOSTS, LEASES, AGG, CNT = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local BAD = PREFIX .. "bad"
local HOST_PRIOR = PREFIX .. "hr"
local HOST_AGG = PREFIX .. "ha"
local HOST_NU = PREFIX .. "hnu"
local DATES = PREFIX .. "lm"
local HOST_PAGES, HOST_SWEEP = PREFIX .. "hp", PREFIX .. "hs"
local SIGNAL_PAGES, SIGNAL_TRUST = PREFIX .. "sg", PREFIX .. "st"  -- lua/signals.lua
local PROBE = PREFIX .. "probe"
local SHARD = string.match(PREFIX, ":(%d+)}:$") or "?"

-- The header: ARGV[1..H], the same fields for every shard script, named as
-- frontier_rate/wire.py HEADER names them, in the same order (tests/test_store.py
-- checks that the two lists agree).
local H = 19
local C = {
  now = tonumber(ARGV[1]), nu = tonumber(ARGV[2]), objective = ARGV[3], policy = ARGV[4],
  estimator = ARGV[5], min_interval = tonumber(ARGV[6]), max_interval = tonumber(ARGV[7]),
  eta = tonumber(ARGV[8]), beta = tonumber(ARGV[9]), omega = tonumber(ARGV[10]),
  interval_prior_info = tonumber(ARGV[11]), interval_max_step = tonumber(ARGV[12]),
  min_host_delay = tonumber(ARGV[13]), lease_timeout = tonumber(ARGV[14]),
  buckets = tonumber(ARGV[15]), log_prior_rate = tonumber(ARGV[16]), cells = ARGV[17],
  server_clock_rate = tonumber(ARGV[18]), namespace_id = ARGV[19],
}
local FRESHNESS = C.objective == "freshness"   -- else "changes"
local WHITTLE = C.policy == "whittle"          -- else "lagrangian"
local INTERVAL = C.estimator == "interval"

-- Bucket layout: linear hashing, so the bucket hashes grow online and stay
-- compact (store.bucket_of mirrors it). CNT holds the shard's level "bl" and
-- split pointer "bs": with NB = buckets * 2^level, a page goes to h mod NB, or
-- to h mod 2NB when that is below the split pointer (its bucket was split).
-- A namespace from before the layout grew has neither field: level 0, split 0,
-- exactly its old fixed layout, so old data needs no migration.
local LAYOUT = redis.call("HMGET", CNT, "bl", "bs", "hi", "id")
local LEVEL, SPLIT = math.floor(tonumber(LAYOUT[1]) or 0), math.floor(tonumber(LAYOUT[2]) or 0)
if LEVEL < 0 or LEVEL > 24 then LEVEL, SPLIT = 0, 0 end
local NB = C.buckets * 2 ^ LEVEL
if SPLIT < 0 or SPLIT >= NB then LEVEL, SPLIT, NB = 0, 0, C.buckets end
local function bucket_of(id)
  local h = struct.unpack(">I4", id)
  local b = h % NB
  if b < SPLIT then b = h % (2 * NB) end
  return b
end
-- The hash key of bucket b of a kind ("s:", "u:", "x:", "m:"), built once per call
-- (no number formatting and string building per HGET/HSET).
local BUCKET_KEYS = {}  -- kind -> bucket -> key
local function bkey(kind, b)
  local keys = BUCKET_KEYS[kind]
  if not keys then
    keys = {}
    BUCKET_KEYS[kind] = keys
  end
  local key = keys[b]
  if not key then
    key = PREFIX .. kind .. b
    keys[b] = key
  end
  return key
end
local function skey(id) return bkey("s:", bucket_of(id)) end
local function ukey(id) return bkey("u:", bucket_of(id)) end
local function xkey(id) return bkey("x:", bucket_of(id)) end
local function mkey(id) return bkey("m:", bucket_of(id)) end
local function qkey(host) return PREFIX .. "q:" .. host end

-- Constants -----------------------------------------------------------------
local F_LEASED, F_GONE, F_CHANGED, F_APPLIED = 1, 2, 4, 8

-- Page state (wire.STATE): 48 bytes; 64 for `interval`, still within the default
-- 64-byte limit of the compact hash encoding: weight (float32), est, aux, p (float32,
-- the crawl rate of the pending draw), last_fetch, fetches, changes, leases
-- (uint16, the lease token), fingerprint digest (4 bytes), flags,
-- fails = consecutive failures (low 4 bits) + 16 * consecutive 404/410.
-- est/aux: LLN x_k / S_k, SA y_k / unused, SAM z_k / z_{k-1},
-- interval log-rate / T0 plus x1, x2 = changed score B / curvature H.
local STATE = "<fddfdI4I4I2c4BB"
if INTERVAL then STATE = STATE .. "dd" end
local STATE_SIZE = struct.size(STATE)
local RATE_EST = C.estimator == "lln" or C.estimator == "sa"  -- est is a rate (>= 0)
local SUM_AUX = C.estimator == "lln" or INTERVAL               -- aux is a sum (>= 0)
local MIN_RATE = 1 / C.max_interval  -- the lowest rate a page plans with (lib.plan_rate)

-- F(y) = 1 - (1 + y) e^{-y} (lib.index_curve): the coefficients of its Taylor series, cut
-- after the F_TERMS[1 - e] terms that still matter in double precision for y < 2^e
-- (policy._F_TERMS: 18 terms just below 1, 2 from 2^-26 down).
local F_COEF = {0.5, -0.33333333333333331, 0.125, -0.033333333333333333,
  0.0069444444444444441, -0.0011904761904761906, 0.00017361111111111112,
  -2.2045855379188714e-05, 2.4801587301587302e-06, -2.5052108385441718e-07,
  2.296443268665491e-08, -1.9270852604185937e-09, 1.4911969277048643e-10,
  -1.0706029224547743e-11, 7.1692159985810778e-13, -4.498331606952833e-14,
  2.6552651846596585e-15, -1.4797143443923793e-16, 7.8096034842931133e-18,
  -3.9145882126782523e-19, 1.8683261924146203e-20, -8.5099743753875053e-22}
local F_TERMS = {18, 15, 12, 10, 9, 8, 7, 6, 6, 5, 5, 5, 4, 4, 4, 4, 4, 3, 3, 3, 3, 3, 3, 3,
  3, 3, 2}

-- Policy cell of a page (policy.cell_of): log-spaced bins of weight and rate.
-- The bin layout comes from the namespace's configuration (C.cells:
-- "w_log10_min,w_per_decade,w_bins,r_log10_min,r_per_decade,r_bins"), fixed
-- when the namespace was created so that pages leave the cell they entered.
local CELLS = {}
for v in string.gmatch(C.cells, "[^,]+") do CELLS[#CELLS + 1] = tonumber(v) end
-- A value's bin (policy._bin): floor((log10 x - log10_min) * per_decade), clamped
-- to [0, n_bins - 1] (as math.min(n_bins - 1, math.max(0, b)) would: 0 for x <= 0).
local function bin(x, log10_min, per_decade, n_bins)
  if x <= 0 then return 0 end
  local b = math.floor((math.log10(x) - log10_min) * per_decade)
  if not (b > 0) then b = 0 end
  if not (b < n_bins - 1) then b = n_bins - 1 end
  return b
end

local PRIOR_PAGES = 2  -- pseudo-pages of the namespace prior in a pool (lib.host_log_prior)
local GROW_LOAD = 48   -- pages per bucket above which a shard splits a bucket (lib.grow)
-- the change pattern (lib.pattern_get and after)
local PATTERN = "<dffffffffffff"
local PATTERN_SIZE = struct.size(PATTERN)
local PERIODS = {3600, 86400, 604800}
local DECAY, MIN_WEIGHT, MIN_R = 0.9, 4, 0.7
local BURST_RECENT, BURST_WAIT, BURST_TRIALS, BURST_LIFT = 0.1, 3, 3, 2
local TWO_PI = 2 * math.pi

-- Per-call state, written back by lib.finish() ---------------------------------
local AGG_DELTA, HOST_DELTA = {}, {}  -- cell -> {n, Σλ, Σw}; "<cell>:<host>" -> {.., host}
local CELL_NAMES = {}   -- cell -> its decimal name, formatted once per call
local HOST_NU_READ = {}  -- host -> its nu_h, read once per script call
local HOST_NU_ANY = nil  -- whether any host has its own threshold (HLEN, once per call)
local HOST_POOLS = {}   -- host -> {n, sum, changed}: its pooled prior
local DIRTY_HOSTS = {}  -- hosts whose queue head changed: re-scored once in READY
local QUEUE_HEADS = {}  -- host -> {id, score} of its queue head as this call saw it
local HOST_INDEX = LAYOUT[3] == "1"  -- the host page index is kept (HOST_PAGES, HOST_SWEEP)
-- NEWLY_QUARANTINED collects url, reason of every page quarantined by this call, for
-- the caller to log (every script that may quarantine returns it: wire.quarantined).
local NEWLY_QUARANTINED = {}

-- The library, and the standard functions it uses most, declared last: every function
-- below captures them, and a closure finds the upvalues declared last first.
local floor, min, max, exp, log, huge = math.floor, math.min, math.max, math.exp, math.log,
  math.huge
local spack, sunpack, sformat = struct.pack, struct.unpack, string.format

local lib = {}

-- Small helpers ---------------------------------------------------------------

function lib.has(flags, bit) return floor(flags / bit) % 2 == 1 end
function lib.set(flags, bit, on)
  if lib.has(flags, bit) == on then return flags end
  if on then return flags + bit end
  return flags - bit
end

function lib.fmt(x) return sformat("%.17g", x) end

-- One check of a trust tally t = {checks, failed checks} (Last-Modified dates per host in
-- observe.lua, sources per host in signals.lua): counts it; a tally is ignored while more
-- than 1 in `ratio` checks failed, and CNT's `counter` counts the tallies now ignored.
-- Returns 1 when this check made it ignored, 2 when it made it trusted again, else 0.
function lib.tally_check(t, good, ratio, counter)
  local before = t[2] * ratio > t[1]
  t[1] = t[1] + 1
  if not good then t[2] = t[2] + 1 end
  local after = t[2] * ratio > t[1]
  if after == before then return 0 end
  redis.call("HINCRBY", CNT, counter, after and 1 or -1)
  return after and 1 or 2
end

-- Append value to the list map[key], made on first use.
function lib.push(map, key, value)
  local list = map[key]
  if not list then
    list = {}
    map[key] = list
  end
  list[#list + 1] = value
end

-- Zset scores (due times, ready times, lease deadlines) are whole microseconds:
-- integers are stored and compared natively in compact zsets (no string scores)
-- (wire.us).
function lib.us(t)
  local x = floor(t * 1e6 + 0.5)
  -- "%d" writes the same digits as "%.17g" below 2^53, at half the cost
  if x > -9007199254740992 and x < 9007199254740992 then return sformat("%d", x) end
  return sformat("%.17g", x)
end
function lib.seconds(score) return tonumber(score) / 1e6 end


-- Validation (mirrors wire.unpack_state, same checks in the same order, same
-- words): a state read from Redis is checked before any script uses it, so one
-- corrupted value can never make a whole batch fail. Returns the state table,
-- or nil and the problem.

function lib.number_problem(name, x, non_negative)
  if x ~= x or x == huge or x == -huge then return name .. " is not a finite number" end
  if non_negative and x < 0 then return name .. " is negative" end
  return nil
end

function lib.validate(raw)
  if #raw ~= STATE_SIZE then
    return nil, "state is " .. #raw .. " bytes, expected " .. STATE_SIZE
  end
  local weight, est, aux, p, last_fetch, fetches, changes, leases, fp, flags, fails, x1, x2 =
    sunpack(STATE, raw)
  -- one constructor: the table is sized once instead of growing field by field
  local s = {weight = weight, est = est, aux = aux, p = p, last_fetch = last_fetch,
    fetches = fetches, changes = changes, leases = leases, fp = fp, flags = flags,
    fails = fails % 16, notfound = floor(fails / 16), x1 = x1, x2 = x2}
  -- x - x == 0: x is finite; the checks below name the problem only when one of these fails
  local problem = nil
  if not (weight >= 0 and weight < huge and est - est == 0 and (est >= 0 or not RATE_EST)
      and aux - aux == 0 and (aux >= 0 or not SUM_AUX) and p >= 0 and p < huge
      and last_fetch - last_fetch == 0) then
    local number_problem = lib.number_problem
    problem = number_problem("weight", s.weight, true)
      or number_problem("estimate", s.est, RATE_EST)
      or number_problem("aux", s.aux, SUM_AUX)
      or number_problem("p", s.p, true)
      or number_problem("last_fetch", s.last_fetch, false)
  end
  if not problem and INTERVAL then
    problem = lib.number_problem("x1", s.x1, true) or lib.number_problem("x2", s.x2, true)
  end
  if problem then return nil, problem end
  if fetches > 0 and p <= 0 then return nil, "p is not positive after a fetch" end
  if changes > fetches then return nil, "changes exceed fetches" end
  if flags >= 16 then return nil, "flags " .. flags .. " out of range" end
  return s
end

-- The page's state: s; or nil, problem, raw when the stored value is corrupt; nil when absent.
function lib.load_state(id)
  local raw = redis.call("HGET", skey(id), id)
  if not raw then return nil end
  local s, problem = lib.validate(raw)
  return s, problem, raw
end

function lib.save(id, s)
  local fails = min(s.fails, 15) + 16 * min(s.notfound, 15)
  redis.call("HSET", skey(id), id, spack(STATE, s.weight, s.est, s.aux, s.p,
    s.last_fetch, s.fetches, s.changes, s.leases, s.fp, s.flags, fails, s.x1 or 0, s.x2 or 0))
end

-- Policy (seed 001 / seed 002, docs/MATH.md): mirrors frontier_rate.policy ---------

-- Rate the policy plans with: the reported estimate (wire.reported_rate), floored at
-- 1/max_interval so that a page that has not changed so far still gets a finite rate.
function lib.reported(s)
  if INTERVAL then return exp(s.est) end
  if C.estimator == "sam" then return max(s.est, 0) end
  return s.est
end
function lib.plan_rate(s)
  return max(lib.reported(s), MIN_RATE)
end

-- Effective weight: w (objective "changes") or w / lambda ("freshness").
function lib.eff_weight(w, lam)
  if not FRESHNESS then return w end
  if lam > 0 then return w / lam end
  if w > 0 then return huge end
  return 0
end

function lib.index_curve(y)
  if y < 1 then
    local _, e = math.frexp(y)
    local acc = 0
    for i = F_TERMS[1 - e] or 2, 1, -1 do acc = acc * y + F_COEF[i] end
    return acc * y * y
  end
  if y == huge then return 1 end
  return 1 - (1 + y) * exp(-y)
end

-- The y >= 0 with F(y) = c (policy.optimal_y, the same iteration step by step). For
-- c < 0.5 Newton stops after a step of at most 1e-8 y: the next would only round.
function lib.optimal_y(c)
  if c <= 0 then return 0 end
  if c >= 1 then return huge end
  if c < 0.5 then
    local index_curve = lib.index_curve
    local sq = math.sqrt(2 * c)
    local y = sq * (1 + sq / 3)
    if sq < 1e-8 then return y end
    for _ = 1, 5 do
      local step = (index_curve(y) - c) / (y * exp(-y))
      y = y - step
      if step <= 1e-8 * y and step >= -1e-8 * y then break end
    end
    return y
  end
  local log_d = log(1 - c)
  local y = -log_d
  for _ = 1, 2 do y = -log_d + log(1 + y) end
  for _ = 1, 5 do y = y - (y - log(1 + y) + log_d) * (1 + y) / y end
  return y
end

-- Planned (mean) interval at threshold nu (the page's host_nu): t = y(nu / w_eff) / lambda
-- (policy.interval_for_threshold), bounded by [min_interval, max_interval].
function lib.planned_interval(weight, lam, nu)
  local w_eff = lib.eff_weight(weight, lam)
  local t = huge
  if lam > 0 and w_eff > nu then
    local c = 0
    if w_eff < huge then c = nu / w_eff end
    t = lib.optimal_y(c) / lam
  end
  return min(max(t, C.min_interval), C.max_interval)
end

-- Index of a page, `age` seconds after its last fetch (policy.page_index):
-- continuous w_eff F(lambda age) (seed 001, "lagrangian"), or seed 002's discrete
-- Whittle index w_eff [1 - a^n (1 + n (1 - a))], a = e^{-lambda T}, n = floor(age / T)
-- with T = min_interval ("whittle"). A page never fetched comes first (infinite index).
function lib.index(s, now)
  if s.fetches == 0 then return huge end
  local lam = lib.plan_rate(s)
  local w_eff = lib.eff_weight(s.weight, lam)
  local age = max(now - s.last_fetch, 0)
  if WHITTLE then
    local tick = C.min_interval
    local a = exp(-lam * tick)
    local n = floor(age / tick + 1e-9 * max(1, age / tick))
    return w_eff * (1 - a ^ n * (1 + n * (1 - a)))
  end
  return w_eff * lib.index_curve(lam * age)
end

function lib.cell_of(weight, lam)
  return bin(weight, CELLS[1], CELLS[2], CELLS[3]) * CELLS[6]
    + bin(lam, CELLS[4], CELLS[5], CELLS[6])
end

-- Aggregate changes are summed in Lua and written once per cell (AGG) and once
-- per cell of each host (HOST_AGG: "<cell>:<host>" -> "<ddd" pages, Σλ, Σw
-- (wire.HOST_AGG): what the threshold solve needs to cap each host at its politeness
-- limit) by lib.finish().
-- Add (n, Σλ, Σw) deltas to cell c in AGG_DELTA and to host's cell c in HOST_DELTA.
function lib.add_to_cell(c, host, n, lam, weight)
  local d = AGG_DELTA[c]
  if not d then
    d = {0, 0, 0}
    AGG_DELTA[c] = d
  end
  d[1], d[2], d[3] = d[1] + n, d[2] + lam, d[3] + weight
  local name = CELL_NAMES[c]
  if not name then
    name = sformat("%d", c)
    CELL_NAMES[c] = name
  end
  local field = name .. ":" .. host
  d = HOST_DELTA[field]
  if not d then
    d = {0, 0, 0, host}
    HOST_DELTA[field] = d
  end
  d[1], d[2], d[3] = d[1] + n, d[2] + lam, d[3] + weight
end
function lib.agg_add(weight, lam, sign, host)
  lib.add_to_cell(lib.cell_of(weight, lam), host, sign, sign * lam, sign * weight)
end

-- Move a page's contribution to the aggregates from (w0, l0) to (w1, l1); a page that
-- stays in its cell (the common case once its estimate settles) only changes the sums.
function lib.agg_move(w0, l0, w1, l1, host)
  if w0 == w1 and l0 == l1 then return end
  local c0, c1 = lib.cell_of(w0, l0), lib.cell_of(w1, l1)
  if c0 == c1 then
    lib.add_to_cell(c0, host, 0, l1 - l0, w1 - w0)
  else
    lib.add_to_cell(c0, host, -1, -l0, -w0)
    lib.add_to_cell(c1, host, 1, l1, w1)
  end
end

-- Host h's own threshold nu_h = max(nu, tau_h) (docs/MATH.md: a multiplier per host):
-- the engine publishes tau_h in HOST_NU for the hosts whose politeness cap binds
-- (frontier_rate/threshold.py).
function lib.host_nu(host)
  local nu = HOST_NU_READ[host]
  if nu then return nu end
  if HOST_NU_ANY == nil then HOST_NU_ANY = redis.call("HLEN", HOST_NU) > 0 end
  if not HOST_NU_ANY then return C.nu end
  local tau = tonumber(redis.call("HGET", HOST_NU, host) or "")
  nu = C.nu
  if tau and tau == tau and tau > C.nu then nu = tau end
  HOST_NU_READ[host] = nu
  return nu
end

-- Estimators (seed 004): mirror frontier_rate.estimators exactly -----------

-- expm1 without cancellation (Kahan): Lua 5.1 has none.
function lib.expm1(x)
  local u = exp(x)
  if u == 1 then return x end
  if u == huge then return u end
  local um1 = u - 1
  if um1 == -1 then return -1 end
  return um1 * x / log(u)
end

function lib.clip(x, lo, hi) return min(max(x, lo), hi) end

-- One update with change indicator I (0/1), the crawl rate p of this
-- observation, its realised interval tau; k = number of earlier updates;
-- log_prior: the page's prior log-rate (`interval` only; host_log_prior);
-- since: time from a change of known time (Last-Modified) to this fetch, or nil.
function lib.update_estimate(s, I, p, tau, k, log_prior, since)
  local e = C.estimator
  if e == "lln" then
    -- eq. 1 in ratio form: x_k = I_hat_k / (S_k + alpha_k / p_k), S_k = sum (1 - I_j)/p_j,
    -- alpha_k = 1 (estimators.lln_estimate)
    s.aux = s.aux + (1 - I) / p
    s.est = (s.changes + I) / (s.aux + 1 / p)
  elseif e == "sa" then
    -- eq. 2: y_{k+1} = y_k + eta_k [I (y_k + p) - y_k], eta_k = (k+1)^-eta (estimators.sa_step)
    local eta = (k + 1) ^ (-C.eta)
    s.est = s.est + eta * (I * (s.est + p) - s.est)
  elseif e == "sam" then
    -- eq. 3 with eq. 10: zeta_k = (beta_k - omega eta_k) / beta_{k-1}, beta_k = (k+1)^-beta,
    -- zeta_0 = 0 (estimators.sam_step / zeta_step); est = z_k, aux = z_{k-1}
    local eta = (k + 1) ^ (-C.eta)
    local zeta = 0
    if k > 0 then zeta = ((k + 1) ^ (-C.beta) - C.omega * eta) / (k ^ (-C.beta)) end
    local z = s.est
    s.est = z + eta * (I * (z + p) - z) + zeta * (z - s.aux)
    s.aux = z
  elseif e == "interval" then
    -- recursive MAP in phi = log rate (estimators.interval_step, step by step):
    -- est = phi, aux = T0, x1 = B, x2 = H; count = updates including this one
    local clip, expm1 = lib.clip, lib.expm1
    local count = k + 1
    local phi = s.est
    local x = clip(exp(phi) * tau, 1e-300, 1e300)
    local r = x / expm1(x)
    local rho
    if x < 1e-3 then rho = x / 2 + x * x / 12 else rho = x / -expm1(-x) - 1 end
    local b, h
    if I == 1 and since then
      -- a dated change: the exact term log(lambda) - lambda * since (interval_step)
      b, h = s.x1 + 1, s.x2
      s.aux = s.aux + since
    else
      b, h = s.x1 + I * r, s.x2 + I * (r * rho)
      s.aux = s.aux + (1 - I) * tau
    end
    local exposure = min(exp(phi) * s.aux, 1e300)
    local score = b - exposure + C.interval_prior_info * (log_prior - phi)
    local curvature = C.interval_prior_info + exposure + h
    local step_max = C.interval_max_step
    local new = clip(phi + clip(score / curvature, -step_max, step_max), -690, 690)
    local step = new - phi
    local factor = 1
    if b > 0 then
      local scaled = min(b * exp(min(-(h / b) * step, 700)), count)
      factor = scaled / b
    end
    s.est, s.x1, s.x2 = new, b * factor, h * factor
  end
end

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
    n, sum = sunpack("<dd", raw)
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
  if s.fetches < 2 then return nil end
  return log(rate)
end

-- Prior log-rate of a page of `host` whose own contribution is `own` (or nil): its
-- host's pool shrunk towards the shard's pool (lib.population_log_prior, issue 35).
function lib.host_log_prior(host, own)
  local pool = lib.host_pool(host)
  local n, sum = pool[1], pool[2]
  if own then n, sum = n - 1, sum - own end
  local base = lib.population_log_prior(own)
  if n < 0.5 then return base end
  return (sum + PRIOR_PAGES * base) / (n + PRIOR_PAGES)
end

-- BEGIN issue 35: the population level of the pooled prior ---------------------
-- The shard's pages with an observed interval pool their log planned rates under the
-- field POPULATION of HOST_PRIOR (no host is named "": a URL has a host), kept with
-- every host's pool (lib.host_pool_move). A host's pool shrinks towards this one, and
-- this one towards the namespace's prior_rate by POPULATION_PAGES pseudo-pages: a
-- host with few pages starts from what the crawl has seen elsewhere (most pages of a
-- real crawl never change), not from prior_rate; an empty namespace starts there.
-- Hosts are spread over shards by hash, so each shard's pool samples the population.
-- Hierarchical empirical Bayes on log rates (docs/MATH.md, "The population prior").
-- A shard's population of fewer than POPULATION_MIN observed pages is not trusted (the
-- namespace is still nearly empty): its pages start from prior_rate as before.
local POPULATION, POPULATION_PAGES, POPULATION_MIN = "", 2, 4

function lib.population_log_prior(own)
  local pool = lib.host_pool(POPULATION)
  local n, sum = pool[1], pool[2]
  if own then n, sum = n - 1, sum - own end
  if n < POPULATION_MIN - 0.5 then return C.log_prior_rate end
  return (sum + POPULATION_PAGES * C.log_prior_rate) / (n + POPULATION_PAGES)
end
-- END issue 35 -------------------------------------------------------------------

-- The (est, aux) a page of `host` starts from: its host's pooled prior as the pool stands
-- now, in the estimator's terms (wire.initial_state with x0 = that prior).
function lib.prior_state(host)
  local log_prior = lib.host_log_prior(host, nil)
  if INTERVAL then return log_prior, 0 end
  if C.estimator == "sam" then return exp(log_prior), exp(log_prior) end
  return exp(log_prior), 0
end

-- A page without an observed interval (fetches <= 1: its state is still its start)
-- follows its host's pooled prior as the pool moves: it takes lib.prior_state now, not the
-- pool as it stood when the page was added (pages added together, before any of their
-- host's pages was observed, would otherwise plan with the namespace prior until their
-- second fetch, max_interval away at a low budget). Returns true when s changed; the
-- caller moves the aggregates and saves.
function lib.follow_prior(s, host)
  if s.fetches > 1 then return false end
  local e0, a0 = lib.prior_state(host)
  if e0 == s.est and a0 == s.aux then return false end
  s.est, s.aux = e0, a0
  return true
end

function lib.host_pool_move(host, old, new)
  if old == new then return end
  local pool = lib.host_pool(host)
  if old then pool[1], pool[2] = pool[1] - 1, pool[2] - old end
  if new then pool[1], pool[2] = pool[1] + 1, pool[2] + new end
  pool[3] = true
  if host ~= POPULATION then lib.host_pool_move(POPULATION, old, new) end  -- issue 35
end

-- Hosts ---------------------------------------------------------------------

-- A host's (next_allowed, delay) (wire.HOST_RECORD); a malformed value reads as the
-- default (0, -1) and is overwritten by the next host_set.
function lib.host_get(host)
  local raw = redis.call("HGET", HOSTS, host)
  if not raw or #raw ~= 16 then return 0, -1 end
  local next_allowed, delay = sunpack("<dd", raw)
  if next_allowed ~= next_allowed or delay ~= delay or delay == huge then return 0, -1 end
  return next_allowed, delay
end

function lib.host_set(host, next_allowed, delay)
  redis.call("HSET", HOSTS, host, spack("<dd", next_allowed, delay))
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
  AGG_DELTA = {}
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
      if raw and #raw == 24 then n, l, w = sunpack("<ddd", raw) end
      n, l, w = n + d[1], max(l + d[2], 0), max(w + d[3], 0)
      if n < 0.5 then
        drops[#drops + 1] = field
      else
        writes[#writes + 1] = field
        writes[#writes + 1] = spack("<ddd", n, l, w)
      end
    end
    if #writes > 0 then redis.call("HSET", HOST_AGG, unpack(writes)) end
    if #drops > 0 then redis.call("HDEL", HOST_AGG, unpack(drops)) end
    if HOST_INDEX and pages ~= 0 then lib.index_pages(host, pages) end
  end
  HOST_DELTA = {}
  for host, pool in pairs(HOST_POOLS) do
    if pool[3] then
      if pool[1] < 0.5 then
        redis.call("HDEL", HOST_PRIOR, host)
      else
        redis.call("HSET", HOST_PRIOR, host, spack("<dd", pool[1], pool[2]))
      end
    end
  end
  HOST_POOLS = {}
  for host in pairs(DIRTY_HOSTS) do lib.host_refresh(host) end
  DIRTY_HOSTS = {}
  QUEUE_HEADS = {}
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
  local record = spack("<I2I2", #host, #reason) .. host .. reason .. raw
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
  local lh, lr = sunpack("<I2I2", record)
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
    if flags < 16 and not has(flags, F_LEASED) and not has(flags, F_GONE)
        and not number_problem("weight", weight, true)
        and not number_problem("estimate", est, RATE_EST)
        and not number_problem("last_fetch", last_fetch, false) then
      return {weight = weight, est = est, last_fetch = last_fetch, fetches = fetches,
              fails = fails % 16}
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
  local le, ll = sunpack("<I2I2", raw)
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
    spack("<I2I2", #etag, #last_modified) .. etag .. last_modified .. meta)
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
    SPLIT = SPLIT + 1
    if SPLIT == NB then LEVEL, SPLIT, NB = LEVEL + 1, 0, NB * 2 end
    splits = splits + 1
  end
  if splits > 0 then redis.call("HSET", CNT, "bl", LEVEL, "bs", SPLIT) end
  return splits
end

-- Change pattern: rhythm and bursts (frontier_rate/pattern.py, step by step) ----
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
-- (frontier_rate/namespace.py), and the engine sends the id it opened in the
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
-- nothing, and an accepted one runs whole.
function lib.start(writes)
  if C.namespace_id ~= "" and LAYOUT[4] ~= C.namespace_id then
    return redis.error_reply("FRLOST " .. SHARD .. " " .. (LAYOUT[4] or ""))
  end
  if writes then redis.call("SETRANGE", PROBE, 0, "") end
  return nil
end
