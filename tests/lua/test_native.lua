-- Native (C) frames: the C functions running at the tick, spliced above
-- the Lua frame that called them. Fixtures built by the test suite
-- (tests/native/): a Lua C module and an FFI library with a known chain
-- outer -> middle -> inner, where inner burns most of the time; then a
-- real Debian C module (lua-cjson), loader traffic under a fast timer
-- (the deadlock hazard of unwinding in a signal handler), and a mixed
-- workload whose stacks must never show LuaJIT's own code as addresses.
local t = require("t")
local ljprof = require("ljprof")
local ffi = require("ffi")

local CTEST = assert(os.getenv("LJPROF_CTEST"), "LJPROF_CTEST not set (run from meson)")
local FFITEST = assert(os.getenv("LJPROF_FFITEST"), "LJPROF_FFITEST not set")
local ctest = package.loadlib(CTEST, "luaopen_ljp_ctest")()
package.loaded.ljp_ctest = ctest  -- so that its functions are named
ffi.cdef("double ljpf_outer(long n);")
local fflib = ffi.load(FFITEST)

-- Profile fn for about secs of wall time at 1 kHz; returns the summary
-- ({stack, vmstate, count}, stacks "a;b;c" root first) and the stats.
local function profile(secs, fn, opts)
  opts = opts or {}
  local o = {clock = "wall", rate = 1000, fmt = "fZ;", depth = -100}
  for k, v in pairs(opts) do o[k] = v end
  ljprof.record(o)
  local t0 = os.clock()
  while os.clock() - t0 < secs do fn() end
  ljprof.stop()
  return ljprof.summary(), ljprof.stats()
end

local function total(entries, pred)
  local n = 0
  for _, e in ipairs(entries) do
    if not pred or pred(e) then n = n + e.count end
  end
  return n
end

