-- The measured configurations: how each one runs a workload (the exact
-- command line), and how many samples it took. Every process is started
-- as `luajit -lbench.probe [profiler option] WORKLOAD`; bench/probe.lua
-- writes ljprof's statistics (with -jprof) or trace event counts when the
-- environment asks it to, and is loaded in every configuration so that all
-- pay the same.
local proc = require("lib.proc")

local M = {}

local function out_file() return proc.TMP .. "/profile.out" end
local function stats_file() return proc.TMP .. "/stats.txt" end

-- Total samples in a folded-stacks report ("stack count" lines).
local function folded_total(path)
  local n = 0
  for c in (proc.readfile(path) or ""):gmatch(" (%d+)\n") do n = n + tonumber(c) end
  return n
end

-- The samples of an ljprof run: the statistics bench/probe.lua wrote.
local function ljprof_stats(name)
  return function()
    local st = proc.read_kv(stats_file())
    if not st then error(name .. ": no statistics written (" .. stats_file() .. ")") end
    return st
  end
end

local function config(c)
  c.argv = function(script)
    local a = {"luajit", "-lbench.probe"}
    if c.option then a[#a + 1] = c.option .. "," .. out_file() end
    a[#a + 1] = script
    return a
  end
  c.cmd = "luajit -lbench.probe " .. (c.option and (c.option .. ",OUT ") or "") .. "WORKLOAD"
  c.prepare = function()
    os.remove(out_file())
    os.remove(stats_file())
  end
  return c
end

-- Unprofiled.
function M.plain()
  return config{name = "plain", label = "plain `luajit`", kind = "plain", env = {}}
end

-- ljprof through its -jp-compatible front end: -jprof=<opts>,OUT.
-- rate: the nominal samples per second; clock: cpu or wall.
function M.ljprof(name, label, opts, rate, clock)
  local c = config{name = name, label = label, kind = "ljprof", option = "-jprof=" .. opts,
                   rate = rate, clock = clock}
  c.env = {LJPROF_BENCH_STATS = stats_file()}
  c.samples = ljprof_stats(name)
  return c
end

-- LuaJIT's built-in profiler: -jp=<opts>,OUT. Its folded output ('G')
-- lists raw sample counts: their total is the samples taken.
function M.jitp(name, label, opts, rate)
  local c = config{name = name, label = label, kind = "jitp", option = "-jp=" .. opts,
                   rate = rate, clock = "cpu"}
  c.env = {}
  c.samples = function()
    local n = folded_total(out_file())
    return {signals = n, ticks = n}
  end
  return c
end

-- ljprof started from the environment as an operator starts it (docs/
-- operators.md): `luajit -l ljprof.auto WORKLOAD` with LJPROF giving the
-- rate and a pprof output (the production default: 99 Hz on the cpu
-- clock, pprof written at exit).
function M.auto(rate)
  local name = "auto" .. rate
  local c = config{name = name, label = "ljprof `LJPROF=rate=" .. rate .. "` (`-l ljprof.auto`)",
                   kind = "ljprof", rate = rate, clock = "cpu"}
  c.argv = function(script)
    return {"luajit", "-lbench.probe", "-lljprof.auto", script}
  end
  c.cmd = "LJPROF=rate=" .. rate .. ",output=OUT.pb.gz luajit -lbench.probe -l ljprof.auto WORKLOAD"
  c.env = {LJPROF_BENCH_STATS = stats_file(),
           LJPROF = "rate=" .. rate .. ",output=" .. out_file() .. ".pb.gz"}
  local prepare = c.prepare
  c.prepare = function()
    prepare()
    os.remove(out_file() .. ".pb.gz")
  end
  c.samples = ljprof_stats(name)
  return c
end

M.SWEEP_RATES = {100, 3000, 10000}
M.IDLE = "Gi60000"
function M.idle_ljprof()
  return M.ljprof("idle", "ljprof `-jprof=Gi60000` (no samples)", M.IDLE, 0, "cpu")
end
function M.idle_jitp()
  return M.jitp("jpidle", "jit.p `-jp=Gi60000` (no samples)", M.IDLE, 0)
end
-- No profiler, LuaJIT's profiling mode on as jit.p turns it on (bench/
-- probe.lua, LJPROF_BENCH_VMPROF): the control for what jit.p's mode
-- changes in the compiled code.
function M.vmprof()
  local c = config{name = "vmprof", label = "LuaJIT's profiling mode alone (`jit.profile` 'f', no sample)",
                   kind = "control", env = {LJPROF_BENCH_VMPROF = "f"}}
  c.cmd = "LJPROF_BENCH_VMPROF=f luajit -lbench.probe WORKLOAD"
  return c
end

-- The configurations of the overhead table, run on every workload: the
-- same view (-jp's 'G': folded stacks, 100 frames deep) in both profilers.
function M.base()
  return {
    M.plain(),
    M.ljprof("cpu10", "ljprof `-jprof=Gi10` (cpu, 10 ms)", "Gi10", 100, "cpu"),
    M.ljprof("cpu1", "ljprof `-jprof=Gi1` (cpu, 1 ms)", "Gi1", 1000, "cpu"),
    M.ljprof("wall1k", "ljprof `-jprof=G/clock=wall/rate=1000`", "G/clock=wall/rate=1000", 1000, "wall"),
    -- the same without native (C) frames: what their capture costs
    M.ljprof("cpu10n", "ljprof `-jprof=Gi10/native=off`", "Gi10/native=off", 100, "cpu"),
    M.ljprof("wall1kn", "ljprof `-jprof=G/clock=wall/rate=1000/native=off`",
             "G/clock=wall/rate=1000/native=off", 1000, "wall"),
    M.jitp("jp10", "jit.p `-jp=Gi10` (10 ms)", "Gi10", 100),
    M.jitp("jp1", "jit.p `-jp=Gi1` (1 ms)", "Gi1", 1000),
    -- the always-on production default
    M.auto(99),
    -- both started with a 60 s interval: their fixed costs alone
    M.idle_ljprof(), M.idle_jitp(),
    -- and the control for jit.p: its profiling mode with no profiler
    M.vmprof(),
  }
end

-- Extra configurations for the overhead-against-rate plot, run on the
-- sweep workloads in the same rounds: ljprof's wall clock at more rates.
function M.sweep()
  local t = {}
  for _, r in ipairs(M.SWEEP_RATES) do
    t[#t + 1] = M.ljprof("wall" .. r, "ljprof wall " .. r .. " Hz",
                         "G/clock=wall/rate=" .. r, r, "wall")
  end
  -- the production rates below and above the default, and jit.p at 19 Hz
  t[#t + 1] = M.auto(19)
  t[#t + 1] = M.auto(999)
  t[#t + 1] = M.jitp("jp53", "jit.p `-jp=Gi53` (53 ms, 19 Hz)", "Gi53", 19)
  return t
end

-- Unprofiled, with 8n bytes allocated first (bench/probe.lua's
-- LJPROF_BENCH_LAYOUT): how much the trace counts move without any
-- profiler, only because the heap layout changed.
function M.shifted(n)
  local c = M.plain()
  c.name, c.label, c.env = "shift" .. n, "plain, heap shifted by " .. 8 * n .. " bytes",
                           {LJPROF_BENCH_LAYOUT = tostring(n)}
  return c
end

-- The configurations of the trace-event counts.
function M.jit()
  local b = {}
  for _, c in ipairs(M.base()) do b[c.name] = c end
  return {b.plain, M.shifted(100), M.shifted(500), M.idle_ljprof(), b.cpu1, b.wall1k,
          M.idle_jitp(), b.jp10, b.jp1, b.vmprof}
end

-- The ljprof configuration compared with each jit.p one (same interval).
M.VS_JITP = {cpu10 = "jp10", cpu1 = "jp1", wall1k = "jp1", auto19 = "jp53", auto99 = "jp10",
             auto999 = "jp1"}

return M
