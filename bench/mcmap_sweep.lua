-- The machine code map (src/mcmap.c) over many programs: untrusted
-- snapshot spans and the share of code bytes mapped exactly, per program,
-- by bench/mcmap_cover.lua (each program in its own process, its traces
-- mapped at its end). Programs: bench/workloads/*.lua (luacheck
-- included), bench/accuracy/inline.lua's sources, bench/lib/methods.lua,
-- tests/lua/exact_cases.lua's workloads (when the tree has them, or from
-- the path given by LJP_EXACT_CASES), and the kinds below (strings,
-- tables, FFI, bit ops, math, coroutines). Usage, from the repository:
--   LUA_PATH="$PWD/?.lua;$PWD/jit/?.lua;;" LUA_CPATH="$PWD/build/lib?.so;;" \
--     luajit bench/mcmap_sweep.lua [name-pattern]
-- The programs are written to a temporary directory, removed at the end.
local SRC = (arg[0]:match("^(.*)/bench/[^/]*$") or ".")
local only = arg[1]
local function rd(p)
  local f = io.open(p, "rb")
  if not f then return nil end
  local s = f:read("*a")
  f:close()
  return s
end

local progs = {}
local function add(name, text) progs[#progs + 1] = {name = name, text = text} end

-- bench/workloads
local ls = io.popen("ls " .. SRC .. "/bench/workloads/*.lua")
for p in ls:lines() do
  local n = p:match("([^/]*)%.lua$")
  if n ~= "luacheck_loop" then
    add(n, "arg = {[0] = " .. string.format("%q", p) .. "}\n" ..
           "local f = assert(loadfile(" .. string.format("%q", p) .. "))\nreturn f()\n")
  end
end
ls:close()

-- bench/accuracy/inline.lua's sources: its table W, cut before its driver
do
  local text = rd(SRC .. "/bench/accuracy/inline.lua")
  local cut = text and text:find("\nlocal ORDER", 1, true)
  if cut then
    local saved = arg
    arg = {[0] = SRC .. "/bench/accuracy/inline.lua"}
    local W = assert(loadstring(text:sub(1, cut) .. "return W", "=inline.lua"))()
    arg = saved
    local names = {}
    for k in pairs(W) do names[#names + 1] = k end
    table.sort(names)
    for _, k in ipairs(names) do
      add("inline_" .. k, "local run = assert(loadstring(" .. string.format("%q", W[k].src) ..
          "))(math.sin, 2000)\nrun(60)\n")
    end
  end
end

add("methods", "local sin = math.sin\n" .. rd(SRC .. "/bench/lib/methods.lua") ..
    "\nprint(step(200000))\n")

-- tests/lua/exact_cases.lua's workloads (HEAD .. src, main(0.4))
do
  local p = os.getenv("LJP_EXACT_CASES") or SRC .. "/tests/lua/exact_cases.lua"
  local text = rd(p)
  if text then
    local M = assert(loadstring(text, "=exact_cases.lua"))()
    local ctest = SRC .. "/build/tests/ljp_ctest.so"
    for _, w in ipairs(M.W) do
      add("exact_" .. w.name, string.format("arg = {'none', 'cpu', 'off', '0.4', %q}\n", ctest) ..
          M.HEAD .. w.src .. "\nmain(0.4)\n")
    end
  end
end

-- Kinds of code the bench workloads hold little of.
add("k_strings", [[
local fmt, rep, sub, byte, char, concat = string.format, string.rep, string.sub, string.byte, string.char, table.concat
local t, acc = {}, 0
for i = 1, 300000 do
  local s = fmt("%d:%s:%x", i, "k" .. i % 7, i) .. fmt("%q", "a\"b" .. i % 10)
  local r = rep("xy", i % 5 + 1) .. sub(s, 2, 6) .. char(65 + i % 26)
  acc = acc + byte(r, 1) + #s + #r + #tostring(i) + (tonumber("1" .. i % 10) or 0)
  t[i % 64 + 1] = r
  if i % 64 == 0 then acc = acc + #concat(t, ",") end
end
print(acc)
]])
add("k_tables", [[
local keep, acc = {}, 0
local function mk(i) return {i, i + 1, x = i, y = i * 2} end
local function pt(x, y) return {x = x, y = y} end
for i = 1, 400000 do
  local a = mk(i)
  local b = pt(a.x, a.y)
  local c = {1, 2, 3, i}
  local d = {}
  d[1] = i d.k = b
  keep[i % 256 + 1] = d
  acc = acc + a[1] + b.y + c[4] + #keep + #c
  local f = function() return i end
  acc = acc + f()
end
print(acc)
]])
add("k_ffi", [[
local ffi = require("ffi")
ffi.cdef("typedef struct { double x, y; int n; } kpt; int abs(int); size_t strlen(const char *);")
local C = ffi.C
local arr = ffi.new("double[?]", 1024)
local acc, a64 = 0, ffi.new("int64_t", 1)
for i = 1, 400000 do
  local p = ffi.new("kpt", i, i * 0.5, i % 7)
  arr[i % 1024] = p.x * p.y + p.n
  acc = acc + arr[(i * 7) % 1024] + C.abs(-i % 1000) + tonumber(C.strlen("hello"))
  a64 = a64 * 3 + i
  a64 = a64 % 1000003
end
print(acc, tonumber(a64))
]])
add("k_bit", [[
local band, bor, bxor, lshift, rshift, arshift, rol, tobit = bit.band, bit.bor, bit.bxor, bit.lshift, bit.rshift, bit.arshift, bit.rol, bit.tobit
local h = 0
for i = 1, 2000000 do
  h = bxor(h, lshift(i, 5)) + rshift(h, 2)
  h = band(bor(h, i), 0x7fffffff) + arshift(-i, 3)
  h = tobit(rol(h, 7) + i * 31)
end
print(bit.tohex(h))
]])
add("k_math", [[
local floor, ceil, sqrt, abs, min, max, fmod, pow, exp, log = math.floor, math.ceil, math.sqrt, math.abs, math.min, math.max, math.fmod, math.pow, math.exp, math.log
local s = 0
for i = 1, 1000000 do
  local x = i * 0.37
  s = s + floor(x) - ceil(x / 3) + sqrt(x) + abs(-x) + min(x, 50) + max(x, 3, s % 7)
  s = s + fmod(x, 7.5) + pow(x, 0.5) + x ^ 1.5 + exp(-x % 3) + log(x + 1) + i % 13
  s = s % 1e9
end
print(s)
]])
add("k_coroutines", [[
local function gen(n)
  return coroutine.wrap(function()
    for i = 1, n do coroutine.yield(i * 2, i % 3) end
  end)
end
local acc = 0
for r = 1, 200 do
  for a, b in gen(3000) do acc = acc + a + b end
  local co = coroutine.create(function(x) while true do x = coroutine.yield(x + 1) end end)
  for i = 1, 2000 do local _, v = coroutine.resume(co, i) acc = acc + v end
end
print(acc)
]])

add("k_strings2", [[
local fmt, up, low, rev, find, match, sub = string.format, string.upper, string.lower, string.reverse, string.find, string.match, string.sub
local acc, parts = 0, {}
for i = 1, 200000 do
  local s = fmt("%5.2f|%-6s|%c|%g|%o|%X|%s", i / 7, "ab", 65 + i % 26, i * 0.5, i, i, true)
  local u = up(sub(s, 1, 8)) .. low("ABC") .. rev("xyz") .. i .. "/" .. i * 0.25
  acc = acc + #u + (find(s, "|", 1, true) or 0) + #tostring(i * 0.1)
  parts[#parts + 1] = u
  if #parts > 100 then acc = acc + #table.concat(parts) parts = {} end
  local m = match(u, "%d+")
  acc = acc + (m and #m or 0)
end
print(acc)
]])
add("k_tables2", [[
local insert, remove = table.insert, table.remove
local keep, acc = {}, 0
local mt = {__index = function(t, k) return k * 2 end}
local Base = {} Base.__index = Base
function Base.new(x) return setmetatable({x = x, v = {x, x + 1}}, Base) end
function Base:get() return self.x + self.v[2] end
function Base:set(x) self.x = x self.v[1] = x end
for i = 1, 300000 do
  local o = Base.new(i)
  o:set(o:get() % 1000)
  keep[i % 128 + 1] = o
  local t = {}
  for j = 1, 4 do insert(t, j * i) end
  acc = acc + remove(t) + #t + o.x
  local p = setmetatable({}, mt)
  acc = acc + p[i % 10]
  local h = {a = i, b = i, c = i}
  h.d = i
  keep[i % 64 + 200] = h
  for k, v in ipairs(t) do acc = acc + v end
end
print(acc)
]])
add("k_ffi2", [[
local ffi = require("ffi")
ffi.cdef("typedef struct { int a[4]; double d; } k2; void *memcpy(void *, const void *, size_t);")
local keep, acc = {}, 0
local buf = ffi.new("uint8_t[64]")
local u = ffi.new("uint64_t", 12345)
for i = 1, 300000 do
  local s = ffi.new("k2")
  s.a[i % 4] = i
  s.d = i * 0.5
  keep[i % 32 + 1] = s
  ffi.fill(buf, 16, i % 256)
  ffi.copy(buf + 16, "abcdefgh", 8)
  local p = ffi.cast("int32_t *", buf)
  acc = acc + p[1] + s.a[i % 4] + s.d + buf[17]
  u = u * 7 + i
  u = u / 3
  acc = acc + tonumber(u % 100) + #ffi.string(buf + 16, 4)
end
print(acc)
]])
add("k_bit2", [[
local ffi = require("ffi")
local band, bor, bxor, lshift, rshift, bswap, tohex = bit.band, bit.bor, bit.bxor, bit.lshift, bit.rshift, bit.bswap, bit.tohex
local h, acc = 0LL, 0
for i = 1, 500000 do
  h = bxor(h * 31, i) + lshift(0x1234LL, i % 20)
  h = band(h, 0xffffffffffLL)
  acc = acc + bswap(i) % 7 + rshift(bor(i, 3), 1)
  if i % 1000 == 0 then acc = acc + #tohex(i) end
end
print(tonumber(h), acc)
]])
add("k_math2", [[
local random, floor, modf, frexp, ldexp, huge, atan2 = math.random, math.floor, math.modf, math.frexp, math.ldexp, math.huge, math.atan2
math.randomseed(1)
local s, mn = 0, huge
for i = 1, 800000 do
  local r = random()
  local a, b = modf(i / 3)
  s = s + floor(i / 7) + r + a + b + ldexp(r, 3) + atan2(i, 3) + random(10)
  if r < mn then mn = r end
  s = s % 1e7
end
print(s, mn)
]])
add("k_closures", [[
local function counter() local n = 0 return function(d) n = n + d return n end end
local function sum(...) local s = 0 for i = 1, select("#", ...) do s = s + (select(i, ...)) end return s end
local c, acc = counter(), 0
local up = 0
local function bump(x) up = up + x return up end
for i = 1, 500000 do
  acc = acc + c(1) + sum(i, 2, 3) + bump(i % 3)
  local t = {i, i + 1}
  acc = acc + t[1] + t[2]
end
print(acc)
]])
add("k_coroutines2", [[
local function producer(n)
  return coroutine.create(function()
    for i = 1, n do coroutine.yield({i, tostring(i)}) end
    return nil
  end)
end
local acc = 0
for r = 1, 100 do
  local p = producer(3000)
  while true do
    local ok, v = coroutine.resume(p)
    if not v then break end
    acc = acc + v[1] + #v[2]
  end
  acc = acc + (coroutine.status(p) == "dead" and 1 or 0)
end
print(acc)
]])

-- Run each through bench/mcmap_cover.lua's --one.
local tmp = os.tmpname()
os.remove(tmp)
assert(os.execute("mkdir -p " .. tmp) == 0 or true)
local tot = {0, 0, 0, 0, 0, 0}
print(string.format("%-22s %6s %6s %9s %7s %6s %9s", "program", "traces", "mapped", "bytes", "exact", "spans", "untrusted"))
for _, p in ipairs(progs) do
  if not only or p.name:find(only) then
    local path = tmp .. "/" .. p.name .. ".lua"
    local f = assert(io.open(path, "wb"))
    f:write(p.text)
    f:close()
    local h = io.popen(string.format("cd %s && %s %s/bench/mcmap_cover.lua --one %s 2>&1 >/dev/null",
                                     SRC, arg[-1] or "luajit", SRC, path))
    local out = h:read("*a")
    h:close()
    local v = {out:match("MCMAP (%d+) (%d+) (%d+) (%d+) (%d+) (%d+)")}
    if v[1] then
      for k = 1, 6 do v[k] = tonumber(v[k]) tot[k] = tot[k] + v[k] end
      print(string.format("%-22s %6d %6d %9d %6.1f%% %6d %9d", p.name, v[1], v[2], v[3],
                          100 * v[4] / math.max(v[3], 1), v[5], v[6]))
    else
      print(string.format("%-22s failed: %s", p.name, out:sub(1, 200):gsub("\n", " ")))
    end
    os.remove(path)
  end
end
os.execute("rmdir " .. tmp)
print(string.format("%-22s %6d %6d %9d %6.1f%% %6d %9d", "all", tot[1], tot[2], tot[3],
                    100 * tot[4] / math.max(tot[3], 1), tot[5], tot[6]))
