-- Time spent in C: a Debian C module (lua-cjson, if installed) and a C
-- library called through the FFI (zlib). Profile it with
--   luajit -jprof=G examples/native.lua      (folded stacks, C frames on top)
--   build/ljprof -o native.svg examples/native.lua
local ffi = require("ffi")
ffi.cdef[[
unsigned long compressBound(unsigned long len);
int compress2(uint8_t *dst, unsigned long *dstlen, const uint8_t *src,
              unsigned long srclen, int level);
]]
local okz, zlib = pcall(ffi.load, "z")  -- libz.so (zlib1g-dev), else the runtime's
if not okz then okz, zlib = pcall(ffi.load, "libz.so.1") end
local okj, cjson = pcall(require, "cjson")

local function make_records(n)
  local t = {}
  for i = 1, n do
    t[i] = {id = i, name = "entity" .. i, pos = {x = i * 0.5, y = i * 0.25},
            tags = {"a", "b", "c"}}
  end
  return t
end

local function encode(records)
  return cjson.encode(records)
end

local function compress(s)
  local bound = zlib.compressBound(#s)
  local out = ffi.new("uint8_t[?]", bound)
  local len = ffi.new("unsigned long[1]", bound)
  assert(zlib.compress2(out, len, s, #s, 9) == 0)
  return tonumber(len[0])
end

local function serialize(records)
  local s = okj and encode(records) or tostring(#records)
  return okz and compress(s) or #s
end

local records = make_records(5000)
local total = 0
for _ = 1, 40 do total = total + serialize(records) end
print("bytes written", total, okj and "" or "(no lua-cjson)", okz and "" or "(no zlib)")
