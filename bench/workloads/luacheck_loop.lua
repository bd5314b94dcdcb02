-- Workload "luacheck_loop" (the memory benchmark, bench/lib/memory.lua):
-- the luacheck workload run again and again for LJPROF_BENCH_SECONDS of
-- wall time (default 60), so that a profile collects as many distinct
-- stacks as a long run of a real program does. Its output (luacheck's
-- report each round, then the number of rounds) depends on the speed:
-- it is not compared between configurations.
local seconds = tonumber(os.getenv("LJPROF_BENCH_SECONDS") or "") or 60
local path = debug.getinfo(1, "S").source:match("^@(.*)luacheck_loop%.lua$") .. "luacheck.lua"
local chunk = assert(loadfile(path))
local t0, rounds = os.time(), 0
repeat
  chunk()
  rounds = rounds + 1
until os.time() - t0 >= seconds
print("rounds", rounds)
-- The peak RSS so far: before a profiler stopped at exit writes its
-- outputs (wait4's ru_maxrss, taken by the harness, includes that).
local f = io.open("/proc/self/status")
local status = f and f:read("*a") or ""
if f then f:close() end
print("hwm_kb", status:match("VmHWM:%s*(%d+)") or "?")
