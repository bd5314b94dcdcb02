-- A profiled program that forks (through the FFI, or a C module that calls
-- fork) and whose child stops the run (ljprof.stop(), or os.exit under
-- -jprof, which writes the profile): neither process may hang, on every
-- clock. The child has no timer thread of its own (threads do not survive
-- fork): before, the thread clock's stop waited in the child for the
-- parent's timer thread for ever (pthread_cond_destroy on a condition
-- variable the parent's thread was waiting on), and the parent for the
-- child (waitpid). Each run is under `timeout`, so a hang fails.
local t = require "t"

local LUAJIT, ENV, q = t.LUAJIT, t.CHILD_ENV, t.q
local dir = t.tmpdir()

local PROGRAM = [[
local ffi = require("ffi")
ffi.cdef("int fork(void); int waitpid(int, int *, int);")
local function work(n) local s = 0 for i = 1, n do s = s + i % 3 end return s end
local mode = ...
local ljprof
if mode == "record" then
  ljprof = require("ljprof")
  ljprof.record{clock = os.getenv("CLOCK"), interval = 1}
end
work(1e7)
local pid = ffi.C.fork()
if pid == 0 then
  work(1e7)
  if ljprof then ljprof.stop() end
  io.stdout:write("child done\n")
  io.stdout:flush()
  os.exit(0)
end
local st = ffi.new("int[1]")
ffi.C.waitpid(pid, st, 0)
work(1e7)
if ljprof then ljprof.stop() end
print("parent done", st[0])
]]

local path = dir .. "/fork.lua"
t.write(path, PROGRAM)

local counts = {runs = 0, hangs = 0}
for _, clock in ipairs({"cpu", "wall", "itimer", "thread"}) do
  for _, mode in ipairs({"record", "jprof"}) do
    t.case(string.format("fork, the child stops the run: %s clock, %s", clock, mode), function()
      local out = dir .. "/out.txt"
      os.remove(out)
      local cmd = mode == "record"
        and string.format("CLOCK=%s %s %s record", clock, LUAJIT, q(path))
        or string.format("%s %s %s", LUAJIT, q("-jprof=f/clock=" .. clock .. "/rate=1000," .. out),
                         q(path))
      local p = io.popen("timeout -k 5 60 env " .. ENV .. cmd .. " 2>&1; echo rc=$?")
      local res = p:read("*a")
      p:close()
      counts.runs = counts.runs + 1
      local rc = tonumber(res:match("rc=(%d+)%s*$"))
      if rc == 124 or rc == 137 then counts.hangs = counts.hangs + 1 end
      t.eq(rc, 0, "both processes end (124: a hang):\n" .. res)
      t.ok(res:find("child done", 1, true) and res:find("parent done\t0", 1, true),
           "the child and then the parent finish:\n" .. res)
      if mode == "jprof" then t.ok((t.read(out) or "") ~= "", "the profile is written") end
    end)
  end
end

print(string.format("  %d runs, %d hangs", counts.runs, counts.hangs))
-- exec: a program that execvp's itself once (through the FFI). Under
-- LD_PRELOAD=libljprof.so the exec is interposed (src/exec.c): on clock
-- itimer the new program was killed by the inherited ITIMER_PROF
-- ("Profiling timer expired", status 155); on every clock the profile
-- was lost without a word. Now the old program's profile is written
-- before the exec, the new program runs and is profiled in turn (LJPROF
-- is in its environment): two files (%t: exec keeps the pid).
local EXEC = [[
local ffi = require("ffi")
ffi.cdef("int execvp(const char *file, char *const argv[]);")
local function work(n) local s = 0 for i = 1, n do s = s + i % 7 end return s end
jit.off(work)
local t0 = os.clock()
while os.clock() - t0 < 0.3 do work(10000) end
if arg[1] ~= "again" then
  local args = {]] .. string.format("%q", LUAJIT) .. [[, arg[0], "again"}
  local argv, keep = ffi.new("char *[4]"), {}
  for i, s in ipairs(args) do keep[i] = ffi.new("char[?]", #s + 1, s); argv[i - 1] = keep[i] end
  io.stdout:write("exec\n")
  io.stdout:flush()
  ffi.C.execvp(args[1], argv)
  error("exec failed")
end
t0 = os.clock()
while os.clock() - t0 < 0.3 do work(10000) end
print("new program done")
]]
t.write(dir .. "/exec.lua", EXEC)

for _, clock in ipairs({"itimer", "cpu", "wall", "thread"}) do
  t.case("exec of itself under LD_PRELOAD: " .. clock .. " clock: profile written, the new program runs", function()
    local out = dir .. "/exec-" .. clock .. "-%t.txt"
    local res, code = t.sh_in(dir, string.format("rm -f exec-%s-*.txt; LJPROF=%s LD_PRELOAD=%s " ..
      "timeout 60 env %s %s exec.lua", clock, q("clock=" .. clock .. ",output=" .. out),
      q(t.BUILD .. "/libljprof.so"), ENV, LUAJIT))
    t.eq(code, 0, "exit status (155: killed by SIGPROF)\n" .. res)
    t.ok(res:find("new program done", 1, true) ~= nil, "the new program ran to its end:\n" .. res)
    t.ok(not res:find("ljprof:", 1, true), "no complaint:\n" .. res)
    local p = io.popen("ls " .. q(dir) .. " | grep '^exec-" .. clock .. "-'")
    local files = {}
    for f in p:lines() do files[#files + 1] = f end
    p:close()
    t.eq(#files, 2, "two profiles: the old program's, written before exec, and the new one's")
    for _, f in ipairs(files) do
      t.ok((t.read(dir .. "/" .. f) or ""):find("work", 1, true) ~= nil, f .. " has samples in work")
    end
  end)
end
-- Loaded by -jprof, ljprof cannot see the exec (the profile of the old
-- program is lost, docs/usage.md "exec"), but nothing of it may outlive
-- the exec: clock itimer's timer was ITIMER_PROF, which the new program
-- inherited and died of (status 155).
for _, clock in ipairs({"itimer", "cpu", "wall", "thread"}) do
  t.case("exec of itself under -jprof: " .. clock .. " clock: the new program runs", function()
    local res, code = t.sh_in(dir, string.format("timeout 60 env %s %s -jprof=/clock=%s,exec-jprof.txt exec.lua",
      ENV, LUAJIT, clock))
    t.eq(code, 0, "exit status (155: killed by SIGPROF)\n" .. res)
    t.ok(res:find("new program done", 1, true) ~= nil, "the new program ran to its end:\n" .. res)
  end)
end
os.execute("rm -rf " .. q(dir))
t.done()
