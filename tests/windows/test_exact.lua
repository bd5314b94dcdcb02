-- Exact stacks in the Windows build, under Wine (tests/windows/meson.build):
-- the Linux test's workloads and checker (tests/lua/exact_cases.lua,
-- shared with tests/lua/test_exact_stacks.lua), each run in a child
-- luajit.exe (through cmd.exe: t.run_win) under ljprof.dll with the wall
-- clock (on Windows the cpu clock is the same timer, gated by the thread's
-- cycles, which Wine cannot read), Lua frames only (native frames are not
-- captured on Windows). Every workload: compiled driver loops calling
-- small functions, C library functions and a C module
-- (ljp_ctest.dll, tests/native/ctest.c) from compiled code through Lua
-- wrappers, allocation, recursion, coroutines, metamethods, pcall/error.
--
-- The interval is 4 ms, not the Linux test's 1 ms: a sample costs ~0.8 ms
-- of the profiled thread's time under Wine (suspended while the timer
-- thread reads it; win-os prints the cost), so at 1 ms the program would
-- mostly be the sampler's. Runs are >= 3 s (>= 500 samples each).
-- Asserted: >= 300 samples per workload and 0 samples on an impossible
-- path (the Linux test allows 0.5%; here none). Printed: samples and
-- impossible samples per workload, and the game loop's subsystem shares
-- against its wall-clock truth (not asserted here: the zones test in
-- test_profile.lua is the strict one).
local t = require("t")
local cases = require("exact_cases")

local LUAJIT = arg and arg[-1] or "luajit"
local CTEST = assert(os.getenv("LJPROF_CTEST"), "LJPROF_CTEST not set (run from meson)")
local INTERVAL = 4      -- ms
local MIN_DUR = 3       -- s
local MIN_SAMPLES = 300
local PRE = string.format("ljp_we_%d_", os.time())

-- Run workload w under ljprof (wall clock): entries {count, stack}, truth
local function run_child(w)
  local script = PRE .. w.name .. ".lua"
  t.write(script, cases.HEAD .. w.src .. cases.TAIL)
  local out, code = t.run_win(string.format("%s %s ljprof wall off %s %s %d", LUAJIT, script,
    tostring(math.max(w.dur, MIN_DUR)), CTEST, INTERVAL))
  os.remove(script)
  local entries, truth, other = {}, {}, {}
  for line in out:gmatch("[^\n]+") do
    local n, s = line:match("^S\t(%d+)\t(.*)$")
    if n then
      entries[#entries + 1] = {count = tonumber(n), stack = s}
    else
      local k, v = line:match("^T\t([^\t]+)\t(%S+)$")
      if k then truth[k] = tonumber(v) else other[#other + 1] = line end
    end
  end
  return entries, truth, code, table.concat(other, "\n")
end

print(string.format("%-11s %7s %10s  %s", "workload", "samples", "impossible", "most frequent impossible"))
local all, bad = 0, 0
for _, w in ipairs(cases.W) do
  t.case(w.name .. " wall: no impossible edge", function()
    local g = cases.graph(w.edges)
    local entries, truth, code, other = run_child(w)
    t.eq(code, 0, w.name .. ": exit status: " .. other)
    local r = cases.measure(g, entries)
    all, bad = all + r.total, bad + r.wrong
    print(string.format("%-11s %7d %10d  %s", w.name, r.total, r.wrong,
      r.worst[1] and (r.worst[1].stack .. " (" .. r.worst[1].count .. ")") or ""))
    t.ok(r.total >= MIN_SAMPLES, string.format("%s: enough samples: %d", w.name, r.total))
    t.eq(r.wrong, 0, string.format("%s: samples on an impossible path (of %d)", w.name, r.total))
    if w.name == "game" and truth.main then
      local incl = cases.inclusive("main", entries)
      local cells = {}
      for _, sub in ipairs({"ai", "phys", "render"}) do
        cells[#cells + 1] = string.format("%s %.1f%% / %.1f%%", sub,
          incl > 0 and 100 * cases.inclusive(sub, entries) / incl or 0, 100 * truth[sub] / truth.main)
      end
      print("  game shares, samples / wall time (not asserted): " .. table.concat(cells, ", "))
    end
  end)
end
print(string.format("all workloads: %d samples, %d impossible", all, bad))

t.done()
