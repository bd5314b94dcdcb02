-- Signal conflicts are never silent, and foreign signals keep their
-- meaning:
--   * a program that takes over ljprof's sampling signal (its own handler,
--     SIG_IGN, or SIG_DFL under the thread clock) while a run is going: sampling stops, the samples taken
--     stay, and one line on stderr says so (checked every ~100 ms at a safe
--     point, and at stop, however late the change); stats().signal_lost
--     tells;
--   * a signal sent by another process (kill -USR1 when USR1 samples) does
--     what it would do without ljprof: here, end the process with it.
-- Each child runs under `timeout` so that a hang fails instead of blocking.
local t = require "t"

local LUAJIT, ENV = t.LUAJIT, t.CHILD_ENV

local q = t.q
local dir = t.tmpdir()

local function run(code, pre)
  local path = dir .. "/child.lua"
  local f = assert(io.open(path, "w"))
  f:write(code)
  f:close()
  local p = io.popen((pre or "") .. "timeout -k 5 60 env " .. ENV .. LUAJIT .. " " .. q(path) ..
                     " 2>&1; echo rc=$?")
  local out = p:read("*a")
  p:close()
  return tonumber(out:match("rc=(%d+)%s*$")), out:gsub("rc=%d+%s*$", "")
end

local PRELUDE = [[
local ffi = require("ffi")
ffi.cdef[[
typedef void (*ljt_handler)(int);
ljt_handler signal(int sig, ljt_handler h);
int abs(int);
int __libc_current_sigrtmin(void);
]] .. "]]" .. [[

local ljprof = require("ljprof")
local function burn(sec)
  local t0, s = os.clock(), 0
  while os.clock() - t0 < sec do for i = 1, 1e5 do s = s + i % 3 end end
  return s
end
]]

local counts = {runs = 0, crashes = 0, lost = 0}

local function taken_over(what, clock, signo_expr, handler_expr)
  t.case(what, function()
    local rc, out = run(PRELUDE .. string.format([[
ljprof.record{clock = %q, interval = 1}
burn(0.3)
local sig = %s
ffi.C.signal(sig, %s)
burn(0.5)
local ok = ljprof.stop()
local st = ljprof.stats()
print("stats", st.signal_lost, st.ticks, ok)
]], clock, signo_expr, handler_expr))
    counts.runs = counts.runs + 1
    if rc and rc >= 124 then counts.crashes = counts.crashes + 1 end
    t.eq(rc, 0, what .. ": the program ends normally:\n" .. out)
    local lost, ticks = out:match("stats\t(%a+)\t(%d+)")
    t.eq(lost, "true", what .. ": stats().signal_lost:\n" .. out)
    t.ok(tonumber(ticks or 0) > 20, what .. ": the samples before are kept: " .. tostring(ticks))
    if tonumber(ticks or 0) == 0 then counts.lost = counts.lost + 1 end
    local _, lines = out:gsub("ljprof: the program changed the handling of signal", "")
    t.eq(lines, 1, what .. ": one line says so:\n" .. out)
  end)
end

taken_over("SIGPROF taken over by the program's own handler (itimer clock)", "itimer", "27",
           "ffi.cast('ljt_handler', ffi.C.abs)")
taken_over("SIGPROF ignored by the program (itimer clock)", "itimer", "27",
           "ffi.cast('ljt_handler', 1)")
taken_over("the sampling signal ignored by the program (wall clock)", "wall",
           "23", "ffi.cast('ljt_handler', 1)")
taken_over("the sampling signal taken over by the program (cpu clock)", "cpu",
           "23", "ffi.cast('ljt_handler', ffi.C.abs)")
-- Reset to SIG_DFL. With a real-time signal, as the default was, the
-- kernel's next tick ended the process (status 166, profile lost): the
-- default signal, SIGURG, is ignored by default. The thread clock's timer
-- thread also looks before each tick it sends.
for _, clock in ipairs({"cpu", "wall", "thread"}) do
  taken_over("the sampling signal reset to SIG_DFL by the program (" .. clock .. " clock)",
             clock, "23", "ffi.cast('ljt_handler', 0)")
end

-- Issue 28, item 3: a change 100 ms before stop. The check compared ticks
-- over a window still holding those from before the change: 6 of 20 runs
-- kept signal_lost false. 20 runs in one program, each must see it.
local function late_change(clock, handler_name, handler_expr, runs)
  local what = string.format("the sampling signal %s 100 ms before stop, %d runs (%s clock)",
                             handler_name, runs, clock)
  t.case(what, function()
    local rc, out = run(PRELUDE .. string.format([[
local lost, n = 0, %d
for i = 1, n do
  ljprof.record{clock = %q, interval = 1}
  burn(0.15)
  ffi.C.signal(23, %s)
  burn(0.1)
  ljprof.stop()
  local st = ljprof.stats()
  if st.signal_lost then lost = lost + 1 else print("run " .. i .. ": not seen", st.ticks) end
  ffi.C.signal(23, ffi.cast('ljt_handler', 0))  -- SIG_DFL again for the next start
end
print("lost", lost, n)
]], runs, clock, handler_expr))
    counts.runs = counts.runs + 1
    t.eq(rc, 0, what .. ": the program ends normally:\n" .. out)
    local lost, n = out:match("lost\t(%d+)\t(%d+)")
    t.eq(lost and tonumber(lost), runs, what .. ": signal_lost every time:\n" .. out)
    t.eq(tonumber(n), runs, what)
  end)
end
for _, clock in ipairs({"cpu", "wall", "thread"}) do
  late_change(clock, "ignored", "ffi.cast('ljt_handler', 1)", 20)
  late_change(clock, "taken over", "ffi.cast('ljt_handler', ffi.C.abs)", 10)
end

t.case("kill -USR1 from another process ends the program as without ljprof", function()
  local pidfile = dir .. "/pid"
  local code = PRELUDE .. string.format([[
ljprof.record{clock = "wall", interval = 1, signal = 10}
local f = io.open(%q, "w") f:write(tostring(require("ffi").C.getpid and 0 or 0)) f:close()
burn(30)
print("not killed")
]], pidfile)
  code = code:gsub("int abs%(int%);", "int abs(int); int getpid(void);")
  code = code:gsub("tostring%(require%(\"ffi\"%)%.C%.getpid and 0 or 0%)", "tostring(ffi.C.getpid())")
  local path = dir .. "/usr1.lua"
  local f = assert(io.open(path, "w"))
  f:write(code)
  f:close()
  os.remove(pidfile)
  local p = io.popen("(timeout -k 5 60 env " .. ENV .. LUAJIT .. " " .. q(path) ..
    " >/dev/null 2>&1; echo rc=$? > " .. q(dir .. "/usr1.rc") .. ") & " ..
    "for i in $(seq 1 100); do [ -s " .. q(pidfile) .. " ] && break; sleep 0.1; done; " ..
    "sleep 0.3; kill -USR1 $(cat " .. q(pidfile) .. "); wait; cat " .. q(dir .. "/usr1.rc"))
  local out = p:read("*a")
  p:close()
  counts.runs = counts.runs + 1
  local rc = tonumber(out:match("rc=(%d+)"))
  t.eq(rc, 128 + 10, "killed by SIGUSR1 (status 138), as unprofiled: " .. out)
end)

print(string.format("  %d runs: %d crashes or hangs, %d lost profiles", counts.runs, counts.crashes,
                    counts.lost))
os.execute("rm -rf " .. q(dir))
t.done()
