-- Names of native frames, as perf and gdb give them (issue 15): C++
-- names demangled, and a stripped executable's own code named after its
-- file ("ljp_host+0x11c9"), never after the nearest symbol ("main+0x11c9").
-- Fixtures: tests/native/ (host.c, cxxtest.cpp). Each case runs children.
local t = require("t")
local ffi = require("ffi")

local FIX = os.getenv("LJPROF_NAMES_FIXTURES")  -- build/tests: the stripped copies
local dir = t.tmpdir()

-- Run the Lua source src in a child (luajit, or the host program), with
-- the extra environment env ("VAR=value ..."); returns its output and
-- whether it exited with 0.
local function child(src, env, prog, args)
  local script = dir .. "/child.lua"
  t.write(script, src)
  local p = io.popen(string.format("cd %s && env %s %s %s %s %s 2>&1; echo status=$?", t.q(dir),
    t.CHILD_ENV, env or "", t.q(prog or t.LUAJIT), t.q(script), args or ""))
  local out = p:read("*a")
  p:close()
  return out:gsub("status=%d+\n$", ""), out:find("status=0\n$") ~= nil
end

-- For children: profile(secs, fn) calls fn for secs of CPU time, sampled
-- at 1 kHz wall, and prints each stack as "count stack" (root first).
local PROFILE = [[
local ljprof = require("ljprof")
local ffi = require("ffi")
local function profile(secs, fn)
  ljprof.record({clock = "wall", rate = 1000, fmt = "fZ;", depth = -100})
  local t0 = os.clock()
  while os.clock() - t0 < secs do fn() end
  ljprof.stop()
  for _, e in ipairs(ljprof.summary()) do print(e.count .. " " .. e.stack) end
end
]]

-- Samples per stack of a child's output; total of those matching pat.
local function stacks(out)
  local list = {}
  for n, s in out:gmatch("(%d+) ([^\n]+)") do list[#list + 1] = {n = tonumber(n), s = s} end
  return list
end
local function count(list, pred)
  local n = 0
  for _, e in ipairs(list) do if pred(e.s) then n = n + e.n end end
  return n
end
local function top(list, k)
  table.sort(list, function(a, b) return a.n > b.n end)
  local o = {}
  for i = 1, math.min(k or 8, #list) do o[#o + 1] = list[i].n .. " " .. list[i].s end
  return table.concat(o, "\n")
end

-- The function symbols (t or T) of an unstripped file: name -> address.
local function nm(path)
  local syms = {}
  local p = io.popen("nm " .. t.q(path) .. " 2>/dev/null")
  for a, name in p:read("*a"):gmatch("(%x+) [tTiW] ([^\n]+)") do syms[name] = tonumber(a, 16) end
  p:close()
  return syms
end

-- -- A stripped executable's own code -------------------------------------

t.case("a stripped -rdynamic host: its code is ljp_host+0xSTART, the root frame too; never main+0x", function()
  if not t.ok(FIX, "LJPROF_NAMES_FIXTURES set (objcopy found by meson)") then return end
  local syms = nm(os.getenv("LJPROF_HOST_FULL"))
  t.ok(syms.host_inner and syms.host_middle and syms.host_pmain and syms.main, "the unstripped host's symbols")
  local folded = dir .. "/host.folded"
  local out, ok = child([[
    local ffi = require("ffi")
    ffi.cdef("double ljph_work(long n);")
    local prof = require("jit.prof")
    prof.start("G/clock=wall/rate=1000", ...)
    local t0 = os.clock()
    while os.clock() - t0 < 1.0 do ffi.C.ljph_work(2e5) end
    prof.stop()
  ]], nil, FIX .. "/ljp_host", t.q(folded))
  t.ok(ok, "the host ran:\n" .. out)
  local list = {}
  for s, n in (t.read(folded) or ""):gmatch("([^\n]+) (%d+)\n") do list[#list + 1] = {s = s, n = tonumber(n)} end
  local all = count(list, function() return true end)
  local want = string.format(";ljph_work;ljp_host+0x%x;ljp_host+0x%x", syms.host_middle or -1, syms.host_inner or -1)
  local chain = count(list, function(s) return s:find(want, 1, true) end)
  local root = count(list, function(s) return s:find(string.format("^ljp_host%%+0x%x;", syms.host_pmain or -1)) end)
  print(string.format("  %d samples, %d end in %s, %d with the root ljp_host+0x%x",
    all, chain, want, root, syms.host_pmain or -1))
  t.ok(all > 300, "samples: " .. all)
  t.ok(chain / all > 0.6, "the host's static functions by file and start:\n" .. top(list))
  local own = count(list, function(s) return s:find("[ljprof]", 1, true) == 1 end)
  t.ok(root > 0 and root == all - own,
    "the root frame (host_pmain, no Lua name) is ljp_host+0x<its start>:\n" .. top(list))
  t.ok(count(list, function(s) return s:find("main+0x", 1, true) end) == 0, "no main+0x:\n" .. top(list))
end)


-- -- C++ -----------------------------------------------------------------

t.case("C++ names demangled (the process's own __cxa_demangle)", function()
  local lib = os.getenv("LJPROF_CXXTEST")
  if not lib then
    print("  SKIP: no C++ compiler when the build was configured")
    return
  end
  local out, ok = child(PROFILE .. [[
    ffi.cdef("double ljpx_run(long n);")
    local l = ffi.load(]] .. string.format("%q", lib) .. [[)
    profile(1.0, function() return l.ljpx_run(2e4) end)
  ]])
  t.ok(ok, "the child ran:\n" .. out)
  local list = stacks(out)
  local all = count(list, function() return true end)
  local chain = count(list, function(s)
    return s:find(";ljpx_run;game::Phys::step(unsigned long, int);unsigned long twice<unsigned long>(unsigned long, int)", 1, true)
  end)
  print(string.format("  %d samples, %d in ljpx_run;game::Phys::step(...);twice<unsigned long>(...)", all, chain))
  t.ok(chain / all > 0.5, "the C++ chain, demangled:\n" .. top(list))
  t.ok(count(list, function(s) return s:find(";_Z", 1, true) end) == 0, "no mangled name:\n" .. top(list))
end)

os.execute("rm -rf " .. t.q(dir))
t.done()
