-- JIT perturbation: the trace compiler's events (trace starts, stops,
-- aborts, flushes) of every workload without a profiler and under each
-- profiler configuration of the overhead table, counted by bench/probe.lua
-- (LJPROF_BENCH_TRACES) in separate runs, so the counting never touches
-- the timed runs. LuaJIT's trace selection has random elements (penalties
-- after aborts), so unprofiled runs vary too: medians over the rounds.
local proc = require("lib.proc")
local stat = require("lib.stat")
local configs = require("lib.configs")

local M = {}

local EVENTS = {"start", "stop", "abort", "flush"}

function M.run(ctx)
  local file = proc.TMP .. "/traces.txt"
  local cfgs = configs.jit()
  local res = {workloads = ctx.workloads, cfgs = cfgs, reps = ctx.jit_reps, data = {}, mismatches = {}}
  local ref = {}
  for rep = 1, res.reps do
    for _, w in ipairs(ctx.workloads) do
      proc.log("jit round %d/%d %-12s", rep, res.reps, w)
      res.data[w] = res.data[w] or {}
      for _, c in ipairs(cfgs) do
        c.prepare()
        os.remove(file)
        local env = {}
        for k, v in pairs(ctx.env) do env[k] = v end
        for k, v in pairs(c.env) do env[k] = v end
        env.LJPROF_BENCH_TRACES = file
        local r = proc.run_retry("traces " .. c.name .. " " .. w, c.argv(ctx.script(w)), env)
        local d = res.data[w][c.name] or {}
        res.data[w][c.name] = d
        if r then
          ref[w] = ref[w] or r.out
          if r.out ~= ref[w] then
            res.mismatches[#res.mismatches + 1] = string.format("%s under %s (trace count run %d)", w, c.name, rep)
          else
            local t = proc.read_kv(file)
            if t then d[#d + 1] = t end
          end
        end
        proc.log(" %s", c.name)
      end
      proc.log("\n")
    end
  end
  return res
end

local function med(res, w, name, ev)
  local t = {}
  for _, r in ipairs(res.data[w][name] or {}) do t[#t + 1] = r[ev] or 0 end
  return stat.median(t)
end
M.median = med

function M.tables(res)
  local L = {}
  local function p(s) L[#L + 1] = s end
  p("Trace events per run, median over " .. res.reps .. " rounds, as `starts/stops/aborts " ..
    "(flushes)`; a stop is a trace compiled. Every run here, plain included, has the counting " ..
    "handler of bench/probe.lua attached. *no samples* = the profiler started with a 60 s " ..
    "interval (`-jprof=Gi60000`, `-jp=Gi60000`). jit.p flushes all traces when it starts " ..
    "and stops, and while it runs in its `f`/`l` modes LuaJIT records profiling checks into " ..
    "new traces, so it changes the compiled code even when it takes no sample; ljprof never " ..
    "flushes and holds its hook back while the recorder runs. *plain, heap shifted by N " ..
    "bytes*: no profiler, a string of N bytes allocated before the workload (bench/probe.lua's " ..
    "LJPROF_BENCH_LAYOUT): what a shifted heap alone does to the choice of traces. *no " ..
    "profiler, LuaJIT's profiling mode*: `jit.profile.start(\"fi60000\")` with a callback " ..
    "that does nothing (bench/probe.lua's LJPROF_BENCH_VMPROF), the mode jit.p's `G` view " ..
    "turns on, without jit.p.")
  p("")
  local head, sep = {"workload"}, {"---"}
  for _, c in ipairs(res.cfgs) do
    head[#head + 1] = c.name == "plain" and "plain" or (c.kind == "plain" and "plain, " or
      c.kind == "control" and "" or c.kind == "ljprof" and "ljprof " or "jit.p ") ..
      (({cpu10 = "10 ms", cpu1 = "1 ms", wall1k = "wall 1 kHz", jp10 = "10 ms", jp1 = "1 ms",
         cpu10n = "10 ms, native off", wall1kn = "wall 1 kHz, native off",
         idle = "no samples", jpidle = "no samples",
         shift100 = "heap shifted by 800 bytes", shift500 = "heap shifted by 4000 bytes",
         vmprof = "no profiler, LuaJIT's profiling mode (`f`)"})[c.name] or c.name)
    sep[#sep + 1] = "---"
  end
  p("| " .. table.concat(head, " | ") .. " |")
  p("|" .. table.concat(sep, "|") .. "|")
  local totals = {}
  for _, w in ipairs(res.workloads) do
    local cells = {w}
    for _, c in ipairs(res.cfgs) do
      local v = {}
      for _, ev in ipairs(EVENTS) do v[ev] = med(res, w, c.name, ev) end
      if v.start then
        cells[#cells + 1] = string.format("%.0f/%.0f/%.0f (%.0f)", v.start, v.stop, v.abort, v.flush)
        local t = totals[c.name] or {start = 0, stop = 0, abort = 0, flush = 0}
        totals[c.name] = t
        for _, ev in ipairs(EVENTS) do t[ev] = t[ev] + v[ev] end
      else
        cells[#cells + 1] = "(no data)"
      end
    end
    p("| " .. table.concat(cells, " | ") .. " |")
  end
  local cells = {"**all workloads**"}
  for _, c in ipairs(res.cfgs) do
    local t = totals[c.name]
    cells[#cells + 1] = t and string.format("**%.0f/%.0f/%.0f (%.0f)**", t.start, t.stop, t.abort, t.flush) or ""
  end
  p("| " .. table.concat(cells, " | ") .. " |")
  p("")
  res.totals = totals
  return table.concat(L, "\n")
end

return M
