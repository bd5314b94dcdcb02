-- The cross-built LuaJIT under Wine (tests/windows/meson.build): it is
-- LuaJIT 2.1 for Windows x64, its own profiler (jit.profile, a timer
-- thread on Windows) samples a busy function with its stack, and -jp's
-- module (jit.p) loads. Exits non-zero, with the reason, on a failure.
local ok_n, bad_n = 0, 0
local function ok(c, what)
  if c then ok_n = ok_n + 1 else bad_n = bad_n + 1; io.stderr:write("failed: ", what, "\n") end
end

print(jit.version, jit.os, jit.arch)
ok(jit.version:match("^LuaJIT 2%.1") ~= nil, "version " .. jit.version)
ok(jit.os == "Windows", "jit.os " .. jit.os)
ok(jit.arch == "x64", "jit.arch " .. jit.arch)

local profile = require("jit.profile")
local samples, in_spin = 0, 0
local function spin_here(n)
  local t = 0
  for i = 1, n do t = t + i % 7 end
  return t
end
profile.start("fi1", function(th, count, vmstate)
  samples = samples + count
  local s = profile.dumpstack(th, "f;", 5)
  if s:find("spin_here", 1, true) then in_spin = in_spin + count end
end)
local t0 = os.clock()
while os.clock() - t0 < 1 do spin_here(1e6) end
profile.stop()
print(("jit.profile: %d samples, %d in spin_here"):format(samples, in_spin))
ok(samples >= 50, "jit.profile samples over 1 s at 1 ms: " .. samples)
ok(in_spin >= samples * 0.8, "samples in spin_here: " .. in_spin .. " of " .. samples)

local p_ok, p = pcall(require, "jit.p")
ok(p_ok and type(p.start) == "function", "require jit.p: " .. tostring(p))

print(("luajit: %d checks, %d failed"):format(ok_n + bad_n, bad_n))
os.exit(bad_n == 0 and 0 or 1)
