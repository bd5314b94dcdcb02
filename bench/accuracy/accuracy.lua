-- Accuracy harness: where do ljprof and the built-in jit.profile put the
-- time of calibrated workloads, compared with the time each component
-- really took (measured in-run)? Also: VM-state splits of both profilers
-- sampling at once, and trace-event perturbation by each profiler.
-- Prints a markdown report and writes it to docs/accuracy.md (full mode).
--
-- Normally started by bench/accuracy/run, which sets LUA_PATH/LUA_CPATH:
--   luajit bench/accuracy/accuracy.lua [--quick] [--out FILE] [--no-write]
--     --quick     short passes, fewer perturbation runs (< ~40 s); prints
--                 the report and writes it only when --out is given
--     --out FILE  where to write the markdown (default docs/accuracy.md)
--     --no-write  print only
-- Environment: ACC_CMD (the command line to quote in the report),
-- ACC_LIBDIR (where the ljprof library was loaded from, for the report).
local H = require("harness")
local comp = H.components
local RM = require("realmix")

-- -- Options -------------------------------------------------------------------

local opt = {quick = false, out = nil, write = nil}
do
  local i = 1
  while i <= #arg do
    local a = arg[i]
    if a == "--quick" then opt.quick = true
    elseif a == "--out" then i = i + 1; opt.out = assert(arg[i], "--out FILE"); opt.write = true
    elseif a == "--no-write" then opt.write = false
    else
      io.stderr:write("accuracy.lua: unknown option ", a, "\n",
                      "usage: bench/accuracy/run [--quick] [--out FILE] [--no-write]\n")
      os.exit(2)
    end
    i = i + 1
  end
  if opt.write == nil then opt.write = not opt.quick end
  opt.out = opt.out or "docs/accuracy.md"
end

local function log(...)
  io.stderr:write(string.format(...))
  io.stderr:flush()
end

-- -- What is run -----------------------------------------------------------------

