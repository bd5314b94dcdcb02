-- Overhead benchmark of ljprof against plain luajit and the built-in jit.p,
-- and the per-sample cost of ljprof. Writes docs/performance.md.
-- Normally started by bench/run, which builds ljprof, copies the library and
-- compiles bench/sigcost.c into a scratch directory, and passes:
--   LJPROF_BENCH_LIBDIR  directory holding libljprof.so (default: build)
--   LJPROF_BENCH_TMP     scratch directory (default: a new mktemp -d)
--   LJPROF_BENCH_SIGCOST the compiled bench/sigcost (optional)
-- Options: --quick (3 repetitions, 2 workloads, prints only), --reps N
--   (overhead rounds, default 7), --cost-reps N (per-sample cost rounds, 9),
--   --workloads a,b,... , --write (write the report even with --quick),
--   --no-write, --out FILE (default docs/performance.md), --cost-only,
--   --no-cost.
--
-- Every run is a separate process started with posix_spawn; wall time is
-- CLOCK_MONOTONIC around spawn..wait4, CPU time is user+sys from wait4's
-- rusage. Configurations run interleaved (rep 1: A B C ..., rep 2: A B C ...)
-- and each profiled run is compared with the plain run of the same round.
local ffi = require("ffi")

ffi.cdef[[
typedef int pid_t;
struct ljb_timeval { long tv_sec; long tv_usec; };
struct ljb_rusage {
  struct ljb_timeval ru_utime, ru_stime;
  long ru_maxrss, ru_ixrss, ru_idrss, ru_isrss, ru_minflt, ru_majflt, ru_nswap,
       ru_inblock, ru_oublock, ru_msgsnd, ru_msgrcv, ru_nsignals, ru_nvcsw,
       ru_nivcsw;
};
struct ljb_timespec { long tv_sec; long tv_nsec; };
int clock_gettime(int clk, struct ljb_timespec *ts);
int posix_spawn_file_actions_init(void *fa);
int posix_spawn_file_actions_addopen(void *fa, int fd, const char *path,
                                     int oflag, unsigned mode);
int posix_spawn_file_actions_destroy(void *fa);
int posix_spawnp(pid_t *pid, const char *file, const void *fa,
                 const void *attr, char *const argv[], char *const envp[]);
pid_t wait4(pid_t pid, int *status, int options, struct ljb_rusage *ru);
char *strerror(int errnum);
extern char **environ;
]]
local C = ffi.C

-- -- Options -------------------------------------------------------------

local ALL_WORKLOADS = {"fib", "mandelbrot", "binarytrees", "strings"}
local QUICK_WORKLOADS = {"fib", "binarytrees"}

local opt = {reps = 7, cost_reps = 9, quick = false, write = nil, out = "docs/performance.md",
             cost = true, overhead = true}
