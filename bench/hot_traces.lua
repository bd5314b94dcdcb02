-- Memory of a program with many hot compiled functions (issue 28, item
-- 5), and of the write at stop of a profile with many distinct stacks.
--
--   luajit bench/hot_traces.lua [N [SECONDS [EVERY [K]]]]   (from the
--   source tree, after ./run build; defaults 20000 functions, 4 s of CPU,
--   every=5, K=42: 74,088 stacks)
--
-- 1. N functions, each a loop LuaJIT compiles (with the default
--    maxtrace=1000 it flushes and recompiles them all the time), called
--    in turn for SECONDS of CPU time, a full collection after each round
--    (the Lua heap the same in every run): unprofiled, under
--    `-jprof=G/clock=wall/rate=10000,F.pb.gz` and under
--    `LJPROF=clock=wall,rate=10000,every=EVERY,...` (-l ljprof.auto). Each
--    run reads its VmRSS and VmHWM (/proc/self/status) and
--    ljprof.stats().bytes at the end of its loop.
-- 2. K^3 distinct stacks (top[a] -> mid[b] -> leaf[c], interpreted),
--    sampled at 10 kHz wall until ~60,000-74,000 have a sample, then
--    jit.prof's stop (the write at exit) to one .pb.gz: VmHWM before and
--    after it.
-- Prints markdown. Nothing is asserted (tests/lua/test_memory.lua checks
-- a small version).
local N = tonumber(arg[1]) or 20000
local S = tonumber(arg[2]) or 4
local EVERY = tonumber(arg[3]) or 5
local K = tonumber(arg[4]) or 42

package.path = debug.getinfo(1, "S").source:match("^@(.-)[^/]*$") .. "?.lua;" .. package.path
local src, build, dir = require("lib.proc").tree(debug.getinfo(1, "S").source)
local ENV = string.format("LUA_PATH='%s/?.lua;%s/jit/?.lua;;' LUA_CPATH='%s/lib?.so;;' ",
                          src, src, build)
local LJ = arg[-1] or "luajit"

local function read(path)
  local f = assert(io.open(path))
  local s = f:read("*a")
  f:close()
  return s
end

local STATUS = [[
local function status()
  local f = io.open("/proc/self/status") local s = f:read("*a") f:close()
  return tonumber(s:match("VmRSS:%s*(%d+)")), tonumber(s:match("VmHWM:%s*(%d+)"))
end
local function report(what)
  local rss, hwm = status()
  local lj = package.loaded.ljprof
  local st = lj and lj.stats() or {}
  print(("%s rss=%d hwm=%d bytes=%d samples=%d stacks=%d"):format(what, rss, hwm,
    st.bytes or 0, st.samples or 0, st.stacks or 0))
end
local function stop()
  if arg[#arg] == "stop" then require("jit.prof").stop() report("stopped") end
end
]]

local HOT = STATUS .. [[
local N, S = tonumber(arg[1]), tonumber(arg[2])
local fs = {}
for i = 1, N do
  fs[i] = loadstring(("local k = %d return function(n) local s = 0 " ..
    "for j = 1, n do s = s + (j * k) %% 7 end return s end"):format(i), "=f" .. i)()
end
local t0, r = os.clock(), 0
while os.clock() - t0 < S do
  for i = 1, N do r = r + fs[i](100) end
  collectgarbage()
end
report("loop")
stop()
]]

local STACKS = STATUS .. read(src .. "/bench/lib/many_stacks.lua") .. [[
report("loop")
stop()
]]

local function write(name, s)
  local f = assert(io.open(dir .. "/" .. name, "w"))
  f:write(s)
  f:close()
end
write("hot.lua", HOT)
write("stacks.lua", STACKS)

local function run(cmd)
  local p = io.popen("cd '" .. dir .. "' && " .. cmd .. " 2>&1")
  local out = p:read("*a")
  p:close()
  local r = {}
  for what, rss, hwm, bytes, samples, stacks in
      out:gmatch("(%a+) rss=(%d+) hwm=(%d+) bytes=(%d+) samples=(%d+) stacks=(%d+)") do
    r[what] = {rss = tonumber(rss), hwm = tonumber(hwm), bytes = tonumber(bytes),
               samples = tonumber(samples), stacks = tonumber(stacks)}
  end
  if not r.loop then io.stderr:write("hot_traces: no result from: ", cmd, "\n", out, "\n") end
  return r
end

local function mb(kb) return string.format("%.1f MB", kb / 1024) end

local plain = run(LJ .. " hot.lua " .. N .. " " .. S)
local jp = run(ENV .. LJ .. " -jprof=G/clock=wall/rate=10000,out.pb.gz hot.lua " ..
               N .. " " .. S .. " stop")
local ev = run(ENV .. "LJPROF='clock=wall,rate=10000,every=" .. EVERY .. ",output=" .. dir ..
               "/e-%n.pb.gz' " .. LJ .. " -l ljprof.auto hot.lua " .. N .. " " .. S)
print(("%d hot compiled functions, %g s of CPU, 10 kHz wall; at the end of the loop:"):format(N, S))
print()
print("| run | VmRSS | VmHWM | stats().bytes | samples | limit: unprofiled + bytes + 16 MB |")
print("|---|---|---|---|---|---|")
local function row(name, r)
  if not (r and r.loop) then print("| " .. name .. " | failed | | | | |") return end
  local l = r.loop
  local limit = plain.loop and (plain.loop.rss + l.bytes / 1024 + 16 * 1024)
  print(("| %s | %s | %s | %.1f MB | %d | %s |"):format(name, mb(l.rss), mb(l.hwm),
    l.bytes / 1048576, l.samples, limit and (mb(limit) .. (l.rss <= limit and ", met" or ", **exceeded**")) or "?"))
end
row("unprofiled", plain)
row("`-jprof`", jp)
row("`LJPROF every=" .. EVERY .. "`", ev)
print()
local st = run(ENV .. LJ .. " -jprof=G/clock=wall/rate=10000,stacks.pb.gz stacks.lua " ..
               K .. " 12 stop")
if st.loop and st.stopped then
  print(("Write at stop (`jit.prof.stop()`, one `.pb.gz`) of %d distinct stacks (%d samples): " ..
    "VmHWM %s before, %s after: **+%s** (%.0f bytes per stack)."):format(st.loop.stacks,
    st.loop.samples, mb(st.loop.hwm), mb(st.stopped.hwm), mb(st.stopped.hwm - st.loop.hwm),
    (st.stopped.hwm - st.loop.hwm) * 1024 / st.loop.stacks))
end
os.execute("rm -rf '" .. dir .. "'")
