-- Memory that ljprof takes from a program (issue 28, item 5): a program of
-- many hot compiled functions (LuaJIT compiles, flushes and recompiles
-- their traces all the time) profiled at 10 kHz wall, with -jprof and with
-- LJPROF every= (ljprof.auto). Its resident set at the end of the loop
-- must stay within 16 MB of the same program unprofiled plus what
-- ljprof says it holds (stats().bytes); and writing the profile at stop
-- (the exit write, jit.prof's stop, in ljprof's own Lua state) must add
-- little to the peak. Before the fix, the code map kept every replaced
-- trace array until a later collect: 2,000 functions for 2 s, RSS 5 MB
-- unprofiled, 227 MB profiled. The loop runs for CPU time, not wall time;
-- nothing here depends on how fast the machine is.
local t = require("t")

local q = t.q
local dir = t.tmpdir()
local LJ = t.LUAJIT
local N, CPU = 2000, 1.5

local PROG = [[
local N, S, mode = tonumber(arg[1]), tonumber(arg[2]), arg[3]
local fs = {}
for i = 1, N do
  fs[i] = loadstring(("local k = %d return function(n) local s = 0 " ..
    "for j = 1, n do s = s + (j * k) %% 7 end return s end"):format(i), "=f" .. i)()
end
local function status()
  local f = io.open("/proc/self/status") local s = f:read("*a") f:close()
  return tonumber(s:match("VmRSS:%s*(%d+)")), tonumber(s:match("VmHWM:%s*(%d+)"))
end
local t0, r = os.clock(), 0
while os.clock() - t0 < S do
  for i = 1, N do r = r + fs[i](100) end
  collectgarbage()  -- the Lua heap the same, profiled or not
end
local rss, hwm = status()
local lj = package.loaded.ljprof
local st = lj and lj.stats() or {}
print(("loop rss=%d hwm=%d bytes=%d samples=%d stacks=%d"):format(
  rss, hwm, st.bytes or 0, st.samples or 0, st.stacks or 0))
if mode == "stop" then  -- the exit write, done here to be measured
  require("jit.prof").stop()
  rss, hwm = status()
  print(("stopped rss=%d hwm=%d"):format(rss, hwm))
end
]]
t.write(dir .. "/prog.lua", PROG)

local function run(prefix, args)
  local out, code = t.sh_in(dir, prefix .. " " .. q(LJ) .. " " .. args ..
    " prog.lua " .. N .. " " .. CPU .. " stop")
  t.eq(code, 0, "status of " .. args .. ": " .. out)
  local r = {}
  r.rss, r.hwm, r.bytes, r.samples, r.stacks =
    out:match("loop rss=(%d+) hwm=(%d+) bytes=(%d+) samples=(%d+) stacks=(%d+)")
  for k, v in pairs(r) do r[k] = tonumber(v) end
  local srss, shwm = out:match("stopped rss=(%d+) hwm=(%d+)")
  r.stop_hwm = tonumber(shwm)
  r.out = out
  return r
end

local MB = 1024  -- KB

local base = run("", "")
t.case("unprofiled baseline measured", function()
  t.ok(base.rss and base.rss > 0, "no RSS line: " .. base.out)
end)

local function bound(name, r)
  t.case(name, function()
    if not t.ok(r.rss, "no RSS line: " .. r.out) then return end
    t.ok(r.samples > 1000, "samples taken: " .. r.samples)
    local limit = base.rss + math.ceil(r.bytes / 1024) + 16 * MB
    print(("  %s: RSS %d KB (unprofiled %d KB, stats().bytes %d, limit %d KB), samples %d"):format(
      name, r.rss, base.rss, r.bytes, limit, r.samples))
    t.ok(r.rss <= limit, ("RSS %d KB > unprofiled %d KB + stats().bytes %d + 16 MB"):format(
      r.rss, base.rss, r.bytes))
  end)
end

