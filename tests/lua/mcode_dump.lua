-- mcode_dump.lua OUT SCRIPT [ARGS...]: runs SCRIPT with the trace
-- machine code of every trace LuaJIT completes appended to OUT as it is
-- made (jit.util.tracemc at the "stop" event): records of the trace's
-- number, address and size (three decimal numbers and a newline) then its
-- bytes. Used by test_x64dec.lua (the decoder against objdump).
local out_name, script = arg[1], arg[2]
local util = require("jit.util")
local out = assert(io.open(out_name, "wb"))
local function on_trace(what, tr)
  if what ~= "stop" then return end
  local mc, addr = util.tracemc(tr)
  if not mc then return end
  out:write(string.format("%d %d %d\n", tr, addr, #mc), mc)
  out:flush()
end
jit.attach(on_trace, "trace")
local a = {[0] = script}
for i = 3, #arg do a[i - 2] = arg[i] end
arg = a
local chunk = assert(loadfile(script))
chunk(unpack(a))
