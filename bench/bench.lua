-- ljprof's benchmark suite: overhead against plain luajit and jit.p,
-- JIT perturbation, per-sample cost and aggregation throughput. Writes the
-- report (docs/performance.md) and the plot of overhead against sampling
-- rate (docs/img/overhead-vs-rate.svg), and prints a summary.
--
-- Started by bench/run, which builds ljprof, copies the library and
-- compiles the C helpers into a scratch directory, and passes:
--   LJPROF_BENCH_LIBDIR    directory holding libljprof.so
--   LJPROF_BENCH_TMP       scratch directory
--   LJPROF_BENCH_SIGCOST   compiled bench/sigcost.c (optional)
--   LJPROF_BENCH_AGGBENCH  compiled bench/aggbench.c (optional)
--   LJPROF_BENCH_CMD       the command line, for the report
--   LJPROF_BENCH_BUILD     the build directory, for the report
-- Options (bench/run passes them on):
--   --quick             a smoke check in about 2.5 minutes: 2 workloads, 3
--                       rounds; writes the report into the build directory
--   --reps N            overhead rounds (default 13; quick 3)
--   --cost-reps N       per-sample cost rounds (default 5; quick 2)
--   --jit-reps N        trace-count rounds (default 2; quick 1)
--   --workloads a,b     overhead and trace-count workloads
--   --sweep a,b         workloads that also run the rate sweep
--   --parts a,b         any of overhead,jit,cost,throughput,memory (default all)
--   --no-perf           skip the perf recordings
--   --out FILE          report file; --plot FILE  plot file
package.path = "bench/?.lua;" .. package.path
local proc = require("lib.proc")
local stat = require("lib.stat")
local svgplot = require("lib.svgplot")
local overhead = require("lib.overhead")
local jitperturb = require("lib.jitperturb")
local cost = require("lib.cost")
local throughput = require("lib.throughput")
local memory = require("lib.memory")

local ALL_WORKLOADS = {"fib", "nbody", "spectralnorm", "mandelbrot", "binarytrees", "strings",
                       "tablechurn", "json", "coroutines", "richards", "mixed", "luacheck"}
local SWEEP = {"fib", "json", "richards", "luacheck"}
local QUICK_WORKLOADS = {"fib", "json"}
local QUICK_SWEEP = {"fib"}

-- -- Options ----------------------------------------------------------------------

local opt = require("lib.args").parse(arg, {
  ["--quick"] = "flag", ["--reps"] = "number", ["--cost-reps"] = "number",
  ["--jit-reps"] = "number", ["--workloads"] = "list", ["--sweep"] = "list",
  ["--parts"] = "list", ["--no-perf"] = "flag", ["--out"] = "string", ["--plot"] = "string",
}, "bench")
opt.quick = opt.quick or false
opt.perf = not opt.no_perf

local BUILD = os.getenv("LJPROF_BENCH_BUILD") or "build"
local ctx = {
  quick = opt.quick,
  reps = opt.reps or (opt.quick and 3 or 13),
  cost_reps = opt.cost_reps or (opt.quick and 2 or 5),
  jit_reps = opt.jit_reps or (opt.quick and 1 or 2),
  agg_samples = opt.quick and 200000 or 1000000,
  workloads = opt.workloads or (opt.quick and QUICK_WORKLOADS or ALL_WORKLOADS),
  sigcost = os.getenv("LJPROF_BENCH_SIGCOST"),
  aggbench = os.getenv("LJPROF_BENCH_AGGBENCH"),
  have = {},
}
if ctx.sigcost == "" then ctx.sigcost = nil end
if ctx.aggbench == "" then ctx.aggbench = nil end
local parts = {}
for _, p in ipairs(opt.parts or {"overhead", "jit", "cost", "throughput", "memory"}) do parts[p] = true end
local out_file = opt.out or (opt.quick and (BUILD .. "/bench/performance.md") or "docs/performance.md")
local plot_file = opt.plot or (opt.quick and (BUILD .. "/bench/overhead-vs-rate.svg")
                               or "docs/img/overhead-vs-rate.svg")

proc.TMP = os.getenv("LJPROF_BENCH_TMP") or proc.sh("mktemp -d")
local ROOT = proc.sh("pwd")
local LIBDIR = os.getenv("LJPROF_BENCH_LIBDIR") or (BUILD)
ctx.env = {
  LUA_PATH = ROOT .. "/?.lua;" .. ROOT .. "/jit/?.lua;;",
  LUA_CPATH = LIBDIR .. "/lib?.so;;",
  LUAJIT_PROFILEFILE = false, LJPROF_BENCH = false,
  LJPROF_BENCH_STATS = false, LJPROF_BENCH_TRACES = false, LJPROF = false,
}
ctx.script = function(w) return "bench/workloads/" .. w .. ".lua" end
ctx.perf = opt.perf and proc.sh("command -v perf") ~= ""