-- -jprof: the whole run kept, written at stop in ljprof's own state.
local jp = run(t.CHILD_ENV, "-jprof=G/clock=wall/rate=10000,out.folded")
bound("hot_traces_jprof_rss_bound", jp)
t.case("hot_traces_jprof_stop_write_peak", function()
  if not t.ok(jp.stop_hwm, "no stop line: " .. jp.out) then return end
  local f = t.read(dir .. "/out.folded")
  t.ok(f and #f > 0, "out.folded written")
  print(("  stop: peak %d KB -> %d KB (%d stacks)"):format(jp.hwm, jp.stop_hwm, jp.stacks))
  t.ok(jp.stop_hwm - jp.hwm <= 32 * MB, ("the write at stop added %d KB to the peak"):format(
    jp.stop_hwm - jp.hwm))
end)

-- LJPROF every=: periodic exports by the library's export helper.
local ev = run(t.CHILD_ENV .. "LJPROF=" .. q("clock=wall,rate=10000,every=0.3,output=" ..
  dir .. "/e-%n.folded"), "-l ljprof.auto")
bound("hot_traces_every_rss_bound", ev)

-- The write at stop of many distinct stacks (K^3 of top[a] -> mid[b] ->
-- leaf[c], interpreted), to .pb.gz, .folded and speedscope in one write:
-- its peak
-- grows by at most 430 bytes per distinct stack, plus 4 MB for the
-- writer's state and modules. Before the model's one table per sample,
-- the collector's pace in ljprof's state and the writers' parts: 741 B
-- per stack to .pb.gz, 1,143 to .folded and 1,023 to speedscope (18,000
-- to 21,000 stacks), 721 to .pb.gz for 59,945 (docs/performance.md,
-- "Memory of the write at stop").
local STACKS = t.read(t.SRC .. "/bench/lib/many_stacks.lua") .. [[
local function hwm()
  local f = io.open("/proc/self/status") local s = f:read("*a") f:close()
  return tonumber(s:match("VmHWM:%s*(%d+)"))
end
local st = package.loaded.ljprof.stats()
local before = hwm()
require("jit.prof").stop()
print(("stacks=%d before=%d after=%d"):format(st.stacks, before, hwm()))
]]
t.write(dir .. "/stacks.lua", STACKS)
-- Run stacks.lua under -jprof with these outputs; check the peak the
-- write at stop added: at most 4 MB + 430 bytes per distinct stack.
-- Returns the number of stacks, nil when the run gave no result line.
local function stop_write_peak(outputs, what)
  local out, code = t.sh_in(dir, t.CHILD_ENV .. q(LJ) ..
    " -jprof=G/clock=wall/rate=10000," .. outputs .. " stacks.lua 30 3")
  t.eq(code, 0, "status: " .. out)
  local stacks, before, after = out:match("stacks=(%d+) before=(%d+) after=(%d+)")
  if not t.ok(stacks, "no result line: " .. out) then return nil end
  stacks, before, after = tonumber(stacks), tonumber(before), tonumber(after)
  local added = (after - before) * 1024
  local limit = 4 * 1048576 + 430 * stacks
  print(("  write at stop of %d stacks (%s): peak +%d KB, %.0f B per stack; limit %d KB"):format(
    stacks, what, after - before, added / stacks, math.floor(limit / 1024)))
  t.ok(stacks >= 8000, "distinct stacks sampled: " .. stacks)
  t.ok(added <= limit, ("the write at stop added %d KB to the peak for %d stacks (limit 4 MB + 430 B each)"):format(
    after - before, stacks))
  return stacks
end

t.case("exit_write_many_stacks_peak_per_stack", function()
  local stacks = stop_write_peak("many.pb.gz,many.folded,many.speedscope.json",
                                 ".pb.gz, .folded, speedscope")
  if not stacks then return end
  local f = t.read(dir .. "/many.folded")
  local lines = 0
  for _ in (f or ""):gmatch("\n") do lines = lines + 1 end
  t.ok(lines > stacks / 2, "many.folded: " .. lines .. " lines")
  local g = t.read(dir .. "/many.pb.gz")
  t.eq((g or ""):sub(1, 2), "\31\139", "many.pb.gz is gzip")
  local j = t.read(dir .. "/many.speedscope.json") or ""
  t.ok(j:find('"type":"sampled"', 1, true) and j:sub(-5) == "]}]}\n", "many.speedscope.json complete")
end)

-- The same write at stop to an SVG flame graph alone, with the same bound.
-- With four tables per frame of the tree (a frame per distinct stack at
-- least), 1,223 bytes per stack (+19.3 MB for 16,589 stacks); with the
-- tree in arrays and tables for the frames drawn only, 370-377 (+4.8 MB
-- for 13,253, +5.3 MB for 14,967).
t.case("exit_write_many_stacks_svg_peak_per_stack", function()
  if not stop_write_peak("many.svg", ".svg") then return end
  local f = t.read(dir .. "/many.svg") or ""
  t.ok(f:find('<svg version="1.1" id="ljprof-flamegraph"', 1, true) and f:sub(-7) == "</svg>\n",
    "many.svg complete")
  local _, drawn = f:gsub('<g class="f"', "")
  t.ok(drawn >= 30, "many.svg: " .. drawn .. " frames drawn")
end)

-- ljprof.write_file takes a list of strings (the writers' parts): written
-- one after another, as the string they join to; one line for a part
-- that is not a string.
t.case("write_file_parts", function()
  local ljprof = require("ljprof")
  local path = dir .. "/parts.txt"
  t.ok(ljprof.write_file(path, {"a;b 1\n", "", "c 2\n"}), "parts written")
  t.eq(t.read(path), "a;b 1\nc 2\n", "the parts in order")
  t.ok(ljprof.write_file(path, {}), "no parts written")
  t.eq(t.read(path), "", "no parts: an empty file")
  local ok, err = pcall(ljprof.write_file, path, {"x", 5})
  t.ok(not ok and tostring(err):find("part 2 is a number %(accepted: strings%)"), tostring(err))
end)

os.execute("rm -rf " .. q(dir))
t.done()
