-- A program's own signal handler, and ljprof's samples landing in it
-- (tests/native/altstack.c: SIGALRM every 1 ms, each call busy 0.3 ms):
-- on an 8 KiB alternate signal stack (sigaltstack), ljprof's handler must
-- fit in what is left there (it overflowed it: SIGSEGV, 3 of 3 runs on the
-- wall and thread clocks); its own use there is measured with a pattern
-- (the fixture fills the stack and finds the deepest byte written); and
-- on the thread's own stack the signal trampoline the handler returns
-- through is named __restore_rt (it was "libc.so.6+0x3c04f").
local t = require("t")
local ffi = require("ffi")

local LIB = os.getenv("LJPROF_ALTSTACK")
local dir = t.tmpdir()
local q = t.q

local PROG = dir .. "/alt.lua"
t.write(PROG, [[
local ffi = require("ffi")
ffi.cdef[=[int ljpa_start(long size, long period_us, long work_us);
           long ljpa_stop(void); long ljpa_used(void);]=]
local lib = ffi.load(]] .. string.format("%q", tostring(LIB)) .. [[)
local size, secs = tonumber(arg[1]), tonumber(arg[2])
assert(lib.ljpa_start(size, 1000, 300) == 0, "ljpa_start")
local function work(n) local s = 0 for i = 1, n do s = s + i % 7 end return s end
jit.off(work)
local t0, r = os.clock(), 0
while os.clock() - t0 < secs do r = r + work(10000) end
local calls = lib.ljpa_stop()
print(string.format("calls %d used %d", tonumber(calls), tonumber(lib.ljpa_used())))
]])

-- Run the program (alternate stack of size bytes, 0: none) under
-- -jprof opts, or unprofiled; returns calls, bytes used, output, status.
local function run(size, opts, out)
  local jp = opts and string.format("-jprof=%s,%s ", opts, q(out)) or ""
  local text, code = t.sh_in(dir, string.format("%s %s %s%s %d 0.8", t.CHILD_ENV, t.LUAJIT,
    jp, q(PROG), size))
  local calls, used = text:match("calls (%d+) used (%d+)")
  return tonumber(calls), tonumber(used), text, code
end

ffi.cdef[[unsigned long getauxval(unsigned long type);]]
local FRAME = tonumber(ffi.C.getauxval(51))   -- AT_MINSIGSTKSZ: the kernel's signal frame
if FRAME == 0 then FRAME = 3376 end

t.case("own SIGALRM handler on an 8 KiB sigaltstack: wall and thread clocks, 3 runs each", function()
  if not t.ok(LIB, "LJPROF_ALTSTACK names the fixture library") then return end
  local base_calls, base_used = run(8192)
  t.ok(base_calls and base_calls > 100, "unprofiled: the handler ran (" .. tostring(base_calls) .. ")")
  for _, clock in ipairs({"wall", "thread"}) do
    for i = 1, 3 do
      local out = dir .. "/p.folded"
      os.remove(out)
      local calls, used, text, code = run(8192, "/clock=" .. clock .. "/rate=2000", out)
      t.eq(code, 0, clock .. " run " .. i .. ": exit status (139: the alternate stack overflowed)\n" .. text)
      t.ok(calls and calls > 100, clock .. " run " .. i .. ": the handler ran: " .. text)
      t.ok(used and used <= 8192, clock .. " run " .. i .. ": within the stack: " .. tostring(used))
      t.ok((t.read(out) or ""):find(" %d+\n") ~= nil, clock .. " run " .. i .. ": profile written")
    end
  end
  print(string.format("  unprofiled: the program's handler used %d of 8192 bytes", base_used or -1))
end)

t.case("ljprof's handler on an alternate stack: its use measured, at most the kernel's frame + 4 KiB", function()
  if not LIB then return end
  -- A 64 KiB alternate stack leaves room for a whole sample (native
  -- walk included): the deepest byte written there, profiled minus
  -- unprofiled, is ljprof's signal frame and handler.
  local _, u0 = run(65536)
  local worst = 0
  for _, clock in ipairs({"wall", "thread"}) do
    local _, u1, text, code = run(65536, "/clock=" .. clock .. "/rate=2000", dir .. "/m.folded")
    t.eq(code, 0, clock .. ": exit status\n" .. text)
    if u0 and u1 then worst = math.max(worst, u1 - u0) end
  end
  print(string.format("  program's handler %d bytes; ljprof's frame and handler at most %d more " ..
    "(kernel frame %d)", u0 or -1, worst, FRAME))
  t.ok(worst > 0, "ljprof's handler ran on the alternate stack")
  t.ok(worst <= FRAME + 4096, string.format("ljprof's use %d <= kernel frame %d + 4096 " ..
    "(docs/operators.md)", worst, FRAME))
end)

t.case("signal trampoline named __restore_rt (was libc.so.6+0x...)", function()
  if not LIB then return end
  local out = dir .. "/tramp.folded"
  local _, _, text, code = run(0, "/clock=wall/rate=2000", out)
  t.eq(code, 0, "exit status\n" .. text)
  local f = t.read(out) or ""
  t.ok(f:find(";__restore_rt;ljpa_on_alarm;ljpa_burn", 1, true) ~= nil,
       "the handler's frames above __restore_rt:\n" .. f:sub(1, 600))
  t.ok(not f:find(";libc%.so%.6%+0x%x+;ljpa_on_alarm"), "no unnamed libc frame below the handler")
end)

os.execute("rm -rf " .. q(dir))
t.done()
