-- Per-sample cost: bench/workloads/deep.lua keeps the Lua stack at a fixed
-- depth (5, 20, 100 frames) while a leaf runs, either an interpreted loop
-- or C code (zlib through the FFI, with native frames above the Lua
-- leaf), so every sample walks the same stack and reaches its safe point
-- at once. ljprof samples it on the wall clock at 5 kHz through
-- bench/with_ljprof.lua, with native frames on and off, next to an
-- unprofiled run of the same wrapper (module loaded, not recording).
-- Reported per sample: ljprof's own stage timers (handler, safe-point
-- stack dump, aggregation), and the end-to-end differential CPU time,
-- which also holds the kernel's signal delivery; bench/sigcost.c gives
-- that platform cost alone. perf then shows where the time goes.
local proc = require("lib.proc")
local stat = require("lib.stat")

local M = {}

M.RATE = 5000
M.DEPTHS = {5, 20, 100}
M.LEAVES = {"lua", "c"}
-- deep.lua ITERATIONS per leaf: ~0.6 s each
local ITERS = {lua = 150000000, c = 80}
local SIG_ITERS = 200000000  -- sigcost busy loop: ~0.6 s
-- bench/sigcost.c's timers: the kernel's periodic re-arm alone, a periodic
-- timer moved by the handler (ljprof's re-arm until 2026-11-25), a
-- one-shot timer re-armed by the handler after a clock read (ljprof's)
M.SIG_MODES = {"periodic", "moved", "oneshot"}
local SCRIPT = "bench/workloads/deep.lua"
local WRAPPER = "bench/with_ljprof.lua"

local function record_opts(native)
  return string.format("clock=wall,rate=%d,fmt=jprof,depth=-200,native=%s", M.RATE, tostring(native))
end
M.record_opts = record_opts

local function merged(a, b)
  local e = {}
  for k, v in pairs(a) do e[k] = v end
  for k, v in pairs(b) do e[k] = v end
  return e
end

function M.run(ctx)
  local stats = proc.TMP .. "/cost-stats.txt"
  local res = {reps = ctx.cost_reps, sig = {off = {}}, mismatches = {}}
  for _, m in ipairs(M.SIG_MODES) do res.sig[m] = {} end
  local ref = {}
  local modes = {
    {key = "off", opts = "profile=off"},
    {key = "native", opts = record_opts(true)},
    {key = "nonative", opts = record_opts(false)},
  }
  local function deep(d, leaf, mode)
    local id = d .. " " .. leaf
    os.remove(stats)
    local r = proc.run_retry("deep " .. id .. " " .. mode.key,
      {"luajit", WRAPPER, SCRIPT, tostring(d), tostring(ITERS[leaf]), leaf},
      merged(ctx.env, {LJPROF_BENCH = mode.opts .. ",stats=" .. stats}))
    if not r then return false end
    ref[id] = ref[id] or r.out
    if r.out ~= ref[id] then
      res.mismatches[#res.mismatches + 1] = string.format("deep %s under %s", id, mode.key)
      return false
    end
    r.st = proc.read_kv(stats)
    return r
  end
  local function sig(rate, mode)
    local r = proc.run_retry("sigcost " .. rate .. " " .. mode,
      {ctx.sigcost, tostring(rate), tostring(SIG_ITERS), mode}, ctx.env)
    if not r then return false end
    r.signals = tonumber(r.out:match("signals (%d+)"))
    return r
  end
  for _, d in ipairs(M.DEPTHS) do
    res[d] = {}
    for _, leaf in ipairs(M.LEAVES) do
      res[d][leaf] = {}
      for _, m in ipairs(modes) do res[d][leaf][m.key] = {} end
      deep(d, leaf, modes[1])  -- warm-up, reference output
    end
  end
  for rep = 1, res.reps do
    proc.log("cost round %d/%d", rep, res.reps)
    for _, d in ipairs(M.DEPTHS) do
      for _, leaf in ipairs(M.LEAVES) do
        for _, m in ipairs(modes) do res[d][leaf][m.key][rep] = deep(d, leaf, m) end
      end
      proc.log(" d%d", d)
    end
    if ctx.sigcost then
      res.sig.off[rep] = sig(0, "periodic")
      for _, m in ipairs(M.SIG_MODES) do res.sig[m][rep] = sig(M.RATE, m) end
    end
    proc.log("\n")
  end
  if ctx.perf then M.perf(ctx, res) end
  return res
end

-- -- Profiling the profiler ----------------------------------------------------

local PERF_HZ = 2000
-- Frames of the program itself (callers of everything), left out.
local ROOTS = {__libc_start_call_main = true, main = true, lua_cpcall = true, lua_pcall = true,
               _start = true, ["__libc_start_main_impl (inlined)"] = true}

-- perf report with call graphs: ms[dso .. " " .. sym] = inclusive CPU ms
-- (one cpu-clock sample = 1/PERF_HZ s), names[key] = {dso=, sym=}, and
-- the self share of each object.
local function perf_report(data)
  local r = {ms = {}, names = {}, dsos = {}, dso_ms = {}, total = 0}
  local txt = proc.sh("perf report -i " .. data .. " --stdio --no-children --sort dso -n -g none 2>/dev/null")
  for line in txt:gmatch("[^\n]+") do
    local pct, n, dso = line:match("^%s*([%d.]+)%%%s+(%d+)%s+(.-)%s*$")
    if pct then
      dso = dso:gsub(" tid %d+$", "")  -- compiled trace code: "[JIT] tid N"
      r.dsos[#r.dsos + 1] = {pct = tonumber(pct), dso = dso}
      r.dso_ms[dso] = (r.dso_ms[dso] or 0) + tonumber(n) * 1000 / PERF_HZ
      r.total = r.total + tonumber(n)
    end
  end
  local total_ms = r.total * 1000 / PERF_HZ
  txt = proc.sh("perf report -i " .. data .. " --stdio --children --sort dso,sym -g none " ..
                "--percent-limit 0.02 2>/dev/null")
  for line in txt:gmatch("[^\n]+") do
    local ch, dso, sym = line:match("^%s*([%d.]+)%%%s+[%d.]+%%%s+(%S+)%s+%[.%]%s+(.-)%s*$")
    if ch and not sym:match("^0x") and not ROOTS[sym] then
      local k = dso .. " " .. sym
      -- A name listed twice (recursive or inlined in two places): the
      -- larger inclusive time holds the other.
      r.ms[k] = math.max(r.ms[k] or 0, tonumber(ch) / 100 * total_ms)
      r.names[k] = {dso = dso, sym = sym}
    end
  end
  r.total_ms = total_ms
  return r
end

-- perf recordings with call graphs (cpu-clock, DWARF unwinding) of a run
-- without and with ljprof; the difference of each function's inclusive
-- time is what profiling added there:
--  * deep.lua at depth 20, ljprof at 20 kHz on the wall clock, against the
--    same wrapper not recording: what one sample costs, function by
--    function (Lua leaf with native frames on; C leaf with them on and off);
--  * richards with ljprof started but taking no sample: its fixed costs;
--  * luacheck under `-jprof=G/clock=wall/rate=1000`, and taking no sample,
--    against plain: where a real program's profiling overhead goes.
function M.perf(ctx, res)
  local data = proc.TMP .. "/perf.data"
  local stats = proc.TMP .. "/perf-stats.txt"
  local probe = {"luajit", "-lbench.probe"}
  res.perf = {}
  local function deep_run(leaf, native)
    return {what = string.format("deep.lua 20, %s leaf, ljprof at 20 kHz (wall clock, native %s) " ..
                                 "against not recording", leaf == "c" and "C" or "Lua", native and "on" or "off"),
            argv = {"luajit", WRAPPER, SCRIPT, "20", tostring(ITERS[leaf]), leaf},
            base_env = {LJPROF_BENCH = "profile=off"},
            env = {LJPROF_BENCH = record_opts(native):gsub("rate=%d+", "rate=20000") .. ",stats=" .. stats}}
  end
  local runs = {
    deep_run("lua", true),
    not ctx.quick and deep_run("c", true) or nil,
    not ctx.quick and deep_run("c", false) or nil,
    not ctx.quick and {what = "richards, ljprof started but taking no sample (`-jprof=Gi60000`) against plain",
     base_argv = {probe[1], probe[2], ctx.script("richards")},
     argv = {probe[1], probe[2], "-jprof=Gi60000," .. proc.TMP .. "/perf-profile.out", ctx.script("richards")},
     base_env = {}, env = {LJPROF_BENCH_STATS = stats}, idle = true} or nil,
    {what = "luacheck, `-jprof=G/clock=wall/rate=1000` against plain",
     base_argv = {probe[1], probe[2], ctx.script("luacheck")},
     argv = {probe[1], probe[2], "-jprof=G/clock=wall/rate=1000," .. proc.TMP .. "/perf-profile.out",
             ctx.script("luacheck")},
     base_env = {}, env = {LJPROF_BENCH_STATS = stats}, needs = "luacheck"},
    not ctx.quick and {what = "luacheck, ljprof started but taking no sample (`-jprof=Gi60000`) against plain",
     base_argv = {probe[1], probe[2], ctx.script("luacheck")},
     argv = {probe[1], probe[2], "-jprof=Gi60000," .. proc.TMP .. "/perf-profile.out", ctx.script("luacheck")},
     base_env = {}, env = {LJPROF_BENCH_STATS = stats}, needs = "luacheck", idle = true} or nil,
  }
  local bases = {}  -- recordings without ljprof, shared by runs with the same command
  local head = {"perf", "record", "-q", "-e", "cpu-clock", "-F", tostring(PERF_HZ),
                "--call-graph", "dwarf,16384", "-o", data, "--"}
  local function record(argv, env)
    local a = {}
    for _, x in ipairs(head) do a[#a + 1] = x end
    for _, x in ipairs(argv) do a[#a + 1] = x end
    local ok = pcall(proc.run, a, merged(ctx.env, env))
    local rep = ok and perf_report(data) or nil
    os.remove(data)
    return rep
  end
  for i = 1, 6 do
    local r = runs[i]
    if r and (not r.needs or ctx.have[r.needs]) then
      proc.log("perf: %s\n", r.what)
      os.remove(stats)
      local bargv = r.base_argv or r.argv
      local bkey = table.concat(bargv, " ") .. (r.base_env.LJPROF_BENCH or "")
      bases[bkey] = bases[bkey] or record(bargv, r.base_env)
      local base = bases[bkey]
      local prof = record(r.argv, r.env)
      local st = proc.read_kv(stats)
      if base and prof and st and st.signals and (st.signals > 0 or r.idle) then
        local env = r.env.LJPROF_BENCH and ("LJPROF_BENCH=" .. r.env.LJPROF_BENCH:gsub(",stats=.*", "") .. " ") or ""
        res.perf[#res.perf + 1] = {
          what = r.what, base = base, prof = prof, st = st, argv = r.argv,
          cmd = env .. proc.untmp(table.concat(head, " ") .. " " .. table.concat(r.argv, " "))}
      end
    end
  end
end

-- -- Report ----------------------------------------------------------------------

-- Per-signal stage costs of one profiled run, in ns.
local function stages(r)
  local st = r.st
  -- The steady state when the workload marked the end of its warm-up
  -- (one-time costs, such as loading a library's symbols at the first
  -- native frame, left out), else the whole run.
  local function v(k) return st["steady_" .. k] or st[k] end
  local n = v("signals")
  if not n or n == 0 then return nil end
  local hook = v("hook_ns") / n
  local dump = v("complete_ns") / n
  local agg = v("aggregate_ns") / n
  return {
    handler = v("handler_ns") / n, dump = dump, agg = agg,
    other = math.max(0, hook - dump - agg),
    total = v("handler_ns") / n + math.max(hook, dump + agg),
    sp = st.safepoints / n, rate = n / r.wall,
    frames = st.top_frames, nframes = (st.native_frames or 0) / n,
  }
end

-- Summaries per depth and mode: medians of every stage over the rounds,
-- and the differential CPU per signal against the unprofiled run of the
-- same round.
function M.summary(res, d, leaf, mode)
  local acc = {}
  local diff, mins = {}, {on = math.huge, off = math.huge}
  local nsig = {}
  for i = 1, res.reps do
    local on, off = res[d][leaf][mode][i], res[d][leaf].off[i]
    if on then
      local s = stages(on)
      if s then for k, v in pairs(s) do acc[k] = acc[k] or {}; table.insert(acc[k], v) end end
      mins.on = math.min(mins.on, on.cpu)
      nsig[#nsig + 1] = on.st.signals
    end
    if off then mins.off = math.min(mins.off, off.cpu) end
    if on and off then diff[#diff + 1] = (on.cpu - off.cpu) / on.st.signals * 1e9 end
  end
  if not acc.total then return nil end
  local m = {n = #acc.total}
  for k, v in pairs(acc) do m[k] = stat.median(v) end
  m.diff = stat.median(diff)
  m.diff_lo, m.diff_hi = stat.quantile(diff, 0.25), stat.quantile(diff, 0.75)
  m.diff_min = (mins.on - mins.off) / stat.median(nsig) * 1e9
  m.total_lo, m.total_hi = stat.quantile(acc.total, 0.25), stat.quantile(acc.total, 0.75)
  return m
end

-- CPU per signal of bench/sigcost.c's timer in mode (default periodic).
function M.signal_baseline(res, mode)
  local d, rates, nsig = {}, {}, {}
  local mins = {on = math.huge, off = math.huge}
  for i = 1, res.reps do
    local on, off = res.sig[mode or "periodic"][i], res.sig.off[i]
    if on then mins.on = math.min(mins.on, on.cpu); nsig[#nsig + 1] = on.signals end
    if off then mins.off = math.min(mins.off, off.cpu) end
    if on and off and on.signals > 0 then
      d[#d + 1] = (on.cpu - off.cpu) / on.signals * 1e9
      rates[#rates + 1] = on.signals / on.wall
    end
  end
  if #d == 0 then return nil end
  return {ns = stat.median(d), lo = stat.quantile(d, 0.25), hi = stat.quantile(d, 0.75),
          min = (mins.on - mins.off) / stat.median(nsig) * 1e9, rate = stat.median(rates)}
end

function M.tables(res)
  local L = {}
  local function p(s) L[#L + 1] = s end
  p(string.format("Workload `bench/workloads/deep.lua DEPTH ITERATIONS LEAF` (a recursion DEPTH Lua " ..
    "frames deep, then the leaf: `lua` = an interpreted loop (%d steps), `c` = %d calls of " ..
    "zlib's compress2 through the FFI, so that samples land in C with native frames above " ..
    "the Lua leaf; JIT off, so each sample reaches its safe point at once) under " ..
    "`bench/with_ljprof.lua` with `LJPROF_BENCH=%s` (the key format `luajit -jprof` records " ..
    "with, up to 200 frames); %d rounds, each also running the unprofiled baseline " ..
    "(`profile=off`: same wrapper, module loaded, not recording). Stage columns are ljprof's " ..
    "own timers divided by the signals taken, medians over rounds: *handler* = `handler_ns` " ..
    "(signal handler: VM state, ring, native unwinding when on, arming the hook); *stack dump* " ..
    "= `complete_ns` (safe point: walking the Lua stack, naming native frames, building and " ..
    "interning the key); *aggregation* = `aggregate_ns` (ring -> count tables); *other hook* = " ..
    "the rest of `hook_ns`; *total* = handler + hook (IQR in brackets). *differential* = (CPU " ..
    "profiled − CPU unprofiled) / signals: everything a sample costs the process, including " ..
    "the kernel delivering the signal, the timer's re-arm and LuaJIT calling the hook; median " ..
    "(IQR) of the paired rounds, and *min* = (fastest profiled − fastest unprofiled) / signals, " ..
    "less sensitive to other load. The stage timers count the steady state: from a tenth into " ..
    "the leaf's work (deep.lua calls the wrapper's mark there) to the end, so one-time costs " ..
    "(learning LuaJIT's layouts at start, loading a library's symbols at its first native " ..
    "frame: ~1-2 ms each) are not spread over the samples; the differential includes them. " ..
    "*frames* = items in the most-sampled key (the DEPTH frames, " ..
    "the wrapper's and luajit's own, and native frames).",
    ITERS.lua, ITERS.c, record_opts(true):gsub("native=true", "native=true|false"), res.reps))
  p("")
  p("| depth | leaf | native | frames | native frames / sample | signals/s | handler | stack dump | aggregation | other hook | **total** | differential CPU / signal | min |")
  p("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
  for _, d in ipairs(M.DEPTHS) do
    for _, leaf in ipairs(M.LEAVES) do
      for _, mode in ipairs({"native", "nonative"}) do
        local m = M.summary(res, d, leaf, mode)
        local nat = mode == "native" and "on" or "off"
        if not m then
          p(string.format("| %d | %s | %s | (no data) |||||||||| |", d, leaf, nat))
        else
          p(string.format("| %d | %s | %s | %s | %.1f | %.0f | %s | %s | %s | %s | **%s** (%s-%s) | %s (%s-%s) | %s |%s",
            d, leaf, nat, stat.num(m.frames), m.nframes, m.rate,
            stat.ns(m.handler), stat.ns(m.dump), stat.ns(m.agg), stat.ns(m.other), stat.ns(m.total),
            stat.ns(m.total_lo), stat.ns(m.total_hi), stat.ns(m.diff), stat.ns(m.diff_lo),
            stat.ns(m.diff_hi), stat.ns(m.diff_min),
            m.n < res.reps and string.format(" [n=%d]", m.n) or ""))
        end
      end
    end
  end
  p("")
  local b = M.signal_baseline(res)
  if b then
    local moved, oneshot = M.signal_baseline(res, "moved"), M.signal_baseline(res, "oneshot")
    p(string.format("Platform baseline (`bench/sigcost.c`: a C busy loop, a CLOCK_MONOTONIC timer at " ..
      "%d Hz signalling the thread, differential CPU per signal over the same rounds, median " ..
      "(IQR), min method, signals/s):", M.RATE))
    p("")
    p("| timer | CPU per signal | min | signals/s |")
    p("|---|---|---|---|")
    local function row(what, x)
      if x then
        p(string.format("| %s | **%s** (%s-%s) | %s | %.0f |", what, stat.ns(x.ns), stat.ns(x.lo),
          stat.ns(x.hi), stat.ns(x.min), x.rate))
      end
    end
    row("periodic, empty handler: the delivery alone, paid by any timer-signal profiler", b)
    row("periodic, moved by the handler (`timer_settime`; ljprof until 2026-11-25)", moved)
    row("one-shot, re-armed by the handler after a clock read (ljprof's cpu and wall clocks)", oneshot)
    p("")
    p("The differential column above includes the delivery and ljprof's re-arm; ljprof's stage " ..
      "timers do not. The second row less the first is what moving a periodic timer costs, " ..
      "which the kernel has just queued again for its next period; the third less the first " ..
      "is what ljprof's re-arm (a one-shot timer, queued once per signal as a periodic one " ..
      "is, and a clock read) adds to the delivery.")
  else
    p("Platform baseline not measured (bench/sigcost.c could not be compiled).")
  end
  p("")
  return table.concat(L, "\n")
end

-- Added CPU per sample under a function in perf run r (nil if not seen).
function M.perf_added(r, sym)
  for k, ms in pairs(r.prof.ms) do
    if r.prof.names[k].sym == sym then return (ms - (r.base.ms[k] or 0)) * 1e6 / r.st.signals end
  end
  return nil
end

-- What perf saw: per function, inclusive CPU ms without and with
-- ljprof, and the difference per sample taken, largest first.
function M.perf_tables(res)
  if not res.perf or #res.perf == 0 then return nil end
  local L = {}
  local function p(s) L[#L + 1] = s end
  for _, r in ipairs(res.perf) do
    local n = r.st.signals
    p(string.format("**%s**: %.0f ms of CPU without, %.0f ms with ljprof (%d samples; `%s`).",
      r.what, r.base.total_ms, r.prof.total_ms, n, r.cmd))
    p("")
    local d = {}
    for i, x in ipairs(r.prof.dsos) do
      if i <= 7 then
        d[#d + 1] = string.format("%s %.0f → %.0f", x.dso, r.base.dso_ms[x.dso] or 0, r.prof.dso_ms[x.dso])
      end
    end
    p("Self time by object, ms without → with ljprof: " .. table.concat(d, ", ") ..
      " (`[JIT]` is compiled trace code, `luajit` the interpreter and runtime).")
    p("")
    local rows = {}
    for k, ms in pairs(r.prof.ms) do
      rows[#rows + 1] = {k = k, ms = ms, base = r.base.ms[k] or 0}
    end
    table.sort(rows, function(a, b)
      local da, db = a.ms - a.base, b.ms - b.base
      if da ~= db then return da > db end
      return a.k < b.k
    end)
    p("| function (inclusive) | object | ms without | ms with | added ms | added per sample |")
    -- (rows sorted by added time)
    p("|---|---|---|---|---|---|")
    local shown, last = 0, nil
    for _, x in ipairs(rows) do
      local add = x.ms - x.base
      if shown >= 18 or add < 0.5 then break end
      -- Left out: a wrapper with the same time as the row above it, and
      -- the program's own functions (over 5% of the run without ljprof),
      -- whose inclusive time holds the signals that landed in them.
      if not (last and math.abs(last - add) < 1e-6) and x.base < 0.05 * r.base.total_ms then
        shown = shown + 1
        local nm = r.prof.names[x.k]
        p(string.format("| `%s` | %s | %.1f | %.1f | %.1f | %s |", nm.sym, nm.dso, x.base, x.ms, add,
                        n > 0 and stat.ns(add * 1e6 / n) or ""))
      end
      last = add
    end
    p("")
  end
  return table.concat(L, "\n")
end

return M
