-- The trace compiler's ticks in VM state C (the QA repro formerly at
-- tests/qa_repros/dofile_c_under_chunk.lua).
-- ljprof's own "record" handler (inline=recorded, the default) is called
-- through LuaJIT's VM, whose return to C sets g->vmstate to C: the
-- recorder then runs in state C (trace_state -> lj_record_ins), and so
-- does the interpreter running the recorded function on. The frame at
-- L->base is the Lua function being recorded. Before, such ticks showed
-- in state C under that function, some with the recorder's libc calls
-- above it: "main;dofile;crunch;__munmap" (or __errno_location,
-- __mprotect) although crunch, a pure arithmetic loop, calls no C
-- function. Now a tick in LuaJIT's own code while the compiler is busy is
-- the compiler's ('J'), and one in the interpreter itself is 'I'.
--
-- Each dofile loads a fresh copy of crunch (a new prototype), so its loop
-- is recorded and compiled anew every time: at 20 kHz about 2% of the
-- ticks fall in the compiler. Measured (wall clock, 0.05 ms, 3 x 600
-- dofiles): before the fix, state C with crunch innermost 76-126 ticks
-- against 2,892-3,157 compiler ticks under crunch (0.024-0.042), a native
-- frame above crunch in state C in 2 of 3 runs; after, 10 against 5,452
-- (0.002) and none (the few left: the interpreter in state C whose frame
-- at L->base could not be read, given the safe point's stack).
local t = require("t")
local ljprof = require("ljprof")

local dir = os.getenv("TMPDIR") or "/tmp"
local child = string.format("%s/ljpt_recstate_%d.lua", dir, math.random(1, 1e9))

local function write_child()
  local f = assert(io.open(child, "w"))
  f:write([[
local function crunch(n)
  local s = 0
  for i = 1, n do s = s + (i % 7) * 0.5 end
  return s
end
return crunch(20000)
]])
  for i = 1, 3000 do f:write("-- padding so that reading and parsing take time ", i, "\n") end
  f:close()
  -- The file handle's finalizer runs now, not during the profile (the GC
  -- after a finalizer runs in state C too, a case of its own).
  collectgarbage()
  collectgarbage()
end

t.case("compiler ticks in state C after the record handler: 'J', never state C under the recorded function", function()
  write_child()
  local c_native, c_top, j_child, all, recorded = {}, 0, 0, 0, true
  local rounds = 0
  while rounds < 8 and (rounds < 3 or j_child < 300) do
    rounds = rounds + 1
    ljprof.record({clock = "wall", interval = 0.05})
    local acc = 0
    for _ = 1, 600 do acc = acc + dofile(child) end
    local st = ljprof.stats()
    ljprof.stop()
    recorded = recorded and st.inline_frames == "recorded"
    for _, e in ipairs(ljprof.summary()) do
      all = all + e.count
      local at = e.stack:find("ljpt_recstate_%d+%.lua:%d+")
      if at then
        local above = e.stack:match("ljpt_recstate_%d+%.lua:%d+;(.*)$", at)
        if e.vmstate == "C" and above then
          c_native[#c_native + 1] = string.format("%d %s %s", e.count, e.vmstate, e.stack)
        elseif e.vmstate == "C" then
          c_top = c_top + e.count
        elseif e.vmstate == "J" then
          j_child = j_child + e.count
        end
      end
    end
  end
  os.remove(child)
  print(string.format("  %d rounds, %d ticks: compiler under crunch %d, state C with crunch innermost %d, with a native frame above it %d",
    rounds, all, j_child, c_top, #c_native))
  t.ok(recorded, "the record handler is on (inline=recorded)")
  t.ok(#c_native == 0, "no state-C stack with a native frame above the recorded function:\n" ..
    table.concat(c_native, "\n"))
  -- The window was hit: the recorder's ticks under crunch.
  t.ok(j_child >= 100, "compiler ticks under crunch: " .. j_child)
  t.ok(c_top * 100 <= j_child, string.format(
    "state C with crunch innermost: %d against %d compiler ticks (at most 1 in 100)", c_top, j_child))
end)

t.done()