do
  local i = 1
  while i <= #arg do
    local a = arg[i]
    if a == "--quick" then opt.quick = true
    elseif a == "--reps" then i = i + 1; opt.reps = assert(tonumber(arg[i]), "--reps N")
    elseif a == "--cost-reps" then i = i + 1; opt.cost_reps = assert(tonumber(arg[i]), "--cost-reps N")
    elseif a == "--workloads" then
      i = i + 1
      opt.workloads = {}
      for w in assert(arg[i], "--workloads a,b"):gmatch("[^,]+") do opt.workloads[#opt.workloads + 1] = w end
    elseif a == "--write" then opt.write = true
    elseif a == "--no-write" then opt.write = false
    elseif a == "--out" then i = i + 1; opt.out = assert(arg[i], "--out FILE")
    elseif a == "--cost-only" then opt.overhead = false
    elseif a == "--no-cost" then opt.cost = false
    else
      io.stderr:write("overhead.lua: unknown option ", a, "\n")
      os.exit(2)
    end
    i = i + 1
  end
  if opt.quick then
    opt.reps = opt.reps == 7 and 3 or opt.reps
    opt.cost_reps = opt.cost_reps == 9 and 3 or opt.cost_reps
    opt.workloads = opt.workloads or QUICK_WORKLOADS
  end
  opt.workloads = opt.workloads or ALL_WORKLOADS
  if opt.write == nil then opt.write = not opt.quick end
end

local LIBDIR = os.getenv("LJPROF_BENCH_LIBDIR") or "build"
local SIGCOST = os.getenv("LJPROF_BENCH_SIGCOST")
local TMP = os.getenv("LJPROF_BENCH_TMP")
if not TMP then
  local p = io.popen("mktemp -d")
  TMP = p:read("*l")
  p:close()
end

-- -- Running one process -----------------------------------------------------

local function now()
  local ts = ffi.new("struct ljb_timespec")
  C.clock_gettime(1, ts)  -- CLOCK_MONOTONIC
  return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9
end

local function cstrings(list)  -- NULL-terminated char *[], with anchors
  local arr = ffi.new("char *[?]", #list + 1)
  local keep = {}
  for i, s in ipairs(list) do
    keep[i] = ffi.new("char[?]", #s + 1, s)
    arr[i - 1] = keep[i]
  end
  arr[#list] = nil
  return arr, keep
end

-- The environment of the children: ours, with `set` overriding/adding
-- (a value of false removes the variable).
local function environment(set)
  local env, seen = {}, {}
  local i = 0
  while C.environ[i] ~= nil do
    local e = ffi.string(C.environ[i])
    local k = e:match("^([^=]*)=")
    if k and set[k] == nil then env[#env + 1] = e end
    i = i + 1
  end
  for k, v in pairs(set) do
    if v then env[#env + 1] = k .. "=" .. v end
    seen[k] = true
  end
  table.sort(env)
  return env
end

local O_WRONLY_CREAT_TRUNC = 1 + 64 + 512

-- Run argv with stdout/stderr to files; returns wall s, cpu s, stdout text.
local function run(argv, envset)
  local out, err = TMP .. "/stdout", TMP .. "/stderr"
  local fa = ffi.new("uint8_t[256]")  -- posix_spawn_file_actions_t (80 bytes on glibc)
  C.posix_spawn_file_actions_init(fa)
  C.posix_spawn_file_actions_addopen(fa, 1, out, O_WRONLY_CREAT_TRUNC, 420)
  C.posix_spawn_file_actions_addopen(fa, 2, err, O_WRONLY_CREAT_TRUNC, 420)
  local cargv, k1 = cstrings(argv)
  local cenv, k2 = cstrings(environment(envset))
  local pid = ffi.new("pid_t[1]")
  local status = ffi.new("int[1]")
  local ru = ffi.new("struct ljb_rusage")
  local t0 = now()
  local rc = C.posix_spawnp(pid, argv[1], fa, nil, cargv, cenv)
  if rc ~= 0 then error("posix_spawnp " .. argv[1] .. ": " .. ffi.string(C.strerror(rc))) end
  assert(C.wait4(pid[0], status, 0, ru) == pid[0], "wait4 failed")
  local wall = now() - t0
  C.posix_spawn_file_actions_destroy(fa)
  local _ = {k1, k2}
  local cpu = tonumber(ru.ru_utime.tv_sec) + tonumber(ru.ru_utime.tv_usec) * 1e-6 +
              tonumber(ru.ru_stime.tv_sec) + tonumber(ru.ru_stime.tv_usec) * 1e-6
  local f = io.open(out); local stdout = f:read("*a"); f:close()
  local st = status[0]
  if st ~= 0 then
    f = io.open(err); local stderr = f:read("*a"); f:close()
    local sig = bit.band(st, 0x7f)
    if sig ~= 0 and sig ~= 0x7f then return nil, sig, stderr end  -- killed by a signal
    error(string.format("%s exited with status %d:\n%s", table.concat(argv, " "),
                        bit.rshift(st, 8), stderr))
  end
  return wall, cpu, stdout
end

-- A run that dies from a signal (a crash) is counted and repeated, up to
-- MAX_ATTEMPTS attempts; then it is given up (returns nil) and that round of
-- that configuration is left out. crashes[label] = {crashed=, given_up=}.
local MAX_ATTEMPTS = 5
local crashes, crash_order = {}, {}
local function run_retry(label, argv, envset)
  for _ = 1, MAX_ATTEMPTS do
    local wall, cpu, out = run(argv, envset)
    if wall then return wall, cpu, out end
    if not crashes[label] then
      crashes[label] = {crashed = 0, given_up = 0}
      crash_order[#crash_order + 1] = label
    end
    crashes[label].crashed = crashes[label].crashed + 1
    io.stderr:write(string.format("\n!! %s: killed by signal %d (%s)\n%s",
                                  label, cpu, table.concat(argv, " "), out))
  end
  crashes[label].given_up = crashes[label].given_up + 1
  io.stderr:write("!! " .. label .. ": crashed " .. MAX_ATTEMPTS .. " times in a row, round left out\n")
  return nil
end

local function readfile(path)
  local f = io.open(path)
  if not f then return nil end
  local s = f:read("*a")
  f:close()
  return s
end

-- Stats file written by bench/with_ljprof.lua: "key value" lines.
local function read_stats(path)
  local st = {}
  for k, v in assert(readfile(path), "no stats file " .. path):gmatch("([%w_.]+) ([^\n]*)") do
    st[k] = tonumber(v) or v
  end
  return st
end

-- Total samples in a jit.p raw ('r', 'm0') report: sum of the counts.
local function jitp_samples(path)
  local n = 0
  for c in assert(readfile(path), "no jit.p output " .. path):gmatch("%s*(%d+)  [^\n]*\n") do
    n = n + tonumber(c)
  end
  return n
end

-- -- Configurations ---------------------------------------------------------

local WRAPPER = "bench/with_ljprof.lua"
local STATS = TMP .. "/stats.txt"
local JITP_OUT = TMP .. "/jitp.txt"

local function ljprof_cfg(name, label, opts)
  return {
    name = name, label = label, ljprof = opts,
    argv = function(script, args)
      local a = {"luajit", WRAPPER, script}
      for _, x in ipairs(args or {}) do a[#a + 1] = x end
      return a
    end,
    env = {LJPROF_BENCH = opts .. ",stats=" .. STATS},
    samples = function() return read_stats(STATS) end,
  }
end

local function jitp_cfg(name, label, mode)
  return {
    name = name, label = label, jitp = mode,
    argv = function(script) return {"luajit", "-jp=" .. mode .. "," .. JITP_OUT, script} end,
    env = {},
    samples = function() local n = jitp_samples(JITP_OUT); return {signals = n, ticks = n} end,
  }
end

local CONFIGS = {
  {name = "plain", label = "plain `luajit`", argv = function(s) return {"luajit", s} end, env = {}},
  ljprof_cfg("cpu10", "ljprof cpu 10 ms", "clock=cpu,interval=10"),
  ljprof_cfg("cpu1", "ljprof cpu 1 ms", "clock=cpu,interval=1"),
  ljprof_cfg("wall1k", "ljprof wall 1 kHz", "clock=wall,rate=1000"),
  jitp_cfg("jp10", "jit.p `-jp=f` (10 ms)", "frm0"),
  jitp_cfg("jp1", "jit.p `-jp=fi1` (1 ms)", "fri1m0"),
}
local VS_JITP = {cpu10 = "jp10", cpu1 = "jp1", wall1k = "jp1"}

local BASE_ENV = {LUA_CPATH = LIBDIR .. "/lib?.so;;", LJPROF_BENCH = false,
                  LUAJIT_PROFILEFILE = false}

local function merged_env(extra)
  local e = {}
  for k, v in pairs(BASE_ENV) do e[k] = v end
  for k, v in pairs(extra) do e[k] = v end
  return e
end

-- -- Statistics --------------------------------------------------------------

local function sorted(t)
  local s = {}
  for i, v in ipairs(t) do s[i] = v end
  table.sort(s)
  return s
end

local function median(t)
  local s = sorted(t)
  local n = #s
  if n == 0 then return nil end
  if n % 2 == 1 then return s[(n + 1) / 2] end
  return (s[n / 2] + s[n / 2 + 1]) / 2
end

local function minmax(t)
  local s = sorted(t)
  return s[1], s[#s]
end

local function ratio_cell(t)  -- "1.023 (0.99-1.05)"
  if #t == 0 then return "(no data)" end
  local lo, hi = minmax(t)
  return string.format("%.3f (%.2f-%.2f)", median(t), lo, hi) ..
         (#t < opt.reps and string.format(" [n=%d]", #t) or "")
end

local function num(x, f)
  if x == nil then return "" end
  return string.format(f or "%.0f", x)
end

local function log(...)
  io.stderr:write(string.format(...))
  io.stderr:flush()
end

-- -- Overhead benchmark -------------------------------------------------------

local function overhead_bench()
  -- res[w][cfg] = list of {wall=, cpu=, st=}
  local res, ref = {}, {}
  for _, w in ipairs(opt.workloads) do
    res[w] = {}
    for _, c in ipairs(CONFIGS) do res[w][c.name] = {} end
    -- Warm-up (discarded): also the reference output of the workload.
    local _, _, out = run_retry("plain " .. w, CONFIGS[1].argv("bench/workloads/" .. w .. ".lua"), merged_env({}))
    ref[w] = assert(out, "plain run crashed")
  end
  for rep = 1, opt.reps do
    for _, w in ipairs(opt.workloads) do
      local script = "bench/workloads/" .. w .. ".lua"
      log("rep %d/%d %-12s", rep, opt.reps, w)
      for _, c in ipairs(CONFIGS) do
        os.remove(STATS); os.remove(JITP_OUT)
        local wall, cpu, out = run_retry(c.name .. " " .. w, c.argv(script), merged_env(c.env))
        if wall and out ~= ref[w] then
          error(string.format("%s under %s printed different output:\n%s\nexpected:\n%s",
                              w, c.name, out, ref[w]))
        end
        local r = false  -- false: given up after repeated crashes
        if wall then
          r = {wall = wall, cpu = cpu}
          if c.samples then r.st = c.samples() end
          log(" %s %.2f/%.2f", c.name, wall, cpu)
        else
          log(" %s CRASHED", c.name)
        end
        res[w][c.name][rep] = r
      end
      log("\n")
    end
  end
  return res
end

-- Paired ratios of config a against config b for one workload (rounds in
-- which either run was given up are skipped).
local function paired(runs, a, b, field)
  local t = {}
  for i = 1, opt.reps do
    local ra, rb = runs[a][i], runs[b][i]
    if ra and rb then t[#t + 1] = ra[field] / rb[field] end
  end
  return t
end

local function per_cpu(runs, name, key)
  local t = {}
  for i = 1, opt.reps do
    local r = runs[name][i]
    if r and r.st and r.st[key] then t[#t + 1] = r.st[key] / r.cpu end
  end
  return #t > 0 and median(t) or nil
end

local function overhead_tables(res)
  local L = {}
  local function p(s) L[#L + 1] = s end
  p("### Unprofiled baseline")
  p("")
  p("| workload | wall s (median, min-max) | CPU s (median, min-max) |")
  p("|---|---|---|")
  for _, w in ipairs(opt.workloads) do
    local walls, cpus = {}, {}
    for i = 1, opt.reps do
      local r = res[w].plain[i]
      if r then walls[#walls + 1] = r.wall; cpus[#cpus + 1] = r.cpu end
    end
    local a, b = minmax(walls)
    local c, d = minmax(cpus)
    p(string.format("| %s | %.3f (%.3f-%.3f) | %.3f (%.3f-%.3f) |", w,
                    median(walls), a, b, median(cpus), c, d))
  end
  p("")
  p("### Overhead per configuration")
  p("")
  p("Ratios are profiled/plain of the same round: median (min-max) over " ..
    opt.reps .. " rounds. Rates are per second of the process's CPU time " ..
    "(user+sys), median over rounds: *signals* = timer signals taken (one stack " ..
    "record each), *ticks* = sample weight including expiries the timer could not deliver, " ..
    "*safe points* = stack dumps actually done (samples that arrive in compiled " ..
    "code wait for the next trace exit and share one dump). For jit.p, signals " ..
    "and ticks are both the sample total of its raw report (`r`, `m0` only change " ..
    "the report's format). *vs jit.p* = paired ratio to the jit.p run at the same " ..
    "interval (1 ms for wall 1 kHz), CPU time.")
  p("")
  p("| workload | configuration | wall ×plain | CPU ×plain | signals/s | ticks/s | safe points/s | CPU vs jit.p |")
  p("|---|---|---|---|---|---|---|---|")
  for _, w in ipairs(opt.workloads) do
    for _, c in ipairs(CONFIGS) do
      if c.name ~= "plain" then
        local vs = VS_JITP[c.name] and ratio_cell(paired(res[w], c.name, VS_JITP[c.name], "cpu")) or ""
        p(string.format("| %s | %s | %s | %s | %s | %s | %s | %s |", w, c.label,
          ratio_cell(paired(res[w], c.name, "plain", "wall")),
          ratio_cell(paired(res[w], c.name, "plain", "cpu")),
          num(per_cpu(res[w], c.name, "signals")),
          num(per_cpu(res[w], c.name, "ticks")),
          c.ljprof and num(per_cpu(res[w], c.name, "safepoints")) or "",
          vs))
      end
    end
  end
  p("")
  p("### Summary: CPU overhead, median % over plain")
  p("")
  p("| workload | ljprof 10 ms | jit.p 10 ms | ljprof 1 ms (cpu) | jit.p 1 ms | ljprof wall 1 kHz |")
  p("|---|---|---|---|---|---|")
  for _, w in ipairs(opt.workloads) do
    local function pct(name)
      local t = paired(res[w], name, "plain", "cpu")
      if #t == 0 then return "(no data)" end
      return string.format("%+.1f%%", (median(t) - 1) * 100)
    end
    p(string.format("| %s | %s | %s | %s | %s | %s |", w, pct("cpu10"), pct("jp10"),
                    pct("cpu1"), pct("jp1"), pct("wall1k")))
  end
  p("")
  return table.concat(L, "\n")
end

-- -- Per-sample cost ------------------------------------------------------------

local COST_RATE = 5000
local COST_ITERS = 300000000  -- deep.lua leaf loop: ~1.2 s interpreted
local SIG_ITERS = 350000000   -- sigcost busy loop: ~1.2 s
local DEPTHS = {10, 50}

local function cost_bench()
  local res = {sig = {off = {}, on = {}}}
  for _, d in ipairs(DEPTHS) do res[d] = {off = {}, on = {}} end
  local script = "bench/workloads/deep.lua"
  local function deep(d, profile)
    local o = profile and ("clock=wall,rate=" .. COST_RATE) or "profile=off"
    os.remove(STATS)
    local wall, cpu = run_retry("deep " .. d .. " " .. o, {"luajit", WRAPPER, script, tostring(d), tostring(COST_ITERS)},
                          merged_env({LJPROF_BENCH = o .. ",stats=" .. STATS}))
    return wall and {wall = wall, cpu = cpu, st = read_stats(STATS)} or false
  end
  local function sig(rate)
    local wall, cpu, out = run_retry("sigcost " .. rate, {SIGCOST, tostring(rate), tostring(SIG_ITERS)}, merged_env({}))
    return wall and {wall = wall, cpu = cpu, signals = tonumber(out:match("signals (%d+)"))} or false
  end
  deep(DEPTHS[1], false)  -- warm-up
  for rep = 1, opt.cost_reps do
    log("cost rep %d/%d", rep, opt.cost_reps)
    for _, d in ipairs(DEPTHS) do
      res[d].off[rep] = deep(d, false)
      res[d].on[rep] = deep(d, true)
      log(" d%d %s/%s", d, res[d].off[rep] and string.format("%.2f", res[d].off[rep].cpu) or "-",
          res[d].on[rep] and string.format("%.2f", res[d].on[rep].cpu) or "-")
    end
    if SIGCOST then
      res.sig.off[rep] = sig(0)
      res.sig.on[rep] = sig(COST_RATE)
    end
    log("\n")
  end
  return res
end

local function cost_tables(res)
  local L = {}
  local function p(s) L[#L + 1] = s end
  -- Bare signal cost (C program, empty handler).
  local signs, sigrates = {}, {}
  local sigmin = {on = math.huge, off = math.huge}
  for i = 1, opt.cost_reps do
    local on, off = res.sig.on[i], res.sig.off[i]
    if on then sigmin.on = math.min(sigmin.on, on.cpu) end
    if off then sigmin.off = math.min(sigmin.off, off.cpu) end
    if on and off then
      signs[#signs + 1] = (on.cpu - off.cpu) / on.signals * 1e9
      sigrates[#sigrates + 1] = on.signals / on.wall
    end
  end
  p(string.format("Workload bench/workloads/deep.lua DEPTH (recursion, then an " ..
    "interpreted busy loop at the leaf). Wall clock at %d Hz (`clock=wall,rate=%d`), " ..
    "default key format (`fZ;`, depth -100), JIT off, %d rounds; each round runs " ..
    "the unprofiled baseline (`profile=off`: same wrapper, module loaded, not " ..
    "recording) and the profiled run back to back. *frames* = items in the sampled " ..
    "stack key (the workload's DEPTH frames plus the wrapper's and luajit's own " ..
    "frames). (a) = `hook_ns / safepoints` from ljprof's stats. (b) = (CPU profiled " ..
    "- CPU unprofiled) / signals: *paired* = median (min-max) over rounds of the " ..
    "paired difference; *min* = (fastest profiled run - fastest unprofiled run) / " ..
    "median signals, which is less sensitive to load from other processes (that " ..
    "only ever adds time).",
    COST_RATE, COST_RATE, opt.cost_reps))
  p("")
  p("| depth | frames | signals/s (wall) | safe points / signal | (a) hook ns per safe point | (b) differential CPU ns per signal, paired | (b) min |")
  p("|---|---|---|---|---|---|---|")
  for _, d in ipairs(DEPTHS) do
    local hook, diff, rate, spr, nsig = {}, {}, {}, {}, {}
    local frames
    local min_on, min_off = math.huge, math.huge
    for i = 1, opt.cost_reps do
      local on, off = res[d].on[i], res[d].off[i]
      if on then min_on = math.min(min_on, on.cpu) end
      if off then min_off = math.min(min_off, off.cpu) end
      if on and off then
        local st = on.st
        hook[#hook + 1] = st.hook_ns / st.safepoints
        diff[#diff + 1] = (on.cpu - off.cpu) / st.signals * 1e9
        rate[#rate + 1] = st.signals / on.wall
        spr[#spr + 1] = st.safepoints / st.signals
        nsig[#nsig + 1] = st.signals
        frames = st.top_frames
      end
    end
    if #hook == 0 then
      p(string.format("| %d | (no data) | | | | | |", d))
    else
      local a, b = minmax(hook)
      local c, e = minmax(diff)
      p(string.format("| %d | %d | %.0f | %.3f | %.0f (%.0f-%.0f) | %.0f (%.0f-%.0f) | %.0f |%s", d, frames,
        median(rate), median(spr), median(hook), a, b, median(diff), c, e,
        (min_on - min_off) / median(nsig) * 1e9,
        #hook < opt.cost_reps and string.format(" [n=%d]", #hook) or ""))
    end
  end
  p("")
  if #signs > 0 then
    local a, b = minmax(signs)
    local rates = sigrates
    local nsig = {}
    for i = 1, opt.cost_reps do
      if res.sig.on[i] then nsig[#nsig + 1] = res.sig.on[i].signals end
    end
    p(string.format("Platform baseline (bench/sigcost.c: a C busy loop, a CLOCK_MONOTONIC " ..
      "timer at %d Hz delivering a signal to the thread, empty handler; differential CPU " ..
      "per signal, same rounds): **%.0f ns per signal** paired median (min-max %.0f-%.0f), " ..
      "%.0f ns by the min method, %.0f signals/s. " ..
      "Method (b) includes this cost; method (a) does not (it times only the safe-point " ..
      "hook: stack dump and aggregation).", COST_RATE, median(signs), a, b,
      (sigmin.on - sigmin.off) / median(nsig) * 1e9, median(rates)))
  else
    p("Platform baseline not measured (no C compiler: bench/sigcost.c not built).")
  end
  p("")
  return table.concat(L, "\n")
end

-- -- Report ---------------------------------------------------------------------

local function sh(cmd)
  local f = io.popen(cmd .. " 2>&1")
  local s = f:read("*a"):gsub("%s+$", "")
  f:close()
  return s
end

local function machine()
  local model = (readfile("/proc/cpuinfo") or ""):match("model name%s*:%s*([^\n]*)") or "?"
  return {
    date = os.date("!%Y-%m-%d %H:%M UTC"),
    nproc = sh("nproc"),
    cpu = model,
    kernel = sh("uname -sr"),
    luajit = sh("luajit -v"),
    mem = ((readfile("/proc/meminfo") or ""):match("MemTotal:%s*(%d+)") or "?") .. " kB",
    load = (readfile("/proc/loadavg") or "?"):match("^(%S+ %S+ %S+)"),
    commit = sh("git rev-parse --short HEAD"),
    dirty = sh("git status --porcelain -- src include meson.build"),
  }
end

local function command_line()
  local a = {}
  for i = 1, #arg do a[i] = arg[i] end
  local s = table.concat(a, " ")
  return os.getenv("LJPROF_BENCH_CMD") or ("luajit bench/overhead.lua " .. s)
end

local t_start = now()
local m0 = machine()
local over = opt.overhead and overhead_bench()
local cost = opt.cost and cost_bench()
local m1 = machine()
local elapsed = now() - t_start

local R = {}
local function p(s) R[#R + 1] = s end
p("# ljprof performance")
p("")
p("<!-- Generated by bench/run (bench/overhead.lua); do not edit by hand. -->")
p("")
p("## Run")
p("")
p("- Date: " .. m0.date .. "; benchmark took " .. string.format("%.0f s", elapsed) .. ".")
p("- Command: `" .. command_line() .. "`" .. (opt.quick and " (quick mode)" or ""))
p("- Machine: " .. m0.nproc .. " CPUs (`nproc`), CPU model \"" .. m0.cpu .. "\", " ..
  m0.mem .. " RAM, " .. m0.kernel .. " (a virtual machine).")
p("- " .. m0.luajit .. " (Debian package, `/usr/bin/luajit`).")
p("- ljprof at commit " .. m0.commit .. (m0.dirty ~= "" and
  " with uncommitted changes in src/ (other work in progress)" or "") ..
  ", meson `debugoptimized` build; the library was copied once at the start so " ..
  "that rebuilds during the run could not mix versions.")
p("- Load average (1/5/15 min) at start " .. m0.load .. ", at end " .. m1.load ..
  ". The machine is a shared virtual machine whose load varies, so single " ..
  "runs are noisy; read medians and the min-max spread.")
p("")
p("## Method")
p("")
p("- Each run is a fresh `luajit` process (started with posix_spawn; stdout and " ..
  "stderr to files). Wall time: CLOCK_MONOTONIC around spawn..wait4. CPU time: " ..
  "user+sys from wait4's rusage. Every profiled run's output is checked against " ..
  "the unprofiled output.")
p("- Interleaved rounds: in each round every workload runs once under every " ..
  "configuration, one after the other (plain, ljprof cpu 10 ms, ljprof cpu 1 ms, " ..
  "ljprof wall 1 kHz, jit.p 10 ms, jit.p 1 ms). Ratios are paired within a " ..
  "round. One discarded warm-up run per workload first.")
p("- ljprof runs use `bench/with_ljprof.lua` (env `LJPROF_BENCH`, e.g. " ..
  "`clock=cpu,interval=10`), which calls `ljprof.record` (aggregate only, key " ..
  "format `fZ;`, depth -100), runs the workload with `dofile`, stops, and " ..
  "writes `ljprof.stats()` to a file. jit.p runs are `luajit -jp=frm0,FILE` " ..
  "and `luajit -jp=fri1m0,FILE` (`f` and `fi1` plus raw counts and no " ..
  "threshold, so that the report's total is the number of samples).")
p("- The `cpu` clock is a per-thread CPU-time timer; on this kernel (HZ=250) " ..
  "it fires only on kernel ticks, so \"1 ms\" yields ~250-290 signals/s (random " ..
  "gaps), each weighted by the expiries it stands for (~4). jit.p's ITIMER_PROF has the " ..
  "same limit. The `wall` clock (CLOCK_MONOTONIC timer) is precise.")
p("- Workloads (bench/workloads/): fib (recursive calls ~30 deep, interpreted: " ..
  "`jit.off(fib)`), mandelbrot (one hot numeric trace), binarytrees (allocation + " ..
  "GC, mostly interpreted), strings (string.format, gmatch, gsub, table.concat, " ..
  "sort: interpreter, C functions, GC). Each is deterministic; its output is the " ..
  "same under every configuration.")
p("")
if over then
  p("## Overhead")
  p("")
  p(overhead_tables(over))
end
if cost then
  p("## Per-sample cost")
  p("")
  p(cost_tables(cost))
end
p("## Crashes")
p("")
if #crash_order == 0 then
  p("No run crashed.")
else
  p("Runs killed by a signal. A crashed run was repeated, up to " .. MAX_ATTEMPTS ..
    " attempts; the tables use the repeats, and a round whose run crashed " ..
    MAX_ATTEMPTS .. " times is left out (the cell then shows [n=rounds]).")
  p("")
  for _, label in ipairs(crash_order) do
    local c = crashes[label]
    p(string.format("- %s: %d crashed attempt(s)%s", label, c.crashed,
      c.given_up > 0 and string.format(", %d round(s) left out", c.given_up) or ""))
  end
end
p("")
p("## Caveats")
p("")
p("- Shared, noisy 2-CPU virtual machine; differences of a few percent are " ..
  "within the spread, and CPU time itself grows when the other CPU is busy. " ..
  "Ratios below 1 are noise.")
p("- fib runs interpreted on purpose: compiled, its unprofiled time varied by " ..
  "up to 2x between identical runs (LuaJIT randomises trace selection after " ..
  "trace aborts), which hides overheads of a few percent.")
p("- `hook_ns` is measured by ljprof with CLOCK_MONOTONIC, so a preemption " ..
  "inside the hook inflates it; the median over rounds is robust to a few.")
p("- Timer signals are expensive on this VM (see the platform baseline above): " ..
  "most of the differential cost of a sample here is the kernel/hypervisor " ..
  "delivering the timer signal, not ljprof's work. Other machines were not " ..
  "measured.")
p("- Samples that land in compiled code are completed at the next trace exit " ..
  "to the interpreter; a hot loop that never exits (mandelbrot) gets very few " ..
  "safe points, each carrying many ticks. jit.p's `f` mode instead recompiles " ..
  "traces with profiling guards (and flushes them at start and stop).")
p("- CPU time includes process start-up and exit (a few ms), identical in " ..
  "both runs of a pair.")
p("")
local report = table.concat(R, "\n")

io.write(report)
if opt.write then
  local f = assert(io.open(opt.out, "w"))
  f:write(report)
  f:close()
  log("wrote %s\n", opt.out)
end
