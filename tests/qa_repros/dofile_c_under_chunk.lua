-- QA repro: a tick inside dofile()'s own C work (the parser's buffers freed with
-- munmap, before the chunk is called) is shown with the chunk's function as the
-- Lua leaf: "main;dofile;<child's crunch>;__munmap" in VM state C. crunch() is a
-- pure arithmetic loop that calls no C function: that stack never existed.
--
--   luajit tests/qa_repros/dofile_c_under_chunk.lua      (repeat: rare)
--
-- Measured 2026-11-29 (cpu clock, 1 ms): 3 of 31 runs showed one such signal
-- (4 ticks each, VM state C, __munmap or __errno_location above the child's
-- function), about 12 of 40,000 ticks. The bad samples are also the only ones
-- naming the frame "dofile"; every other sample of the run names it
-- "[builtin#25]".
local child = "/tmp/ljp_qa_dofile_child.lua"
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
local prof = require("ljprof")
prof.record({clock = "cpu", interval = 1})
local acc = 0
for _ = 1, tonumber(arg and arg[1]) or 3000 do acc = acc + dofile(child) end
prof.stop()
os.remove(child)
local bad, total = 0, 0
for _, e in ipairs(prof.summary()) do
  total = total + e.count
  -- the child's function is "ljp_qa_dofile_child.lua:1"; a native frame above it is
  -- possible only in the compiler (J), never in state C (crunch calls no C function)
  if e.stack:match("dofile_child%.lua:%d+;") and e.vmstate ~= "J" then
    bad = bad + e.count
    print("IMPOSSIBLE", e.count, e.vmstate, e.stack)
  end
end
print(("impossible %d of %d ticks"):format(bad, total))
os.exit(bad == 0 and 0 or 1)
