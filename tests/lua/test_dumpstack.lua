-- Oracle test: ljprof.dumpstack must return byte-identical strings to
-- LuaJIT's own jit.profile.dumpstack, for every format character, many
-- depths and a generated corpus of stacks.
--
-- Level 0 of a direct call is the dumpstack function itself, which differs
-- on purpose (the built-in is a fast function, ours a plain C function), so
-- the stack of ANOTHER thread is dumped: from inside each context running on
-- thread T a fresh coroutine dumps T (T is then 'normal'), or T yields or
-- dies and is dumped from outside. A "direct" mode compares in place after
-- mapping the one level-0 string.
--
-- Never call jit.profile.start/stop in this file: stop frees the built-in's
-- dump buffer without clearing it, so a later jit.profile.dumpstack would
-- write into freed memory.
local t = require "t"
local P = require "jit.profile"
local L = require "ljprof"
local jds, lds = P.dumpstack, L.dumpstack

-- The main thread as an object. coroutine.running() returns nil on the main
-- thread unless LuaJIT was built with 5.2 compatibility; then a profiler
-- callback (ours, to keep jit.profile's buffer alive) hands it over.
local MAIN = coroutine.running()
if not MAIN then
  L.start("i1", function(th) MAIN = MAIN or th end, {clock = "wall"})
  local rounds = 0
  while not MAIN and rounds < 2000 do t.burn(0.005); rounds = rounds + 1 end
  L.stop()
end
assert(type(MAIN) == "thread", "could not get the main thread object")

local function cur() return coroutine.running() or MAIN end

-- Formats: every format character alone and combined, verbatim bytes
-- (';' ' ' '|' newline, tab, digits, '<'), 'p' at several places (sticky),
-- 'Z' at several places, several 'Z's, the empty format.
local FMTS = {
  "f", "F", "l", "p", "Z", "", "fZ;", "FZ;", "lZ;", "F|lZ; ", "pfZ;",
  "pFZ;", "plZ;", "l;pZ", "plZ\n", "f;l", ";", " ", "|", "\n", "x", "12",
  "Zx", "fZ", "Zf;", "<F>", "lll", "ZZf;Z", "Fp;lZ|", "12f3", "\tl\t", "pZ",
  "f\n\n", "FlFpl", "fZ ;", "l\nZ", "pF|plZ;",
}
-- Depths: positive, negative, zero; smaller and larger than any stack.
local DEPTHS = {
  1, 2, 3, 4, 5, 7, 10, 100, 1000, 0, -1, -2, -3, -4, -5, -7, -10, -100,
  -1000, 2147483647, -2147483648,
}

-- -- Comparison ----------------------------------------------------------

local ncmp, nprobes, mismatches, nmismatch = 0, 0, {}, 0
local CTX, CFMTS, CDEPTHS = "?", FMTS, DEPTHS

-- What the corpus must have produced somewhere (built-in's output of
-- "pF|lZ;" over the whole stack), so the comparisons are not vacuous.
local FEATURES = {
  "[builtin:foreach]", "[builtin:foreachi]", "[builtin#", "|@0x", "[string]",
  "(for generator)", "__index", "__newindex", "__add", "__eq", "__concat",
  "__lt", "__le", "__unm", "mychunk:", "some/dir/named:",
  "some/dir/file.lua:", "C:\\dir\\sub\\win.lua:", "GLOBAL_W|", "meth|",
  "field|", "upf|", "rec|", ":tc|", "sort|", "gsub|", "pcall|", "xpcall|",
  "require|", "yield|", "foreach|", "load|", "tostring|", "[string]:inner|",
  ":va|", "mychunk:inner|", "error|", "ljp_dumped.lua:",
}
local found = {}

local function note(a)
  for i = 1, #FEATURES do
    local f = FEATURES[i]
    if not found[f] and a:find(f, 1, true) then found[f] = true end
  end
end

local function mismatch(ctx, f, d, a, b)
  nmismatch = nmismatch + 1
  if #mismatches < 40 then
    mismatches[#mismatches + 1] = string.format(
      "%s fmt=%q depth=%s\n    jit.profile: %q\n    ljprof:      %q",
      ctx, f, tostring(d), a, b)
  end
end

-- Compare both dumps of thread T (not the running one).
local function compare(T, ctx)
  nprobes = nprobes + 1
  for i = 1, #CFMTS do
    local f = CFMTS[i]
    for j = 1, #CDEPTHS do
      local d = CDEPTHS[j]
      local a, b = jds(T, f, d), lds(T, f, d)
      ncmp = ncmp + 1
      if a ~= b then mismatch(ctx, f, d, a, b) end
    end
  end
  note(jds(T, "pF|lZ;", -100))
end

-- Threads that resumed another coroutine inside the current context (they
-- are 'normal' while the probe runs): dumped as well.
local ACTIVE = {}
local function enter() ACTIVE[#ACTIVE + 1] = cur() end
local function leave() ACTIVE[#ACTIVE] = nil end
local function clear_active() for i = #ACTIVE, 1, -1 do ACTIVE[i] = nil end end

local function dumper(T)
  compare(T, CTX)
  for i = 1, #ACTIVE do
    if ACTIVE[i] ~= T then compare(ACTIVE[i], CTX .. " [normal #" .. i .. "]") end
  end
end

-- Probes: called at the deepest point of a context.
local function probe_wrap()
  coroutine.wrap(dumper)(cur())
end

local function probe_resume()
  local co = coroutine.create(dumper)
  local ok, err = coroutine.resume(co, cur())
  if not ok then error(err, 0) end
end

-- In place: level 0 is the dumpstack function itself; the built-in's
-- level-0 'l' string is mapped to ours. Both calls on one line, through a
-- field of the same name, so that the caller's line and names agree.
local function plain_replace(s, from, to)
  local i, j = s:find(from, 1, true)
  if not i then return s end
  return s:sub(1, i - 1) .. to .. plain_replace(s:sub(j + 1), from, to)
end
local function probe_direct()
  nprobes = nprobes + 1
  local l0a, l0b = P.dumpstack("l", 1), L.dumpstack("l", 1)
  t.ok(l0a:match("^%[builtin#%d+%]$") and l0b:match("^@0x%x+$"),
    "level 0 of a direct call: " .. l0a .. " / " .. l0b)
  for i = 1, #CFMTS do
    local f = CFMTS[i]
    for j = 1, #CDEPTHS do
      local d = CDEPTHS[j]
      local a, b = P.dumpstack(f, d), L.dumpstack(f, d)
      ncmp = ncmp + 1
      a = plain_replace(a, l0a, l0b)
      if a ~= b then mismatch(CTX .. " [direct]", f, d, a, b) end
    end
  end
end

local YIELD_CO
local TOKEN = {}
local function probe_yield()
  if cur() == YIELD_CO then
    -- Fails across a C call boundary (sort comparator, gsub callback...):
    -- then dump in place instead.
    if pcall(coroutine.yield, TOKEN) then return end
  end
  return probe_wrap()
end

local function probe_dead()
  error("probe: dead coroutine")
end

-- -- Wrappers: each calls k once from inside some construct --------------

local W = {}
local function add(name, fn) W[#W + 1] = {name = name, fn = fn} end

add("call", function(k) local r = k() return r end)

GLOBAL_W = function(k) local r = k() return r end
add("global", function(k) local r = GLOBAL_W(k) return r end)

local M = {}
function M.field(k) local r = k() return r end
add("field", function(k) local r = M.field(k) return r end)

local obj = {}
function obj:meth(k) local r = k() return r end
add("method", function(k) local r = obj:meth(k) return r end)

local upf = function(k) local r = k() return r end
add("upvalue", function(k) local r = upf(k) return r end)

local function rec(n, k)
  if n == 0 then local r = k() return r end
  local r = rec(n - 1, k)
  return r
end
add("recursion", function(k) local r = rec(5, k) return r end)

local mod = {}
function mod.run(k) local r = k() return r end
local function tc(k) return mod.run(k) end
add("tailcall", function(k) local r = tc(k) return r end)
add("tailcall-wrapper", function(k) return tc(k) end)
local function tcn(n, k) if n == 0 then return mod.run(k) end return tcn(n - 1, k) end
add("tailcall-chain", function(k) local r = tcn(3, k) return r end)
add("tailcall-k", function(k) return k() end)

add("__index", function(k)
  local o = setmetatable({}, {__index = function(_, key) k() return 1 end})
  local r = o.x
  return r
end)
add("__newindex", function(k)
  local o = setmetatable({}, {__newindex = function(_, key, v) k() end})
  o.x = 1
end)
add("__add", function(k)
  local o = setmetatable({}, {__add = function(a, b) k() return 1 end})
  local r = o + 1
  return r
end)
add("__call", function(k)
  local c = setmetatable({}, {__call = function(self, x) local r = k() return r end})
  local r = c(1)
  return r
end)
add("__eq", function(k)
  local mt = {__eq = function(a, b) k() return true end}
  local a, b = setmetatable({}, mt), setmetatable({}, mt)
  local r = a == b
  return r
end)
add("__lt", function(k)
  local mt = {__lt = function(a, b) k() return true end}
  local a, b = setmetatable({}, mt), setmetatable({}, mt)
  local r = a < b
  return r
end)
add("__le", function(k)
  local mt = {__le = function(a, b) k() return true end}
  local a, b = setmetatable({}, mt), setmetatable({}, mt)
  local r = a <= b
  return r
end)
add("__concat", function(k)
  local o = setmetatable({}, {__concat = function(a, b) k() return "c" end})
  local r = o .. "x"
  return r
end)
add("__unm", function(k)
  local o = setmetatable({}, {__unm = function(a) k() return 1 end})
  local r = -o
  return r
end)
add("__tostring", function(k)
  local o = setmetatable({}, {__tostring = function(a) k() return "o" end})
  local r = tostring(o)
  return r
end)
add("udata-__index", function(k)
  local u = newproxy(true)
  getmetatable(u).__index = function(_, key) k() return 1 end
  local r = u.x
  return r
end)

add("for-generator", function(k)
  local n = 0
  for _ in function(s, c) if c == nil then k() return 1 end end do n = n + 1 end
  return n
end)
add("for-wrap-generator", function(k)
  local n = 0
  enter()
  for _ in coroutine.wrap(function() k() coroutine.yield(1) end) do n = n + 1 end
  leave()
  return n
end)
add("pcall", function(k)
  local ok, r = pcall(k)
  if not ok then error(r, 0) end
  return r
end)
add("xpcall", function(k)
  local ok, r = xpcall(k, function(e) return e end)
  if not ok then error(r, 0) end
  return r
end)
add("xpcall-handler", function(k)
  local r
  xpcall(function() error("raised") end, function(e) r = k() return e end)
  return r
end)
add("after-caught-error", function(k)
  local r
  pcall(function() local x = nil; return x.y end)  -- a caught error first
  r = k()
  return r
end)
add("sort", function(k)
  local done = false
  table.sort({3, 1, 2}, function(a, b)
    if not done then done = true; k() end
    return a < b
  end)
end)
add("gsub", function(k)
  local r
  string.gsub("a", "a", function() r = k() end)
  return r
end)
add("foreach", function(k)
  local r
  table.foreach({1}, function() r = k() end)
  return r
end)
add("foreachi", function(k)
  local r
  table.foreachi({1}, function() r = k() end)
  return r
end)
local nreq = 0
add("require-preload", function(k)
  nreq = nreq + 1
  local name = "ljp_test_mod" .. nreq
  package.preload[name] = function() k() return true end
  local r = require(name)
  package.loaded[name], package.preload[name] = nil, nil
  return r
end)
add("load-reader", function(k)
  local done = false
  load(function() if not done then done = true; k() end return nil end)
end)

local CHUNK = "local k = ...\nlocal function inner(k)\n  local r = k()\n  return r\nend\n"
  .. "local r = inner(k)\nreturn r\n"
local chunks = {
  {"loadstring", loadstring(CHUNK)},
  {"chunk=mychunk", loadstring(CHUNK, "=mychunk")},
  {"chunk=path", loadstring(CHUNK, "=some/dir/named")},
  {"chunk@path", loadstring(CHUNK, "@some/dir/file.lua")},
  {"chunk@winpath", loadstring(CHUNK, "@C:\\dir\\sub\\win.lua")},
  {"chunk-plainname", loadstring(CHUNK, "plainname")},
  {"chunk-emptyname", loadstring(CHUNK, "")},
  {"chunk-bytecode", loadstring(string.dump(loadstring(CHUNK, "@ljp_dumped.lua")))},
  {"chunk-stripped", loadstring(string.dump(loadstring(CHUNK, "@ljp_dumped.lua"), true))},
}
for _, c in ipairs(chunks) do
  local chunk = c[2]
  assert(chunk, c[1])
  add(c[1], function(k) local r = chunk(k) return r end)
end
add("chunk-pcall", function(k)
  local ok, r = pcall(chunks[4][2], k)
  if not ok then error(r, 0) end
  return r
end)

add("vararg", function(k)
  local function va(...) local r = k() return r end
  local r = va(1, 2, 3)
  return r
end)
add("vararg-select", function(k)
  local function va(...) local r = select(2, ...)() return r end
  local r = va(1, k)
  return r
end)
add("dynamic-key", function(k)
  local tab = {function(k) local r = k() return r end}
  local key = 1
  local r = tab[key](k)
  return r
end)
add("hot-loop", function(k)
  local r
  for i = 1, 300 do if i == 250 then r = k() end end
  return r
end)
add("jit-off", (function()
  local function f(k) local s = 0 for i = 1, 10 do s = s + i end local r = k() return r end
  jit.off(f)
  return f
end)())
add("coroutine-wrap", function(k)
  enter()
  local r = coroutine.wrap(function() local r = k() return r end)()
  leave()
  return r
end)
add("coroutine-resume", function(k)
  local co = coroutine.create(function() local r = k() return r end)
  enter()
  local ok, r = coroutine.resume(co)
  leave()
  if not ok then error(r, 0) end
  return r
end)

-- -- Contexts: chains of wrappers, run in several modes -----------------

local function run_chain(chain, probe)
  local k = probe
  for i = #chain, 1, -1 do
    local w, kk = chain[i].fn, k
    k = function() local r = w(kk) return r end
  end
  local r = k()
  return r
end

local function chain_name(chain)
  local n = {}
  for i = 1, #chain do n[i] = chain[i].name end
  return table.concat(n, ">")
end

local MODES = {
  "main/wrap", "main/resume", "main/direct", "coro/wrap", "coro/resume",
  "coro/direct", "coro/yield", "coro/dead",
}

local function run_mode(chain, mode)
  clear_active()
  CTX = chain_name(chain) .. " {" .. mode .. "}"
  local where, how = mode:match("^(%a+)/(%a+)$")
  if where == "main" then
    local probe = how == "wrap" and probe_wrap or how == "resume" and probe_resume
      or probe_direct
    run_chain(chain, probe)
  elseif how == "yield" then
    local co = coroutine.create(function() return run_chain(chain, probe_yield) end)
    YIELD_CO = co
    local ok, r = coroutine.resume(co)
    while ok and r == TOKEN do
      compare(co, CTX .. " [suspended]")
      ok, r = coroutine.resume(co)
    end
    YIELD_CO = nil
    if not ok then error(r, 0) end
  elseif how == "dead" then
    local co = coroutine.create(function() return run_chain(chain, probe_dead) end)
    local ok, err = coroutine.resume(co)
    t.ok(coroutine.status(co) == "dead", CTX .. ": coroutine not dead")
    compare(co, CTX .. (ok and " [finished]" or " [dead]"))
  else
    local probe = how == "wrap" and probe_wrap or how == "resume" and probe_resume
      or probe_direct
    enter()  -- the main thread resumes the context's coroutine
    local co = coroutine.create(function() return run_chain(chain, probe) end)
    local ok, err = coroutine.resume(co)
    leave()
    if not ok then error(err, 0) end
  end
end

-- Deterministic pseudo-random numbers (no dependence on math.random).
local seed = 12345
local function rnd(n)
  seed = (seed * 1103515245 + 12345) % 2147483648
  return math.floor(seed / 65536) % n + 1
end

local function subset(list, n, always)
  local out, seen = {}, {}
  for _, v in ipairs(always) do out[#out + 1] = v; seen[v] = true end
  while #out < n do
    local v = list[rnd(#list)]
    if not seen[v] then out[#out + 1] = v; seen[v] = true end
  end
  return out
end

local function report(name)
  if nmismatch > 0 then
    io.stderr:write(string.format("  %d mismatches in %s, first %d:\n", nmismatch, name,
      #mismatches))
    for _, m in ipairs(mismatches) do io.stderr:write("  ", m, "\n") end
  end
  t.eq(nmismatch, 0, name .. ": mismatching dumps")
  mismatches, nmismatch = {}, 0
end

t.case("single wrappers x all modes x all formats x all depths", function()
  CFMTS, CDEPTHS = FMTS, DEPTHS
  for _, w in ipairs(W) do
    for _, mode in ipairs(MODES) do run_mode({w}, mode) end
  end
  report("single wrappers")
end)

t.case("pairs of wrappers x 3 modes x sampled formats/depths", function()
  for _, w1 in ipairs(W) do
    for _, w2 in ipairs(W) do
      CFMTS = subset(FMTS, 10, {"F|lZ; "})
      CDEPTHS = subset(DEPTHS, 8, {100, -100})
      for _ = 1, 3 do run_mode({w1, w2}, MODES[rnd(#MODES)]) end
    end
  end
  report("pairs")
end)

t.case("random chains of 3-6 wrappers", function()
  for _ = 1, 1500 do
    local chain = {}
    for i = 1, 2 + rnd(4) do chain[i] = W[rnd(#W)] end
    CFMTS = subset(FMTS, 10, {"F|lZ; ", "pfZ;"})
    CDEPTHS = subset(DEPTHS, 10, {100, -100, 3, -3})
    run_mode(chain, MODES[rnd(#MODES)])
  end
  report("random chains")
end)

t.case("fresh, finished and deep coroutines", function()
  CFMTS, CDEPTHS = FMTS, DEPTHS
  CTX = "fresh coroutine"
  compare(coroutine.create(function() end), CTX)
  CTX = "fresh coroutine of a C function"
  compare(coroutine.create(print), CTX)
  local co = coroutine.create(function() return 1 end)
  coroutine.resume(co)
  CTX = "finished coroutine"
  compare(co, CTX)
  CTX = "deep recursion (300 levels)"
  local deep = coroutine.create(function()
    local function d(n) if n == 0 then coroutine.yield() return 0 end return 1 + d(n - 1) end
    return d(300)
  end)
  coroutine.resume(deep)
  compare(deep, CTX)
  t.eq(select(2, jds(deep, "f;", -1000):gsub(";", "")), 302, "frames of the deep stack")
  report("coroutines")
end)

t.case("inside the profiler callback: the interrupted thread's stack", function()
  -- The real use: cb(thread, ...) dumps the interrupted coroutine (main or
  -- not) at whatever point of the corpus the sample landed.
  local function spin() local s = 0 for i = 1, 20000 do s = s + i % 7 end return s end
  jit.off(spin)
  local ncb, threads = 0, {}
  local fmts = FMTS
  local depths = {1, 2, 3, 100, -1, -3, -100}
  L.start("i1", function(th, samples, vmstate)
    ncb = ncb + 1
    threads[th] = true
    for i = 1, #fmts do
      for j = 1, #depths do
        local a, b = jds(th, fmts[i], depths[j]), lds(th, fmts[i], depths[j])
        ncmp = ncmp + 1
        if a ~= b then mismatch("callback", fmts[i], depths[j], a, b) end
      end
    end
  end, {clock = "wall"})
  local passes = 0
  while ncb < 400 and passes < 40 do
    passes = passes + 1
    for _, w in ipairs(W) do
      clear_active()
      run_chain({w, W[rnd(#W)]}, spin)
      clear_active()
      enter()
      coroutine.wrap(function() return run_chain({W[rnd(#W)], w}, spin) end)()
      leave()
    end
  end
  local ok, err = L.stop()
  t.eq(ok, true, "stop after the callback test: " .. tostring(err))
  t.ok(ncb > 0, "the callback ran")
  local nth = 0
  for _ in pairs(threads) do nth = nth + 1 end
  t.ok(nth >= 2, "samples landed on the main thread and on coroutines (" .. nth .. " threads)")
  print(string.format("  %d callbacks on %d threads", ncb, nth))
  report("callback")
end)

t.case("the corpus covers every kind of frame", function()
  for _, f in ipairs(FEATURES) do t.ok(found[f], "no stack showed " .. f) end
end)

-- A suspended coroutine with a few frames, for the argument tests.
local argco = coroutine.create(function()
  local function inner() coroutine.yield() end
  local function outer() inner() return 1 end
  return outer()
end)
coroutine.resume(argco)

t.case("depth conversion: number strings, fractions, out of range", function()
  local ds = {
    "3", " 5 ", "0x10", "1e1", "-2", "2.9", 2.7, 2.2, -2.7, 0.5, -0.5, -1.5, 1e-300,
    2 ^ 31, 2 ^ 31 - 1, -2 ^ 31, -2 ^ 31 - 1, 2 ^ 32 - 1, 2 ^ 32 + 1, 2 ^ 32 + 3,
    -2 ^ 32 - 2, 1e10, -1e10, 1e300, -1e300, 0 / 0, 1 / 0, -1 / 0,
  }
  for _, th in ipairs({argco, MAIN}) do
    for _, d in ipairs(ds) do
      for _, f in ipairs({"l;", "fZ;", "F|lZ; "}) do
        local a, b
        if th == MAIN then
          a, b = coroutine.wrap(function() return jds(MAIN, f, d), lds(MAIN, f, d) end)()
        else
          a, b = jds(th, f, d), lds(th, f, d)
        end
        t.eq(b, a, string.format("%s fmt=%q depth=%s (%s)", th == MAIN and "main" or "coroutine",
          f, tostring(d), type(d)))
      end
    end
  end
  -- The documented cases, spelled out.
  t.eq(lds(argco, "f;", 2.7), lds(argco, "f;", 2), "2.7 behaves as 2")
  t.eq(lds(argco, "f;", "3"), lds(argco, "f;", 3), "\"3\" behaves as 3")
  t.eq(lds(argco, "f;", -2.7), lds(argco, "f;", -2), "-2.7 behaves as -2")
end)

t.case("format coercion and embedded NUL", function()
  t.eq(L.dumpstack(12, 1), "12", "number fmt coerced")
  t.eq(L.dumpstack(12, 1), P.dumpstack(12, 1), "number fmt vs jit.profile")
  t.eq(lds(argco, 1.5, 2), jds(argco, 1.5, 2), "fractional number fmt")
  t.eq(lds(argco, 12, "2"), jds(argco, 12, "2"), "number fmt and string depth")
  t.eq(L.dumpstack("x", 3), P.dumpstack("x", 3), "x,3")
  t.eq(L.dumpstack("Zx", 3), P.dumpstack("Zx", 3), "Zx,3")
  t.eq(L.dumpstack("", 2), "", "empty fmt")
  t.eq(lds(argco, "f\0l;", 3), jds(argco, "f\0l;", 3), "fmt with embedded NUL")
  t.eq(lds(argco, "f;", 3, "extra", {}), jds(argco, "f;", 3, "extra", {}), "extra arguments")
end)

t.case("argument errors match jit.profile", function()
  -- Called through a field of the same name in both, so that the function
  -- name in the message is the same.
  local argsets = {
    {n = 0}, {n = 1, nil}, {n = 1, "x"}, {n = 2, "x", nil}, {n = 2, "x", "abc"},
    {n = 2, "x", {}}, {n = 2, {}, 1}, {n = 2, true, 1}, {n = 2, print, 1},
    {n = 1, argco}, {n = 2, argco, "x"}, {n = 3, argco, nil, 1},
    {n = 3, argco, {}, 1}, {n = 3, argco, "x", "3z"}, {n = 3, argco, "x", true},
    {n = 2, nil, 1}, {n = 3, argco, argco, 1}, {n = 2, "f", argco},
  }
  for i, a in ipairs(argsets) do
    local ok1, e1 = pcall(function() return P.dumpstack(unpack(a, 1, a.n)) end)
    local ok2, e2 = pcall(function() return L.dumpstack(unpack(a, 1, a.n)) end)
    t.eq(ok2, ok1, "argument set " .. i .. ": success")
    t.eq(e2, e1, "argument set " .. i .. ": result or message")
  end
  -- The messages themselves.
  t.raises(function() L.dumpstack() end,
    "bad argument #1 to 'dumpstack' (string expected, got no value)")
  t.raises(function() L.dumpstack(nil, 1) end,
    "bad argument #1 to 'dumpstack' (string expected, got nil)")
  t.raises(function() L.dumpstack("f") end,
    "bad argument #2 to 'dumpstack' (number expected, got no value)")
  t.raises(function() L.dumpstack(argco, "f") end,
    "bad argument #3 to 'dumpstack' (number expected, got no value)")
  t.raises(function() L.dumpstack({}, 1) end,
    "bad argument #1 to 'dumpstack' (string expected, got table)")
end)

t.case("dumpstack before any start and after stop", function()
  -- This file has already run and stopped one profiler (to get MAIN);
  -- dump repeatedly, then start/stop again and dump.
  for _ = 1, 3 do
    t.eq(lds(argco, "F|lZ; ", 100), jds(argco, "F|lZ; ", 100), "after stop")
  end
  L.record({clock = "wall", interval = 1})
  L.stop()
  t.eq(lds(argco, "F|lZ; ", -100), jds(argco, "F|lZ; ", -100), "after record/stop")
end)

-- In a fresh process: no run started, nothing learnt at require (the
-- fast-function ids are learnt by a run's start or by the first dump), so
-- a builtin below the dump is still [builtin#N], as the built-in says.
t.case("dumpstack before any run in a fresh process: builtins named", function()
  local script = [[
local L, P = require "ljprof", require "jit.profile"
local co = coroutine.create(function() pcall(function() coroutine.yield() end) end)
coroutine.resume(co)
local a, b = L.dumpstack(co, "F|lZ; ", 100), P.dumpstack(co, "F|lZ; ", 100)
io.write(a, "\n", b, "\n")
]]
  local out, code
  if t.WINDOWS then
    -- under Wine (tests/windows): the same luajit.exe, in the working
    -- directory, with the environment's LUA_CPATH (cmd.exe runs it)
    local f = "ljp_fresh_" .. os.time() .. ".lua"
    t.write(f, script)
    out, code = t.run_win(t.LUAJIT .. " " .. f)
    os.remove(f)
  else
    local d = t.tmpdir()
    t.write(d .. "/fresh.lua", script)
    out, code = t.sh_in(d, t.CHILD_ENV .. t.LUAJIT .. " fresh.lua")
    os.execute("rm -rf " .. t.q(d))
  end
  local a, b = out:match("^(.-)\r?\n(.-)\r?\n$")
  t.ok(code == 0 and a and a:find("[builtin#", 1, true), "a builtin named: " .. out)
  t.eq(a, b, "the built-in's dump")
end)

print(string.format("%d probes, %d comparisons", nprobes, ncmp))
t.done()
