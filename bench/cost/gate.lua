-- The cost gate: ljprof's own instructions counted under valgrind
-- (callgrind, LuaJIT's seed fixed by bench/detseed.c, address randomisation
-- off), on short workloads, against budgets (bench/cost/budgets.lua, set
-- from measured figures + 10%).
--
--   luajit bench/cost/gate.lua [--check] [--build DIR] [--jobs J]
--                              [--workloads deep,deepi,many2000,many20000]
--                              [--budgets FILE] [--model]
--
-- A workload not listed below is bench/workloads/NAME.lua (idle and 1 ms
-- with native frames). --model also times each workload natively without
-- ljprof (median CPU of 3 runs) and prints docs/performance.md's table:
-- overhead modelled at 100 Hz and 1 kHz as own instructions per sample x
-- rate / the workload's instructions per second (its count under
-- callgrind / its native CPU time); with --out FILE it also writes it
-- there as a section (docs/cost.md, which bench/bench.lua puts at the
-- head of docs/performance.md).
--
-- From the repository root. Prints one line per figure; with --check,
-- exits 1 when a figure exceeds its budget (tests/meson.build's cost_gate).
-- Figures, per workload (bench/cost/*.lua):
--   start      own instructions of a run that takes no sample (interval
--              60 s): loading, starting, stopping (no output written:
--              bench/cost/run.lua)
--   handler    the signal handler's own instructions / the signals it
--              took (1 ms cpu clock, native frames on / off)
--   safepoint  (the Lua hook's - the one-time loads) / safe points: all
--              a safe point does, completing its signals' records included
--   per_sample handler + safepoint: a sample's own instructions where a
--              safe point serves one signal (deepi: the interpreted leaf),
--              the dearest case elsewhere
--   sample     (own with samples - own without - the one-time loads) /
--              samples (timer expiries): printed, not gated, since the
--              expiries per signal move with valgrind's timing
--   trace      (start(many) - start(deep)) / (trace events(many) - trace
--              events(deep)): what a trace event costs ljprof when no
--              sample is taken (nothing is followed per event)
-- "Own" is inclusive of what ljprof calls (bench/cost/callgrind.lua).
-- Handler and safe point are gated where their work is done, per call:
-- the per-sample figure spread the safe points' work over the expiries,
-- whose number moves from run to run (and, before the one-time loads were
-- named right, the 12 M symbol load too), so its budgets had to be wide.
package.path = "bench/?.lua;" .. package.path
local proc = require("lib.proc")
local cg = require("cost.callgrind")

local opt = require("lib.args").parse(arg, {
  ["--check"] = "flag", ["--build"] = "string", ["--jobs"] = "number",
  ["--workloads"] = "list", ["--budgets"] = "string", ["--model"] = "flag", ["--out"] = "string",
  ["--keep"] = "string",
}, "gate")
opt.build = opt.build or os.getenv("LJPROF_BUILD") or "build"
opt.jobs = opt.jobs or 2
opt.workloads = opt.workloads or {"deep", "deepi", "many2000", "many20000"}
opt.budgets = opt.budgets or "bench/cost/budgets.lua"
for _, tool in ipairs({"valgrind", "setarch", "cc"}) do
  if proc.sh("command -v " .. tool) == "" then
    io.stderr:write("gate: ", tool, " is not installed (apt-get install valgrind util-linux gcc)\n")
    os.exit(2)
  end
end

-- name -> cmd: the script and its arguments; gated: the gate's own
-- workload (bench/cost/, every sample with native frames: the symbol load
-- must be seen), else a bench workload (bench/workloads/), run sampled only
local WORK = {
  deep = {cmd = "bench/cost/deep.lua 20", gated = true},
  -- the interpreted leaf only: a safe point serves about one signal, so
  -- handler + safe point is what one sample costs (issue 29's figure)
  deepi = {cmd = "bench/cost/deep.lua 20 60 interp", gated = true},
  -- (no budget: the walk's depth)
  deep300 = {cmd = "bench/cost/deep.lua 300 4", gated = true},
  many2000 = {cmd = "bench/cost/many.lua 2000 300 2", gated = true},
  many20000 = {cmd = "bench/cost/many.lua 20000 300 2", gated = true},
  -- luacheck over its own analysis stages (19 files, 0.44 s of CPU,
  -- 12,000 trace events: LuaJIT's trace churn is slow under valgrind; the
  -- bench's tree, all of /usr/share/lua/5.1, takes 7 s of CPU once
  -- luarocks is installed, over an hour here, and luacheck's 54 modules
  -- did not finish in 25 minutes)
  luacheck = {cmd = "bench/workloads/luacheck.lua /usr/share/lua/5.1/luacheck/stages"},
}
-- configurations: name, interval (ms), native
local CONF = {
  idle = {60000, "on"}, on = {1, "on"}, off = {1, "off"},
}
local PLAN = {deep = {"idle", "on", "off"}, deepi = {"idle", "on", "off"},
              deep300 = {"idle", "off"}, many2000 = {"idle", "on"},
              many20000 = {"idle", "on"}}
-- one-time work (once per process, at the first sample that needs it),
-- charged neither per sample nor per safe point: the native names' ELF
-- symbol load (about 12 M instructions here) and the trace snapshots'
-- layouts (about 2 M). Names of functions callgrind sees: a static
-- function called once is inlined and has no arc (load_symbols was named
-- here until 2026-11-28 and matched nothing, so the symbol load was
-- spread over the samples).
local ONCE = {"ljp_elfsyms_load", "ljp_vm_learn_snapshots"}  -- (the first: checked)
-- once per trace that takes samples (inline=recorded): its record map
-- derived and proven (irmap.c), its machine code decoded and aligned to
-- its IR (mcmap.c, from a trace's 4th sample); charged neither per sample
-- nor per safe point but per trace mapped (the figure trace_map)
local PERTRACE = {"ljp_irmap_derive", "ljp_mcmap_build"}
-- the entry points whose cost is gated per call: the signal handler (per
-- signal taken) and the Lua hook (per safe point)
local HANDLER, HOOK = "ljp_signal_handler", "ljp_hook"
-- the "record" handler (inline=recorded): per recorded bytecode mapped,
-- gated per event; its total is part of the fixed cost (within the budget
-- the samples pay for: src/irmap.h)
local RECORD_EVENT = "ljp_record_event"
-- LuaJIT's own instructions to dispatch one record event to a handler
-- (lj_vmevent_call's inclusive cost less the handler's: callgrind,
-- luacheck, 2026-11-29: (217.9 M - 141.8 M) / 351,569 calls)
local RECORD_DISPATCH = 216
-- the record map's budget (src/irmap.h): events at once, per tick
local IRMAP_FIRST, IRMAP_PER_TICK
do
  local h = assert(io.open("src/irmap.h")):read("*a")
  IRMAP_FIRST = assert(tonumber(h:match("#define LJP_IRMAP_FIRST (%d+)")))
  IRMAP_PER_TICK = assert(tonumber(h:match("#define LJP_IRMAP_PER_TICK (%d+)")))
end
-- a record's completion at a safe point (once per signal it serves): the
-- model's dearest case splits the safe point into its work per record and
-- the rest (bench/cost/gate.lua --model)
local RECORD = "ljp_frames_record"

local ROOT = proc.sh("pwd")
local TMP = proc.sh("mktemp -d ${TMPDIR:-/tmp}/ljprof-gate.XXXXXX")
local function cleanup() os.execute("rm -rf " .. proc.shellquote(TMP)) end
local SHIM = TMP .. "/detseed.so"
if not os.execute("cc -O2 -shared -fPIC -o " .. SHIM .. " bench/detseed.c -ldl") then
  cleanup()
  error("gate: cannot compile bench/detseed.c")
end

local jobs, runs = {}, {}
for _, w in ipairs(opt.workloads) do
  if not WORK[w] then
    assert(io.open("bench/workloads/" .. w .. ".lua"), "gate: unknown workload " .. w)
    WORK[w] = {cmd = "bench/workloads/" .. w .. ".lua"}
  end
  if not PLAN[w] then
    -- sampled only: a bench workload runs longer under valgrind than the
    -- longest interval (60 s of CPU), so a run without a sample cannot be
    -- had; its start is deep's (the same loading, record() and stop())
    -- plus its trace events at the per-event figure, and its own count is
    -- the sampled run's less ljprof's (the default mode compiles the same
    -- code with or without ljprof)
    PLAN[w] = {"on"}
  end
  for _, c in ipairs(PLAN[w]) do
    local id = w .. "-" .. c
    local script, args = WORK[w].cmd:match("^(%S+)%s*(.*)$")
    runs[#runs + 1] = {w = w, c = c, id = id}
    local cmd = string.format(
      -- (meson test sets MALLOC_PERTURB_: glibc then fills every block
      -- malloc hands out or frees, which ljprof's counts would carry)
      "env -u MALLOC_PERTURB_ LUA_PATH=%s LUA_CPATH=%s LJPROF_BENCH_SEED=1 LD_PRELOAD=%s " ..
      "setarch -R valgrind --tool=callgrind --callgrind-out-file=%s/%s.cg " ..
      "luajit bench/cost/run.lua %s %d %s %s >/dev/null 2>%s/%s.err",
      proc.shellquote(ROOT .. "/?.lua;" .. ROOT .. "/jit/?.lua;;"),
      proc.shellquote((opt.build:sub(1, 1) == "/" and "" or ROOT .. "/") .. opt.build .. "/lib?.so;;"), SHIM, TMP, id,
      script, CONF[c][1], CONF[c][2], args, TMP, id)
    if c == "idle" then
      -- the longest interval (60 s) still has its first tick at random in
      -- [0, 60 s): a run that took one is run again
      cmd = string.format("for i in 1 2 3 4 5 6; do %s; grep -q 'cost: samples 0 ' %s/%s.err && break; done",
                          cmd, TMP, id)
    end
    jobs[#jobs + 1] = cmd
  end
end
local t0 = proc.now()
os.execute(proc.parallel(jobs, TMP, opt.jobs))
local elapsed = proc.now() - t0

local R = {}
for _, r in ipairs(runs) do
  local err = proc.readfile(TMP .. "/" .. r.id .. ".err") or ""
  local s, sig, p, t = err:match("cost: samples (%d+) signals (%d+) safepoints (%d+) traces (%d+)")
  local total = tonumber((proc.readfile(TMP .. "/" .. r.id .. ".cg") or ""):match("\nsummary: (%d+)"))
  if not s then
    cleanup()
    io.stderr:write("gate: run ", r.id, " failed:\n", err, "\n")
    os.exit(1)
  end
  if r.c == "idle" and tonumber(s) > 0 then
    cleanup()
    io.stderr:write("gate: run ", r.id, " took a sample in each of 6 tries\n")
    os.exit(1)
  end
  local split_names = {}
  for _, n in ipairs(ONCE) do split_names[#split_names + 1] = n end
  for _, n in ipairs(PERTRACE) do split_names[#split_names + 1] = n end
  split_names[#split_names + 1] = RECORD
  local own, by_fn, split = cg.own(TMP .. "/" .. r.id .. ".cg", "libljprof", split_names)
  local once, pertrace = 0, 0
  for _, n in ipairs(ONCE) do once = once + (split[n] or 0) end
  for _, n in ipairs(PERTRACE) do pertrace = pertrace + (split[n] or 0) end
  local mapped = tonumber(err:match(" mapped (%d+)")) or 0
  local records = tonumber(err:match(" records (%d+)")) or 0
  -- a function renamed or inlined would silently drop out of a figure:
  -- the handler and the hook must be seen when signals came, and the
  -- symbol load in a run that names native frames
  -- (the symbol load only on the gate's own workloads, whose every sample
  -- has native frames: a bench workload that runs in the interpreter may
  -- take no sample in C code at all, fib in one run of two)
  local missing = (tonumber(sig) > 0 and not (by_fn[HANDLER] and by_fn[HOOK]) and
                   HANDLER .. " or " .. HOOK) or
                  (r.c == "on" and tonumber(s) > 0 and WORK[r.w].gated and
                   (split[ONCE[1]] or 0) == 0 and ONCE[1])
  if missing then
    cleanup()
    io.stderr:write("gate: run ", r.id, ": no cost for ", missing,
                    " in callgrind's data (renamed or inlined? bench/cost/gate.lua names it)\n")
    os.exit(1)
  end
  -- the per-trace work is taken out of the hook's figure like the
  -- one-time work (x.once), and shown per trace mapped
  R[r.id] = {own = own, once = once + pertrace, pertrace = pertrace, mapped = mapped,
             records = records, record_event = by_fn[RECORD_EVENT] or 0,
             samples = tonumber(s), signals = tonumber(sig),
             safepoints = tonumber(p), traces = tonumber(t), total = total,
             handler = by_fn[HANDLER] or 0, hook = by_fn[HOOK] or 0,
             -- the records' completion less the one-time and per-trace
             -- work done within it (the symbol load, the snapshot layouts
             -- learnt by the first record in a trace, the record maps)
             record = (split[RECORD] or 0) - once - pertrace}
  if opt.keep then os.execute(string.format("cp %s/%s.cg %s/%s.err %s/", TMP, r.id, TMP, r.id,
                                            proc.shellquote(opt.keep))) end
end

-- Native CPU time of each workload without ljprof (for --model).
local native_cpu = {}
if opt.model then
  for _, w in ipairs(opt.workloads) do
    local script, args = WORK[w].cmd:match("^(%S+)%s*(.*)$")
    local v = {}
    for i = 1, 3 do
      os.execute(string.format("env LUA_PATH=%s luajit bench/cost/run.lua %s 1 none %s >/dev/null 2>%s/native.err",
        proc.shellquote(ROOT .. "/?.lua;;"), script, args, TMP))
      v[i] = tonumber((proc.readfile(TMP .. "/native.err") or ""):match("cpu (%S+)"))
    end
    table.sort(v)
    native_cpu[w] = v[2]
  end
end
cleanup()

local figures = {}
local function fig(name, v, note) figures[#figures + 1] = {name, v, note} end
for _, w in ipairs(opt.workloads) do
  local idle = R[w .. "-idle"]
  if idle then fig(w .. ".start", idle.own, string.format("%d trace events", idle.traces)) end
  for _, c in ipairs({"on", "off"}) do
    local x = R[w .. "-" .. c]
    if x then
      -- gated: the handler per signal it took, the hook per safe point
      -- (what it completes of its signals' records included; the one-time
      -- work taken out, which the first safe points do)
      fig(w .. ".handler_native_" .. c, x.signals > 0 and x.handler / x.signals or 0,
          string.format("%s: %.2fM / %d signals", HANDLER, x.handler / 1e6, x.signals))
      fig(w .. ".safepoint_native_" .. c,
          x.safepoints > 0 and (x.hook - x.once) / x.safepoints or 0,
          string.format("%s: (%.2fM - one-time %.2fM) / %d safe points, %.1f signals each", HOOK,
                        x.hook / 1e6, x.once / 1e6, x.safepoints,
                        x.safepoints > 0 and x.signals / x.safepoints or 0))
      if x.records > 0 then
        fig(w .. ".record_event_native_" .. c, x.record_event / x.records,
            string.format("%s: %.2fM / %d recorded bytecodes mapped", RECORD_EVENT,
                          x.record_event / 1e6, x.records))
      end
      if x.mapped > 0 then
        fig(w .. ".trace_map_native_" .. c, x.pertrace / x.mapped,
            string.format("%s: %.2fM / %d traces mapped", table.concat(PERTRACE, " + "),
                          x.pertrace / 1e6, x.mapped))
      end
      -- a signal's handler and a whole safe point: one sample's cost
      -- where a safe point serves one signal (deepi), the dearest case
      -- elsewhere; gated where budgets.lua names it (the issue's targets)
      fig(w .. ".per_sample_native_" .. c,
          (x.signals > 0 and x.handler / x.signals or 0) +
          (x.safepoints > 0 and (x.hook - x.once) / x.safepoints or 0),
          "handler per signal + safe point")
      -- for the record, not gated: all of it over the timer's expiries,
      -- which move with valgrind's timing (about 10 per signal here)
      if idle then
        fig(w .. ".sample_native_" .. c,
            x.samples > 0 and (x.own - idle.own - x.once) / x.samples or 0,
            string.format("(own - start - one-time) / %d samples", x.samples))
      end
    end
  end
end
local d, m = R["deep-idle"], R["many20000-idle"] or R["many2000-idle"]
if d and m and m.traces > d.traces then
  fig("trace_event", math.max(0, (m.own - d.own) / (m.traces - d.traces)),
      string.format("%d - %d trace events", m.traces, d.traces))
end

local budgets = {}
local bf = loadfile(opt.budgets)
if bf then budgets = bf() end
local fail = 0
if opt.check then
  -- every budget must meet its figure: a workload left out, a figure
  -- renamed, or no budget file fails the check rather than passing it
  if not bf then
    print("cost gate: no budgets (" .. opt.budgets .. ")")
    os.exit(1)
  end
  local have = {}
  for _, f in ipairs(figures) do have[f[1]] = true end
  for k in pairs(budgets) do
    if not have[k] then
      print("cost gate: budget " .. k .. " has no figure (workload not run?)")
      fail = fail + 1
    end
  end
end
print(string.format("cost gate: %d runs under callgrind in %.0f s", #runs, elapsed))
for _, f in ipairs(figures) do
  local b = budgets[f[1]]
  local verdict = ""
  if b then
    verdict = f[2] <= b and string.format("ok (budget %.0f)", b)
                        or string.format("OVER BUDGET (%.0f)", b)
    if f[2] > b then fail = fail + 1 end
  end
  print(string.format("  %-28s %14.0f  %s  [%s]", f[1], f[2], verdict, f[3]))
end
if opt.model then
  local L = {}
  local function out(x) L[#L + 1] = x or "" end
  out("## Instruction counts (own cost, deterministic)")
  out()
  out(string.format("<!-- Generated by `luajit bench/cost/gate.lua --model --out docs/cost.md " ..
    "--workloads %s`; do not edit by hand. -->", table.concat(opt.workloads, ",")))
  out()
  out(string.format("Date: %s; ljprof at commit %s; %d runs under callgrind in %.0f s.",
    os.date("!%Y-%m-%d %H:%M UTC"), proc.sh("git rev-parse --short HEAD"), #runs, elapsed))
  out()
  out("ljprof's own instructions, inclusive of what it makes LuaJIT, libc and libunwind do " ..
    "for it (bench/cost/callgrind.lua), counted by valgrind's callgrind with LuaJIT's seed " ..
    "fixed (bench/detseed.c) and address randomisation off. *At start*: a run that takes no " ..
    "sample (loading, starting, stopping; no output written: its writer is -jprof's Lua writer). " ..
    "*One-time*: what the first samples of a process load once (the native names' ELF " ..
    "symbols of the objects sampled, the trace snapshots' layouts) and each trace that takes " ..
    "samples maps once. *Start, stop, trace events*: in the sampled run, all but the handler, " ..
    "the hook and the record handler. *Record map, natively*: inline=recorded's handler, " ..
    "paid for by the samples (src/irmap.h): natively it maps at most its first allowance and " ..
    "its share per tick of the workload's CPU time at 1 ms (under valgrind the ticks come " ..
    "about 50 times as often for the same work), each at its measured own cost plus LuaJIT's " ..
    "dispatch of the event (216). *Fixed*: these three and the one-time work over the " ..
    "workload's own instructions. " ..
    "*Handler per signal*: the signal handler's own instructions over the signals it took " ..
    "(1 ms of CPU). *Safe point*: the Lua hook's over the safe points, the one-time work " ..
    "taken out; it completes the records of the signals it serves (1-6 under valgrind, " ..
    "1-3 natively). *Per signal*: a handler and its share of a safe point as measured. " ..
    "*Dearest*: a safe point for every signal, as natively where they are fewer: the " ..
    "handler, the completion of one record (`ljp_frames_record`'s instructions over the " ..
    "signals) and the rest of a safe point (the hook's less its records'). " ..
    "*Per trace event*: the difference of the start costs of the trace-churn program and " ..
    "the depth-20 one over their difference in trace events (nothing is followed per event). " ..
    "*Model*: own instructions per signal × rate / the workload's instructions per second " ..
    "(its count under callgrind / its native CPU time without ljprof, median of 3). The " ..
    "kernel's delivery of a signal (about 20 µs on this VM, bench/sigcost.c) is the same for " ..
    "any signal-based profiler and is beside the model, not in it. `deep`: depth 20, a Lua " ..
    "leaf, compiled and interpreted; `deepi`: its interpreted half only, where a safe point " ..
    "serves about one signal (handler + safe point: one sample); `manyN`: N distinct functions under integer keys, 300 of them hot, traces flushed " ..
    "twice (bench/cost/).")
  out()
  out("| workload | own at start (M instr.) | start, stop, trace events (M) | record map, natively (M; bytecodes) | one-time (M) | fixed, % of the run | " ..
      "handler per signal | safe point (signals served) | per signal | dearest | " ..
      "own per trace event | model at 100 Hz | model at 1 kHz | 1 kHz, dearest | " ..
      "kernel's delivery at 100 Hz / 1 kHz |")
  out("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
  local per_trace = 0
  for _, f in ipairs(figures) do if f[1] == "trace_event" then per_trace = f[2] end end
  local function row(w, c, label)
    local idle, x = R[w .. "-idle"], R[w .. "-" .. c]
    if not x then return end
    local h = x.signals > 0 and x.handler / x.signals or 0
    local sp = x.safepoints > 0 and (x.hook - x.once) / x.safepoints or 0
    local k = x.safepoints > 0 and x.signals / x.safepoints or 1
    -- per signal as measured: its handler and its share of a safe point;
    -- natively a safe point serves fewer signals (1-3): the dearest case
    -- is a safe point per signal, its work per record (one) and the rest
    -- of it (a safe point's cost less its records')
    local rec = x.signals > 0 and x.record / x.signals or 0
    local rest = x.safepoints > 0 and (x.hook - x.once - x.record) / x.safepoints or 0
    local per, worst = h + sp / k, h + rest + rec
    -- the workload's own instructions per second: a sampled-only run's
    -- count less ljprof's and LuaJIT's dispatch of its record events
    local work = idle and idle.total - idle.own or
                 x.total - x.own - x.records * RECORD_DISPATCH
    local ips = work / native_cpu[w]
    -- measured in the sampled run: the start, the stop and the trace
    -- events' handlers (all but the handler and the hook), the record
    -- handler apart: under valgrind the ticks, which pay for the record
    -- map (src/irmap.h), come about 50 times as often for the same work;
    -- natively it maps at most its first allowance and its share per
    -- tick of the workload's CPU time (1 ms)
    local outside = x.own - x.handler - x.hook - x.record_event
    local per_rec = x.records > 0 and x.record_event / x.records + RECORD_DISPATCH or 0
    local native_recs = math.min(x.records, IRMAP_FIRST + IRMAP_PER_TICK * native_cpu[w] * 1000)
    local recmap = native_recs * per_rec
    local start = idle and string.format("%.2f", idle.own / 1e6) or "—"
    local fixed = string.format("%.3f%%", (outside + recmap + x.once) * 100 / work)
    out(string.format("| %s | %s | %.2f | %.2f (%d) | %.2f | %s | %.1fk | %.1fk (%.1f) | %.1fk | %.1fk | %.0f | %.3f%% | %.2f%% | %.2f%% | 0.2%% / 2%% |",
      label, start, outside / 1e6, recmap / 1e6, native_recs, x.once / 1e6, fixed, h / 1e3, sp / 1e3, k,
      per / 1e3, worst / 1e3, per_trace,
      per * 100 / ips * 100, per * 1000 / ips * 100, worst * 1000 / ips * 100))
  end
  for _, w in ipairs(opt.workloads) do
    row(w, "on", w)
    if w == "deep" then row(w, "off", "deep, native off") end
    if w == "deepi" then row(w, "off", "deepi, native off") end
  end
  print()
  print(table.concat(L, "\n"))
  -- the generated section ends at its marker; what the file holds after
  -- it (the passes' notes) is kept
  out()
  out("<!-- End of the generated section: what follows is kept by --out. -->")
  if opt.out then
    local old = proc.readfile(opt.out) or ""
    local keep = old:match("<!%-%- End of the generated section[^\n]*\n(.*)$") or ""
    proc.writefile(opt.out, table.concat(L, "\n") .. "\n" .. keep)
  end
end
if opt.check then
  if fail > 0 then
    print(string.format("cost gate: %d figure(s) over budget (%s)", fail, opt.budgets))
    os.exit(1)
  end
  print("cost gate: all figures within budget")
end
