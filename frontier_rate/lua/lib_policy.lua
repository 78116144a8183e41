-- lib_policy.lua: the policy and the estimators of lib (part of lua/lib.lua's library,
-- after it; store.LIB_FILES gives the order).

-- Policy (seed 001 / seed 002, docs/MATH.md): mirrors frontier_rate.math.policy ---------

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

-- The shortest interval after which a page of rate lam may have changed enough to be worth a
-- fetch: C.worth_y / lam, where the chance of a change 1 - e^{-lam t} reaches the process's
-- min_change_chance (default index.MIN_CHANGE_CHANCE; the header carries -log(1 - chance);
-- issue 60; index.worth_interval); inf for lam = 0 (longest binds).
function lib.worth_wait(lam)
  if lam > 0 then return C.worth_y / lam end
  return huge
end

-- Planned (mean) interval at threshold nu (the page's host_nu): t = y(nu / w_eff) / lambda
-- (policy.interval_for_threshold), bounded below by shortest (default min_interval) and by
-- the wait after which a fetch is worth it (lib.worth_wait), above by longest (default
-- max_interval): index.worth_interval.
function lib.planned_interval(weight, lam, nu, longest, shortest)
  local w_eff = lib.eff_weight(weight, lam)
  local t = huge
  if lam > 0 and w_eff > nu then
    local c = 0
    if w_eff < huge then c = nu / w_eff end
    t = lib.optimal_y(c) / lam
  end
  return min(max(t, shortest or C.min_interval, lib.worth_wait(lam)), longest or C.max_interval)
end

-- The rate a page plans its next interval with. A page whose every observed interval saw a
-- change (interval estimator: its unchanged exposure T0 = aux holds less than one expected
-- change) has only a lower bound on its rate: the changed intervals say "at least this
-- fast", the estimate rests on the prior. Under the freshness objective the planned interval
-- y(nu lam / w) / lam is shortest at the rate lam* = EXPLORE_C w / nu (3.35 nu); a faster
-- page is planned longer and longer, and at a long interval it sees a change again, so the
-- bound never moves. Such a page plans with min(lam, lam*), the most a fetch of it may be
-- worth, from its 2nd to its EXPLORE_CHANGES-th change, until an unchanged interval shows
-- its rate (issue 35; mirrors index.explore_rate; EXPLORE_C and EXPLORE_CHANGES come from
-- index.py through the contract's prelude, whose docstrings say why 6).
function lib.explore_rate(s, lam, nu)
  if not (INTERVAL and FRESHNESS) or s.changes < 2 or s.changes > EXPLORE_CHANGES then return lam end
  if s.weight <= 0 or nu <= 0 or lam * s.aux >= 1 then return lam end
  return min(lam, EXPLORE_C * s.weight / nu)
end

-- The longest interval of a source (a sitemap or feed, F_SOURCE) of weight w: max_interval /
-- w for w < 1, at most INTERVAL_FLOOR_SPAN floors (index.source_max_interval, whose
-- docstring says why).
function lib.source_max_interval(w)
  return C.max_interval / max(min(w, 1), 1 / INTERVAL_FLOOR_SPAN)
end

-- The shortest interval between two fetches of page s: min_interval, or max_interval for a
-- source read before that weighs less than one page (index.source_min_interval, whose
-- docstring says why). What plans it (lib.page_interval) and what fetches it early
-- (candidates.lua) both keep to it.
function lib.shortest_interval(s)
  if s.fetches > 0 and s.weight < 1 and lib.has(s.flags, F_SOURCE) then return C.max_interval end
  return C.min_interval
end

-- The shortest interval before page s may be fetched early (candidates.lua, fill_budget):
-- lib.shortest_interval, and not before its plan rate says a fetch is worth it
-- (lib.worth_wait, at most max_interval; issue 60: filling the budget revisited pages that
-- never changed at the host rate).
function lib.early_interval(s)
  return max(lib.shortest_interval(s), min(lib.worth_wait(lib.plan_rate(s)), C.max_interval))
end

-- The planned interval of page s at rate lam (its plan_rate) and threshold nu (its host_nu),
-- exploration included (not for a source, whose estimate no other page uses): what
-- observe.lua and refresh.lua plan a fetched page with.
function lib.page_interval(s, lam, nu)
  if lib.has(s.flags, F_SOURCE) then
    return lib.planned_interval(s.weight, lam, nu, lib.source_max_interval(s.weight),
      lib.shortest_interval(s))
  end
  return lib.planned_interval(s.weight, lib.explore_rate(s, lam, nu), nu)
end

-- Index of a page, `age` seconds after its last fetch (policy.page_index):
-- continuous w_eff F(lambda age) (seed 001, "lagrangian"), or seed 002's discrete
-- Whittle index w_eff [1 - a^n (1 + n (1 - a))], a = e^{-lambda T}, n = floor(age / T)
-- with T = min_interval ("whittle"). A page never fetched comes first (infinite index); a
-- source never fetched ranks as a page of its weight known to be stale, w_eff (index.
-- first_source_index): after the pages never fetched, among the revisits by value.
function lib.index(s, now)
  if s.fetches == 0 and not lib.has(s.flags, F_SOURCE) then return huge end
  local lam = lib.plan_rate(s)
  local w_eff = lib.eff_weight(s.weight, lam)
  if s.fetches == 0 then return w_eff end
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
-- Is page s in the cell aggregates the threshold solve plans the budget with? A source
-- (F_SOURCE: a sitemap or feed) is not. Its floor is not a page's (lib.source_max_interval)
-- and its worth is what it tells of its pages, not its own freshness; counted in the cells,
-- each source was planned at a page's floor, and on a crawl of small hosts, where the budget
-- cannot pay the floor, the threshold rose 30-190 fold and the pages were planned with it
-- (docs/BENCHMARKS.md, web_like_sitemaps). Sources are fetched when due (their own planned
-- interval) within the same budget.
function lib.in_aggregates(s)
  return not lib.has(s.flags, F_SOURCE)
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
-- (frontier_rate/engine/threshold.py).
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

-- Estimators (seed 004): mirror frontier_rate.math.estimators exactly -----------

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
    -- alpha_k = 1 (updates.lln_estimate)
    s.aux = s.aux + (1 - I) / p
    s.est = (s.changes + I) / (s.aux + 1 / p)
  elseif e == "sa" then
    -- eq. 2: y_{k+1} = y_k + eta_k [I (y_k + p) - y_k], eta_k = (k+1)^-eta (updates.sa_step)
    local eta = (k + 1) ^ (-C.eta)
    s.est = s.est + eta * (I * (s.est + p) - s.est)
  elseif e == "sam" then
    -- eq. 3 with eq. 10: zeta_k = (beta_k - omega eta_k) / beta_{k-1}, beta_k = (k+1)^-beta,
    -- zeta_0 = 0 (updates.sam_step / zeta_step); est = z_k, aux = z_{k-1}
    local eta = (k + 1) ^ (-C.eta)
    local zeta = 0
    if k > 0 then zeta = ((k + 1) ^ (-C.beta) - C.omega * eta) / (k ^ (-C.beta)) end
    local z = s.est
    s.est = z + eta * (I * (z + p) - z) + zeta * (z - s.aux)
    s.aux = z
  elseif e == "interval" then
    -- recursive MAP in phi = log rate (updates.interval_step, step by step):
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