-- luacheck is a Debian package (bench/run installs it); without it, that
-- workload is left out and said so.
ctx.have.luacheck = proc.sh("luajit -e 'print(package.searchpath(\"luacheck.main\", package.path) ~= nil)'") == "true"
do
  local w = {}
  for _, x in ipairs(ctx.workloads) do
    if x ~= "luacheck" or ctx.have.luacheck then w[#w + 1] = x end
  end
  ctx.workloads = w
  local s, inset = {}, {}
  for _, x in ipairs(w) do inset[x] = true end
  for _, x in ipairs(opt.sweep or (opt.quick and QUICK_SWEEP or SWEEP)) do
    if inset[x] then s[#s + 1] = x end
  end
  ctx.sweep_workloads = s
end

-- -- Machine facts --------------------------------------------------------------------

local function machine()
  local cpuinfo = proc.readfile("/proc/cpuinfo") or ""
  return {
    date = os.date("!%Y-%m-%d %H:%M UTC"),
    nproc = proc.sh("nproc"),
    cpu = cpuinfo:match("model name%s*:%s*([^\n]*)") or "?",
    kernel = proc.sh("uname -sr"),
    luajit = proc.sh("luajit -v"),
    mem = ((proc.readfile("/proc/meminfo") or ""):match("MemTotal:%s*(%d+)") or "?"),
    load = (proc.readfile("/proc/loadavg") or "?"):match("^(%S+ %S+ %S+)"),
    clocksource = (proc.readfile("/sys/devices/system/clocksource/clocksource0/current_clocksource")
                   or "?"):gsub("%s+$", ""),
    commit = proc.sh("git rev-parse --short HEAD"),
    dirty = proc.sh("git status --porcelain -- src include meson.build jit"),
    perf = proc.sh("perf --version 2>/dev/null"),
    luacheck = proc.sh("dpkg-query -W -f '${Version}' lua-check 2>/dev/null"),
  }
end

-- -- Run ----------------------------------------------------------------------------

local t_start = proc.now()
local m0 = machine()
local R = {}
if parts.overhead then R.over = overhead.run(ctx) end
if parts.jit then R.jit = jitperturb.run(ctx) end
if parts.cost then R.cost = cost.run(ctx) end
if parts.throughput then R.agg = throughput.run(ctx) end
if parts.memory then R.mem = memory.run(ctx) end
-- Hot compiled code (bench/hot_traces.lua, its own markdown; ~1 min).
if parts.memory then
  local f = io.popen("luajit bench/hot_traces.lua" .. (opt.quick and " 2000 1 1 20" or "") .. " 2>&1")
  R.hot = f:read("*a")
  f:close()
end
local m1 = machine()
local elapsed = proc.now() - t_start

-- -- Targets ----------------------------------------------------------------------------

-- Each: {target=, measured=, verdict=} rows for the report and the summary.
local targets = {}
local function verdict(ok) return ok and "met" or "**missed**" end
-- Per workload, a target on a paired ratio is met when the confidence
-- interval of its median (stat.median_ci, CONF) lies within the limit,
-- missed when it lies beyond, and not resolved by this run when the
-- interval holds the limit: on a noisy VM a median alone would pass or
-- fail a workload by chance.
local CONF = 0.90
local function ci(t)
  local lo, hi = stat.median_ci(t, CONF)
  if not lo then lo, hi = stat.minmax(t) end
  return lo, hi
end
-- LuaJIT's profiling mode "changes" a workload when the interval of its
-- control ratio lies wholly beyond 3% either way.
local MODE_EFFECT_LO, MODE_EFFECT_HI = 0.97, 1.03
local function set_verdict(nmet, nmiss, n)
  if nmet == n then return "met" end
  if nmiss > 0 then return "**missed**" end
  return "not resolved (within this run's noise)"
end

if R.over then
  local o = R.over
  -- What LuaJIT's profiling mode alone (the vmprof control, no profiler)
  -- does to a workload, when the interval says it does something.
  local function mode_effect(w)
    local t = overhead.paired(o, w, "vmprof", "plain", "cpu")
    if #t == 0 then return nil end
    local lo, hi = ci(t)
    if hi >= MODE_EFFECT_LO and lo <= MODE_EFFECT_HI then return nil end
    return stat.median(t), lo, hi
  end
  -- Per-workload overhead targets (% over plain, at most limit).
  local function overhead_target(label, name, limit)
    local n, met, miss, open = 0, {}, {}, {}
    for _, w in ipairs(o.workloads) do
      local t = overhead.paired(o, w, name, "plain", "cpu")
      if #t > 0 then
        n = n + 1
        local m, lo, hi = stat.median(t), ci(t)
        local cell = string.format("%s %+.1f%% [%+.1f, %+.1f]", w, (m - 1) * 100, (lo - 1) * 100, (hi - 1) * 100)
        if (hi - 1) * 100 <= limit then met[#met + 1] = w
        elseif (lo - 1) * 100 > limit then miss[#miss + 1] = cell
        else open[#open + 1] = cell end
      end
    end
    if n == 0 then return end
    targets[#targets + 1] = {
      target = label,
      measured = string.format("met on %d of %d workloads%s%s", #met, n,
        #miss > 0 and ("; missed on: " .. table.concat(miss, ", ")) or "",
        #open > 0 and ("; within noise (median, interval holds the limit): " .. table.concat(open, ", ")) or ""),
      verdict = set_verdict(#met, #miss, n),
      key = name,
    }
  end
  overhead_target("ljprof CPU overhead ≤ 1% at 100 Hz (`-jprof=Gi10`, cpu clock), every workload", "cpu10", 1)
  overhead_target("ljprof CPU overhead ≤ 3% at 1 kHz (`/clock=wall/rate=1000`: 1000 samples/s), every workload", "wall1k", 3)
  overhead_target("(same limit, cpu clock `-jprof=Gi1`: tick-limited to ~250 samples/s, each weighted ~4)", "cpu1", 3)
  -- ljprof against jit.p (ratio below 1). Where LuaJIT's profiling mode
  -- alone changes the workload, jit.p's runs are another compiled program:
  -- said next to the ratio, with the two profilers' own costs (ljprof
  -- against plain, jit.p against its mode alone).
  local function vs_target(label, a, b)
    local n, met, miss, open = 0, {}, {}, {}
    for _, w in ipairs(o.workloads) do
      local t = overhead.paired(o, w, a, b, "cpu")
      if #t > 0 then
        n = n + 1
        local m, lo, hi = stat.median(t), ci(t)
        local cell = string.format("%s ×%.3f [%.3f, %.3f]", w, m, lo, hi)
        local em = mode_effect(w)
        if em then
          cell = cell .. string.format(" (LuaJIT's profiling mode alone: ×%.3f; own costs: ljprof %s " ..
            "over plain, jit.p %s over its mode)", em, stat.pct(overhead.cpu_ratio(o, w, a)),
            stat.pct(stat.median(overhead.paired(o, w, b, "vmprof", "cpu"))))
        end
        if hi < 1 then met[#met + 1] = w
        elseif lo >= 1 then miss[#miss + 1] = cell
        else open[#open + 1] = cell end
      end
    end
    if n == 0 then return end
    targets[#targets + 1] = {
      target = label,
      measured = string.format("ljprof cheaper on %d of %d workloads%s%s", #met, n,
        #miss > 0 and ("; dearer on: " .. table.concat(miss, ", ")) or "",
        #open > 0 and ("; the same within noise: " .. table.concat(open, ", ")) or ""),
      verdict = set_verdict(#met, #miss, n),
    }
  end
  overhead_target("a run started with a 60 s interval (no sample) costs ≤ 0.5%, every workload", "idle", 0.5)
  vs_target("below jit.p at 10 ms (paired CPU ratio ljprof/jit.p < 1), every workload", "cpu10", "jp10")
  vs_target("below jit.p at 1 ms (both tick-limited CPU timers), every workload", "cpu1", "jp1")
  overhead_target("the production default (`LJPROF`, 99 Hz, pprof at exit, `-l ljprof.auto`) ≤ 1%, every workload",
                  "auto99", 1)
  vs_target("the production default below jit.p at 10 ms, every workload", "auto99", "jp10")
end
local cost20
if R.cost then
  cost20 = cost.summary(R.cost, 20, "lua", "native")
  local off20 = cost.summary(R.cost, 20, "lua", "nonative")
  local c20 = cost.summary(R.cost, 20, "c", "native")
  if cost20 then
    targets[#targets + 1] = {
      target = "per-sample cost ≤ 2 µs at depth 20 (ljprof's stages: handler + hook; Lua leaf)",
      measured = string.format("%s native on, %s native off; C leaf with native frames %s " ..
                               "(differential incl. signal delivery: %s)",
                               stat.ns(cost20.total), off20 and stat.ns(off20.total) or "?",
                               c20 and stat.ns(c20.total) or "?", stat.ns(cost20.diff)),
      verdict = verdict(cost20.total <= 2000),
    }
    local cost100 = cost.summary(R.cost, 100, "lua", "native")
    if cost100 then
      targets[#targets + 1] = {
        target = "per-sample cost linear in the depth (depth 100 ≤ 5 × depth 20)",
        measured = string.format("depth 100 %s = %.1f × depth 20", stat.ns(cost100.total),
                                 cost100.total / cost20.total),
        verdict = verdict(cost100.total <= 5 * cost20.total),
      }
    end
  end
end
if R.agg and R.agg.full_per_s then
  targets[#targets + 1] = {
    target = "aggregation ≥ 5 M samples/s with realistic stacks (ring -> interned stack -> tables)",
    measured = string.format("%s samples/s whole path; ring -> count tables alone %s samples/s",
                             throughput.rate(R.agg.full_per_s), throughput.rate(R.agg.count_per_s)),
    verdict = verdict(R.agg.full_per_s >= 5e6),
  }
end

-- -- Report -------------------------------------------------------------------------------

local L = {}
local function p(s) L[#L + 1] = s or "" end
local function rel(path)  -- the plot as seen from the report's directory
  local dir = out_file:match("^(.*)/[^/]*$")
  if dir and path:sub(1, #dir + 1) == dir .. "/" then return path:sub(#dir + 2) end
  return path
end
local cmdline = os.getenv("LJPROF_BENCH_CMD") or ("luajit bench/bench.lua " .. table.concat(arg, " "))

p("# ljprof performance")
p()
p("<!-- Generated by bench/run (bench/bench.lua and bench/lib/); do not edit by hand. -->")
p()
-- The instruction-count table leads (bench/cost/gate.lua --model --out
-- docs/cost.md): deterministic, where the timed tables below carry the
-- machine's noise.
do
  local f = io.open("docs/cost.md")
  if f then
    p((f:read("*a"):gsub("\n+$", "")))
    f:close()
    p()
    p("## Timed measurements")
    p()
  end
end
p("Every number below was measured by the command in *Run*, on the machine it names, in one " ..
  "run: ratios are side by side in the same rounds (plain luajit, ljprof, jit.p), never " ..
  "absolute times taken on their own.")
p()
p("## Run")
p()
p("- Date: " .. m0.date .. "; the measurements took " .. string.format("%.0f s", elapsed) ..
  (ctx.quick and " (quick mode: a smoke check, too few rounds for conclusions)" or "") .. ".")
p("- Command: `" .. cmdline .. "` (from the repository root).")
p("- Machine: " .. m0.nproc .. " CPUs (`nproc`), \"" .. m0.cpu .. "\", " .. m0.mem ..
  " kB RAM, " .. m0.kernel .. ", a shared virtual machine; clock source " .. m0.clocksource ..
  "; no hardware performance counters.")
p("- Load average (1/5/15 min): " .. m0.load .. " at the start, " .. m1.load .. " at the end.")
p("- " .. m0.luajit .. " (Debian package, `/usr/bin/luajit`); luacheck " ..
  (ctx.have.luacheck and (m0.luacheck ~= "" and m0.luacheck or "installed") or "not installed (workload left out)") ..
  "; " .. (m0.perf ~= "" and m0.perf or "perf not installed") .. ".")
p("- ljprof at commit " .. m0.commit .. (m0.dirty ~= "" and
  " **with uncommitted changes** in src/, include/ or jit/ (work in progress by others)" or "") ..
  ", meson `debugoptimized` build in `" .. BUILD .. "`; the library was copied once at the start, " ..
  "so a rebuild during the run could not mix versions.")
if R.over then
  local cpu1 = {}
  for _, w in ipairs(R.over.workloads) do cpu1[#cpu1 + 1] = overhead.per_cpu(R.over, w, "cpu1", "signals") end
  if #cpu1 > 0 then
    p(string.format("- Kernel tick: a thread CPU-time timer asked for 1 ms delivered %.0f signals " ..
      "per CPU second (median over workloads): CPU-time timers fire only on the kernel's " ..
      "tick (250 Hz); wall-clock (CLOCK_MONOTONIC) timers are precise.", stat.median(cpu1)))
  end
end
p()

p("## Targets")
p()
p("Where we stand against the targets of the benchmark issue. A per-workload overhead is " ..
  "the median of the paired CPU ratios over the rounds, in brackets the " ..
  string.format("%.0f%%", CONF * 100) .. " distribution-free confidence interval of that median " ..
  "(order statistics of the rounds). A workload meets a limit when the whole interval is " ..
  "within it and misses it when the whole interval is beyond; when the interval holds the " ..
  "limit this run cannot tell, and the target is *not resolved*: more rounds, or a quieter " ..
  "machine, would.")
p()
p("| target | measured | verdict |")
p("|---|---|---|")
for _, t in ipairs(targets) do p("| " .. t.target .. " | " .. t.measured .. " | " .. t.verdict .. " |") end
p()
local notes = {}
-- What some of ljprof's functions seen by perf do (for the notes below).
local KNOWN = {
  traces_event = "ljprof's handler of LuaJIT's trace events (runs recording aborts only)",
  trace_from_memory = "reading a trace's start from LuaJIT's trace object",
  ljp_tm_find = "looking through LuaJIT's trace array for the trace that holds a PC",
  ljp_lname_by_value = "naming a function that runs only in traces by the variable holding it",
  trace_learn = "learning a new trace's machine code",
  ljp_codemap_trace_set = "adding a trace to the code map, which copies and re-sorts (qsort) " ..
                          "all known trace ranges for every new trace",
  trace_started = "finding where a trace starts",
  lua_close = "at exit: jit.prof stopping and writing the report",
  ljp_dumpstack_leaf = "the stack dump",
  lua_getstack = "LuaJIT's stack walk, which starts from the top frame for every level",
  ljp_vm_learn_jstate = "learning where LuaJIT keeps the trace compiler's state, with " ..
                        "fault-safe process_vm_readv reads at trace events (when the probe " ..
                        "loop could not)",
  ljp_signal_handler = "the signal handler",
  asm_sysvec_apic_timer_interrupt = "the timer interrupts",
}
if cost20 and R.cost then
  local b = cost.signal_baseline(R.cost)
  notes[#notes + 1] = string.format("- **Per sample at depth 20** (%s in all): handler %s, safe-point " ..
    "stack dump %s, aggregation %s, other hook work %s. The stack dump is the larger stage: " ..
    "a walk of the live Lua frames, names and lines cached per prototype, and the frames " ..
    "interned as ids (%s at depth 5, %s at 100). The whole process pays %s per sample " ..
    "(differential CPU, median); a bare timer signal into an empty C handler costs %s on " ..
    "this VM (bench/sigcost.c), which is paid by any profiler that samples with wall-clock " ..
    "timer signals. The stage timers do not see the handler's entry, the timer's re-arm (a " ..
    "clock read and a `timer_settime`, see the platform baseline under *Per-sample cost*), " ..
    "the kernel's signal delivery, or LuaJIT calling the hook; perf shows them under " ..
    "*Per-sample cost*.",
    stat.ns(cost20.total), stat.ns(cost20.handler), stat.ns(cost20.dump), stat.ns(cost20.agg),
    stat.ns(cost20.other),
    stat.ns((cost.summary(R.cost, 5, "lua", "native") or {}).total),
    stat.ns((cost.summary(R.cost, 100, "lua", "native") or {}).total),
    stat.ns(cost20.diff), b and stat.ns(b.ns) or "?")
  local c_on, c_off = cost.summary(R.cost, 20, "c", "native"), cost.summary(R.cost, 20, "c", "nonative")
  if c_on and c_off then
    local peek, step
    for _, pr in ipairs(R.cost.perf or {}) do
      if pr.what:match("C leaf") and pr.what:match("native off") then peek = cost.perf_added(pr, "process_vm_readv") end
      if pr.what:match("C leaf") and pr.what:match("native on") then step = cost.perf_added(pr, "ljp_cfi_step") end
    end
    notes[#notes + 1] = string.format("- **In C code** (depth 20, the zlib leaf) the handler costs %s " ..
      "with native frames on (the native walk of %.1f frames%s) and %s with them off%s; " ..
      "in the interpreter it costs %s.",
      stat.ns(c_on.handler), c_on.nframes,
      step and (", of which the CFI stepping (ljp_cfi_step) ≈ " .. stat.ns(step) .. " by perf") or "",
      stat.ns(c_off.handler),
      peek and (" (then it reads the running C function from LuaJIT's state with fault-safe " ..
                "process_vm_readv system calls: ≈ " .. stat.ns(peek) .. " per sample by perf)") or "",
      stat.ns(cost20.handler))
  end
  if R.over then
    notes[#notes + 1] = string.format("- **What that means for overhead**: at %s per sample, " ..
      "100 samples/s cost about %.1f%% of CPU time and 1000 samples/s about %.1f%%, before " ..
      "anything specific to a workload (deeper stacks); the bare signal (%s) alone " ..
      "is %.1f%% at 1 kHz on this VM.",
      stat.ns(cost20.diff), cost20.diff * 100 / 1e7, cost20.diff * 1000 / 1e7,
      b and stat.ns(b.ns) or "?", b and b.ns * 1000 / 1e7 or 0)
  end
end
if R.over and #R.over.sweep_workloads > 0 then
  local parts = {}
  for _, w in ipairs(R.over.sweep_workloads) do
    local a, b = overhead.cpu_ratio(R.over, w, "idle"), overhead.cpu_ratio(R.over, w, "jpidle")
    if a and b then parts[#parts + 1] = string.format("%s %s / %s", w, stat.pct(a), stat.pct(b)) end
  end
  if #parts > 0 then
    notes[#notes + 1] = "- **Fixed costs**: started with a 60 s interval, so that they take no " ..
      "sample, ljprof / jit.p change CPU time by " .. table.concat(parts, ", ") .. " (median " ..
      "paired ratios, as in the overhead tables). That is what a profiler costs besides " ..
      "sampling: loading and starting (ljprof learns LuaJIT's layouts once, in a Lua state of " ..
      "its own; it follows no trace event), writing the " ..
      "report, and any change to the code LuaJIT compiles; jit.p's profiling modes make LuaJIT " ..
      "compile different traces (profiling checks recorded into them, all traces flushed at " ..
      "start and stop), which can make a program faster or slower whether or not a sample " ..
      "is taken (see *JIT perturbation*)."
  end
  -- jit.p's mode: where LuaJIT's profiling mode alone changes a workload.
  local moved = {}
  for _, w in ipairs(R.over.workloads) do
    local t = overhead.paired(R.over, w, "vmprof", "plain", "cpu")
    if #t > 0 then
      local lo, hi = ci(t)
      if hi < MODE_EFFECT_LO or lo > MODE_EFFECT_HI then
        local tr = ""
        if R.jit and R.jit.data[w] then
          tr = string.format("; traces compiled %.0f plain, %.0f in the mode, aborts %.0f and %.0f",
            jitperturb.median(R.jit, w, "plain", "stop"), jitperturb.median(R.jit, w, "vmprof", "stop"),
            jitperturb.median(R.jit, w, "plain", "abort"), jitperturb.median(R.jit, w, "vmprof", "abort"))
        end
        moved[#moved + 1] = string.format("%s %s [%s, %s] (jit.p without samples %s, at 10 ms %s%s)",
          w, stat.pct(stat.median(t)), stat.pct(lo), stat.pct(hi),
          stat.pct(overhead.cpu_ratio(R.over, w, "jpidle")), stat.pct(overhead.cpu_ratio(R.over, w, "jp10")), tr)
      end
    end
  end
  if #moved > 0 then
    notes[#notes + 1] = "- **jit.p's profiling mode changes the compiled program.** No profiler, " ..
      "only LuaJIT's profiling mode turned on as jit.p turns it on (`jit.profile.start(\"fi60000\")`, " ..
      "a callback that does nothing, no sample taken: the *LuaJIT's mode* column) moves CPU time " ..
      "by more than 3%: " .. table.concat(moved, "; ") .. ". In that mode LuaJIT's recorder " ..
      "puts a profiling check and a snapshot into every trace wherever the function changes " ..
      "(`rec_profile_ins`, `IR_PROF`), so the traces differ from the unprofiled program's. That " ..
      "is jit.p's doing, not sampling's, and a ratio of ljprof to jit.p on such a workload " ..
      "compares two different compiled programs. ljprof leaves LuaJIT's profiling mode off: " ..
      "on those workloads the targets against jit.p are also given as the two profilers' own " ..
      "costs (ljprof over plain, jit.p over LuaJIT's mode alone)."
  end
  local odd = {}
  for _, w in ipairs(R.over.sweep_workloads) do
    local a, b = overhead.cpu_ratio(R.over, w, "idle"), overhead.cpu_ratio(R.over, w, "cpu10")
    if a and b and a > b + 0.03 then
      odd[#odd + 1] = string.format("%s (%s without samples, %s at 10 ms)", w, stat.pct(a), stat.pct(b))
    end
  end
  if #odd > 0 then
    -- ljprof's statistics say where it read traces: from LuaJIT's memory
    -- (no trace event followed) or from trace events.
    local function from_memory(w, name)
      local n, k = 0, 0
      for i = 1, R.over.reps do
        local r = R.over.data[w][name][i]
        if r and r.st then n = n + 1; if tostring(r.st.trace_source) == "memory" then k = k + 1 end end
      end
      return k, n
    end
    local why = {}
    for _, w in ipairs(R.over.sweep_workloads) do
      local a, b = overhead.cpu_ratio(R.over, w, "idle"), overhead.cpu_ratio(R.over, w, "cpu10")
      if a and b and a > b + 0.03 then
        local k1, n1 = from_memory(w, "idle")
        local k2, n2 = from_memory(w, "cpu10")
        why[#why + 1] = string.format("%s: %d of %d runs without samples, %d of %d at 10 ms",
                                      w, k1, n1, k2, n2)
      end
    end
    notes[#notes + 1] = "- **Taking no sample costs more than sampling** on " .. table.concat(odd, ", ") ..
      ". Runs that read LuaJIT's traces from memory (statistics `trace_source`: " ..
      table.concat(why, "; ") .. ") follow no trace event and, without samples, only load, " ..
      "start and stop ljprof; what else differs between such runs is which traces the " ..
      "program gets, which a run's layout and LuaJIT's random penalties decide (see *Method* " ..
      "and *JIT perturbation*)."
  end
end
do
  -- Runs that followed trace events (ljprof could not read traces from
  -- memory): what those cost does not depend on the sampling rate.
  local ev, all = 0, 0
  for _, w in ipairs(R.over and R.over.sweep_workloads or {}) do
    for _, cfg in pairs(R.over.data[w] or {}) do
      for i = 1, R.over.reps do
        local r = cfg[i]
        if r and r.st and r.st.trace_source then
          all = all + 1
          if tostring(r.st.trace_source) ~= "memory" then ev = ev + 1 end
        end
      end
    end
  end
  if ev > 0 then
    notes[#notes + 1] = string.format("- %d of %d ljprof runs followed trace events (statistics " ..
      "`trace_source`), as ljprof does where it cannot read LuaJIT's traces from memory: their " ..
      "cost grows with the number of traces a program compiles and aborts (luacheck: tens of " ..
      "thousands per run, see *JIT perturbation*), not with the sampling rate.", ev, all)
  elseif all > 0 then
    notes[#notes + 1] = string.format("- All %d ljprof runs read LuaJIT's traces from memory " ..
      "(statistics `trace_source`): none ran code per trace event.", all)
  end
end
if R.agg and R.agg.full_ns then
  local a = R.agg
  notes[#notes + 1] = string.format("- **Aggregation**: the ring and count tables take %.0f ns " ..
    "per sample (%s/s); interning the stack, %.1f frame ids (%.0f bytes of text per key as " ..
    "`-jprof` writes it, which is what was interned before), takes the rest of the %.0f ns: " ..
    "hashing %.0f ns, then the table probe and the comparison with the stored ids.",
    a.count_ns, throughput.rate(a.count_per_s), a.key_frames_mean or 0, a.key_bytes_mean,
    a.full_ns, a.hash_ns - a.copy_ns)
end
for _, n in ipairs(notes) do p(n) end
if #notes > 0 then p() end

p("## Method")
p()
p("- Every run is a fresh process started with posix_spawn (stdout and stderr to files). Wall " ..
  "time: CLOCK_MONOTONIC around spawn..wait4; CPU time: user+sys from wait4's rusage. " ..
  "Every workload's output is compared with its unprofiled output in every configuration " ..
  "(*Output checks* below).")
p("- Rounds are interleaved: in each round, each workload runs once under every " ..
  "configuration, one after the other, the order rotated by one configuration each round " ..
  "(A B C, B C A, ...); ratios are paired within a round, and reported as " ..
  "the median over rounds with the interquartile range (IQR). One discarded warm-up run " ..
  "per workload comes first. Noise from other load on the VM only ever adds time, and it " ..
  "can land on either run of a pair, so ratios below 1 happen and are noise.")
p("- **A heap layout per round.** Each round runs every configuration with the same heap " ..
  "shift before the workload (`LJPROF_BENCH_LAYOUT`, bench/probe.lua: round r allocates a " ..
  "string of 8 (389 r mod 1001) bytes first), and each round another one. LuaJIT's choice of " ..
  "traces depends on where the program's objects and bytecode land (its hot counters are a " ..
  "64-entry table indexed by bytecode address, a 256-byte period): any allocation before " ..
  "the program shifts them, a profiler's start among them (see *JIT perturbation*, the " ..
  "shifted rows). With one fixed layout a profiler's ratio would measure the layout it " ..
  "happened to move the program to (richards ran 30% faster under jit.p at the layout of " ..
  "the first report, and 30% slower under ljprof when its start allocated 84 KB); across " ..
  "shifts that effect varies in sign and the median measures the profiler. (Until " ..
  "2026-11-25 the shift was N small strings, which mostly did not move the program's " ..
  "bytecode: 4 placements of richards' main function in 12 rounds.)")
p("- Commands (OUT = a scratch file): every process is `luajit -lbench.probe ... WORKLOAD`; " ..
  "`bench/probe.lua` is loaded in every configuration, plain included, and does nothing " ..
  "unless the environment asks: for -jprof runs it writes `ljprof.stats()` after jit.prof " ..
  "stops (samples, safe points, stage timers); in the trace-count runs it counts trace " ..
  "events. Both profilers produce the same view, -jp's `G` (folded stacks, 100 frames " ..
  "deep, the flame-graph input), and their default CPU clocks:")
if R.over then
  for _, c in ipairs(R.over.base) do p("  - " .. c.label .. ": `" .. c.cmd .. "`") end
  if #R.over.sweep_workloads > 0 then
    p("  - sweep (" .. table.concat(R.over.sweep_workloads, ", ") .. " only): `luajit -lbench.probe " ..
      "-jprof=G/clock=wall/rate=R,OUT WORKLOAD` for R = " ..
      table.concat(require("lib.configs").SWEEP_RATES, ", ") .. " Hz")
  end
end
p("- Workloads (`bench/workloads/`, deterministic, each ~0.6-1 s unprofiled): fib (recursive " ..
  "calls ~30 deep, interpreted via `jit.off(fib)`), nbody and spectralnorm and mandelbrot " ..
  "(numeric compiled loops), binarytrees (allocation and GC), strings (string building, " ..
  "format, gsub, sort), tablechurn (cache/queue/index tables, insert/remove), json (a JSON " ..
  "encoder over a generated document), coroutines (a ring of 50 coroutines and a " ..
  "generator pipeline), richards (object-oriented dispatch through metatables, Richards " ..
  "style), mixed (compiled loops calling `jit.off` functions and back), and luacheck (the " ..
  "Debian `lua-check` linter checking /usr/share/lua/5.1 and LuaJIT's jit/ modules, ~70 " ..
  "files; its `os.exit` is turned into a coroutine yield so that both profilers write their " ..
  "report; `-jp` writes nothing after `os.exit`).")
p("- The `cpu` clock is a per-thread CPU-time timer (ljprof) or ITIMER_PROF (jit.p); both " ..
  "fire only on kernel ticks here, so a 1 ms interval yields about 250 signals/s; ljprof " ..
  "weights each signal by the expiries it stands for (ticks/s ≈ 1000), jit.p counts one. " ..
  "ljprof's `wall` clock (a CLOCK_MONOTONIC timer) delivers the rate asked for.")
p()

if R.over then
  p("## Overhead")
  p()
  p("![CPU overhead against samples taken per second](" .. rel(plot_file) .. ")")
  p()
  p("The plot: " .. table.concat(R.over.sweep_workloads, ", ") .. ", the median CPU overhead " ..
    "of each configuration against the samples it actually took per CPU second (bars: IQR " ..
    "over rounds). The CPU-clock configurations of both profilers cannot go past ~250 " ..
    "samples/s here; ljprof's wall clock goes on to 10 kHz. *none*: the profilers started with " ..
    "a 60 s interval, taking no sample. Points above +40% sit on the top edge, with their value.")
  p()
  p(overhead.tables(R.over))
end
if R.jit then
  p("## JIT perturbation")
  p()
  p(jitperturb.tables(R.jit))
end
if R.cost then
  p("## Per-sample cost")
  p()
  p(cost.tables(R.cost))
  local pt = cost.perf_tables(R.cost)
  if pt then
    p("### Profiling the profiler (perf)")
    p()
    p("`perf record -e cpu-clock` (software clock; this VM has no hardware counters) of one " ..
      "run each. LuaJIT's binary is stripped, so its interpreter shows as addresses (left out " ..
      "below; it is mostly the workload's own time) and only its exported `lua_*` API has " ..
      "names. Kernel symbols under the signal path (`[kernel.kallsyms]`) are the delivery " ..
      "and return of the timer signal.")
    p()
    p(pt)
  end
end
if R.agg then
  p("## Aggregation throughput and memory")
  p()
  p(throughput.tables(R.agg))
end
if R.mem then
  p("## Memory of a long run")
  p()
  p(memory.tables(R.mem))
end
if R.hot and R.hot ~= "" then
  p("## Memory of hot compiled code")
  p()
  p("`luajit bench/hot_traces.lua` (20,000 functions, each a loop LuaJIT compiles; with the " ..
    "default maxtrace=1000 it flushes and recompiles them all the time; a full collection after " ..
    "each round keeps the Lua heap the same in every run). VmRSS, VmHWM from /proc/self/status " ..
    "and `ljprof.stats().bytes` at the end of the loop, one run each. With `every=`, the " ..
    "export helper's state renders the interval's profile while the program runs: its heap " ..
    "(model and pprof encoding, ~700 bytes per distinct stack, more with many distinct " ..
    "functions) is part of the RSS read then.")
  p()
  p(R.hot)
end

p("## Crashes and output checks")
p()
local mism = {}
for _, key in ipairs({"over", "jit", "cost"}) do
  for _, m in ipairs(R[key] and R[key].mismatches or {}) do mism[#mism + 1] = m end
end
if #mism == 0 then
  p("Every run printed exactly the output of the unprofiled run of its workload.")
else
  p("**Output differed from the unprofiled run** (those runs are left out of the tables):")
  p()
  for _, m in ipairs(mism) do p("- " .. m) end
end
p()
if #proc.crash_order == 0 then
  p("No run crashed.")
else
  p("Runs killed by a signal (each was repeated, up to " .. proc.MAX_ATTEMPTS .. " attempts; a round " ..
    "whose run crashed every time is left out, and its cells show [n=rounds]):")
  p()
  for _, label in ipairs(proc.crash_order) do
    local c = proc.crashes[label]
    p(string.format("- %s: %d crashed attempt(s)%s", label, c.crashed,
      c.given_up > 0 and string.format(", %d round(s) left out", c.given_up) or ""))
  end
end
p()
p("## Caveats")
p()
p("- A shared, noisy 2-CPU virtual machine: overheads of a percent or two are within the " ..
  "spread of single rounds (see the IQRs), and CPU time itself grows when the other CPU is " ..
  "busy. The targets are judged on the confidence interval of each median, not on the " ..
  "median alone.")
p("- fib runs interpreted on purpose: compiled, its run time varies by up to 2x between " ..
  "identical runs (LuaJIT randomises trace selection after aborts), which would hide " ..
  "overheads of a few percent.")
p("- richards' run time depends on which traces LuaJIT compiles, and those choices shift " ..
  "with the heap layout (one per round, see *Method*) and with LuaJIT's profiling mode, " ..
  "which jit.p turns on: its jit.p rows measure a different compiled program (the " ..
  "*LuaJIT's mode* column).")
p("- ljprof's stage timers read CLOCK_MONOTONIC (vDSO), so a preemption inside a timed " ..
  "stage inflates it; medians over rounds are robust to a few.")
p("- Samples that land in compiled code are completed at the next exit to the interpreter: " ..
  "a hot loop that never exits (mandelbrot) gets few safe points, each carrying many " ..
  "samples. jit.p's `f` mode instead recompiles traces with profiling checks (see *JIT " ..
  "perturbation*).")
p("- Native (C) frames are walked only when a sample lands in C code outside LuaJIT's " ..
  "interpreter (the `c` leaf of the per-sample cost, C modules, FFI calls); in Lua code " ..
  "`native on` and `off` cost the same.")
p("- CPU time includes process start-up and exit (a few ms), the same in every configuration " ..
  "except for each profiler's own start, stop and report writing, which are part of its cost.")
p()
local report = table.concat(L, "\n")

-- -- Write ----------------------------------------------------------------------------------

local function mkdir_for(path)
  local dir = path:match("^(.*)/[^/]*$")
  if dir then os.execute("mkdir -p " .. proc.shellquote(dir)) end
end
mkdir_for(out_file)
proc.writefile(out_file, report)
if R.over and #R.over.sweep_workloads > 0 then
  mkdir_for(plot_file)
  proc.writefile(plot_file, svgplot.render(overhead.plot(R.over)))
end

-- -- Summary --------------------------------------------------------------------------------

local S = {}
local function s(x) S[#S + 1] = x end
s(string.format("ljprof benchmark: %s, %.0f s, load %s -> %s", ctx.quick and "quick" or "full",
                elapsed, m0.load, m1.load))
if R.over then
  s("CPU overhead, median over " .. ctx.reps .. " rounds (ljprof 10ms | jit.p 10ms | ljprof 1ms | jit.p 1ms | ljprof wall 1kHz):")
  for _, w in ipairs(R.over.workloads) do
    local c = {}
    for _, name in ipairs({"cpu10", "jp10", "cpu1", "jp1", "wall1k"}) do
      c[#c + 1] = string.format("%7s", stat.pct(overhead.cpu_ratio(R.over, w, name)))
    end
    s(string.format("  %-13s %s", w, table.concat(c, " ")))
  end
end
if R.over and #R.over.sweep_workloads > 0 then
  local parts = {}
  for _, w in ipairs(R.over.sweep_workloads) do
    parts[#parts + 1] = string.format("%s %s / %s", w, stat.pct(overhead.cpu_ratio(R.over, w, "idle")),
                                      stat.pct(overhead.cpu_ratio(R.over, w, "jpidle")))
  end
  s("No samples (60 s interval), ljprof / jit.p: " .. table.concat(parts, ", "))
end
if R.jit and R.jit.totals then
  local t = R.jit.totals
  local function f(n) local x = t[n]; return x and string.format("%d/%d/%d", x.start, x.stop, x.abort) or "?" end
  s("Trace starts/stops/aborts, all workloads: plain " .. f("plain") .. ", ljprof 1ms " .. f("cpu1") ..
    ", ljprof wall 1kHz " .. f("wall1k") .. ", jit.p 1ms " .. f("jp1"))
end
if R.cost then
  for _, d in ipairs(cost.DEPTHS) do
    for _, leaf in ipairs(cost.LEAVES) do
      local m = cost.summary(R.cost, d, leaf, "native")
      if m then
        s(string.format("Per sample, depth %d, %s leaf: %s in ljprof (handler %s, dump %s, aggregation %s); %s differential",
          d, leaf, stat.ns(m.total), stat.ns(m.handler), stat.ns(m.dump), stat.ns(m.agg), stat.ns(m.diff)))
      end
    end
  end
  local b = cost.signal_baseline(R.cost)
  if b then s("Timer signal alone (sigcost): " .. stat.ns(b.ns)) end
end
if R.agg and R.agg.full_per_s then
  s(string.format("Aggregation: %s samples/s whole path, %s samples/s ring -> tables; %.0f bytes per unique stack",
    throughput.rate(R.agg.full_per_s), throughput.rate(R.agg.count_per_s),
    R.agg["mem_" .. R.agg.keys .. "_bytes_per_stack"] or 0))
end
s("Targets:")
for _, t in ipairs(targets) do s("  [" .. t.verdict:gsub("%*", "") .. "] " .. t.target .. ": " .. t.measured) end
if #mism > 0 then s("OUTPUT MISMATCHES: " .. #mism .. " (see the report)") end
s("Report: " .. out_file .. (R.over and #R.over.sweep_workloads > 0 and (", plot: " .. plot_file) or ""))
io.write(table.concat(S, "\n"), "\n")
if #mism > 0 then os.exit(1) end
