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
os.execute("rm -rf " .. q(dir))
t.done()
