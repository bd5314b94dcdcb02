----------------------------------------------------------------------------
-- jit.prof.diff: what changed between two profiles of one program
-- (`ljprof report --diff before.ljprof after.ljprof`).
--
--   local diff = require("jit.prof.diff")
--   local d = diff.compare(before, after)      -- p's of jit.prof.model
--   diff.text(d, {before = "a.ljprof", after = "b.ljprof"})  -- the report
--   diff.profile(d)     -- the after profile, each sample with .before:
--                       -- jit.prof.svg draws it as a differential graph
--
-- Normalized by total samples: every share is of its own profile's total,
-- and in the flame graph the before counts are scaled by after's total /
-- before's total, so that two runs of different lengths (or rates)
-- compare; the report says so in its header.
--
-- Rules:
-- - Frames of the two profiles are matched per function, as the report
--   matches them (below; a function's lines are one frame), C functions
--   and native frames by name. Their labels in the graph are
--   model.names' over both profiles (a name two functions share is
--   qualified in both).
-- - The report is per function: the innermost Lua frame of each sample
--   (native frames left out, as -jp's views do; a C function Lua called,
--   such as string.rep, is a function) for "self", every function on the
--   stack once for "total". A named Lua function is matched by file and
--   name, not by its first line (an edit above it moves that line), unless
--   its file has several functions of that name; unnamed ones by file and
--   first line. Rows: the functions whose self share grew most first, down
--   to those that shrank most; rows that moved less than 0.05 points in
--   self and total and hold under 0.5% are left out.
-- - The flame graph: width from the after profile (as flamegraph.pl draws
--   difffolded.pl's output); colour by each frame's change, after minus
--   scaled before (its samples with its callees'), red grew, blue shrank,
--   the deeper the more, relative to the largest change; white-grey
--   unchanged. A stack that only the before profile has has no width:
--   the report lists what vanished.
----------------------------------------------------------------------------

local model = require("jit.prof.model")

local M = {}

local format = string.format

-- The function key of a frame (and whether it holds the first line): a
-- named Lua function by file and name, unless one of the profiles has
-- two first lines for that name in that file.
local function keyer(a, b)
  local ambiguous = {}
  for _, q in ipairs({a, b}) do
    local seen = {}
    for _, fr in ipairs(q.frames) do
      if fr.lua and fr.name then
        local k = fr.file .. "\0" .. fr.name
        local ld = tostring(fr.linedefined)
        if seen[k] and seen[k] ~= ld then ambiguous[k] = true end
        seen[k] = seen[k] or ld
      end
    end
  end
  return function(fr)
    if not fr.lua then return "C\0" .. tostring(fr.name), false end
    if fr.name then
      local k = fr.file .. "\0" .. fr.name
      if ambiguous[k] then return "L\0" .. k .. "\0" .. tostring(fr.linedefined), true end
      return "L\0" .. k, false
    end
    return "U\0" .. fr.file .. "\0" .. tostring(fr.linedefined), true
  end
end

-- compare(before, after) -> d: {p = the merged profile (after samples
-- with .before, scaled; before-only stacks with count 0), a = before, b =
-- after, scale = after total / before total}.
function M.compare(a, b)
  -- One name per function over both profiles (a function named in one
  -- run and unnamed in the other is one function).
  model.unify_names_all({a, b})
  local p = {frames = {}, samples = {}, total = 0}
  local index = {}
  local keyof = keyer(a, b)
  local function merge_frames(src)
    local of = {}
    for id, fr in ipairs(src.frames) do
      local k = fr.native and ("N\0" .. tostring(fr.name)) or keyof(fr)
      local nid = index[k]
      if not nid then
        nid = #p.frames + 1
        local c = {}
        for f, v in pairs(fr) do c[f] = v end
        c.id = nid
        c.diffkey = k
        p.frames[nid] = c
        index[k] = nid
      end
      of[id] = nid
    end
    return of
  end
  local of_a, of_b = merge_frames(a), merge_frames(b)
  local scale = a.total > 0 and b.total / a.total or 0
  local by = {}
  local function sample(s, of, field, mul)
    local stack = {}
    for i, id in ipairs(s.stack) do stack[i] = of[id] end
    local k = table.concat(stack, ",") .. "\0" .. tostring(s.vmstate)
    local e = by[k]
    if not e then
      e = {stack = stack, vmstate = s.vmstate, zone = s.zone, count = 0, before = 0}
      by[k] = e
      p.samples[#p.samples + 1] = e
    end
    e[field] = e[field] + s.count * mul
  end
  for _, s in ipairs(b.samples) do sample(s, of_b, "count", 1) end
  for _, s in ipairs(a.samples) do sample(s, of_a, "before", scale) end
  p.total = b.total
  p.diff = true
  return {p = p, a = a, b = b, scale = scale}
end

-- -- Change or noise ----------------------------------------------------------
-- Two kinds of noise move a function's share between runs of one program:
-- sampling (a share p of N samples varies by sqrt(p(1-p)/N)) and the run
-- itself (LuaJIT's trace choices, the machine). With several profiles per
-- side, a side's share is the pooled share (its samples over its total),
-- and its variance the larger of
--   the run-to-run variance: the sample variance of the per-profile shares
--     over the number of profiles (it holds the sampling noise too), and
--   the sampling variance: p0(1-p0)/N, p0 the share pooled over both sides
--     (no change), N the side's samples,
-- so that k similar profiles never claim less noise than sampling gives.
-- A change is significant when |after - before| / sqrt(v_before +
-- v_after) exceeds the two-sided critical value at M.ALPHA family-wise
-- over every test made (Bonferroni: each of self and total per function):
-- Student's t with Welch's degrees of freedom when a side's run-to-run
-- variance is the larger, else the normal distribution (the sampling
-- variance is known). One profile per side: sampling noise only (the
-- run-to-run variation cannot be estimated; the report says so).
M.ALPHA = 0.05

local function log_gamma(x)  -- Lanczos (g = 7, n = 9)
  local c = {0.99999999999980993, 676.5203681218851, -1259.1392167224028,
             771.32342877765313, -176.61502916214059, 12.507343278686905,
             -0.13857109526572012, 9.9843695780195716e-6, 1.5056327351493116e-7}
  x = x - 1
  local a = c[1]
  local t = x + 7.5
  for i = 1, 8 do a = a + c[i + 1] / (x + i) end
  return 0.5 * math.log(2 * math.pi) + (x + 0.5) * math.log(t) - t + math.log(a)
end

-- The continued fraction of the incomplete beta function (Numerical
-- Recipes' betacf).
local function betacf(a, b, x)
  local qab, qap, qam = a + b, a + 1, a - 1
  local c, d = 1, 1 - qab * x / qap
  if math.abs(d) < 1e-300 then d = 1e-300 end
  d = 1 / d
  local h = d
  for m = 1, 10000 do
    local m2 = 2 * m
    local aa = m * (b - m) * x / ((qam + m2) * (a + m2))
    d = 1 + aa * d; if math.abs(d) < 1e-300 then d = 1e-300 end
    c = 1 + aa / c; if math.abs(c) < 1e-300 then c = 1e-300 end
    d = 1 / d
    h = h * d * c
    aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
    d = 1 + aa * d; if math.abs(d) < 1e-300 then d = 1e-300 end
    c = 1 + aa / c; if math.abs(c) < 1e-300 then c = 1e-300 end
    d = 1 / d
    local del = d * c
    h = h * del
    if math.abs(del - 1) < 1e-14 then break end
  end
  return h
end

-- The regularized incomplete beta function I_x(a, b).
local function ibeta(a, b, x)
  if x <= 0 then return 0 end
  if x >= 1 then return 1 end
  local bt = math.exp(log_gamma(a + b) - log_gamma(a) - log_gamma(b) +
                      a * math.log(x) + b * math.log(1 - x))
  if x < (a + 1) / (a + b + 2) then return bt * betacf(a, b, x) / a end
  return 1 - bt * betacf(b, a, 1 - x) / b
end

-- P(|T| > t) for Student's t with df degrees of freedom (df == math.huge:
-- the normal distribution, erfc by Numerical Recipes' erfcc).
function M.two_sided_p(t, df)
  t = math.abs(t)
  if df == math.huge or df > 1e7 then
    local z = t / math.sqrt(2)
    local u = 1 / (1 + 0.5 * z)
    return u * math.exp(-z * z - 1.26551223 + u * (1.00002368 + u * (0.37409196 +
      u * (0.09678418 + u * (-0.18628806 + u * (0.27886807 + u * (-1.13520398 +
      u * (1.48851587 + u * (-0.82215223 + u * 0.17087277)))))))))
  end
  return ibeta(df / 2, 0.5, df / (df + t * t))
end

-- The t whose two-sided p is alpha (bisection).
function M.critical(alpha, df)
  local lo, hi = 0, 1
  while M.two_sided_p(hi, df) > alpha do hi = hi * 2 end
  for _ = 1, 100 do
    local mid = (lo + hi) / 2
    if M.two_sided_p(mid, df) > alpha then lo = mid else hi = mid end
  end
  return hi
end

-- The variance of a side's share of one function: shares (per profile,
-- fractions), n (samples per profile), p0 (the share over both sides).
-- Returns the variance and the degrees of freedom it has (math.huge for
-- the sampling variance).
local function side_var(shares, n, p0)
  local k, sum_n = #shares, 0
  for _, x in ipairs(n) do sum_n = sum_n + x end
  local v_samp = sum_n > 0 and p0 * (1 - p0) / sum_n or 0
  if k < 2 then return v_samp, math.huge end
  local mean = 0
  for _, x in ipairs(shares) do mean = mean + x end
  mean = mean / k
  local ss = 0
  for _, x in ipairs(shares) do ss = ss + (x - mean) ^ 2 end
  local v_emp = ss / (k - 1) / k
  if v_emp > v_samp then return v_emp, k - 1 end
  return v_samp, math.huge
end

-- The test of one measure: a, b = {shares = {...}, n = {...}, count =
-- pooled count, total = pooled total}. Returns {delta (points), se
-- (points), df}.
local function test(a, b)
  local pa = a.total > 0 and a.count / a.total or 0
  local pb = b.total > 0 and b.count / b.total or 0
  local all = a.total + b.total
  local p0 = all > 0 and (a.count + b.count) / all or 0
  local va, dfa = side_var(a.shares, a.n, p0)
  local vb, dfb = side_var(b.shares, b.n, p0)
  local v = va + vb
  local df = math.huge
  if dfa ~= math.huge or dfb ~= math.huge then  -- Welch-Satterthwaite
    local den = (dfa ~= math.huge and va * va / dfa or 0) + (dfb ~= math.huge and vb * vb / dfb or 0)
    df = den > 0 and v * v / den or math.huge
  end
  return {delta = (pb - pa) * 100, se = math.sqrt(v) * 100, df = df}
end

-- Several profiles per side as one (frames and samples side by side:
-- compare merges the frames by function).
local function pool(list)
  if #list == 1 then return list[1] end
  local p = {frames = {}, samples = {}, total = 0}
  for _, q in ipairs(list) do
    local off = #p.frames
    for i, fr in ipairs(q.frames) do
      local c = {}
      for k, v in pairs(fr) do c[k] = v end
      c.id = off + i
      p.frames[off + i] = c
    end
    for _, s in ipairs(q.samples) do
      local st = {}
      for i, id in ipairs(s.stack) do st[i] = id + off end
      p.samples[#p.samples + 1] = {stack = st, vmstate = s.vmstate, zone = s.zone,
                                   labels = s.labels, count = s.count}
    end
    p.total = p.total + q.total
  end
  return p
end

-- compare_sets(befores, afters): compare with several profiles per side
-- (lists of p's); the noise is estimated from their spread (rows).
function M.compare_sets(as, bs)
  local all = {}
  for _, q in ipairs(as) do all[#all + 1] = q end
  for _, q in ipairs(bs) do all[#all + 1] = q end
  model.unify_names_all(all)
  local d = M.compare(pool(as), pool(bs))
  d.as, d.bs = as, bs
  return d
end

-- The differential profile for jit.prof.svg: frames of functions that did
-- not change beyond the noise are marked (.noise: drawn unchanged).
function M.profile(d)
  M.rows(d)
  for _, fr in ipairs(d.p.frames) do
    local k = fr.diffkey
    if k and k:sub(1, 2) ~= "N\0" then fr.noise = not d.sig[k] or nil end
  end
  return d.p
end

-- Per function of profile q: self and total counts by function key;
-- funcs[key] = {fr = a frame of it, line = whether the key has its first
-- line}.
local function per_function(q, keyof, funcs)
  local self, total = {}, {}
  for _, s in ipairs(q.samples) do
    local stack = model.lua_stack(q, s.stack)
    local leaf
    if #stack == 0 then
      leaf = "[" .. (model.VMNAMES[s.vmstate] or tostring(s.vmstate)) .. "]"
      funcs[leaf] = funcs[leaf] or {fr = {lua = false, name = leaf}}
      total[leaf] = (total[leaf] or 0) + s.count
    else
      local seen = {}
      for _, id in ipairs(stack) do
        local fr = q.frames[id]
        local k, line = keyof(fr)
        funcs[k] = funcs[k] or {fr = fr, line = line}
        if not seen[k] then
          seen[k] = true
          total[k] = (total[k] or 0) + s.count
        end
      end
      leaf = keyof(q.frames[stack[#stack]])
    end
    self[leaf] = (self[leaf] or 0) + s.count
  end
  return self, total
end

local function pct(n, total) return total > 0 and n * 100 / total or 0 end

-- rows(d) -> list of {name=, self_a=, self_b=, delta=, total_a=,
-- total_b=, tdelta=, noise=, tnoise=, sig=} (shares in percent of each
-- side's pooled total; noise, tnoise: the smallest significant change of
-- self and total, in points; sig: self or total changed beyond the
-- noise), every function, the self share that grew most first; and the
-- tests' summary {tests=, alpha=, zcrit= (the critical value when only
-- sampling noise counts), runs_a=, runs_b=}. d.sig[key] is set for the
-- functions that changed significantly.
function M.rows(d)
  if d.rows then return d.rows, d.tests end
  local keyof = keyer(d.a, d.b)
  local funcs = {}
  local sa, ta = per_function(d.a, keyof, funcs)
  local sb, tb = per_function(d.b, keyof, funcs)
  -- Per profile: self and total per function, and its total.
  local function each(list)
    local out = {}
    for i, q in ipairs(list) do
      local f = {}
      local s, t = per_function(q, keyof, f)
      out[i] = {self = s, total = t, n = q.total}
    end
    return out
  end
  local ra, rb = each(d.as or {d.a}), each(d.bs or {d.b})
  local function measure(runs, field, k, count, total)
    local m = {shares = {}, n = {}, count = count, total = total}
    for i, r in ipairs(runs) do
      m.shares[i] = r.n > 0 and (r[field][k] or 0) / r.n or 0
      m.n[i] = r.n
    end
    return m
  end
  -- Display names: one frame per function, qualified where two share a
  -- name (model.names); functions matched without their first line are
  -- shown without it.
  local keys, shown = {}, {frames = {}}
  for k in pairs(funcs) do keys[#keys + 1] = k end
  table.sort(keys)
  for i, k in ipairs(keys) do
    local f = funcs[k]
    if f.fr.lua then
      shown.frames[i] = {lua = true, file = f.fr.file, name = f.fr.name,
                         linedefined = f.line and f.fr.linedefined or nil}
    else
      shown.frames[i] = {lua = false, name = f.fr.name}
    end
  end
  local names = model.names(shown, "f")
  -- The tests first, then the family's size: a test counts once. A
  -- function's total is the same test as its self when its self and
  -- total counts are equal in every profile of both sides (a leaf
  -- function: every test of it was counted twice before), and a measure
  -- with no noise at all (se 0: the main chunk's total, 100% in every
  -- profile) tests nothing. Bonferroni over the tests that remain.
  local function same(runs, k)
    for _, r in ipairs(runs) do
      if (r.self[k] or 0) ~= (r.total[k] or 0) then return false end
    end
    return true
  end
  local tested, ntests = {}, 0
  for i, k in ipairs(keys) do
    local ts = test(measure(ra, "self", k, sa[k] or 0, d.a.total),
                    measure(rb, "self", k, sb[k] or 0, d.b.total))
    local tt = test(measure(ra, "total", k, ta[k] or 0, d.a.total),
                    measure(rb, "total", k, tb[k] or 0, d.b.total))
    local dup = same(ra, k) and same(rb, k)
    tested[i] = {ts = ts, tt = tt}
    if ts.se > 0 then ntests = ntests + 1 end
    if tt.se > 0 and not (dup and ts.se > 0) then ntests = ntests + 1 end
  end
  local alpha = M.ALPHA / math.max(1, ntests)
  local crit = {}
  local function critical(df)
    local c = crit[df]
    if not c then c = M.critical(alpha, df); crit[df] = c end
    return c
  end
  d.sig = {}
  local rows = {}
  for i, k in ipairs(keys) do
    local r = {
      name = names[i],
      self_a = pct(sa[k] or 0, d.a.total), self_b = pct(sb[k] or 0, d.b.total),
      total_a = pct(ta[k] or 0, d.a.total), total_b = pct(tb[k] or 0, d.b.total),
    }
    r.delta = r.self_b - r.self_a
    r.tdelta = r.total_b - r.total_a
    local ts, tt = tested[i].ts, tested[i].tt
    r.noise = critical(ts.df) * ts.se
    r.tnoise = critical(tt.df) * tt.se
    r.sig = (ts.se > 0 and math.abs(r.delta) > r.noise) or
            (tt.se > 0 and math.abs(r.tdelta) > r.tnoise)
    if r.sig then d.sig[k] = true end
    rows[#rows + 1] = r
  end
  table.sort(rows, function(x, y)
    if x.delta ~= y.delta then return x.delta > y.delta end
    if x.tdelta ~= y.tdelta then return x.tdelta > y.tdelta end
    return x.name < y.name
  end)
  d.rows = rows
  d.tests = {tests = ntests, alpha = M.ALPHA, zcrit = critical(math.huge),
             runs_a = #ra, runs_b = #rb}
  return rows, d.tests
end

local function grouped(n)
  local s = format("%.0f", n)
  local out = s:reverse():gsub("(%d%d%d)", "%1,"):reverse()
  return (out:gsub("^,", ""))
end

-- The text report. names: {before =, after =} (shown in the header);
-- max: rows at most (default 40: the 30 that grew most and the 10 that
-- shrank most when there are more). Only the functions whose self or
-- total share changed beyond the noise are listed.
function M.text(d, names, max)
  names = names or {}
  max = max or 40
  local all, tests = M.rows(d)
  local rows, quiet = {}, 0
  for _, r in ipairs(all) do
    if r.sig then rows[#rows + 1] = r
    elseif math.abs(r.delta) >= 0.05 or math.abs(r.tdelta) >= 0.05 then quiet = quiet + 1 end
  end
  local cut = #rows > max
  local function side(label, nruns, total)
    return format("%s (%s, %s samples)", label,
      nruns == 1 and "1 profile" or (nruns .. " profiles"), grouped(total))
  end
  local out = {
    format("Diff: %s -> %s\n", side(names.before or "before", tests.runs_a, d.a.total),
           side(names.after or "after", tests.runs_b, d.b.total)),
    "Shares are of each side's own total samples (normalized, so runs of different\n" ..
    "lengths compare); the functions whose self share grew most first.\n",
    format("Shown: changes beyond the noise (significant at %g%% family-wise over %d tests,\n" ..
           "Bonferroni; noise = the larger of the spread between a side's profiles and\n" ..
           "sampling noise; threshold %.2f standard errors, more when the spread between\n" ..
           "profiles is the larger). 'noise' is the smallest significant change.\n",
           tests.alpha * 100, tests.tests, tests.zcrit),
  }
  if tests.runs_a < 2 or tests.runs_b < 2 then
    out[#out + 1] = "One profile on a side: only sampling noise is estimated, not the variation\n" ..
      "from run to run (LuaJIT's trace choices): give several profiles per side.\n"
  end
  out[#out + 1] = "\n"
  out[#out + 1] = format("%35s  %35s\n", "----------------------- self", "---------------------- total")
  out[#out + 1] = format("%8s %8s %8s %8s  %8s %8s %8s %8s  %s\n", "before", "after", "delta",
    "noise", "before", "after", "delta", "noise", "function")
  local function row(r)
    out[#out + 1] = format("%7.1f%% %7.1f%% %+7.1f%% %7.1f%%  %7.1f%% %7.1f%% %+7.1f%% %7.1f%%  %s\n",
      r.self_a, r.self_b, r.delta, r.noise, r.total_a, r.total_b, r.tdelta, r.tnoise, r.name)
  end
  for i, r in ipairs(rows) do
    if not cut or i <= max - 10 then row(r)
    elseif i == max - 9 then out[#out + 1] = format("  ... %d more\n", #rows - max)
    end
    if cut and i > #rows - 10 then row(r) end
  end
  if #rows == 0 then out[#out + 1] = "(no function changed beyond the noise)\n" end
  if quiet > 0 then
    out[#out + 1] = format("(%d function%s changed within the noise: not shown)\n", quiet,
                           quiet == 1 and "" or "s")
  end
  return table.concat(out)
end

return M
