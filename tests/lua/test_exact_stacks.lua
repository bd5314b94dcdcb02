-- Exact stacks (issue "Exact stacks"): every call path a profile shows
-- must be one the program can have. The Lua part of a sample is read at
-- the next safe point; in compiled code that is the next trace exit, often
-- after the sampled function returned, so a sample can show a path that
-- never happens (main;phys;ai where phys never calls ai).
--
-- Each workload below declares its static call graph (the caller;callee
-- edges among its own named Lua functions and the known C functions it
-- calls). It runs in a child luajit (the JIT in its normal state) under
-- ljprof (record + summary, key "fZ;") and under LuaJIT's jit.profile
-- ("fi1", dumpstack "fZ;" per callback) for comparison. A sample is wrong
-- when its path, reduced to the workload's own frames, holds an edge the
-- program never has. Frames that are not the workload's (the chunk, the
-- harness, C functions not declared, native frames appended by ljprof)
-- are dropped before adjacent pairs are taken.
--
-- Asserted: ljprof's wrong share <= 0.5% in every run, >= 300 samples per
-- run, and for the game frame loop: ai holds the most self samples and
-- each subsystem's inclusive share of main's samples is within 3 points
-- of its share of main's time on the clock sampled (os.clock, CPU time,
-- for cpu and itimer; CLOCK_MONOTONIC for wall, which also counts the
-- time the process waits for a CPU on a loaded machine) (or 4 standard
-- errors of the
-- independent draws, the signals, if larger: a cpu-clock or itimer signal
-- stands for ~4 ticks here, so those runs have ~1000 draws, the wall runs
-- ~4000). Clocks: cpu, wall, itimer; 1 ms; native
-- frames on and off. jit.p numbers are printed, never asserted.
-- Everything measured is printed (one line per workload/clock/native).
-- VERBOSE=1 prints the most frequent wrong paths of each run; ONLY=name
-- runs one workload; DUMP=1 prints each child's most frequent stacks (and
-- runs wall/native=on only). Stand-alone: LUA_PATH, LUA_CPATH and
-- LJPROF_CTEST as tests/meson.build sets them.
local t = require("t")

local LUAJIT = arg and arg[-1] or "luajit"
local CTEST = assert(os.getenv("LJPROF_CTEST"), "LJPROF_CTEST not set (run from meson)")
local VERBOSE = os.getenv("VERBOSE")
local MAX_WRONG = 0.5     -- percent of samples
local MIN_SAMPLES = 300
local SHARE_TOL = 3       -- percentage points (frame loop subsystems)

-- The workloads and the checker: tests/lua/exact_cases.lua (shared with
-- the Windows test tests/windows/test_exact.lua).
local cases = require("exact_cases")
local graph, bad_edge, measure = cases.graph, cases.bad_edge, cases.measure
local self_counts, inclusive = cases.self_counts, cases.inclusive
local HEAD, TAIL, W = cases.HEAD, cases.TAIL, cases.W

t.case("checker self-check on hand-made stacks", function()
  local g = graph({{"main", "ai"}, {"main", "phys"}, {"main", "render"},
                   {"render", "string.format"}, {"rec", "rec"}, {"main", "rec"}})
  t.eq(bad_edge(g, "main;ai"), nil, "allowed edge")
  t.eq(bad_edge(g, "prog.lua:0;main;ai"), nil, "foreign outer frame dropped")
  t.eq(bad_edge(g, "main;phys;ai"), "phys;ai", "phys never calls ai")
  t.eq(bad_edge(g, "main;render;string.format;ljpt_inner;libc.so+0x10"), nil,
    "native frames on top dropped")
  t.eq(bad_edge(g, "main;string.format"), "main;string.format", "C function without its wrapper")
  t.eq(bad_edge(g, "main;rec;rec;rec;rec"), nil, "recursion")
  t.eq(bad_edge(g, "main;rec;rec;ai"), "rec;ai", "callee of the wrong caller")
  t.eq(bad_edge(g, "ai;main"), "ai;main", "reversed edge")
  t.eq(bad_edge(g, "main;[builtin#12];ai"), nil, "undeclared C frame between: dropped")
  t.eq(bad_edge(g, "ai"), nil, "one frame has no edge")
  t.eq(bad_edge(g, ""), nil, "empty stack")
  local m = measure(g, {{stack = "x;main;ai", count = 3}, {stack = "main;phys;ai", count = 1},
                        {stack = "main;ai;render", count = 4}, {stack = "main", count = 2}})
  t.eq(m.total, 10, "total")
  t.eq(m.wrong, 5, "wrong")
  t.eq(m.pct, 50, "share")
  t.eq(m.bad["phys;ai"], 1, "per edge")
  t.eq(m.bad["ai;render"], 4, "per edge")
  local s = self_counts({main = true, ai = true, phys = true, render = true},
    {{stack = "main;ai", count = 3}, {stack = "main;render;string.format;ljpt_inner", count = 2},
     {stack = "main", count = 1}, {stack = "other", count = 7}})
  t.eq(s.ai, 3, "self ai")
  t.eq(s.render, 2, "self render through a C leaf")
  t.eq(s.main, 1, "self main")
  t.eq(inclusive("render", {{stack = "main;render;x", count = 2}, {stack = "main", count = 1}}), 2,
    "inclusive")
end)