local function ends_with(s, suffix) return s:sub(-#suffix) == suffix end

local function top(entries, k)
  table.sort(entries, function(a, b) return a.count > b.count end)
  local out = {}
  for i = 1, math.min(k or 6, #entries) do
    out[#out + 1] = string.format("%6d %s %s", entries[i].count, entries[i].vmstate, entries[i].stack)
  end
  return table.concat(out, "\n")
end

-- Each chain case for the interpreter and for compiled callers.
for _, mode in ipairs({"interpreted", "compiled"}) do
  t.case("C module: lua caller -> module function -> middle -> inner (" .. mode .. ")", function()
    local function cmod_caller() local x = ctest.run(2e6) return x end
    if mode == "interpreted" then jit.off(cmod_caller) else jit.on(cmod_caller) end
    local e, st = profile(1.0, cmod_caller)
    local all = total(e)
    -- The caller is named as profile() calls it ("fn"). Compiled, it is
    -- inlined into profile's loop trace: no frame of its own remains.
    local caller = mode == "interpreted" and ";profile;fn;" or ";profile;"
    local chain = total(e, function(x)
      return ends_with(x.stack, caller .. "ljp_ctest.run;ljpt_middle;ljpt_inner") or
             (mode == "compiled" and ends_with(x.stack, ";profile;fn;ljp_ctest.run;ljpt_middle;ljpt_inner"))
    end)
    local mid = total(e, function(x) return ends_with(x.stack, ";ljp_ctest.run;ljpt_middle") end)
    print(string.format("  %d samples, inner %d, middle %d; %d unwinds, %d frames", all, chain, mid,
                        st.native_unwinds, st.native_frames))
    t.ok(all >= 500, "enough samples: " .. all)
    t.ok(chain / all > 0.6, "the innermost C function holds the majority:\n" .. top(e))
    t.ok(mid > 0 and mid < chain, "middle shows its own time, less than inner")
    t.ok(total(e, function(x) return x.stack:find("ljpt_run", 1, true) end) == 0,
      "the C function Lua called is named once, by its Lua name")
  end)

  t.case("FFI: lua caller -> outer -> middle -> inner (" .. mode .. ")", function()
    local function ffi_caller() local x = fflib.ljpf_outer(2e6) return x end
    if mode == "interpreted" then jit.off(ffi_caller) else jit.on(ffi_caller) end
    local e = profile(1.0, ffi_caller)
    local all = total(e)
    -- Interpreted, the call goes through the cdata's __call (a C function
    -- Lua sees); compiled, the trace calls ljpf_outer directly.
    local via = mode == "interpreted" and ";profile;fn;ffi.meta.__call;" or ";profile;"
    local chain = total(e, function(x)
      return ends_with(x.stack, via .. "ljpf_outer;ljpf_middle;ljpf_inner") or
             (mode == "compiled" and ends_with(x.stack, ";profile;fn;ljpf_outer;ljpf_middle;ljpf_inner"))
    end)
    print(string.format("  %d samples, %d end in %sljpf_outer;ljpf_middle;ljpf_inner", all, chain, via))
    if mode == "compiled" then
      -- Until profile()'s loop has a trace for this closure the call runs
      -- interpreted: 0.05 to 0.6 s here, as the interpreted case before
      -- left a penalty on the loop (its recordings aborted at the jit.off
      -- function; LuaJIT adds a random part to each penalty). The compiled
      -- samples are judged.
      local n = total(e, function(x) return x.vmstate == "N" end)
      chain = total(e, function(x)
        return x.vmstate == "N" and (ends_with(x.stack, ";profile;ljpf_outer;ljpf_middle;ljpf_inner") or
               ends_with(x.stack, ";profile;fn;ljpf_outer;ljpf_middle;ljpf_inner"))
      end)
      print(string.format("  %d compiled (N), %d of them the chain", n, chain))
      t.ok(n >= 100, "compiled samples: " .. n .. "\n" .. top(e))
      all = n
    end
    t.ok(chain / all > 0.6, "the chain under the Lua caller holds the majority:\n" .. top(e))
  end)
end

t.case("a real C module (lua-cjson): its C frames under the Lua caller", function()
  local ok, cjson = pcall(require, "cjson")
  if not t.ok(ok, "lua-cjson is installed (Debian lua-cjson): " .. tostring(cjson)) then return end
  local doc = {}
  for i = 1, 2000 do
    doc[i] = {id = i, name = "item" .. i, tags = {"a", "b", "c"}, score = i * 0.5,
              nested = {x = i, y = {1, 2, 3}}}
  end
  local function encode_caller() return #cjson.encode(doc) end
  local e = profile(1.0, encode_caller)
  -- (the caller "fn" is inlined into profile's loop once compiled)
  local under = total(e, function(x) return x.stack:find(";profile;[fn;]*cjson%.encode") end)
  local deeper = total(e, function(x)
    return x.stack:match(";profile;[fn;]*cjson%.encode;(.+)$") ~= nil
  end)
  print(string.format("  %d samples under cjson.encode, %d with C frames above it", under, deeper))
  print(top(e, 4))
  t.ok(under > 300, "time in cjson.encode: " .. under)
  t.ok(deeper / under > 0.5, "most of it shows cjson's own C frames")
end)

t.case("native=false: Lua stacks only", function()
  local function off_caller() local x = ctest.run(2e6) return x end
  local e, st = profile(0.5, off_caller, {native = false})
  t.eq(st.native_unwinds, 0, "no unwinds")
  t.eq(total(e, function(x) return x.stack:find("ljpt_", 1, true) end), 0, "no native frames")
  t.ok(total(e, function(x) return ends_with(x.stack, ";ljp_ctest.run") end) / total(e) > 0.8,
    "C time on the C function Lua called:\n" .. top(e))
end)

t.case("loader traffic (dlopen, dlsym, dladdr, dlclose) at 10 kHz: no deadlock", function()
  -- In a child process, so that a hang is a failure, not a stuck suite.
  local script = os.tmpname()
  local f = assert(io.open(script, "w"))
  f:write(string.format([[
    package.cpath = %q .. ";" .. package.cpath
    local ljprof = require("ljprof")
    local ct = package.loadlib(%q, "luaopen_ljp_ctest")()
    ljprof.record{clock = "wall", rate = 10000, fmt = "fZ;", depth = -100}
    local t0, n = os.clock(), 0
    while os.clock() - t0 < 1.5 do n = n + ct.loader(20, %q) end
    ljprof.stop()
    local s = ljprof.stats()
    local named = 0
    for _, e in ipairs(ljprof.summary()) do
      if e.stack:find("dlopen", 1, true) or e.stack:find("dlclose", 1, true) then named = named + e.count end
    end
    print(string.format("found=%%d signals=%%d merged=%%d unwinds=%%d skipped=%%d truncated=%%d named=%%d",
      n, s.signals, s.merged, s.native_unwinds, s.native_skipped, s.native_truncated, named))
  ]], (os.getenv("LUA_CPATH") or ""):gsub(";;$", ""), CTEST, FFITEST))
  f:close()
  local p = io.popen("timeout 60 " .. (arg[-1] or "luajit") .. " " .. script .. " 2>&1; echo status=$?")
  local out = p:read("*a")
  p:close()
  os.remove(script)
  print("  " .. out:gsub("\n$", ""):gsub("\n", "\n  "))
  t.ok(out:find("status=0", 1, true), "the child finished in time (no deadlock): " .. out)
  local found, sig, merged, unw, skipped, named = out:match(
    "found=(%d+) signals=(%d+) merged=(%d+) unwinds=(%d+) skipped=(%d+) truncated=%d+ named=(%d+)")
  t.ok(found and tonumber(found) > 0, "the loader calls worked")
  t.ok(sig and tonumber(sig) > 3000, "signals landed throughout")
  -- Records of their own (the others joined a pending record while the
  -- compiled loop ran without a safe point): nearly all land in C code
  -- of the loader, each walked or, mid-change, skipped.
  local own = sig and tonumber(sig) - tonumber(merged)
  t.ok(unw and (tonumber(unw) + tonumber(skipped)) > 0.5 * own,
    "samples inside the loader were walked or skipped")
  t.ok(named and tonumber(named) > 0, "loader frames are named (dlopen/dlclose)")
end)

t.case("mixed workload: no raw addresses of LuaJIT's own code, none below Lua", function()
  local cjson_ok, cjson = pcall(require, "cjson")
  local mt = {__gc = function() end}
  local function cmp(a, b) return a < b end
  local function work()
    local t1 = {}
    for i = 1, 2000 do t1[i] = (i * 7919) % 2003 end
    table.sort(t1, cmp)
    local s = string.rep("abc ", 2000):gsub("%w+", function(w) return w:upper() end)
    for _ = 1, 50 do setmetatable({}, mt) end
    pcall(error, "x")
    local co = coroutine.wrap(function() for i = 1, 100 do coroutine.yield(i) end end)
    for _ = 1, 100 do co() end
    if cjson_ok then cjson.encode(t1) end
    ctest.run(2e4)
    return #s
  end
  local e, st = profile(1.5, work)
  local bad = {}
  for _, x in ipairs(e) do
    -- The root is luajit's main C function, named stably (luajit+0x...):
    -- a Lua stack level, not a native frame.
    local above_root = x.stack:gsub("^[^;]*", "")
    if above_root:find("luajit+0x", 1, true) or x.stack:find(";0x%x") then bad[#bad + 1] = x.stack end
  end
  print(string.format("  %d samples, %d stacks, %d native frames", total(e), #e, st.native_frames))
  t.ok(#bad == 0, "no raw addresses of LuaJIT's code:\n" .. table.concat(bad, "\n"))
  -- Native frames are always on top: none of the chain's names below a Lua frame.
  for _, x in ipairs(e) do
    local pre = x.stack:match("^(.*);ljpt_inner;")
    t.ok(not pre, "ljpt_inner is a leaf: " .. x.stack)
  end
end)

-- LuaJIT's own code that the interpreter calls for a Lua function (the
-- trace recorder through lj_vm_cpcall, the dispatch hook) runs in state C
-- after a VM event handler or an error returned to C: ljprof's "record"
-- event handler (inline=recorded) leaves the recorder in state C. The
-- frame at L->base is then the Lua function's; the outermost native frame
-- is trace_state, no lua_CFunction. Each comparator here is a fresh
-- prototype: hot, recorded, aborted (it returns to table.sort, a C
-- function), at 10 kHz. Before the fix: about 100 samples a second
-- showed `luajit+0x588f0` (trace_state) or `luajit+0x58020`
-- (lj_dispatch_ins) above the comparator, some with the comparator's
-- caller gone (the stack of a later safe point). Such a tick, taken while
-- the compiler is busy, is now the compiler's: state J (test_recorder_state).
t.case("state C in LuaJIT's helpers for a Lua comparator: no C function invented, the tick's own stack", function()
  local src = "return function(a, b) return a < b end"
  local function sort_fresh()
    local cmp_fresh = load(src, "=ljpt_cmp")()
    local t1 = {}
    for i = 1, 300 do t1[i] = (i * 7919) % 307 end
    table.sort(t1, cmp_fresh)
  end
  local bad, lost, nbad, in_c, in_j, all, recorded = {}, {}, 0, 0, 0, 0, true
  for _ = 1, 4 do
    local e, st = profile(0.5, sort_fresh, {rate = 10000})
    recorded = recorded and st.inline_frames == "recorded"
    for _, x in ipairs(e) do
      all = all + x.count
      local above_root = x.stack:gsub("^[^;]*", "")
      if above_root:find("luajit+0x", 1, true) or above_root:find("[;@]0x%x") then
        bad[#bad + 1] = string.format("%d %s %s", x.count, x.vmstate, x.stack)
        nbad = nbad + x.count
      end
      -- The comparator is only ever called by table.sort.
      local below = x.stack:match("([^;]*);ljpt_cmp:1") or x.stack:match("([^;]*);cmp_fresh")
      if below and below ~= "table.sort" and not below:match("^%[builtin#%d+%]$") then
        lost[#lost + 1] = string.format("%d %s %s", x.count, x.vmstate, x.stack)
      end
      if x.vmstate == "C" and (x.stack:find(";ljpt_cmp:1$") or x.stack:find(";cmp_fresh$")) then
        in_c = in_c + x.count
      elseif x.vmstate == "J" and (x.stack:find(";ljpt_cmp:1$") or x.stack:find(";cmp_fresh$")) then
        in_j = in_j + x.count
      end
    end
  end
  print(string.format("  %d samples, %d in state C and %d in J with the comparator on top, %d bad (%d stacks), %d stacks without sort",
    all, in_c, in_j, nbad, #bad, #lost))
  t.ok(#bad == 0, "no raw addresses of LuaJIT's code:\n" .. table.concat(bad, "\n"))
  t.ok(#lost == 0, "the comparator's caller is table.sort:\n" .. table.concat(lost, "\n"))
  -- The window was there: the recorder's time, LuaJIT's state C, under
  -- the comparator (only with the record events, inline=recorded): the
  -- compiler's, J.
  if recorded then t.ok(in_j > 0, "samples in state J under the comparator: " .. in_j) end
end)

t.case("folded, speedscope and pprof writers carry native frames", function()
  local model = require("jit.prof.model")
  local function sp_caller() local x = ctest.run(2e6) return x end
  ljprof.record({clock = "wall", rate = 1000, fmt = model.KEY_FMT, depth = -model.MAX_DEPTH})
  local t0 = os.clock()
  while os.clock() - t0 < 0.5 do sp_caller() end
  ljprof.stop()
  local p = model.collect(ljprof.summary())
  local folded = require("jit.prof.folded").render(p, {scope = "f"})
  t.ok(folded:find("sp_caller;ljp_ctest.run;ljpt_middle;ljpt_inner %d+") ~= nil or
       folded:find(";ljp_ctest.run;ljpt_middle;ljpt_inner %d+") ~= nil,
    "folded line for the chain:\n" .. folded:sub(1, 400))
  local ss = require("jit.prof.speedscope").render(p, {interval_us = 1000})
  t.ok(ss:find('"name":"ljpt_inner"', 1, true) ~= nil, "speedscope frame for ljpt_inner")
end)

-- Text views speak Lua: a compiled loop calling libm (math.sin, math.cos)
-- and an FFI library. The -jp text views name the Lua function; G and
-- the stack formats keep the native frames.
local model = require("jit.prof.model")
local output = require("jit.prof.output")

local function hot_sin(n)
  local s = 0
  for i = 1, n do s = s + math.sin(i) * math.cos(i) end
  return s
end
local function hot_ffi() return fflib.ljpf_outer(2e5) end
-- libm's sin and cos as named: "sin" (IFUNC implementations by their
-- public names), or the implementation's own name when a debug file names
-- it ("__sin_fma", libc6-dbg; see test_native_names.lua).
local LIBM = "[%w_]*[sc][io][ns][%w_]*"

local function record_model(secs, fn)
  ljprof.record({clock = "wall", rate = 1000, fmt = model.KEY_FMT, depth = -model.MAX_DEPTH})
  local t0 = os.clock()
  while os.clock() - t0 < secs do fn() end
  ljprof.stop()
  return model.collect(ljprof.summary())
end

local function native_names(p)
  local set = {}
  for _, fr in ipairs(p.frames) do
    if fr.native then set[fr.name] = true end
  end
  return set
end

-- The keys of a -jp text report ("%2d%%  key" lines, and "  -- " second
-- levels), in order.
local function report_keys(s)
  local keys = {}
  for line in s:gmatch("[^\n]+") do
    if line:match("^Hot but") then break end
    local k = line:match("^%s*%d+%%%s%s(.+)$") or line:match("^  %-%- %s*%d+%%%s%s(.+)$")
    if k then keys[#keys + 1] = k end
  end
  return keys
end

t.case("text views speak Lua: f, l, vf, s, annotation name Lua frames; G keeps native ones", function()
  jit.on(hot_sin)
  local p = record_model(1.0, function() hot_sin(1e5); hot_ffi() end)
  local nat = native_names(p)
  t.ok(next(nat) ~= nil, "native frames were recorded")
  t.ok(not nat["math.sin"] and not nat["math.cos"], "math.sin is not a native frame")
  for _, letters in ipairs({"f", "F", "l", "vf", "fv", "zf", "fs", "2f", "-3f", "fl"}) do
    local s = assert(output.render(p, {}, "text", {view = letters}))
    local keys = report_keys(s)
    t.ok(#keys > 0, letters .. ": a report:\n" .. s)
    for _, k in ipairs(keys) do
      for part in (k .. " < "):gmatch("(.-) [<>] ") do
        t.ok(not nat[part], letters .. ": no native frame in the text view: " .. k .. "\n" .. s)
      end
    end
    if letters == "f" then
      t.ok(keys[1] == "hot_sin" or keys[1] == "hot_ffi" or keys[1] == "fn",
        "f: a Lua function tops the report:\n" .. s)
    end
  end
  local ann = assert(output.render(p, {}, "text", {view = "a"}))
  for file in ann:gmatch("====== (.-) ======") do
    t.ok(not nat[file], "annotation: no native frame as a file: " .. file)
  end
  t.ok(ann:find("test_native.lua ======", 1, true), "annotation of the Lua source:\n" .. ann:sub(1, 300))
  local f = assert(output.render(p, {}, "text", {view = "f"}))
  local g = assert(output.render(p, {}, "text", {view = "G"}))
  t.ok(g:find(";ljpf_outer;ljpf_middle;ljpf_inner %d+") ~= nil, "G keeps the FFI chain:\n" .. g)
  t.ok(g:find(";hot_sin;" .. LIBM .. " %d+"), "G keeps libm's frames:\n" .. g)
  local folded = assert(output.render(p, {}, "folded", {view = "f"}))
  t.ok(folded:find(";ljpf_middle;ljpf_inner %d+") ~= nil, "folded keeps native frames")
  local show = assert(output.render(p, {}, "text", {view = "f", native = true}))
  local shown = false
  for _, k in ipairs(report_keys(show)) do if nat[k] then shown = true end end
  t.ok(shown, "native=show: native frames in the text view:\n" .. show)
  print("  " .. f:gsub("\n", "\n  "))
  -- the raw profile keeps the mark
  local raw = require("jit.prof.raw")
  local tmp = os.tmpname()
  local fh = assert(io.open(tmp, "w")); fh:write(raw.render(p, {interval_us = 10000})); fh:close()
  local q = raw.read(tmp)
  os.remove(tmp)
  t.eq(q and output.render(q, {}, "text", {view = "f"}), f, "raw round trip: same text view")
end)

t.case("-jprof=f in a child: the Lua function tops the report; /native=show and bad values", function()
  local script = os.tmpname()
  local fh = assert(io.open(script, "w"))
  fh:write([[
    local function ai(n)
      local s = 0
      for i = 1, n do s = s + math.sin(i) * math.cos(i) end
      return s
    end
    local t0 = os.clock()
    while os.clock() - t0 < 0.8 do ai(1e5) end
  ]])
  fh:close()
  local function run(opts)
    local p = io.popen((arg[-1] or "luajit") .. " -jprof=" .. opts .. " " .. script .. " 2>&1")
    local out = p:read("*a")
    p:close()
    return out
  end
  local f = run("f/clock=wall")
  t.ok(f:match("^%s*%d+%%%s+ai\n"), "-jprof=f: ai first:\n" .. f)
  t.ok(not f:find("libm", 1, true) and not f:find("%d%%%s+" .. LIBM .. "\n"),
    "-jprof=f: no native frame:\n" .. f)
  local vf = run("vf/clock=wall")
  t.ok(not vf:find("mprotect", 1, true) and not vf:find("libm", 1, true), "-jprof=vf: no native frame:\n" .. vf)
  local g = run("G/clock=wall")
  t.ok(g:find(";ai;" .. LIBM .. " %d+"), "-jprof=G keeps libm's frames, named:\n" .. g)
  local show = run("f/clock=wall/native=show")
  t.ok(show:find("%d%%%s+" .. LIBM .. "\n"), "/native=show shows them:\n" .. show)
  local bad = run("f/native=maybe")
  t.ok(bad:find("bad native 'maybe' (accepted: on, off, show)", 1, true) and
       select(2, bad:gsub("\n", "")) == 1, "one error line:\n" .. bad)
  os.remove(script)
end)

-- IFUNC implementations (sin, memcpy), with and without separate debug
-- files: test_native_names.lua.

t.done()
