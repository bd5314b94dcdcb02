-- Small programs of known trace structure, for the machine code tests
-- (test_x64dec.lua: the decoder against objdump; test_mcmap.lua: machine
-- code mapped back to IR). mcmap_workloads(src) -> { {name=, text=}, ... }:
-- each text a whole program; n scales its loops.
return function(src, n)
  n = n or 1
  local function rd(p)
    local f = assert(io.open(p, "rb"))
    local s = f:read("*a")
    f:close()
    return s
  end
  local w = {}
  -- The issue's: inlined leaf functions calling sin (CALLN) in a loop.
  w[#w + 1] = {name = "leaves", text = string.format([[
local sin = math.sin
local function leafA(x) return sin(x)+sin(x+1)+sin(x+2)+sin(x+3)+sin(x+4)+sin(x+5)+sin(x+6)+sin(x+7) end
local function leafB(x) return sin(x)+sin(x+1) end
local function mid(x) return leafA(x) + leafB(x) end
local function update(n) local s=0 for i=1,n do s = s + mid(i) end return s end
print(update(%d))
]], 200000 * n)}
  -- Pure float helpers: no calls, no guards in their code.
  w[#w + 1] = {name = "floats", text = string.format([[
local function poly(x) return ((x * 0.5 + 1.25) * x - 3.5) * x + 0.125 end
local function ratio(x, y) return (x - y) / (x + y + 1.5) end
local function mix(x) return poly(x) * 0.25 + ratio(x, 2.5) - x / 7.0 end
local function update(n) local s = 0.0 for i = 1, n do local x = i * 0.001 s = s + mix(x) + poly(s * 1e-9) end return s end
print(update(%d))
]], 300000 * n)}
  -- Integer helpers: ADDOV/SUBOV/MULOV guards.
  w[#w + 1] = {name = "ints", text = string.format([[
local band = bit.band
local function h1(a, b) return a * 3 + b - 7 end
local function h2(a) return band(a * 5 + 11, 1023) end
local function update(n) local s = 0 for i = 1, n do s = band(s + h1(i, s) + h2(i), 0xffff) end return s end
print(update(%d))
]], 300000 * n)}
  -- Compiled recursion.
  w[#w + 1] = {name = "recursion", text = string.format([[
local function visit(d) if d == 0 then return math.sin(d) + 1 end return visit(d - 1) + visit(d - 1) * 0.5 end
local s = 0 for i = 1, %d do s = s + visit(8) end print(s)
]], 800 * n)}
  -- A C helper called from trace code: string.format("%%q") in a loop.
  w[#w + 1] = {name = "format_q", text = string.format([[
local fmt = string.format
local function quote(s) return fmt("%%q", s) end
local function update(n) local t = 0 for i = 1, n do t = t + #quote("a\"b" .. (i %% 10)) end return t end
print(update(%d))
]], 100000 * n)}
  -- string.format("%%q") beside inlined sin calls (CALLN through lea
  -- [r14 + d], every one with the same d): the calls through DISPATCH
  -- were named after the CALLL's function and two of four spans not
  -- aligned (issue 26's integration).
  w[#w + 1] = {name = "format_q_sin", text = string.format([[
local sin, n = math.sin, %d
local fmt = string.format
local strs = {}
for i = 1, 16 do strs[i] = string.rep("ab\"c\n", 8) .. i end
local function fmtq(s) return fmt("%%q", s) end
local function work(x) return sin(x) + sin(x + 1) + sin(x + 2) end
local function loop(n)
  local len = 0
  for i = 1, n do
    len = len + #fmtq(strs[i %% 16 + 1]) + work(i) + sin(i + 3)
  end
  return len
end
local s = 0 for r = 1, 3 do s = s + loop(n) end print(s)
]], 20000 * n)}
  -- FFI: a struct allocated in the loop and sunk (no code, no GC step:
  -- LOOP then holds no GC check), int64 cdata arithmetic (% calls
  -- lj_carith_modi64, MOD's helper; the boxed result sunk), C calls
  -- through ffi.C (CALLXS).
  w[#w + 1] = {name = "ffi", text = string.format([[
local ffi = require("ffi")
ffi.cdef("typedef struct { double x, y; int n; } mcm_pt; int abs(int); size_t strlen(const char *);")
local C = ffi.C
local arr = ffi.new("double[?]", 1024)
local acc, a64 = 0, ffi.new("int64_t", 1)
for i = 1, %d do
  local p = ffi.new("mcm_pt", i, i * 0.5, i %% 7)
  arr[i %% 1024] = p.x * p.y + p.n
  acc = acc + arr[(i * 7) %% 1024] + C.abs(-i %% 1000) + tonumber(C.strlen("hello"))
  a64 = a64 * 3 + i
  a64 = a64 %% 1000003
end
print(acc, tonumber(a64))
]], 100000 * n)}
  -- String functions whose calls the assembler dropped: string.format
  -- with a %%s of a boolean stitches the trace there, its format calls
  -- (CALLL, weak guards) left in the IR without code; string.upper's
  -- CALLL is dead once its BUFSTR is folded into a later one.
  w[#w + 1] = {name = "strings_dead", text = string.format([[
local fmt, up, low, rev, find, match, sub = string.format, string.upper, string.lower, string.reverse, string.find, string.match, string.sub
local acc, parts = 0, {}
for i = 1, %d do
  local s = fmt("%%5.2f|%%-6s|%%c|%%g|%%o|%%X|%%s", i / 7, "ab", 65 + i %% 26, i * 0.5, i, i, true)
  local u = up(sub(s, 1, 8)) .. low("ABC") .. rev("xyz") .. i .. "/" .. i * 0.25
  acc = acc + #u + (find(s, "|", 1, true) or 0) + #tostring(i * 0.1)
  parts[#parts + 1] = u
  if #parts > 100 then acc = acc + #table.concat(parts) parts = {} end
  local m = match(u, "%%d+")
  acc = acc + (m and #m or 0)
end
print(acc)
]], 50000 * n)}
  -- One long snapshot span: 55 float statements with no guard in a loop
  -- (430 refs, 433 anchors: 186k DP cells, over the 2^17 a span had).
  do
    local L = {"local a, b, c, d = 1.5, 2.5, 3.5, 4.5", "for i = 1, " .. 20000 * n .. " do"}
    for k = 1, 55 do
      L[#L + 1] = string.format("  a = a * 0.999 + b * 0.001 - c * 0.0005 + %d.25", k % 7)
      local v = ({"b", "c", "d"})[k % 3 + 1]
      L[#L + 1] = string.format("  %s = %s * 0.5 + a * 0.25", v, v)
    end
    L[#L + 1] = "end print(a + b + c + d)"
    w[#w + 1] = {name = "long_span", text = table.concat(L, "\n")}
  end
  -- Methods reading and writing tables (bench/lib/methods.lua).
  w[#w + 1] = {name = "methods", text = "local sin = math.sin\n" ..
    rd(src .. "/bench/lib/methods.lua") .. string.format("\nprint(step(%d))\n", 100000 * n)}
  return w
end