-- Run workload w in a child: mode "ljprof" (clock, native) or "jitp".
-- The itimer clock (process CPU time, SIGPROF) and jit.p tick on kernel
-- ticks (250 Hz here, not 1 kHz): those runs are longer.
local function run_child(w, mode, clock, native)
  local dur = (clock == "itimer" or mode == "jitp") and math.max(w.dur, 2.5) or w.dur
  local base = os.tmpname()
  local script = base .. ".lua"
  t.write(script, HEAD .. w.src .. TAIL)
  local cmd = string.format("%s %s %s %s %s %s %s 2>&1", LUAJIT, script, mode,
    clock or "-", native or "-", tostring(dur), CTEST)
  local p = io.popen(cmd)
  local out = p:read("*a")
  p:close()
  os.remove(script)
  os.remove(base)
  local entries, truth = {}, {}
  for line in out:gmatch("[^\n]+") do
    local n, s = line:match("^S\t(%d+)\t(.*)$")
    if n then
      entries[#entries + 1] = {count = tonumber(n), stack = s}
    else
      local k, v = line:match("^T\t([^\t]+)\t(%S+)$")
      if k then truth[k] = tonumber(v) else io.stderr:write("  child: ", line, "\n") end
    end
  end
  if os.getenv("DUMP") then
    table.sort(entries, function(a, b) return a.count > b.count end)
    print(string.format("    %s %s %s %s: most frequent stacks", w.name, mode, clock or "", native or ""))
    for i = 1, math.min(8, #entries) do
      print(string.format("      %6d  %s", entries[i].count, entries[i].stack))
    end
  end
  return entries, truth
end

local function show_worst(r, k)
  for i = 1, math.min(k, #r.worst) do
    print(string.format("      %6d  %s", r.worst[i].count, r.worst[i].stack))
  end
end

local function top_edges(r)
  local l = {}
  for e, n in pairs(r.bad) do l[#l + 1] = {e, n} end
  table.sort(l, function(a, b) return a[2] > b[2] end)
  local out = {}
  for i = 1, math.min(3, #l) do out[#out + 1] = l[i][1] .. "=" .. l[i][2] end
  return table.concat(out, " ")
end

local RUNS = os.getenv("DUMP") and {{"wall", "on"}} or {{"cpu", "on"}, {"cpu", "off"}, {"wall", "on"}, {"wall", "off"},
              {"itimer", "on"}, {"itimer", "off"}}

local results = {}

print(string.format("%-11s %-6s %-6s %7s %9s %9s %8s  %s", "workload", "clock", "native",
  "samples", "wrong%", "jit.p%", "jit.p n", "ljprof's most frequent wrong edges"))

local ONLY = os.getenv("ONLY")  -- one workload by name (development)
for _, w in ipairs(W) do
  if ONLY and w.name ~= ONLY then goto next end
  local g = graph(w.edges)
  local jp_entries, jp_truth = run_child(w, "jitp")
  local jp = measure(g, jp_entries)
  if w.name == "game" then
    results[#results + 1] = {w = w, clock = "jit.p", native = "-", r = jp,
                             entries = jp_entries, truth = jp_truth, jitp = true}
  end
  if VERBOSE and jp.wrong > 0 then
    print(string.format("    jit.p %s: %d of %d wrong", w.name, jp.wrong, jp.total))
    show_worst(jp, 5)
  end
  for _, rc in ipairs(RUNS) do
    local clock, native = rc[1], rc[2]
    t.case(string.format("%s %s native=%s: no impossible edge", w.name, clock, native), function()
      local entries, truth = run_child(w, "ljprof", clock, native)
      local r = measure(g, entries)
      results[#results + 1] = {w = w, clock = clock, native = native, r = r, jp = jp,
                               entries = entries, truth = truth}
      print(string.format("%-11s %-6s %-6s %7d %8.2f%% %8.2f%% %8d  %s", w.name, clock, native,
        r.total, r.pct, jp.pct, jp.total, top_edges(r)))
      if VERBOSE and r.wrong > 0 then show_worst(r, 5) end
      t.ok(r.total >= MIN_SAMPLES, string.format("%s %s native=%s: enough samples: %d",
        w.name, clock, native, r.total))
      t.ok(r.pct <= MAX_WRONG, string.format(
        "%s %s native=%s: %.2f%% of %d samples on an impossible path (max %.1f%%): %s",
        w.name, clock, native, r.pct, r.total, MAX_WRONG, top_edges(r)))
    end)
  end
  ::next::
end

-- The game frame loop: ai the hottest function by self time; each
-- subsystem's inclusive share of main's samples against its os.clock
-- share of main's time.
print(string.format("\n%-6s %-6s %6s | %-20s | %-20s | %-20s | %s", "clock", "native", "frames",
  "ai meas/truth", "phys meas/truth", "render meas/truth", "top self"))
for _, res in ipairs(results) do
  if res.w.name == "game" and res.jitp then
    -- jit.p on the same workload, for comparison (not asserted)
    local tr, all = res.truth, inclusive("main", res.entries)
    local cells = {}
    for _, sub in ipairs({"ai", "phys", "render"}) do
      cells[#cells + 1] = string.format("%6.1f%% / %6.1f%%",
        all > 0 and 100 * inclusive(sub, res.entries) / all or 0,
        tr.main and 100 * tr[sub] / tr.main or 0)
    end
    print(string.format("%-6s %-6s %6d | %-20s | %-20s | %-20s | (not asserted)", "jit.p", "-",
      tr.frames or 0, cells[1], cells[2], cells[3]))
  elseif res.w.name == "game" then
    t.case(string.format("game %s native=%s: ai hottest, shares near truth", res.clock, res.native),
      function()
        local lua = {}
        for _, n in ipairs(res.w.lua) do lua[n] = true end
        local self = self_counts(lua, res.entries)
        local top, topn = nil, -1
        for n, c in pairs(self) do if c > topn then top, topn = n, c end end
        local tr, all = res.truth, inclusive("main", res.entries)
        local cells, checks = {}, {}
        for _, sub in ipairs({"ai", "phys", "render"}) do
          local meas = all > 0 and 100 * inclusive(sub, res.entries) / all or 0
          local truth = tr.main and 100 * tr[sub] / tr.main or 0
          cells[#cells + 1] = string.format("%6.1f%% / %6.1f%%", meas, truth)
          checks[#checks + 1] = {sub, meas, truth}
        end
        print(string.format("%-6s %-6s %6d | %-20s | %-20s | %-20s | %s (%d)", res.clock, res.native,
          tr.frames or 0, cells[1], cells[2], cells[3], tostring(top), topn))
        t.ok((tr.frames or 0) >= 1500, "frames: " .. tostring(tr.frames))
        t.eq(top, "ai", "hottest function by self samples")
        for _, c in ipairs(checks) do
          -- 3 points, or 4 standard errors of a share of `all` samples
          -- when there are too few for 3 points to be 4 of them (itimer)
          -- (independent samples: the signals, fewer than the weighted
          -- ticks on the tick-limited cpu clock)
          local p = c[3] / 100
          local draws = math.min(all, tr.signals or all)
          local tol = math.max(SHARE_TOL, 400 * math.sqrt(p * (1 - p) / math.max(draws, 1)))
          t.ok(math.abs(c[2] - c[3]) <= tol, string.format(
            "%s %s native=%s: %s share %.1f%% vs truth %.1f%% (tolerance %.1f points, %d samples, %d signals)",
            "game", res.clock, res.native, c[1], c[2], c[3], tol, all, draws))
        end
      end)
  end
end

t.done()