-- The workloads: mixes of the components with intended proportions.
local MIXES = {
  {name = "equal", title = "all six components, 1/6 each",
   weights = {interp = 1, jitloop = 1, cfuncs = 1, alloc = 1, recurse = 1, meta = 1}},
  {name = "skewed", title = "allocation 50%, the five others 10% each",
   weights = {interp = 1, jitloop = 1, cfuncs = 1, alloc = 5, recurse = 1, meta = 1}},
  {name = "interp-vs-jit", title = "interpreted 25% / compiled 75%",
   weights = {interp = 1, jitloop = 3}},
  {name = "c-vs-lua", title = "C library functions 60% / interpreted Lua 40%",
   weights = {cfuncs = 3, interp = 2}},
  -- The driver loop left to the JIT (components.lua, drive_jit): traces
  -- link across calls. Each pass starts cold (flush) with 20 jitloop calls
  -- in a row (lead), then random order. Why the lead: the exit of
  -- jitloop's loop gets a side trace through the driver only if one of
  -- LuaJIT's few attempts there (after hotexit = 10 exits, tryside = 4)
  -- records a path that compiles: the next call is jitloop again (or the
  -- driver's loop already has its trace). Without the lead that failed in
  -- 6 to 8 of 30 cold starts (then that exit returns to the interpreter
  -- inside acc_jitloop, as under the interpreted driver); with it, in none
  -- of 30. warm: two more passes, ljprof on traces compiled before it
  -- started, without and with ljprof.watch() (WARM_PASSES).
  {name = "compiled-driver", driver = "compiled", flush = true, lead = {"jitloop", 20}, warm = true,
   title = "compiled driver (not jit.off): compiled loop, interpreted closures, " ..
           "C library functions, 1/3 each",
   weights = {jitloop = 1, closure = 1, cfuncs = 1}},
}

-- The profiled passes over each mix. secs = length in CPU seconds: planned
-- from the calibration, and topped up if the calls ran faster than that.
-- ljprof's wall clock at 1 ms gives ~1000 samples/s; CPU-time timers
-- (ljprof cpu, ITIMER_PROF of the built-in) fire at most once per kernel
-- tick (250/s here), so their passes are longer. The "both" pass runs the
-- built-in (i1) and ljprof (wall 1 ms) at once: the VM-state comparison.
-- ljprof uses its wall clock there: both CPU-time timers would expire on
-- the same kernel ticks, so the two profilers would sample the same instants
-- (one signal right after the other); with the wall clock the two samplings
-- are independent, and ljprof gets ~4x as many samples.
local PASSES = {
  {name = "ljwall", secs = opt.quick and 0.7 or 2.6,
   make = function() return {H.ljprof("wall", 1)} end},
  {name = "ljcpu", secs = opt.quick and 0.8 or 4,
   make = function() return {H.ljprof("cpu", 1)} end},
  {name = "builtin", secs = opt.quick and 1.5 or 9,
   make = function() return {H.builtin("i1")} end},
  {name = "both", secs = opt.quick and 1.5 or 9,
   make = function() return {H.builtin("i1"), H.ljprof("wall", 1)} end},
}

-- The warm-start passes of the compiled-driver mix: an unprofiled run of
-- `prep` CPU seconds (from a flush), then ljprof wall 1 ms for `secs`,
-- without a flush. Twice: without ljprof.watch(), then with ljprof.watch()
-- called before the unprofiled run. watch() cannot be undone in a process,
-- so the watched passes run after every other pass (after the loop over
-- the mixes); the perturbation runs that follow use fresh processes.
local WARM = {prep = opt.quick and 0.3 or 0.5, secs = opt.quick and 0.7 or 2.6}
local WARM_PASSES = {
  {key = "warm", watch = false, log = "warm (no watch)", label = "ljprof wall 1 ms, warm start, no watch()",
   what = "without `ljprof.watch()`"},
  {key = "warm_watch", watch = true, log = "warm (watch)", label = "ljprof wall 1 ms, warm start, after watch()",
   what = "with `ljprof.watch()` called before the unprofiled run"},
}

-- Columns of the result tables: {pass, index of the profiler in the pass}.
local COLUMNS = {
  {pass = "ljwall", i = 1, label = "ljprof wall 1 ms"},
  {pass = "ljcpu", i = 1, label = "ljprof cpu 1 ms"},
  {pass = "builtin", i = 1, label = "jit.profile i1"},
  {pass = "both", i = 2, label = "ljprof wall 1 ms, with jit.profile on"},
  {pass = "both", i = 1, label = "jit.profile i1, with ljprof on"},
}

-- Perturbation: configurations and programs, each run in a fresh process.
local PERTURB_CONFIGS = opt.quick and {
  {name = "none", label = "no profiler"},
  {name = "ljprof-wall1", label = "ljprof wall 1 ms"},
  {name = "jitp", label = "jit.p (-jp: f, 10 ms)"},
} or {
  {name = "none", label = "no profiler"},
  {name = "none", label = "no profiler (2nd run)"},
  {name = "ljprof-wall1", label = "ljprof wall 1 ms"},
  {name = "ljprof-wall10", label = "ljprof wall 10 ms"},
  {name = "jitp", label = "jit.p (-jp: f, 10 ms)"},
  {name = "builtin-i1", label = "jit.profile i1"},
}
-- Arguments for bench workloads whose defaults are too long here.
local WORKLOAD_ARGS = {deep = {"10", "20000000"}}
local QUICK_WORKLOADS = {mandelbrot = true, binarytrees = true, strings = true}
local PERTURB_MIX_SECS = opt.quick and 0.4 or 1.0
local PERTURB_MIXES = opt.quick and {equal = true, ["compiled-driver"] = true} or nil  -- nil: all

-- -- Helpers -----------------------------------------------------------------------

local function sh(cmd)
  local f = io.popen(cmd .. " 2>/dev/null")
  local s = f:read("*a"):gsub("%s+$", "")
  f:close()
  return s
end

local function readfile(path)
  local f = io.open(path)
  if not f then return nil end
  local s = f:read("*a")
  f:close()
  return s
end

local function pct(x) return x and string.format("%.1f", x * 100) or "" end

local function shellquote(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

-- -- Machine facts -------------------------------------------------------------------

local function machine()
  return {
    date = os.date("!%Y-%m-%d %H:%M UTC"),
    nproc = sh("nproc"),
    cpu = (readfile("/proc/cpuinfo") or ""):match("model name%s*:%s*([^\n]*)") or "?",
    kernel = sh("uname -sr"),
    luajit = sh("luajit -v"),
    jitversion = jit.version,
    load = (readfile("/proc/loadavg") or "?"):match("^(%S+ %S+ %S+)") or "?",
    commit = sh("git rev-parse --short HEAD"),
    dirty = sh("git status --porcelain -- src include jit meson.build"),
  }
end

local t_start = comp.now_wall()
local m0 = machine()
local ljprof = require("ljprof")

-- -- 1. Calibration ------------------------------------------------------------------

log("calibrating the components (target 1 ms of CPU per call)\n")
jit.flush()
local cal = H.calibrate({target = 0.001, reps = 7, log = log})

-- -- 2. Profiled passes ------------------------------------------------------------------

local results = {}   -- results[mix][pass] = run_pass output (+ plan)

-- Warm start (the compiled-driver mix): ljprof started on a program whose
-- traces are already compiled. An unprofiled run of the mix (from a
-- flush) compiles them; then a pass with ljprof wall 1 ms without a flush,
-- with the same seeds in both warm passes. wp.watch: ljprof.watch() is
-- called before the unprofiled run. The trace log is attached before
-- watch() (ljprof's handler then chains to it and stays in the "trace"
-- slot throughout) and reset after the unprofiled run, so that it lists
-- the traces of the profiled pass only, as in the pass without watch().
local function warm_pass(mi, mix, wp)
  local w = {}
  for k, v in pairs(mix) do w[k] = v end
  w.flush = false
  local tlog = H.trace_watch()
  if wp.watch then
    tlog.attach()
    assert(ljprof.watch() == true, "ljprof.watch() did not return true")
  end
  H.run_pass(H.plan(mix, cal, WARM.prep), {}, 1000 * mi + 9, nil)   -- flushes first
  log("%-15s %-8s %5.1f s CPU ... ", mix.name, wp.log, WARM.secs)
  if wp.watch then tlog.reset() else tlog.attach() end
  local r = H.run_pass(H.plan(w, cal, WARM.secs), {H.ljprof("wall", 1)}, 1000 * mi + 10,
                       WARM.secs)
  r.traces = tlog.detach()
  results[mix.name][wp.key] = r
  log("%.1f s wall; %s: %d samples, TVD %.3f\n", r.seconds.wall, r.results[1].profiler.label,
      r.results[1].result.samples, r.results[1].tvd)
end
for mi, mix in ipairs(MIXES) do
  results[mix.name] = {}
  for pi, pass in ipairs(PASSES) do
    local plan = H.plan(mix, cal, pass.secs)
    log("%-15s %-8s %5.1f s CPU ... ", mix.name, pass.name, pass.secs)
    local watch = mix.driver == "compiled" and H.trace_watch()
    if watch then watch.attach() end
    local r = H.run_pass(plan, pass.make(), 1000 * mi + pi, pass.secs)
    if watch then r.traces = watch.detach() end
    r.plan = plan
    results[mix.name][pass.name] = r
    local parts = {}
    for _, x in ipairs(r.results) do
      parts[#parts + 1] = string.format("%s: %d samples, TVD %.3f", x.profiler.label,
                                        x.result.samples, x.tvd)
    end
    log("%.1f s wall; %s\n", r.seconds.wall, table.concat(parts, "; "))
  end
  -- Warm start without ljprof.watch() (the compiled-driver mix).
  if mix.warm then warm_pass(mi, mix, WARM_PASSES[1]) end
end
-- The real-program mixes (realmix.lua): their own calibration, then the
-- passes ljwall, ljcpu and builtin (same lengths as above). Before the
-- watch() pass, so that ljprof sees their traces start the ordinary way.
local real, real_cal = {}, {}
log("calibrating the real-program mixes\n")
for _, mix in ipairs(RM.mixes) do real_cal[mix.name] = RM.calibrate(mix, log) end
for _, mix in ipairs(RM.mixes) do
  real[mix.name] = {}
  for _, pass in ipairs(PASSES) do
    if pass.name ~= "both" then
      log("%-15s %-8s %5.1f s CPU ... ", mix.name, pass.name, pass.secs)
      local r = RM.run_pass(mix, real_cal[mix.name], pass.make(), pass.secs)
      real[mix.name][pass.name] = r
      local x = r.results[1]
      log("%.1f s wall; %s: %d samples, TVD %.3f\n", r.seconds.wall, x.profiler.label,
          x.result.samples, x.tvd)
    end
  end
end
-- Warm start after ljprof.watch(): last, since watch() is irreversible.
for mi, mix in ipairs(MIXES) do
  if mix.warm then warm_pass(mi, mix, WARM_PASSES[2]) end
end

-- -- 3. Perturbation -----------------------------------------------------------------------

local perturb = {targets = {}, configs = PERTURB_CONFIGS, data = {}}
do
  local tmp = os.tmpname()
  local here = arg[0]:match("^(.*)/[^/]*$") or "."
  local probe = here .. "/perturb.lua"
  -- Targets: the bench workloads, then the mixes.
  for path in sh("ls bench/workloads/*.lua"):gmatch("[^\n]+") do
    local name = path:match("([^/]+)%.lua$")
    if not opt.quick or QUICK_WORKLOADS[name] then
      local args = WORKLOAD_ARGS[name] or {}
      perturb.targets[#perturb.targets + 1] = {
        name = name .. (#args > 0 and " " .. table.concat(args, " ") or ""),
        argv = path .. (#args > 0 and " " .. table.concat(args, " ") or "")}
    end
  end
  for mi, mix in ipairs(MIXES) do
    if not PERTURB_MIXES or PERTURB_MIXES[mix.name] then
      local plan = H.plan(mix, cal, PERTURB_MIX_SECS)
      perturb.targets[#perturb.targets + 1] = {
        name = "mix " .. mix.name,
        argv = "mix:" .. (500 + mi) .. ":" .. (mix.driver or "interpreted") .. ":" ..
               (mix.lead and (comp.by_id[mix.lead[1]].index .. "x" .. mix.lead[2]) or "0x0") ..
               ":" .. H.encode_plan(plan)}
    end
  end
  local errfile = tmp .. ".err"
  for ti, tg in ipairs(perturb.targets) do
    perturb.data[ti] = {}
    log("perturbation %-24s", tg.name)
    for ci, cfg in ipairs(PERTURB_CONFIGS) do
      os.remove(tmp)
      local cmd = string.format("luajit %s %s %s %s >/dev/null 2>%s", shellquote(probe), cfg.name,
                                shellquote(tmp), tg.argv, shellquote(errfile))
      local ok = os.execute(cmd)
      local text = readfile(tmp)
      if (ok ~= 0 and ok ~= true) or not text then
        local err = readfile(errfile) or ""
        os.remove(errfile)
        error(string.format("perturbation run failed: %s\n%s", cmd, err))
      end
      local d = {reasons = {}}
      for k, v in text:gmatch("([^\t\n]+)\t([^\n]*)") do
        local r = k:match("^reason:(.*)$")
        if r then d.reasons[r] = tonumber(v) else d[k] = tonumber(v) or v end
      end
      perturb.data[ti][ci] = d
      log(" %s %d/%d/%d(%d)", cfg.name, d.start or 0, d.stop or 0, d.abort or 0, d.abort0 or 0)
    end
    log("\n")
  end
  os.remove(tmp)
  os.remove(errfile)
  os.remove(errfile)
end

local m1 = machine()
local elapsed = comp.now_wall() - t_start

-- -- 4. Report ----------------------------------------------------------------------------

local R = {}
local function p(s) R[#R + 1] = s or "" end
local function row(cells) p("| " .. table.concat(cells, " | ") .. " |") end
local function rule(n)
  local t = {}
  for i = 1, n do t[i] = "---" end
  row(t)
end

-- The profiler result of a column for a mix.
local function column_result(mixname, col)
  local r = results[mixname][col.pass]
  return r.results[col.i], r
end

p("# ljprof accuracy")
p()
p("<!-- Generated by bench/accuracy/run; do not edit by hand. Every number below was measured by the run that wrote this file. -->")
p()
p("Where do ljprof and the built-in jit.profile put the time of a program, compared " ..
  "with where it really went (each call timed in-run)? Two families of workloads:")
p()
p("- **Component mixes** (equal, skewed, interp-vs-jit, c-vs-lua, compiled-driver): " ..
  "calibrated components in a random order. They isolate one effect each and, on " ..
  "purpose, avoid the hard cases: their driver loop is `jit.off` (except " ..
  "compiled-driver), their C library calls run interpreted, and no C module sits " ..
  "behind a Lua wrapper.")
p("- **Real-program mixes** (" .. (function()
    local t = {}
    for _, mix in ipairs(RM.mixes) do t[#t + 1] = mix.name end
    return table.concat(t, ", ")
  end)() .. "): shaped like programs, every driver left to the JIT. *frame-loop*: " ..
  "a compiled frame loop calling three subsystems in turn, ai (`math.sin`/`math.cos` " ..
  "in a compiled loop), phys (small tables allocated in a compiled loop, so the GC " ..
  "runs under the trace) and render (`string.format` in a compiled loop, then " ..
  "`table.concat`). *main-slices*: four parts run in 40 interleaved slices from a " ..
  "plain main chunk, a compiled numeric loop, a `jit.off(fn)` loop, a compiled " ..
  "loop of `string.rep` with a final `table.concat`, and a compiled allocation loop. " ..
  "*c-module*: a C module (tests/native/ctest.c, three C frames deep) behind a " ..
  "small Lua wrapper (`local r = ctest.run(n); return r`) called from a compiled " ..
  "loop, alternating with a pure Lua function. *cjson*: the same with a real C " ..
  "library, lua-cjson `encode` + `decode` behind a wrapper. These are the hard " ..
  "cases: at a tick the Lua frames of compiled code are not on the Lua stack " ..
  "the way the interpreter leaves them (inlined calls, frames written back only " ..
  "at trace exits); C functions and the GC are entered from traces; a profiler " ..
  "that takes the stack at the next safe point (the built-in) charges the time to " ..
  "wherever the program resumes, which can be another function or the loop " ..
  "around it. ljprof's exact stacks (docs/design.md, \"Exact stacks\") " ..
  "are meant for exactly these; the tables below " ..
  "show how far that holds." ..
  (#RM.missing > 0 and (" Not run here: " .. table.concat(RM.missing, "; ") .. ".") or ""))
p()
p("The metric is the total variation distance (TVD) between a profile's function " ..
  "shares and the in-run truth of the same pass; targets for ljprof wall 1 ms: TVD " ..
  "<= 0.030 on every workload, and never worse than jit.profile on the same " ..
  "workload beyond sampling noise (see Targets).")
p()
p("## Run")
p()
p("- Date: " .. m0.date .. string.format("; the harness took %.0f s.", elapsed))
p("- Command: `" .. (os.getenv("ACC_CMD") or ("luajit bench/accuracy/accuracy.lua " ..
  table.concat(arg, " "))) .. "`" .. (opt.quick and " (quick mode: short passes, fewer samples)" or ""))
p("- Machine: " .. m0.nproc .. " CPUs (`nproc`), \"" .. m0.cpu .. "\", " .. m0.kernel ..
  ". Load average (1/5/15 min) " .. m0.load .. " at start, " .. m1.load .. " at end.")
p("- " .. m0.luajit .. " (`jit.version`: " .. m0.jitversion .. ").")
p("- ljprof " .. tostring(ljprof.version) .. " at commit " .. m0.commit ..
  (m0.dirty ~= "" and " with uncommitted changes in src/ include/ jit/ (work in progress)" or "") ..
  (os.getenv("ACC_LIBDIR") and ("; library copied from build/ at the start") or "") .. ".")
p()
p("## Method")
p()
p("- **Components.** " .. #comp.all .. " named Lua functions, each with its own loop and one size " ..
  "parameter. In every mix but *compiled-driver* they are called from a driver loop " ..
  "that runs interpreted (`jit.off`), so no component is compiled into the driver and " ..
  "each call is a real call. The driver " ..
  "calls each component through an upvalue of the same name, so `dumpstack`'s `f` " ..
  "names the frame after it (bench/accuracy/components.lua).")
do
  local cd
  for _, mix in ipairs(MIXES) do if mix.driver == "compiled" then cd = mix end end
  p("- **Compiled driver.** The *" .. cd.name .. "* mix runs the same loop (same " ..
    "dispatch, same timing) in a second driver, `drive_jit`, that is left to the JIT " ..
    "(not `jit.off`; its clock reads are FFI calls to `clock_gettime`, compiled into " ..
    "its traces). Its components: `acc_jitloop`; `acc_closure`, a loop that creates a " ..
    "closure per iteration (FNEW is not compiled by LuaJIT 2.1, so the loop is " ..
    "blacklisted and runs interpreted, though it is not `jit.off`); and `acc_cfuncs` " ..
    "(`jit.off`). Traces then link across calls: the exit of `acc_jitloop`'s loop " ..
    "trace gets a side trace that returns into the driver, reads the clocks, loops, " ..
    "takes the next call and, when that is `acc_jitloop` again, links to its loop " ..
    "trace; the driver's loop can get a root trace that enters `acc_jitloop` and links " ..
    "to the same loop trace. Where no path compiles (the next call is `acc_closure` " ..
    "or `acc_cfuncs`), the chain falls back to the interpreter in the driver. So " ..
    "compiled code that started in `acc_jitloop` leaves the trace chain in the driver, " ..
    "after the call has returned. The built-in charges a sample taken in compiled code " ..
    "to the stack where the interpreter resumes (here the driver: *other*); ljprof " ..
    "charges it to the function where its trace started. The trace table under the " ..
    "mix's shares lists the traces each pass got. The order is random, except that " ..
    "each pass starts with " .. cd.lead[2] .. " calls of " .. cd.lead[1] .. " in a " ..
    "row (taken from its share): LuaJIT tries a few times to compile a side trace at " ..
    "the loop's exit (after 10 exits, at the next 4: `hotexit`, `tryside`) and gives " ..
    "up for good when none of those paths compiles (the exit then returns to the " ..
    "interpreter inside `acc_jitloop`, as under the interpreted driver), which in a " ..
    "random order from a cold start happens often enough to decide a pass by luck. " ..
    "Each pass also starts with `jit.flush()`, so that its traces are compiled within " ..
    "the pass, with the profilers running, the same way for every profiler " ..
    "(jit.profile `i1` flushes at its stop only). ljprof reads where a trace " ..
    "started from LuaJIT's trace object when a sample lands in it, so it knows every " ..
    "trace, also those compiled before the run (without the memory readers, only " ..
    "traces whose start event it saw: during a run, after `ljprof.watch()`, or during " ..
    "an earlier run of the same state). Two more passes, *warm start* (ljprof wall " ..
    "1 ms, " .. string.format("%g", WARM.secs) .. " s each), run without the flush, " ..
    "on the traces compiled by an unprofiled run of the mix (from a flush) just " ..
    "before: the case of a profiler started on a warmed-up program. The first runs " ..
    "without `ljprof.watch()`; in the second, `ljprof.watch()` is called before the " ..
    "unprofiled run (where traces are read from memory it does nothing; with trace " ..
    "events its handler would see them compiled). Same seeds (same call order) in " ..
    "both. `watch()` cannot be undone in a process, so the second runs after every " ..
    "other pass.")
end
p("- **Real-program mixes.** bench/accuracy/realmix.lua. Each mix has its own " ..
  "named functions (`rm_ai`, `rm_phys`, `rm_render`; `mp_num`, `mp_interp`, " ..
  "`mp_rep`, `mp_alloc`; `rm_caller`, `rm_codec`, `rm_lua`), called through " ..
  "upvalues (main-slices: locals of the main chunk) so that the call sites name " ..
  "them, and its own buckets: those functions and *other*. The drivers (the frame " ..
  "loop, the main chunk loaded with `loadstring`, the two alternating loops) are " ..
  "not `jit.off`; they read the clocks with the JIT-able FFI clocks of the " ..
  "compiled driver, so their traces run through the timing. Truth and attribution " ..
  "as for the component mixes: each call timed in-run, CPU clock outside, wall " ..
  "clock inside; the rest of the pass (loop, clock reads, top-up bookkeeping) is " ..
  "*other*; a sample belongs to the innermost frame of its key that is one of the " ..
  "mix's functions (C frames below a wrapper count for the wrapper because the " ..
  "wrapper is the innermost such frame). Calibration: each part's size is scaled " ..
  "until a direct call costs its intended time (frame-loop ~0.45/0.30/0.22 ms; " ..
  "main-slices 0.30/0.20/0.25/0.25 ms; the C and cjson wrappers ~0.55 ms, the Lua " ..
  "function ~0.45 ms); frames and iterations are then repeated for the pass " ..
  "length (topped up as for the component mixes), while main-slices runs 40 " ..
  "slices whose parts are rescaled, per pass, to 1/40 of the pass each. No random " ..
  "order: the calls come in the program's own order. Each pass starts with " ..
  "`jit.flush()` (traces compiled with the profilers on, as in compiled-driver). " ..
  "Passes: ljwall, ljcpu and builtin, same lengths as for the component mixes " ..
  "(no pass *both*); they run after the component mixes and before the warm start " ..
  "after `watch()`.")
p(string.format("- **Calibration.** Each component's size is scaled until a call costs " ..
  "about %g ms of thread CPU time; then its cost per call is measured (%d repetitions " ..
  "of a batch of %d calls through the interpreted driver, median). Call counts of a mix = " ..
  "intended share x pass length / cost per call (the compiled-driver mix uses the " ..
  "same sizes and costs, measured through the interpreted driver). When the calls of a pass run faster " ..
  "than calibrated, more calls follow (same shares, the costs measured so far in the " ..
  "pass, a new random order) until the pass has used its length in CPU time.",
  cal.target * 1e3, cal.reps, cal.calls))
p("- **Truth.** In every pass each call is timed in-run with `clock_gettime` through " ..
  "the FFI: `CLOCK_MONOTONIC` (wall) inside `CLOCK_THREAD_CPUTIME_ID` (CPU) around " ..
  "the call. A component's true share is the sum of its calls' times over the time " ..
  "of the whole pass (driver loops, and the bookkeeping of top-ups); the rest " ..
  "(dispatch, clock reads, bookkeeping) is *other*. Profiles sampled on wall time (ljprof `wall`) are compared with the wall " ..
  "truth; profiles sampled on CPU time (ljprof `cpu`, ITIMER_PROF of jit.profile) " ..
  "with the CPU truth. Profiler overhead spent inside a call (hooks, callbacks) is " ..
  "part of that call's time, as it is part of what the profiler samples. The " ..
  "intended shares (from calibration) are shown too; they differ from the truth " ..
  "because the machine's speed drifts and profilers add overhead.")
p("- **Order.** The calls of a pass run in a random order (Fisher-Yates, " ..
  "`math.randomseed(1000 x mix + pass)`; compiled-driver: after its lead, see above), " ..
  "so a periodic sampler cannot lock onto a pattern. All passes run in one process after one calibration, one after the " ..
  "other: " .. table.concat((function()
    local t = {}
    for _, ps in ipairs(PASSES) do
      t[#t + 1] = string.format("%s (%g s of CPU)", ps.name, ps.secs)
    end
    return t
  end)(), ", ") .. " for each mix; for compiled-driver then an unprofiled run (" ..
  string.format("%g", WARM.prep) .. " s) and the warm-start pass without `watch()` (" ..
  string.format("%g", WARM.secs) .. " s); last, `ljprof.watch()`, another unprofiled " ..
  "run and the warm-start pass after `watch()`.")
p("- **Profilers.** ljprof: `ljprof.record{clock=..., interval=1, fmt=\"fZ;\", depth=-100}`, " ..
  "then `ljprof.summary()`; a sample's weight is its count (ticks). Built-in: " ..
  "`jit.profile.start(\"i1\", cb)`, where `cb(thread, samples, vmstate)` keys " ..
  "`jit.profile.dumpstack(thread, \"fZ;\", -100)` and adds `samples`. Pass *both*: " ..
  "jit.profile i1 and ljprof wall 1 ms at once (ljprof's signal is SIGRTMIN+4, the " ..
  "built-in's SIGPROF).")
p("- **Attribution.** A sample belongs to the innermost frame of its stack key that " ..
  "is a component function (`acc_*`, or its `file:line` fallback name); no such " ..
  "frame: *other*. Shares are weighted sample counts over the total.")
p("- **Distance.** TVD = 1/2 sum over the " .. #H.buckets .. " buckets (the components and " ..
  "*other*) of |profile share - true share|. " ..
  "*iid TVD* is the TVD expected of a sampler that draws the same number of " ..
  "independent random samples (ljprof: signals; jit.profile: callbacks) from the " ..
  "true shares: 1/2 sum sqrt(2/pi) sqrt(q(1-q)/n). It is a yardstick for sampling " ..
  "noise, not a floor: timer samples are spread evenly over time (stratified), so " ..
  "when samples are denser than the ~1 ms calls a profiler can score well below it. " ..
  "A TVD well above it points at a bias.")
p()

-- Components.
p("## Components")
p()
row({"component", "function(s)", "work", "size n", "ms per call (median, min-max)"})
rule(5)
for k, c in ipairs(comp.all) do
  row({c.id, "`" .. table.concat(c.names, "`, `") .. "`", c.what, tostring(cal.size[k]),
       string.format("%.3f (%.3f-%.3f)", cal.cost[k] * 1e3, cal.spread[k][1] * 1e3,
                     cal.spread[k][2] * 1e3)})
end
p()

-- TVD summary.
p("## Accuracy: TVD against the in-run truth")
p()
p("Lower is better; in parentheses the iid TVD (sampling noise of the same " ..
  "number of independent random samples; see Method).")
p()
do
  local head = {"workload"}
  for _, col in ipairs(COLUMNS) do head[#head + 1] = col.label end
  row(head)
  rule(#head)
  for _, mix in ipairs(MIXES) do
    local cells = {mix.name}
    for _, col in ipairs(COLUMNS) do
      local x = column_result(mix.name, col)
      cells[#cells + 1] = string.format("**%.3f** (%.3f)", x.tvd, x.noise or 0)
    end
    row(cells)
  end
end
p()

for _, mix in ipairs(MIXES) do
  if results[mix.name].warm then
    local parts = {}
    for _, wp in ipairs(WARM_PASSES) do
      local x = results[mix.name][wp.key].results[1]
      parts[#parts + 1] = string.format("%s **%.3f** (%.3f)", wp.what, x.tvd, x.noise or 0)
    end
    p(string.format("%s, warm start (ljprof wall 1 ms started on traces compiled by an " ..
      "unprofiled run before it, no flush; see its shares): %s.", mix.name,
      table.concat(parts, "; ")))
    p()
  end
end

-- Sample counts.
p("### Samples per pass")
p()
row({"workload", "profiler", "truth clock", "pass wall s", "pass CPU s", "samples (weighted)",
     "independent samples", "details"})
rule(8)
for _, mix in ipairs(MIXES) do
  for _, col in ipairs(COLUMNS) do
    local x, r = column_result(mix.name, col)
    row({mix.name, col.label, x.profiler.clock, string.format("%.2f", r.seconds.wall),
         string.format("%.2f", r.seconds.cpu), string.format("%.0f", x.result.samples),
         string.format("%.0f", x.result.draws or 0), x.result.extra or ""})
  end
end
p()

-- Per-workload shares.
p("## Shares per component")
p()
p("Each cell: profile share % / true share % (the truth of that pass, on the " ..
  "profiler's clock). *Intended*: the mix's design, from calibration.")
p()
for _, mix in ipairs(MIXES) do
  p("### " .. mix.name .. ": " .. mix.title)
  p()
  local head = {"component", "intended %"}
  for _, col in ipairs(COLUMNS) do head[#head + 1] = col.label end
  row(head)
  rule(#head)
  local intended = H.intended(mix)
  for _, b in ipairs(H.buckets) do
    local cells = {b, pct(intended[b] or 0)}
    for _, col in ipairs(COLUMNS) do
      local x, r = column_result(mix.name, col)
      cells[#cells + 1] = pct(x.attr.shares[b]) .. " / " .. pct(r.truth[x.profiler.clock][b])
    end
    row(cells)
  end
  do
    local cells = {"**TVD**", ""}
    for _, col in ipairs(COLUMNS) do
      cells[#cells + 1] = string.format("**%.3f**", (column_result(mix.name, col)).tvd)
    end
    row(cells)
  end
  p()
  -- The compiled driver: which traces each pass got.
  if mix.driver == "compiled" then
    p("Traces of " .. mix.name .. ": the traces LuaJIT completed in each pass that start " ..
      "in the drivers, the clock functions or the components (a `jit.attach(fn, \"trace\")` " ..
      "log, attached before the profilers start; ljprof chains to it). *Kind*: a root " ..
      "trace, or a side trace at an exit of another trace (named by its kind and the " ..
      "function it starts in). *Links to*: where the trace continues at its end (a " ..
      "trace, itself, the interpreter, or a return to the interpreter's caller). " ..
      "*Recording ended in*: the function the trace's last bytecode belongs to. A side " ..
      "trace that starts at the exit of `acc_jitloop`'s loop and ends in `drive_jit`, or " ..
      "in `acc_jitloop` linking to its loop, ran through the driver (return, clock " ..
      "reads, dispatch) and, in the second case, into the next call.")
    p()
    row({"pass", "trace starts in", "kind", "links to", "recording ended in", "traces"})
    rule(6)
    for _, ps in ipairs(PASSES) do
      local tr = results[mix.name][ps.name].traces
      for _, e in ipairs(tr.traces) do
        row({ps.name, "`" .. e.fn .. "`", e.kind, e.link, "`" .. e.endfn .. "`", tostring(e.n)})
      end
    end
    p()
    p("Aborted recordings of traces starting in these functions (start: reason):")
    p()
    row({"pass", "aborts", "reasons"})
    rule(3)
    for _, ps in ipairs(PASSES) do
      local tr = results[mix.name][ps.name].traces
      local why = {}
      for _, r in ipairs(tr.reasons) do why[#why + 1] = r.n .. " x " .. r.text end
      row({ps.name, tostring(tr.aborts), (table.concat(why, "; "):gsub("|", "\\|"))})
    end
    p()
  end
  -- Warm start: ljprof on traces compiled before it started, without and
  -- with ljprof.watch().
  if results[mix.name].warm then
    local passes = {}
    for i, wp in ipairs(WARM_PASSES) do
      local r = results[mix.name][wp.key]
      passes[i] = {wp = wp, r = r, x = r.results[1]}
    end
    local sizes = {}
    for _, ps in ipairs(passes) do
      sizes[#sizes + 1] = string.format("%s: %.0f samples, %.2f s", ps.wp.what,
                                        ps.x.result.samples, ps.r.seconds.wall)
    end
    p(string.format("Warm start of %s: ljprof wall 1 ms started on traces that were " ..
      "already compiled (an unprofiled %g s run of the mix from a flush, then the pass " ..
      "without a flush, same seeds), twice (%s). ljprof saw none of these traces " ..
      "start; it reads where each started from LuaJIT's trace object when a sample " ..
      "lands in it, with or without `ljprof.watch()` (with trace events instead, " ..
      "samples in traces it never saw start would take the stack at the safe point, " ..
      "as the built-in's do, and `watch()` keeps its handler attached so that it " ..
      "sees them compiled). Cells: profile share %% / true share %% " ..
      "(wall).", mix.name, WARM.prep, table.concat(sizes, "; ")))
    p()
    local cells_h = {"", "TVD (iid)"}
    local rows = {}
    for i, ps in ipairs(passes) do
      rows[i] = {ps.wp.label, string.format("**%.3f** (%.3f)", ps.x.tvd, ps.x.noise or 0)}
    end
    for _, b in ipairs(H.buckets) do
      local used = false
      for _, ps in ipairs(passes) do
        if (ps.r.truth.wall[b] or 0) > 0 or (ps.x.attr.shares[b] or 0) > 0 then used = true end
      end
      if used then
        cells_h[#cells_h + 1] = b
        for i, ps in ipairs(passes) do
          rows[i][#rows[i] + 1] = pct(ps.x.attr.shares[b]) .. " / " .. pct(ps.r.truth.wall[b])
        end
      end
    end
    row(cells_h)
    rule(#cells_h)
    for _, cells in ipairs(rows) do row(cells) end
    p()
    for _, ps in ipairs(passes) do
      local new = {}
      for _, e in ipairs(ps.r.traces.traces) do
        new[#new + 1] = string.format("`%s` (%s -> %s) x %d", e.fn, e.kind, e.link, e.n)
      end
      p("Traces completed during the warm-start pass " .. ps.wp.what .. " (starting in " ..
        "the drivers, clocks or components): " ..
        (#new > 0 and table.concat(new, "; ") or "none") .. ".")
      p()
    end
  end
end

-- VM states.
local STATES = {"N", "I", "C", "G", "J"}
local function vm_split(vm)
  local total, s = 0, {}
  for _, n in pairs(vm) do total = total + n end
  for st, n in pairs(vm) do s[st] = total > 0 and n / total or 0 end
  return s, total
end
-- Append "ljprof % / built-in %" cells per state; returns the largest
-- difference and its state.
local function split_cells(cells, sl, sb, states)
  local worst, worst_st = 0, "-"
  for _, st in ipairs(states) do
    if cells then cells[#cells + 1] = pct(sl[st] or 0) .. " / " .. pct(sb[st] or 0) end
    local d = math.abs((sl[st] or 0) - (sb[st] or 0))
    if d > worst then worst, worst_st = d, st end
  end
  return worst, worst_st
end

local function extra_states(a, b)  -- states other than N I C G J, if any
  local known, t = {}, {}
  for _, st in ipairs(STATES) do known[st] = true end
  for _, vm in ipairs({a, b}) do
    for st in pairs(vm) do if not known[st] then known[st] = true; t[#t + 1] = st end end
  end
  table.sort(t)
  return t
end

-- The real-program mixes.
local REAL_COLUMNS = {COLUMNS[1], COLUMNS[2], COLUMNS[3]}
local function real_result(mixname, col) return real[mixname][col.pass].results[1], real[mixname][col.pass] end
p("## Real-program mixes")
p()
p("Drivers left to the JIT, C code and GC under traces (see Method, *Real-program " ..
  "mixes*; bench/accuracy/realmix.lua). TVD against the in-run truth of the same " ..
  "pass, lower is better; in parentheses the iid TVD." ..
  (#RM.missing > 0 and (" Not run: " .. table.concat(RM.missing, "; ") .. ".") or ""))
p()
do
  local head = {"workload"}
  for _, col in ipairs(REAL_COLUMNS) do head[#head + 1] = col.label end
  head[#head + 1] = "samples (ljprof wall / cpu / jit.profile)"
  row(head)
  rule(#head)
  for _, mix in ipairs(RM.mixes) do
    local cells, ns = {mix.name}, {}
    for _, col in ipairs(REAL_COLUMNS) do
      local x = real_result(mix.name, col)
      cells[#cells + 1] = string.format("**%.3f** (%.3f)", x.tvd, x.noise or 0)
      ns[#ns + 1] = string.format("%.0f", x.result.samples)
    end
    cells[#cells + 1] = table.concat(ns, " / ")
    row(cells)
  end
end
p()
p("Parts and sizes (one call each per frame / slice / iteration; calibrated cost " ..
  "per call, thread CPU time, the call made directly):")
p()
row({"workload", "part", "function", "work", "size n", "ms per call"})
rule(6)
for _, mix in ipairs(RM.mixes) do
  local c = real_cal[mix.name]
  for k, pt in ipairs(mix.parts) do
    row({mix.name, pt.id, "`" .. pt.name .. "`", pt.what,
         mix.units and (tostring(c.size[k]) .. " (calibration; rescaled per pass to 1/" ..
                        mix.units .. " of it)") or tostring(c.size[k]),
         string.format("%.3f", c.cost[k] * 1e3)})
  end
end
p()
p("Per bucket: profile share % / true share % (the truth of that pass, on the " ..
  "profiler's clock).")
p()
for _, mix in ipairs(RM.mixes) do
  p("### " .. mix.name .. ": " .. mix.title)
  p()
  local head = {"bucket"}
  for _, col in ipairs(REAL_COLUMNS) do head[#head + 1] = col.label end
  row(head)
  rule(#head)
  for _, b in ipairs(RM.buckets(mix)) do
    local cells = {b}
    for _, col in ipairs(REAL_COLUMNS) do
      local x, r = real_result(mix.name, col)
      cells[#cells + 1] = pct(x.attr.shares[b]) .. " / " .. pct(r.truth[x.profiler.clock][b])
    end
    row(cells)
  end
  local cells = {"**TVD**"}
  for _, col in ipairs(REAL_COLUMNS) do
    cells[#cells + 1] = string.format("**%.3f**", (real_result(mix.name, col)).tvd)
  end
  row(cells)
  local units = {}
  for _, col in ipairs(REAL_COLUMNS) do
    local _, r = real_result(mix.name, col)
    units[#units + 1] = string.format("%s %d (%.2f s wall, %.2f s CPU)", col.pass, r.units,
                                      r.seconds.wall, r.seconds.cpu)
  end
  p()
  p((mix.units and "Slices" or "Units (frames / iterations)") .. " per pass: " ..
    table.concat(units, "; ") .. ".")
  p()
  -- On a miss (TVD > 0.030), the bucket where ljprof wall 1 ms has the
  -- largest excess over the truth and its largest stack keys there: the
  -- evidence of the miss, not a correction.
  local x, r = real_result(mix.name, REAL_COLUMNS[1])
  local worst, excess = nil, 0
  for _, b in ipairs(RM.buckets(mix)) do
    local d = x.attr.shares[b] - r.truth.wall[b]
    if d > excess then worst, excess = b, d end
  end
  if x.tvd > 0.03 and worst then
    local keys = {}
    for _, e in ipairs(x.result.entries) do
      if x.attr.bucket_of[e.stack] == worst then keys[#keys + 1] = e end
    end
    table.sort(keys, function(a, b) return a.count > b.count end)
    p(string.format("Miss: ljprof wall 1 ms charged %.1f%% to *%s* (truth %.1f%%); its " ..
      "largest stack keys there (count, VM state, key):", x.attr.shares[worst] * 100, worst,
      r.truth.wall[worst] * 100))
    p()
    for i = 1, math.min(6, #keys) do
      p(string.format("- %d %s `%s`", keys[i].count, keys[i].vmstate, keys[i].stack))
    end
    p()
  end
end

p("## VM states: ljprof and jit.profile sampling at once")
p()
p("Pass *both*: jit.profile `i1` (its `vmstate` argument, weighted by `samples`) and " ..
  "ljprof wall 1 ms (`summary()` entries' `vmstate`, weighted by `count`) in the " ..
  "same run. Cells: ljprof % / jit.profile %. N = compiled code, I = interpreter, " ..
  "C = C code, G = garbage collector, J = JIT compiler.")
p()
do
  local all = {}
  for _, mix in ipairs(MIXES) do
    local r = results[mix.name].both
    local lj, bi = r.results[2].attr.vm, r.results[1].attr.vm
    for _, st in ipairs(extra_states(lj, bi)) do all[st] = true end
  end
  local states = {}
  for _, st in ipairs(STATES) do states[#states + 1] = st end
  for st in pairs(all) do states[#states + 1] = st end
  local head = {"workload", "samples (ljprof / jit.profile)"}
  for _, st in ipairs(states) do head[#head + 1] = st end
  head[#head + 1] = "largest difference (pp)"
  row(head)
  rule(#head)
  for _, mix in ipairs(MIXES) do
    local r = results[mix.name].both
    local sl, nl = vm_split(r.results[2].attr.vm)
    local sb, nb = vm_split(r.results[1].attr.vm)
    local cells = {mix.name, string.format("%.0f / %.0f", nl, nb)}
    local worst, worst_st = split_cells(cells, sl, sb, states)
    cells[#cells + 1] = string.format("**%.1f** (%s)", worst * 100, worst_st)
    row(cells)
  end
  p()
  -- Per component, for the equal mix and the compiled-driver mix: where
  -- the states differ.
  for _, mix in ipairs(MIXES) do
  if mix.name == "equal" or mix.driver == "compiled" then
  local r = results[mix.name].both
  p("Per component (" .. mix.name .. " mix, same pass): ljprof % / jit.profile % of " ..
    "that component's samples.")
  p()
  head = {"component"}
  for _, st in ipairs(states) do head[#head + 1] = st end
  head[#head + 1] = "largest difference (pp)"
  row(head)
  rule(#head)
  for _, b in ipairs(H.buckets) do
    local sl, nl = vm_split(r.results[2].attr.vm_by[b])
    local sb, nb = vm_split(r.results[1].attr.vm_by[b])
    if nl + nb > 0 then
      local cells = {string.format("%s (%.0f / %.0f)", b, nl, nb)}
      local worst, worst_st = split_cells(cells, sl, sb, states)
      cells[#cells + 1] = string.format("%.1f (%s)", worst * 100, worst_st)
      row(cells)
    end
  end
  p()
  end
  end
end

-- Perturbation.
p("## JIT perturbation: trace events")
p()
p("Each cell is one fresh `luajit` process (bench/accuracy/perturb.lua): trace " ..
  "starts / stops / aborts, and in parentheses the aborts with reason code 0, " ..
  "\"" .. require("jit.vmdef").traceerr[0] .. "\", the signature of a hook firing " ..
  "while a trace is recorded. A `jit.attach(fn, \"trace\")` counter is attached " ..
  "before the profiler starts (ljprof chains to it). Mixes run " ..
  string.format("%g", PERTURB_MIX_SECS) .. " s of calibrated calls, starting cold. " ..
  "Flushes (all configurations): see the last row.")
p()
do
  local head = {"program"}
  for _, cfg in ipairs(PERTURB_CONFIGS) do head[#head + 1] = cfg.label end
  row(head)
  rule(#head)
  local totals = {}
  for ci = 1, #PERTURB_CONFIGS do totals[ci] = {start = 0, stop = 0, abort = 0, abort0 = 0, flush = 0} end
  for ti, tg in ipairs(perturb.targets) do
    local cells = {tg.name}
    for ci = 1, #PERTURB_CONFIGS do
      local d = perturb.data[ti][ci]
      cells[#cells + 1] = string.format("%d / %d / %d (%d)", d.start or 0, d.stop or 0,
                                        d.abort or 0, d.abort0 or 0)
      for k in pairs(totals[ci]) do totals[ci][k] = totals[ci][k] + (d[k] or 0) end
    end
    row(cells)
  end
  local cells, fl = {"**total**"}, {"flushes (total)"}
  for ci = 1, #PERTURB_CONFIGS do
    local t = totals[ci]
    cells[#cells + 1] = string.format("**%d / %d / %d (%d)**", t.start, t.stop, t.abort, t.abort0)
    fl[#fl + 1] = tostring(t.flush)
  end
  row(cells)
  row(fl)
  p()
  -- Abort reasons, summed over all programs.
  p("Abort reasons, summed over all programs:")
  p()
  local sums, order = {}, {}
  for ti = 1, #perturb.targets do
    for ci = 1, #PERTURB_CONFIGS do
      for r, n in pairs(perturb.data[ti][ci].reasons) do
        if not sums[r] then sums[r] = {total = 0}; order[#order + 1] = r end
        sums[r][ci] = (sums[r][ci] or 0) + n
        sums[r].total = sums[r].total + n
      end
    end
  end
  table.sort(order, function(a, b)
    if sums[a].total ~= sums[b].total then return sums[a].total > sums[b].total end
    return a < b
  end)
  head = {"reason"}
  for _, cfg in ipairs(PERTURB_CONFIGS) do head[#head + 1] = cfg.label end
  row(head)
  rule(#head)
  if #order == 0 then
    local c = {"(no aborts)"}
    for _ = 1, #PERTURB_CONFIGS do c[#c + 1] = "0" end
    row(c)
  end
  for _, r in ipairs(order) do
    local c = {(r:gsub("|", "\\|"))}
    for ci = 1, #PERTURB_CONFIGS do c[#c + 1] = tostring(sums[r][ci] or 0) end
    row(c)
  end
  p()
end

-- Targets (issue 3), each checked against what this run measured.
p("## Targets")
p()
do
  local function yes(ok) return ok and "met" or "**not met**" end
  -- TVD <= 3% at >= 2000 samples, never worse than jit.p's (same mix).
  for _, col in ipairs({COLUMNS[1], COLUMNS[2]}) do
    local worst, worst_mix, fewest, worse = 0, "-", math.huge, {}
    local function check(name, x, b)
      if x.tvd > worst then worst, worst_mix = x.tvd, name end
      fewest = math.min(fewest, x.result.draws or x.result.samples)
      -- worse only beyond ljprof's own sampling noise (its iid TVD)
      if x.tvd > b.tvd + (x.noise or 0) then
        worse[#worse + 1] = string.format("%s %.3f vs %.3f", name, x.tvd, b.tvd)
      end
    end
    for _, mix in ipairs(MIXES) do
      check(mix.name, column_result(mix.name, col), column_result(mix.name, COLUMNS[3]))
    end
    -- The real-program mixes too.
    for _, mix in ipairs(RM.mixes) do
      check(mix.name, real_result(mix.name, col), real_result(mix.name, COLUMNS[3]))
    end
    p(string.format("- %s: TVD <= 0.030 on every workload: %s (worst %.3f, %s); " ..
      "independent samples per pass >= 2000: %s (fewest %d); not worse than jit.profile " ..
      "i1 by more than ljprof's iid TVD: %s%s.", col.label, yes(worst <= 0.03), worst,
      worst_mix, yes(fewest >= 2000), fewest, yes(#worse == 0),
      #worse > 0 and (" (" .. table.concat(worse, "; ") .. ")") or ""))
  end
  -- VM-state split within 5 pp of the built-in's (pass both).
  local worst, worst_mix = 0, "-"
  for _, mix in ipairs(MIXES) do
    local r = results[mix.name].both
    local d = split_cells(nil, vm_split(r.results[2].attr.vm),
                          vm_split(r.results[1].attr.vm), STATES)
    if d > worst then worst, worst_mix = d, mix.name end
  end
  p(string.format("- VM-state split within 5 pp of jit.profile's: %s (largest %.1f pp, %s).",
    yes(worst <= 0.05), worst * 100, worst_mix))
  -- Trace counts: no hook-induced aborts under ljprof; totals vs unprofiled.
  local tot = {}
  for ci, cfg in ipairs(PERTURB_CONFIGS) do
    local t = {start = 0, stop = 0, abort = 0, abort0 = 0}
    for ti = 1, #perturb.targets do
      local d = perturb.data[ti][ci]
      for k in pairs(t) do t[k] = t[k] + (d[k] or 0) end
    end
    tot[ci] = t
  end
  local base = {}
  for ci, cfg in ipairs(PERTURB_CONFIGS) do
    if cfg.name == "none" then
      base[#base + 1] = string.format("%d / %d / %d", tot[ci].start, tot[ci].stop, tot[ci].abort)
    end
  end
  for ci, cfg in ipairs(PERTURB_CONFIGS) do
    if cfg.name:find("^ljprof") then
      p(string.format("- %s: aborts with code 0 (hook during recording): %d, %s; trace " ..
        "starts / stops / aborts %d / %d / %d; unprofiled run%s: %s (their spread is " ..
        "the run-to-run variation of LuaJIT's trace heuristics).", cfg.label,
        tot[ci].abort0, yes(tot[ci].abort0 == 0), tot[ci].start, tot[ci].stop,
        tot[ci].abort, #base > 1 and "s" or "", table.concat(base, " and ")))
    end
  end
end
p()

p("## Notes")
p()
p("- The machine is a shared virtual machine: component speeds drift during a " ..
  "run (compare the intended shares with the truth), which is why every pass is " ..
  "compared with its own in-run truth, never with the calibration.")
p("- ljprof takes the stack at its next safe point (the next interpreted " ..
  "bytecode; in compiled code, the next trace exit) and corrects the leaf end: a " ..
  "C function becomes the leaf, a compiled-code sample is charged to its trace's " ..
  "start function when ljprof saw that trace start (see Method, *Compiled driver*; " ..
  "docs/design.md, \"Where the time goes\"). A sample whose " ..
  "correction does not apply and whose safe point comes after the call returned " ..
  "lands in the driver (*other*).")
p("- In pass *both*, jit.profile's callback runs Lua code on its own coroutine; " ..
  "ljprof samples taken while it runs have no component frame and count as " ..
  "*other*, while the truth charges that time to the interrupted call.")
p("- In the mixes with the interpreted driver, the driver is `jit.off`: a trace that " ..
  "returns from a component into the driver aborts with \"JIT compilation disabled for " ..
  "function\". These aborts belong to the harness, in every configuration. In the " ..
  "compiled-driver mix, traces that reach the closure loop abort with \"NYI: bytecode " ..
  "51\" (FNEW), and those that reach `acc_cfuncs` with \"JIT compilation disabled for " ..
  "function\"; after a few attempts LuaJIT stops trying at that exit (a side trace " ..
  "that just returns to the interpreter) or start (blacklisting).")
do
  local n, secs = 0, 0
  for _, mix in ipairs(MIXES) do
    local r = results[mix.name].builtin
    n, secs = n + r.results[1].result.samples, secs + r.seconds.cpu
  end
  p(string.format("- jit.profile's `i1` asks for 1 ms, but ITIMER_PROF expires only on " ..
    "kernel ticks: its passes here got %.0f samples per CPU second. ljprof's `cpu` " ..
    "clock has the same tick limit (fewer signals, each weighted by the expiries it " ..
    "stands for); its `wall` clock does not.", n / secs))
end
if not opt.quick then
  p("- The two unprofiled perturbation columns are two identical runs: their " ..
    "difference is the run-to-run variation without any profiler.")
end
p()

local report = table.concat(R, "\n") .. "\n"
io.write(report)
if opt.write then
  local f = assert(io.open(opt.out, "w"))
  f:write(report)
  f:close()
  log("wrote %s\n", opt.out)
end
