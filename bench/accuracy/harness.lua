-- The accuracy harness's machinery, shared by bench/accuracy/accuracy.lua
-- and tests/lua/test_accuracy.lua: calibration of the components, mixes
-- with known proportions, profiled passes over a mix (ljprof, the built-in
-- jit.profile, or both at once) with the in-run truth, attribution of
-- samples to components, and the distance between profile and truth.
local comp = require("components")

local H = {}
H.components = comp

-- -- Small statistics --------------------------------------------------------

function H.median(t)
  local s = {}
  for i, v in ipairs(t) do s[i] = v end
  table.sort(s)
  local n = #s
  if n == 0 then return nil end
  if n % 2 == 1 then return s[(n + 1) / 2] end
  return (s[n / 2] + s[n / 2 + 1]) / 2
end

local function zeros(n)
  local t = {}
  for i = 1, n do t[i] = 0 end
  return t
end

-- The buckets a profile is split into: the components, then "other".
H.buckets = {}
for i, c in ipairs(comp.all) do H.buckets[i] = c.id end
H.buckets[#H.buckets + 1] = "other"

-- Normalise a table id -> amount to shares summing to 1 over H.buckets.
function H.normalise(t)
  local sum, r = 0, {}
  for _, b in ipairs(H.buckets) do sum = sum + (t[b] or 0) end
  for _, b in ipairs(H.buckets) do r[b] = sum > 0 and (t[b] or 0) / sum or 0 end
  return r
end

-- Total variation distance between two share tables over H.buckets.
function H.tvd(p, q)
  local d = 0
  for _, b in ipairs(H.buckets) do d = d + math.abs((p[b] or 0) - (q[b] or 0)) end
  return d / 2
end

-- The TVD expected from sampling alone: an iid sampler drawing n
-- independent samples from the true shares q (normal approximation of
-- E|p_i - q_i| = sqrt(2/pi) * sqrt(q_i (1 - q_i) / n)).
function H.noise_tvd(q, n)
  if not n or n <= 0 then return nil end
  local d = 0
  for _, b in ipairs(H.buckets) do
    local x = q[b] or 0
    d = d + math.sqrt(2 / math.pi) * math.sqrt(x * (1 - x) / n)
  end
  return d / 2
end

-- -- Calibration -------------------------------------------------------------
-- For each component: choose its size parameter n so that one call costs
-- about `target` seconds of CPU time, then measure the cost per call
-- (`reps` repetitions of a batch of calls, median of the per-call means).
-- Everything runs through the interpreted driver (comp.drive), the one of
-- all mixes but the compiled-driver mix, so the code path (interpreted
-- driver, call through an upvalue) is the one that is profiled; the
-- compiled-driver mix uses the same sizes and costs.
-- Returns {size = {n per index}, cost = {s per call per index},
-- spread = {min, max per-call mean per index}, target=, reps=, calls=
-- (calls per batch)}.
function H.calibrate(opts)
  opts = opts or {}
  local target = opts.target or 0.001
  local reps = opts.reps or 7
  local log = opts.log or function() end
  local ncomp = #comp.all
  local size, cost, spread = {}, {}, {}
  local function batch(k, n, calls)
    local seq = {}
    for i = 1, calls do seq[i] = k end
    local sz = zeros(ncomp)
    sz[k] = n
    local wall, cpu = zeros(ncomp), zeros(ncomp)
    comp.drive(seq, calls, sz, wall, cpu)
    return cpu[k] / calls
  end
  for k, c in ipairs(comp.all) do
    local n = c.n
    batch(k, n, 5)                          -- warm up: traces get compiled
    for _ = 1, 4 do                         -- rescale n towards the target
      local t = batch(k, n, 3)
      n = math.max(1, math.floor(n * target / math.max(t, 1e-7) + 0.5))
    end
    batch(k, n, 3)                          -- warm up at the final size
    local per = {}
    local calls = math.max(3, math.floor(0.02 / target + 0.5))  -- ~20 ms a batch
    for r = 1, reps do per[r] = batch(k, n, calls) end
    table.sort(per)
    size[k], cost[k], spread[k] = n, H.median(per), {per[1], per[#per]}
    log(string.format("  %-8s n=%-8d %.3f ms/call (min %.3f, max %.3f over %d x %d calls)\n",
                      c.id, n, cost[k] * 1e3, per[1] * 1e3, per[#per] * 1e3, reps, calls))
  end
  return {size = size, cost = cost, spread = spread, target = target, reps = reps,
          calls = math.max(3, math.floor(0.02 / target + 0.5))}
end

-- -- Mixes -------------------------------------------------------------------
-- A mix is {name=, title=, weights = {id = weight}, driver = "interpreted"
-- (default) | "compiled", flush = true (start each pass with jit.flush()),
-- lead = {id, n} (each pass starts with n calls of that component; see
-- H.sequence)}; missing weights are 0.
-- plan() turns it into call counts for `seconds` of calibrated CPU time.

function H.intended(mix)
  local w = {}
  for _, c in ipairs(comp.all) do w[c.id] = mix.weights[c.id] or 0 end
  return H.normalise(w)
end

function H.plan(mix, cal, seconds)
  local p = H.intended(mix)
  local calls = {}
  for k, c in ipairs(comp.all) do
    calls[k] = p[c.id] > 0 and math.max(1, math.floor(p[c.id] * seconds / cal.cost[k] + 0.5)) or 0
  end
  return {mix = mix, size = cal.size, calls = calls, seconds = seconds}
end

-- The calls of a plan in a random order (seeded Fisher-Yates). With
-- lead = {k, n} (the mix's `lead`, by component id, or given), the first n
-- calls are calls of component k (taken from its calls), then the rest in
-- a random order.
function H.sequence(plan, seed, lead)
  lead = lead or (plan.mix and plan.mix.lead and
                  {comp.by_id[plan.mix.lead[1]].index, plan.mix.lead[2]})
  local seq, first = {}, {}
  for k, n in ipairs(plan.calls) do
    local m = (lead and lead[1] == k) and math.min(n, lead[2]) or 0
    for _ = 1, m do first[#first + 1] = k end
    for _ = 1, n - m do seq[#seq + 1] = k end
  end
  math.randomseed(seed)
  for i = #seq, 2, -1 do
    local j = math.random(i)
    seq[i], seq[j] = seq[j], seq[i]
  end
  if #first > 0 then
    for i = #seq, 1, -1 do seq[i + #first] = seq[i] end
    for i = 1, #first do seq[i] = first[i] end
  end
  return seq, #seq
end

-- A plan as one command-line word ("n:calls,n:calls,...") and back, for the
-- perturbation subprocesses.
function H.encode_plan(plan)
  local t = {}
  for k = 1, #comp.all do t[k] = plan.size[k] .. ":" .. plan.calls[k] end
  return table.concat(t, ",")
end

function H.decode_plan(s)
  local size, calls = {}, {}
  for n, c in s:gmatch("(%d+):(%d+)") do
    size[#size + 1] = tonumber(n)
    calls[#calls + 1] = tonumber(c)
  end
  assert(#size == #comp.all, "bad plan " .. s)
  return {size = size, calls = calls}
end

-- -- Profilers -----------------------------------------------------------------
-- A profiler is {label=, clock="wall"|"cpu" (what its samples measure, so
-- which in-run truth it is compared with), start=fn, stop=fn -> result}.
-- result = {entries = {{stack=, vmstate=, count=}...}, samples = weighted
-- sample count, draws = independent sampling events (signals / callbacks),
-- extra = free-form text}.

local KEY_FMT, KEY_DEPTH = "fZ;", -100

-- ljprof, aggregating internally.
function H.ljprof(clock, interval)
  local ljprof = require("ljprof")
  return {
    label = string.format("ljprof %s %g ms", clock, interval),
    clock = clock,
    start = function()
      ljprof.record({clock = clock, interval = interval, fmt = KEY_FMT, depth = KEY_DEPTH})
    end,
    stop = function()
      local ok, msg = ljprof.stop()
      assert(ok, "ljprof.stop: " .. tostring(msg))
      local entries = ljprof.summary()
      local st = ljprof.stats()
      local n = 0
      for _, e in ipairs(entries) do n = n + e.count end
      return {entries = entries, samples = n, draws = st.signals, stats = st,
              extra = string.format("%d signals, %d ticks, %d dropped, %d merged",
                                    st.signals, st.ticks, st.dropped, st.merged or 0)}
    end,
  }
end

-- The built-in jit.profile: the callback dumps the stack with the same key
-- format and counts `samples` per (stack, vmstate). dumpstack is only ever
-- called from inside the callback.
function H.builtin(mode)
  local profile = require("jit.profile")
  local dumpstack = profile.dumpstack
  local counts, callbacks
  return {
    label = "jit.profile " .. mode,
    clock = "cpu",  -- ITIMER_PROF: process CPU time (one thread here)
    start = function()
      counts, callbacks = {}, 0
      profile.start(mode, function(th, samples, vmstate)
        callbacks = callbacks + 1
        local key = dumpstack(th, KEY_FMT, KEY_DEPTH)
        local byvm = counts[key]
        if not byvm then byvm = {}; counts[key] = byvm end
        byvm[vmstate] = (byvm[vmstate] or 0) + samples
      end)
    end,
    stop = function()
      profile.stop()
      local entries, n = {}, 0
      for key, byvm in pairs(counts) do
        for vm, c in pairs(byvm) do
          entries[#entries + 1] = {stack = key, vmstate = vm, count = c}
          n = n + c
        end
      end
      return {entries = entries, samples = n, draws = callbacks,
              extra = string.format("%d callbacks", callbacks)}
    end,
  }
end

-- -- Attribution ---------------------------------------------------------------
-- Each sample goes to the component whose function name is the innermost
-- component frame of its stack key (keys are root-first, ';'-separated);
-- a stack without a component frame goes to "other". Returns
-- {counts = {bucket -> weighted samples}, shares, vm = {state -> samples},
-- vm_by = {bucket -> {state -> samples}}, total}.
local NAMES = comp.frame_names()

function H.attribute(entries)
  local counts, vm, vm_by, total = {}, {}, {}, 0
  for _, b in ipairs(H.buckets) do counts[b] = 0; vm_by[b] = {} end
  local cache = {}
  for _, e in ipairs(entries) do
    local b = comp.bucket_of(e.stack, NAMES, cache)
    counts[b] = counts[b] + e.count
    vm[e.vmstate] = (vm[e.vmstate] or 0) + e.count
    vm_by[b][e.vmstate] = (vm_by[b][e.vmstate] or 0) + e.count
    total = total + e.count
  end
  return {counts = counts, shares = H.normalise(counts), vm = vm, vm_by = vm_by, total = total}
end

-- -- Trace events ------------------------------------------------------------
-- A trace-event log for the passes of the compiled-driver mix: which
-- traces LuaJIT completed in the drivers, clocks and components, where
-- each started (root, or side trace of which) and what it links to.
-- H.trace_watch() -> w; w.attach() before the pass (before the profilers
-- start: ljprof chains to this handler), w.reset() to forget what it saw so
-- far (as if attached just now), w.detach() after it -> summary
-- {traces = {{fn= (starts in), kind= (root, side trace of ..., stitched
-- to ...), link= (what it links to), endfn= (function where recording
-- ended), n=}...} in order of first completion, aborts = n (of traces
-- starting in those functions), reasons = {{text=, n=}...} (those aborts
-- by start and reason), flushes = n}. After detach the handler does
-- nothing: when another handler was attached on top of it and chains to it
-- (ljprof after ljprof.watch()), jit.attach cannot take it out of that chain.

-- Where a function is: the name of the innermost named function of
-- components.lua whose lines hold it ("acc_closure" for the closure that
-- acc_closure creates), else nil.
local RANGES = comp.function_ranges()
local function where(func)
  local fi = require("jit.util").funcinfo(func)
  if not fi or not fi.source then return nil end
  local src = fi.source:gsub("^@", ""):gsub("^.*/", "")
  local best
  for _, r in ipairs(RANGES) do
    if r.source == src and fi.linedefined >= r.first and fi.linedefined <= r.last and
       (not best or r.last - r.first < best.last - best.first) then
      best = r
    end
  end
  if not best then return nil end
  if best.first ~= fi.linedefined then return best.name .. "'s closure" end
  return best.name
end

function H.trace_watch()
  local jutil = require("jit.util")
  local vmdef = require("jit.vmdef")
  local started, order, count, aborts, flushes, reasons = {}, {}, {}, 0, 0, {}
  local active = true
  local function handler(what, tr, func, pc, otr, oex)
    if not active then return end
    if what == "start" then
      -- otr: the parent trace of a side trace (oex: its exit), or of a
      -- stitched trace (oex: -1); nil for a root trace.
      local parent = otr and started[otr]
      started[tr] = {fn = where(func), side = otr ~= nil and oex ~= -1,
                     stitched = oex == -1,
                     parent = parent and ((parent.side and "a side trace" or
                       parent.stitched and "a stitched trace" or "a root trace") ..
                       " from " .. (parent.fn or "elsewhere")) or "a trace from elsewhere"}
    elseif what == "stop" then
      local s = started[tr]
      if s and s.fn then
        local ti = jutil.traceinfo(tr)
        local link = ti and ti.linktype or "?"
        if link == "root" then
          local t = started[ti.link]
          link = t and ((t.side and "a side trace" or t.stitched and "a stitched trace" or
                         "a root trace") .. " from " .. (t.fn or "elsewhere")) or "a trace compiled before this log started"
        elseif link == "loop" then link = "itself (loop)"
        end
        local e = {fn = s.fn, link = link, endfn = where(func) or "?",
                   kind = s.side and ("side, at an exit of " .. s.parent) or
                          s.stitched and ("stitched to " .. s.parent) or "root"}
        local key = table.concat({e.fn, e.kind, e.link, e.endfn}, "\0")
        if not count[key] then count[key] = e; e.n = 0; order[#order + 1] = key end
        count[key].n = count[key].n + 1
      end
    elseif what == "abort" then
      local s = started[tr]
      if s and s.fn then
        aborts = aborts + 1
        local fmt = type(otr) == "number" and vmdef.traceerr[otr] or tostring(otr)
        if type(oex) == "function" then oex = where(oex) or "?" end
        local ok, r = pcall(string.format, fmt, oex)
        local key = s.fn .. (s.side and " (side)" or "") .. ": " .. (ok and r or fmt)
        reasons[key] = (reasons[key] or 0) + 1
      end
    elseif what == "flush" then
      flushes = flushes + 1
    end
  end
  return {
    attach = function() jit.attach(handler, "trace") end,
    reset = function()
      started, order, count, aborts, flushes, reasons = {}, {}, {}, 0, 0, {}
    end,
    detach = function()
      jit.attach(handler)
      active = false
      local t = {}
      for i, key in ipairs(order) do t[i] = count[key] end
      local r = {}
      for k, n in pairs(reasons) do r[#r + 1] = {text = k, n = n} end
      table.sort(r, function(a, b) return a.n > b.n or (a.n == b.n and a.text < b.text) end)
      return {traces = t, aborts = aborts, flushes = flushes, reasons = r}
    end,
  }
end

-- -- One pass ------------------------------------------------------------------
-- Runs the plan's calls in a seeded random order, through the mix's driver
-- (comp.drivers[mix.driver], default the interpreted one), with the given profilers
-- running (a list, possibly empty, started in order and stopped in reverse).
-- The truth is each call's own time measured in-run, per clock; time of
-- the driver loop outside the calls is "other".
-- min_cpu (optional, seconds): when the calls took less CPU time than this
-- (the machine got faster since calibration), more calls follow, in a new
-- random order, with the mix's intended shares and the costs per call
-- measured so far in this pass, until it is reached (at most 4 top-ups).
-- The bookkeeping between top-ups counts as "other".
-- Returns {truth = {wall = shares, cpu = shares}, seconds = {wall=, cpu=},
--  calls=, results = {{profiler=, result=, attr=, tvd=, noise=}...}}.
function H.run_pass(plan, profilers, seed, min_cpu)
  local ncomp = #comp.all
  local drive = comp.drivers[plan.mix.driver or "interpreted"]
  local seq, nseq = H.sequence(plan, seed)
  local wall, cpu = zeros(ncomp), zeros(ncomp)
  local done = {}
  for k = 1, ncomp do done[k] = plan.calls[k] end
  collectgarbage()
  collectgarbage()
  -- The compiled-driver mix: every pass starts with no traces, so that the
  -- traces linking driver and components are compiled within the pass, the
  -- same way for every profiler. jit.profile flushes at its stop only (and
  -- at its start in modes f and l); ljprof never flushes, and knows where a
  -- trace started only if it saw the trace's start event (during a run,
  -- after ljprof.watch(), or in an earlier run of this state).
  if plan.mix.flush then jit.flush() end
  for _, p in ipairs(profilers) do p.start() end
  local W, C = drive(seq, nseq, plan.size, wall, cpu)
  local round = 0
  while min_cpu and C < 0.98 * min_cpu and round < 4 do
    round = round + 1
    local w0, c0 = comp.now_wall(), comp.now_cpu()
    local p, extra = H.intended(plan.mix), {}
    for k, c in ipairs(comp.all) do
      local cost = done[k] > 0 and cpu[k] / done[k] or 0
      extra[k] = (p[c.id] > 0 and cost > 0)
        and math.max(1, math.floor(p[c.id] * (min_cpu - C) / cost + 0.5)) or 0
      done[k] = done[k] + extra[k]
    end
    local s2, n2 = H.sequence({calls = extra}, seed + 7919 * round)  -- no lead
    local bw, bc = comp.now_wall() - w0, comp.now_cpu() - c0
    local w2, c2 = drive(s2, n2, plan.size, wall, cpu)
    W, C = W + bw + w2, C + bc + c2
    nseq = nseq + n2
  end
  local res = {}
  for i = #profilers, 1, -1 do res[i] = profilers[i].stop() end

  local truth, secs = {}, {wall = W, cpu = C}
  for clock, per in pairs({wall = wall, cpu = cpu}) do
    local t, sum = {}, 0
    for k, c in ipairs(comp.all) do t[c.id] = per[k]; sum = sum + per[k] end
    t.other = math.max(0, secs[clock] - sum)
    truth[clock] = H.normalise(t)
  end
  local out = {truth = truth, seconds = secs, calls = nseq, results = {}}
  for i, p in ipairs(profilers) do
    local attr = H.attribute(res[i].entries)
    local q = truth[p.clock]
    out.results[i] = {profiler = p, result = res[i], attr = attr,
                      tvd = H.tvd(attr.shares, q),
                      noise = H.noise_tvd(q, res[i].draws)}
  end
  return out
end

return H
