-- Overhead: every workload under plain luajit, ljprof (-jprof) and jit.p
-- (-jp) at 10 ms and 1 ms, and ljprof's wall clock at 1 kHz, in
-- interleaved rounds (round 1: A B C ..., round 2: B C ... A, ...); the sweep
-- workloads also run ljprof's wall clock at more rates, for the plot of
-- overhead against sampling rate. Each profiled run is compared with the
-- plain run of the same round (paired ratios), and its samples are
-- counted.
local proc = require("lib.proc")
local stat = require("lib.stat")
local configs = require("lib.configs")

local M = {}

local function merged(a, b)
  local e = {}
  for k, v in pairs(a) do e[k] = v end
  for k, v in pairs(b or {}) do e[k] = v end
  return e
end

function M.run(ctx)
  local base, sweep = configs.base(), configs.sweep()
  local res = {workloads = ctx.workloads, sweep_workloads = ctx.sweep_workloads,
               reps = ctx.reps, cfgs = {}, data = {}, mismatches = {}, base = base, sweep = sweep}
  local in_sweep = {}
  for _, w in ipairs(ctx.sweep_workloads) do in_sweep[w] = true end
  local ref = {}
  for _, w in ipairs(ctx.workloads) do
    local list = {}
    for _, c in ipairs(base) do list[#list + 1] = c end
    if in_sweep[w] then for _, c in ipairs(sweep) do list[#list + 1] = c end end
    res.cfgs[w] = list
    res.data[w] = {}
    for _, c in ipairs(list) do res.data[w][c.name] = {} end
    -- Warm-up (discarded), which is also the reference output.
    local r = proc.run_retry("plain " .. w, base[1].argv(ctx.script(w)), ctx.env)
    ref[w] = assert(r, "the unprofiled run of " .. w .. " crashed").out
  end
  for rep = 1, ctx.reps do
    -- One heap layout per round, the same for every configuration of it
    -- (bench/probe.lua, LJPROF_BENCH_LAYOUT).
    local layout = M.layout(rep)
    for _, w in ipairs(ctx.workloads) do
      proc.log("overhead round %d/%d %-12s", rep, ctx.reps, w)
      -- The order rotates by one configuration each round, so that none
      -- always runs first (or right after a given other one).
      local list = res.cfgs[w]
      for k = 1, #list do
        local c = list[(k + rep - 2) % #list + 1]
        c.prepare()
        local env = merged(ctx.env, c.env)
        env.LJPROF_BENCH_LAYOUT = tostring(layout)
        local r = proc.run_retry(c.name .. " " .. w, c.argv(ctx.script(w)), env)
        if r and r.out ~= ref[w] then
          res.mismatches[#res.mismatches + 1] = string.format("%s under %s, round %d", w, c.name, rep)
          proc.log("\n!! %s under %s printed different output\n", w, c.name)
          r = nil
        end
        if r then
          if c.samples then r.st = c.samples() end
          r.out, r.err = nil, nil
          proc.log(" %s %.2f", c.name, r.cpu)
        else
          proc.log(" %s FAILED", c.name)
        end
        res.data[w][c.name][rep] = r or false
      end
      proc.log("\n")
    end
  end
  return res
end

-- The heap layout of round rep: an early allocation of 8 times this many
-- bytes, spread over 0..1000 (deterministic, so two runs of the suite
-- match).
function M.layout(rep)
  return (rep * 389) % 1001
end

-- -- Derived numbers ---------------------------------------------------------

-- Paired ratios a/b of one field over the rounds where both ran.
local function paired(res, w, a, b, field)
  local t = {}
  local da, db = res.data[w][a], res.data[w][b]
  if not da or not db then return t end
  for i = 1, res.reps do
    if da[i] and db[i] then t[#t + 1] = da[i][field] / db[i][field] end
  end
  return t
end
M.paired = paired

-- Fastest profiled run over fastest plain run (noise from other load only
-- adds time, so the minima are the least disturbed runs).
local function min_ratio(res, w, name, field)
  local a, b = math.huge, math.huge
  for i = 1, res.reps do
    local ra, rb = res.data[w][name][i], res.data[w].plain[i]
    if ra then a = math.min(a, ra[field]) end
    if rb then b = math.min(b, rb[field]) end
  end
  if a == math.huge or b == math.huge then return nil end
  return a / b
end
M.min_ratio = min_ratio

-- Median over rounds of a statistic per CPU second of the run.
local function per_cpu(res, w, name, key)
  local t = {}
  for i = 1, res.reps do
    local r = res.data[w][name][i]
    if r and r.st and r.st[key] then t[#t + 1] = r.st[key] / r.cpu end
  end
  return stat.median(t)
end
M.per_cpu = per_cpu

local function sum_stat(res, w, name, key)
  local n, any = 0, false
  for i = 1, res.reps do
    local r = res.data[w][name][i]
    if r and r.st and r.st[key] then n = n + r.st[key]; any = true end
  end
  return any and n or nil
end

-- Median CPU ratio of a configuration to plain (nil without data).
function M.cpu_ratio(res, w, name)
  return stat.median(paired(res, w, name, "plain", "cpu"))
end

-- -- Report --------------------------------------------------------------------

function M.tables(res)
  local L = {}
  local function p(s) L[#L + 1] = s end
  p("### Unprofiled baseline")
  p("")
  p("| workload | wall s, median (IQR) | CPU s, median (IQR) |")
  p("|---|---|---|")
  for _, w in ipairs(res.workloads) do
    local walls, cpus = {}, {}
    for i = 1, res.reps do
      local r = res.data[w].plain[i]
      if r then walls[#walls + 1] = r.wall; cpus[#cpus + 1] = r.cpu end
    end
    if #walls > 0 then
      p(string.format("| %s | %.3f (%.3f-%.3f) | %.3f (%.3f-%.3f) |", w, stat.median(walls),
        stat.quantile(walls, 0.25), stat.quantile(walls, 0.75), stat.median(cpus),
        stat.quantile(cpus, 0.25), stat.quantile(cpus, 0.75)))
    end
  end
  p("")
  p("### Summary: CPU overhead (median over rounds, % over plain)")
  p("")
  p("Each cell: median paired CPU-time ratio − 1. Samples per CPU second in brackets " ..
    "(ljprof: timer signals taken; jit.p: samples in its report). *no samples*: started with " ..
    "a 60 s interval. *LuaJIT's mode*: no profiler, LuaJIT's profiling mode on as jit.p's " ..
    "`G` view turns it on (`jit.profile.start(\"fi60000\")`, a callback that does nothing): " ..
    "what jit.p's mode alone does to the compiled code.")
  p("")
  p("| workload | ljprof 10 ms | jit.p 10 ms | ljprof 1 ms (cpu) | jit.p 1 ms | ljprof wall 1 kHz " ..
    "| ljprof no samples | jit.p no samples | LuaJIT's mode |")
  p("|---|---|---|---|---|---|---|---|---|")
  for _, w in ipairs(res.workloads) do
    local cells = {}
    for _, name in ipairs({"cpu10", "jp10", "cpu1", "jp1", "wall1k", "idle", "jpidle", "vmprof"}) do
      local r = res.data[w][name] and M.cpu_ratio(res, w, name)
      local sps = res.data[w][name] and per_cpu(res, w, name, "signals")
      cells[#cells + 1] = not r and "(no data)" or
        ((name == "vmprof" or name:match("idle$")) and stat.pct(r)) or
        string.format("%s [%s/s]", stat.pct(r), stat.num(sps))
    end
    p(string.format("| %s | %s |", w, table.concat(cells, " | ")))
  end
  p("")
  p("### Production: started from the environment (`LJPROF`, `-l ljprof.auto`)")
  p("")
  p("ljprof as an operator turns it on (docs/operators.md): `LJPROF=rate=R,output=OUT.pb.gz " ..
    "luajit -l ljprof.auto WORKLOAD`, cpu clock, a pprof profile written at exit. Each cell: " ..
    "median paired CPU-time ratio − 1 (samples per CPU second); *vs jit.p*: paired CPU ratio " ..
    "to jit.p at the nearest interval in the same rounds (`-jp=Gi53`, `Gi10`, `Gi1`). 99 Hz, " ..
    "the default, runs on every workload; 19 and 999 Hz on the sweep workloads.")
  p("")
  p("| workload | 19 Hz | vs jit.p 53 ms | 99 Hz (default) | vs jit.p 10 ms | 999 Hz | vs jit.p 1 ms |")
  p("|---|---|---|---|---|---|---|")
  for _, w in ipairs(res.workloads) do
    local cells = {}
    for _, pair in ipairs({{"auto19", "jp53"}, {"auto99", "jp10"}, {"auto999", "jp1"}}) do
      local a, j = pair[1], pair[2]
      if res.data[w][a] then
        local r = M.cpu_ratio(res, w, a)
        cells[#cells + 1] = r and string.format("%s [%s/s]", stat.pct(r),
                                                stat.num(per_cpu(res, w, a, "signals"))) or "(no data)"
        local v = res.data[w][j] and stat.median(paired(res, w, a, j, "cpu"))
        cells[#cells + 1] = v and string.format("×%.3f", v) or ""
      else
        cells[#cells + 1] = ""
        cells[#cells + 1] = ""
      end
    end
    p(string.format("| %s | %s |", w, table.concat(cells, " | ")))
  end
  p("")
  p("### Native (C) frames: what their capture costs")
  p("")
  p("The same runs with native capture on (the default) and off (`/native=off`): " ..
    "median paired CPU ratio on/off in the same rounds (IQR), and the native frames " ..
    "recorded per sample with it on.")
  p("")
  p("| workload | 100 Hz (cpu) on/off | 1 kHz (wall) on/off | native frames per signal (1 kHz) |")
  p("|---|---|---|---|")
  for _, w in ipairs(res.workloads) do
    if res.data[w].cpu10n then
      local fr, sg = sum_stat(res, w, "wall1k", "native_frames"), sum_stat(res, w, "wall1k", "signals")
      p(string.format("| %s | %s | %s | %s |", w,
        stat.ratio_cell(paired(res, w, "cpu10", "cpu10n", "cpu"), res.reps),
        stat.ratio_cell(paired(res, w, "wall1k", "wall1kn", "cpu"), res.reps),
        (fr and sg and sg > 0) and string.format("%.2f", fr / sg) or ""))
    end
  end
  p("")
  p("### Every configuration")
  p("")
  p("Ratios are profiled/plain of the same round: median (interquartile range) over " ..
    res.reps .. " rounds. Rates are per second of the run's CPU time (user+sys), " ..
    "medians over rounds: *signals* = timer signals taken (ljprof's statistics; for " ..
    "jit.p the samples in its report), *ticks* = ljprof's sample weight, which also " ..
    "counts timer expiries a tick-limited CPU timer could not deliver, *safe points* = " ..
    "ljprof's stack dumps (samples that arrive in compiled code wait for the next exit " ..
    "to the interpreter and share one dump). *dropped* = ticks lost over all rounds " ..
    "(ring full, nothing to merge into). *CPU vs jit.p* = paired CPU ratio to the jit.p " ..
    "run at the same interval (1 ms for wall 1 kHz). *CPU min* = the fastest profiled run over the " ..
    "fastest plain run, an estimate less disturbed by other load.")
  p("")
  p("| workload | configuration | wall ×plain | CPU ×plain | CPU min | signals/s | ticks/s | safe points/s | dropped | CPU vs jit.p |")
  p("|---|---|---|---|---|---|---|---|---|---|")
  for _, w in ipairs(res.workloads) do
    for _, c in ipairs(res.cfgs[w]) do
      if c.kind ~= "plain" then
        local vs = configs.VS_JITP[c.name]
        p(string.format("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |", w, c.label,
          stat.ratio_cell(paired(res, w, c.name, "plain", "wall"), res.reps),
          stat.ratio_cell(paired(res, w, c.name, "plain", "cpu"), res.reps),
          stat.num(min_ratio(res, w, c.name, "cpu"), "%.3f"),
          stat.num(per_cpu(res, w, c.name, "signals")),
          c.kind == "ljprof" and stat.num(per_cpu(res, w, c.name, "ticks")) or "",
          c.kind == "ljprof" and stat.num(per_cpu(res, w, c.name, "safepoints")) or "",
          c.kind == "ljprof" and stat.num(sum_stat(res, w, c.name, "dropped")) or "",
          vs and stat.ratio_cell(paired(res, w, c.name, vs, "cpu"), res.reps) or ""))
      end
    end
  end
  p("")
  return table.concat(L, "\n")
end

-- Overhead against the samples actually taken per second, one panel per
-- sweep workload: spec for lib/svgplot. The runs that take no sample are
-- drawn at IDLE_X, left of a break in the axis.
M.IDLE_X = 25
function M.plot(res)
  local panels = {}
  local groups = {
    {name = "ljprof, wall clock", color = "#1f77b4", marker = "circle", line = true,
     cfgs = {"wall100", "wall1k", "wall3000", "wall10000"}},
    {name = "ljprof, cpu clock (10 ms, 1 ms)", color = "#ff7f0e", marker = "square", line = true,
     cfgs = {"cpu10", "cpu1"}},
    {name = "jit.p (10 ms, 1 ms)", color = "#d62728", marker = "triangle", line = true,
     cfgs = {"jp10", "jp1"}},
    {name = "ljprof, no samples", color = "#1f77b4", marker = "diamond", cfgs = {"idle"}, idle = true},
    {name = "jit.p, no samples", color = "#d62728", marker = "diamond", cfgs = {"jpidle"}, idle = true},
  }
  for _, w in ipairs(res.sweep_workloads) do
    local series = {}
    for _, g in ipairs(groups) do
      local pts = {}
      for _, name in ipairs(g.cfgs) do
        local t = paired(res, w, name, "plain", "cpu")
        if #t > 0 then
          pts[#pts + 1] = {x = g.idle and M.IDLE_X or per_cpu(res, w, name, "signals"),
                           y = (stat.median(t) - 1) * 100,
                           lo = (stat.quantile(t, 0.25) - 1) * 100,
                           hi = (stat.quantile(t, 0.75) - 1) * 100}
        end
      end
      series[#series + 1] = {name = g.name, color = g.color, marker = g.marker, line = g.line, points = pts}
    end
    panels[#panels + 1] = {title = w, series = series}
  end
  return {
    title = "CPU overhead against samples taken per second (median, bars: interquartile range)",
    xidle = M.IDLE_X, yclip = 40,
    xlabel = "samples taken per CPU second (log scale)",
    ylabel = "CPU time over plain luajit (%)",
    panels = panels,
    targets = {{x = 100, y = 1, label = "1% @100 Hz"}, {x = 1000, y = 3, label = "3% @1 kHz"}},
  }
end

return M
