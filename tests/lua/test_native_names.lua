-- Names of native frames, as perf and gdb give them (issue 15):
-- separate debug files (by build ID and by .gnu_debuglink, CRC checked;
-- libc6-dbg's), IFUNC implementations with and without them, C++ names
-- demangled, and a stripped executable's own code named after its file
-- ("ljp_host+0x11c9"), never after the nearest symbol ("main+0x11c9");
-- PLT stubs named as objdump names them ("realloc@plt") and unwound
-- through to their callers.
-- Fixtures: tests/native/ (dbgtest.c and mkdebug.sh, host.c, cxxtest.cpp).
-- Each case runs children, with LJPROF_DEBUG_DIR set as it needs.
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
  -- Calls between the library's functions go through its PLT: a sample in
  -- a stub ("...@plt", demangled) keeps the frames that called it (the
  -- stub's CFA expression), it is never put under the Lua caller.
  local plt = count(list, function(s) return s:find("@plt$") end)
  local orphan = count(list, function(s) return s:find("@plt$") and not s:find(";ljpx_run;", 1, true) end)
  print(string.format("  %d samples in PLT stubs, %d without their callers", plt, orphan))
  t.ok(orphan == 0, "PLT stubs under their callers:\n" .. top(list, 12))
end)

-- -- Separate debug files ----------------------------------------------

-- Every name nm gives at offset off in file path.
local function names_at(path, off)
  local set = {}
  local p = io.popen("nm " .. t.q(path) .. " 2>/dev/null")
  for a, name in p:read("*a"):gmatch("(%x+) [tTWi] ([^\n]+)") do
    if tonumber(a, 16) == off then set[name] = true end
  end
  p:close()
  return set
end

-- The build-id debug file of a loaded object (nil: none installed).
local function debug_file(path)
  local p = io.popen("LC_ALL=C readelf -n " .. t.q(path) .. " 2>/dev/null")
  local id = p:read("*a"):match("Build ID: (%x+)")
  p:close()
  local f = id and "/usr/lib/debug/.build-id/" .. id:sub(1, 2) .. "/" .. id:sub(3) .. ".debug"
  local fh = f and io.open(f, "rb")
  if fh then fh:close() end
  return fh and f or nil
end

ffi.cdef([[
typedef struct { const char *fname; void *fbase; const char *sname; void *saddr; } ljpn_dlinfo;
int dladdr(const void *addr, ljpn_dlinfo *info);
double sin(double); double cos(double);
void *memcpy(void *d, const void *s, size_t n);
void *memset(void *d, int c, size_t n);
]])

-- The object file of a C function of this process and its offset there.
local function where(fn)
  local info = ffi.new("ljpn_dlinfo")
  local a = ffi.cast("const void *", fn)
  assert(ffi.C.dladdr(a, info) ~= 0)
  return ffi.string(info.fname), tonumber(ffi.cast("uintptr_t", a) - ffi.cast("uintptr_t", info.fbase))
end


-- The test's own fixtures (native/mkdebug.sh).

local DBG_CHILD = PROFILE .. [[
for _, lib in ipairs({...}) do
  ffi.cdef("double ljpd_outer(long n);")
  local l = ffi.load(lib)
  local function call() return l.ljpd_outer(2e5) end
  print("== " .. lib:match("[^/]+$"))
  profile(0.4, call)
end
]]

-- For each fixture: its stacks from the output of DBG_CHILD.
local function by_lib(out)
  local res, cur = {}, {}
  for line in out:gmatch("[^\n]+") do
    local name = line:match("^== (%S+)$")
    if name then
      cur = {}
      res[name] = cur
    else
      local n, st = line:match("^(%d+) (.+)$")
      if n then cur[#cur + 1] = {n = tonumber(n), s = st} end
    end
  end
  return res
end

local LIBS = {"dbgid", "dbglink_dir", "dbglink_dot", "dbglink_root", "dbglink_bad", "dbgnone"}
local function lib_paths()
  local l = {}
  for _, n in ipairs(LIBS) do l[#l + 1] = t.q(FIX .. "/libljp_" .. n .. ".so") end
  return table.concat(l, " ")
end

t.case("separate debug files: by build ID, by .gnu_debuglink in three places; a wrong CRC is refused", function()
  if not t.ok(FIX, "LJPROF_NAMES_FIXTURES set (objcopy found by meson)") then return end
  local full = nm(FIX .. "/libljp_dbgnoid_full.so")
  local out, ok = child(DBG_CHILD, "LJPROF_DEBUG_DIR=" .. t.q(FIX .. "/debugroot"), nil, lib_paths())
  t.ok(ok, "the child ran:\n" .. out)
  local res = by_lib(out)
  for _, n in ipairs(LIBS) do
    local list = res["libljp_" .. n .. ".so"] or {}
    local all = count(list, function() return true end)
    local named = count(list, function(s) return s:find(";ljpd_outer;dbg_middle;dbg_inner$") end)
    -- Without a usable debug file the static functions are the object
    -- and the start of each function (its unwind entry): nm's addresses.
    local off = string.format(";ljpd_outer;libljp_%s.so%%+0x%x;libljp_%s.so%%+0x%x$", n,
      full.dbg_middle or -1, n, full.dbg_inner or -1)
    local offsets = count(list, function(s) return s:find(off) end)
    print(string.format("  %-13s %4d samples, %4d ljpd_outer;dbg_middle;dbg_inner, %4d by offset",
      n, all, named, offsets))
    if n == "dbglink_bad" or n == "dbgnone" then
      t.ok(all > 0 and offsets / all > 0.6 and named == 0,
        n .. ": no debug file used, functions by their start:\n" .. top(list))
    else
      t.ok(all > 0 and named / all > 0.6, n .. ": static functions named from the debug file:\n" .. top(list))
    end
  end
  -- LJPROF_DEBUG_DIR set and empty: no separate debug file at all.
  out, ok = child(DBG_CHILD, "LJPROF_DEBUG_DIR=", nil, lib_paths())
  t.ok(ok, "the child ran:\n" .. out)
  res = by_lib(out)
  for _, n in ipairs({"dbgid", "dbglink_dir", "dbglink_dot"}) do
    local list = res["libljp_" .. n .. ".so"] or {}
    t.ok(#list > 0 and count(list, function(s) return s:find("dbg_inner", 1, true) end) == 0,
      n .. ": LJPROF_DEBUG_DIR= reads no debug file:\n" .. top(list))
  end
end)

-- -- libc6-dbg: qsort's internals ------------------------------------------

local QSORT_CHILD = PROFILE .. [==[
ffi.cdef([[void qsort(void *b, size_t n, size_t sz, int (*cmp)(const void *, const void *));
           int strcmp(const char *a, const char *b);]])
local N = 20000
local buf = ffi.new("char[?]", N * 16)
local cmp = ffi.cast("int (*)(const void *, const void *)", ffi.C.strcmp)
profile(1.0, function()
  for i = 0, N - 1 do ffi.copy(buf + i * 16, string.format("%015d", (i * 7919) % N)) end
  ffi.C.qsort(buf, N, 16, cmp)
end)
]==]

t.case("libc6-dbg: qsort's static functions named by libc's build-id debug file", function()
  local libc = where(ffi.C.memset)
  local dbg = debug_file(libc)
  if not t.ok(dbg, "libc6-dbg is installed (./run test installs it): no debug file for " .. libc) then return end
  local out, ok = child(QSORT_CHILD)
  t.ok(ok, "the child ran:\n" .. out)
  local list = stacks(out)
  local under = count(list, function(s) return s:find("qsort", 1, true) end)
  local raw = count(list, function(s) return s:find("qsort", 1, true) and s:find("libc.so.6+0x", 1, true) end)
  local msort = count(list, function(s) return s:find("qsort[^;]*;msort_with_tmp") end)
  print(string.format("  %d samples in qsort, %d through msort_with_tmp, %d with libc.so.6+0x", under, msort, raw))
  t.ok(under > 200, "time in qsort:\n" .. top(list))
  t.ok(raw == 0, "no libc.so.6+0x frame under qsort:\n" .. top(list))
  t.ok(msort / under > 0.5, "qsort's merge sort named:\n" .. top(list))
  -- The same without debug files: the offsets come back.
  out = child(QSORT_CHILD, "LJPROF_DEBUG_DIR=")
  list = stacks(out)
  t.ok(count(list, function(s) return s:find("qsort[^;]*;libc%.so%.6%+0x") end) > 0,
    "LJPROF_DEBUG_DIR=: libc's static functions by offset:\n" .. top(list))
end)

-- -- IFUNC implementations, with and without debug files -----------------

local IFUNC_CHILD = PROFILE .. [==[
ffi.cdef([[void *memcpy(void *d, const void *s, size_t n);
           void *memset(void *d, int c, size_t n);
           double sin(double); double cos(double);]])
local N = 2 ^ 20
local a, b = ffi.new("char[?]", N), ffi.new("char[?]", N)
local C = ffi.C
profile(1.5, function()
  local s = 0
  for i = 1, 2e5 do s = s + C.sin(i) + C.cos(i) end
  for _ = 1, 20 do C.memcpy(a, b, N) end
  for _ = 1, 20 do C.memset(a, 1, N) end
end)
]==]

t.case("IFUNC implementations: the debug file's name when there is one (as perf), else the public name", function()
  local function leaf(list, set)
    return count(list, function(s) return set[s:match("([^;]+)$")] end)
  end
  -- Without debug files: the public names (sin, not libm.so.6+0x702c0).
  local out, ok = child(IFUNC_CHILD, "LJPROF_DEBUG_DIR=")
  t.ok(ok, "the child ran:\n" .. out)
  local list = stacks(out)
  for _, want in ipairs({{"sin"}, {"cos"}, {"memcpy", "memmove"}, {"memset"}}) do
    local set = {}
    for _, n in ipairs(want) do set[n] = true end
    t.ok(leaf(list, set) > 0, "no debug files: " .. want[1] .. " named:\n" .. top(list, 12))
  end
  -- (ljprof's own work, a qsort at the safe point, is not the workload)
  t.ok(count(list, function(s)
    return not s:find("[ljprof]", 1, true) and s:find("lib[mc]%.so%.6%+0x%x+$")
  end) == 0, "no offsets:\n" .. top(list, 12))
  -- With them: the implementation's own name, as nm reads it in the
  -- debug file (__sin_fma, __memmove_avx512_unaligned_erms on this CPU).
  out, ok = child(IFUNC_CHILD)
  t.ok(ok, "the child ran:\n" .. out)
  list = stacks(out)
  for _, fn in ipairs({"sin", "cos", "memcpy", "memset"}) do
    local file, off = where(ffi.C[fn])
    local dbg = debug_file(file)
    if t.ok(dbg, "libc6-dbg: a debug file for " .. file) then
      local set = names_at(dbg, off)
      local names = {}
      for n in pairs(set) do names[#names + 1] = n end
      table.sort(names)
      print(string.format("  with debug files: %s at %s+0x%x is %s: %d samples", fn, file:match("[^/]+$"), off,
        table.concat(names, " or "), leaf(list, set)))
      t.ok(#names > 0 and not set[fn], fn .. ": the debug file names its implementation: " .. table.concat(names, " "))
      t.ok(leaf(list, set) > 0, fn .. " shown as " .. table.concat(names, " or ") .. ":\n" .. top(list, 12))
    end
  end
end)

-- For children: the name ljprof gives each offset listed in the file
-- arg[1] ("path offset" lines) in the object path of this process, as
-- "path offset name" lines (memcpy's libc and sin's libm are loaded).
local CODE_NAMES_CHILD = [[
local ljprof = require("ljprof")
local ffi = require("ffi")
ffi.cdef([=[
typedef struct { const char *fname; void *fbase; const char *sname; void *saddr; } ljpn_dlinfo;
int dladdr(const void *addr, ljpn_dlinfo *info);
double sin(double);
void *memcpy(void *d, const void *s, size_t n);
]=])
local base = {}
for _, fn in ipairs({"memcpy", "sin"}) do
  local info = ffi.new("ljpn_dlinfo")
  assert(ffi.C.dladdr(ffi.cast("const void *", ffi.C[fn]), info) ~= 0)
  base[ffi.string(info.fname)] = tonumber(ffi.cast("uintptr_t", info.fbase))
end
for path, off in io.open(arg[1]):read("*a"):gmatch("(%S+) (%d+)\n") do
  print(path .. " " .. off .. " " .. tostring(ljprof.code_name(base[path] + tonumber(off))))
end
]]

-- A C function a module holds, with no symbol (lua-cjson's json_encode is
-- static in Debian's stripped liblua5.1-cjson.so), called through a Lua
-- wrapper from a compiled loop (stitched: no Lua frame of its own is
-- captured) and loaded after the start: named as Lua names it
-- ("cjson.encode", as with -joff), not "cjson.so+0x45d0" (QA,
-- tests/qa_repros/cjson_native_name.lua: 97% cjson.so+0x45d0 in -jprof=f).
t.case("a module's C function with no symbol: its Lua name, not object+0x", function()
  local out, ok = child([[
local ljprof = require("ljprof")
ljprof.record({clock = "wall", rate = 1000, fmt = "fZ;", depth = -100})
local cjson = require("cjson")   -- (lua-cjson: ./run installs it)
local function enc(x) local s = cjson.encode(x); return s end
local v = {a = 1, b = {1, 2, 3, "x\"y"}, c = "hello world", d = 3.25}
local n, t0 = 0, os.clock()
while os.clock() - t0 < 0.6 do for _ = 1, 1000 do n = n + #enc(v) end end
ljprof.stop()
for _, e in ipairs(ljprof.summary()) do print(e.count .. " " .. e.stack) end
]])
  t.ok(ok, "child ran: " .. out)
  local list = stacks(out)
  local named = count(list, function(s) return s:find("enc;cjson.encode", 1, true) ~= nil end)
  local raw = count(list, function(s) return s:find("enc;[^;]*cjson[^;]*%+0x") ~= nil end)
  t.ok(named >= 100, "samples under enc;cjson.encode: " .. named .. "\n" .. top(list))
  t.eq(raw, 0, "samples with an object+0x frame right under enc:\n" .. top(list))
end)

t.case("PLT stubs: named \"realloc@plt\" as objdump names them, not libc.so.6+0x26000", function()
  -- Each stub objdump names in libc and libm, looked up at its second
  -- byte (a sample inside the stub), with and without debug files.
  local want, list = {}, {}
  for _, fn in ipairs({"memcpy", "sin"}) do
    local path = where(ffi.C[fn])
    local ifunc = {}  -- resolver offset -> IFUNC names (the IRELATIVE stubs)
    local p = io.popen("LC_ALL=C nm -D --defined-only " .. t.q(path) .. " 2>/dev/null")
    for a, n in p:read("*a"):gmatch("(%x+) i ([^\n]+)") do
      local k = tonumber(a, 16)
      ifunc[k] = ifunc[k] or {}
      ifunc[k][n:gsub("@.*", "")] = true
    end
    p:close()
    p = io.popen("LC_ALL=C objdump -d -j .plt -j .plt.sec -j .plt.got " .. t.q(path) .. " 2>/dev/null")
    for a, n in p:read("*a"):gmatch("\n(%x+) <([^>\n]+)@plt>:") do
      local r = n:match("^%*ABS%*%+0x(%x+)$")
      local names = {}
      if r then  -- IRELATIVE: any public name of the IFUNC
        for k in pairs(ifunc[tonumber(r, 16)] or {}) do names[k .. "@plt"] = true end
      else
        names[n:gsub("@.*", "") .. "@plt"] = true
      end
      if next(names) then
        local key = path .. " " .. (tonumber(a, 16) + 1)
        want[key] = {stub = n, names = names, abs = r ~= nil}
        list[#list + 1] = key .. "\n"
      end
    end
    p:close()
  end
  local offs = dir .. "/plt_offsets.txt"
  t.write(offs, table.concat(list))
  for _, env in ipairs({"LJPROF_DEBUG_DIR=", ""}) do
    local out, ok = child(CODE_NAMES_CHILD, env, nil, t.q(offs))
    t.ok(ok, "the child ran:\n" .. out)
    local per, bad = {}, {}
    for path, off, got in out:gmatch("(%S+) (%d+) ([^\n]+)") do
      local w = want[path .. " " .. off]
      local lib = path:match("[^/]+$")
      per[lib] = per[lib] or {named = 0, abs = 0}
      if w then
        if w.abs then per[lib].abs = per[lib].abs + 1 else per[lib].named = per[lib].named + 1 end
        if not w.names[got] then bad[#bad + 1] = lib .. ": " .. w.stub .. "@plt -> " .. got end
      end
    end
    for lib, n in pairs(per) do
      print(string.format("  %s %s: %d stubs by symbol, %d IRELATIVE by their IFUNC",
        env == "" and "with debug files:" or "without:         ", lib, n.named, n.abs))
      t.ok(n.named > 0, "objdump listed no named stubs in " .. lib)
    end
    t.ok(next(per) ~= nil, "no names from the child:\n" .. out)
    t.ok(#bad == 0, "wrong names:\n" .. table.concat(bad, "\n", 1, math.min(#bad, 10)))
  end
end)

os.execute("rm -rf " .. t.q(dir))
t.done()
