-- QA repro: cjson.encode called (through a Lua wrapper) from a compiled loop is
-- named by its native symbol in the Lua views: `-jprof=f` prints
-- "97%  cjson.so+0x45d0" (5 of 5 runs); with -joff the same function is
-- "cjson.encode". The folded stacks lose the Lua C-function frame too:
-- "...;enc;cjson.so+0x45d0;cjson.so+0x3e50" instead of "...;enc;cjson.encode;...".
--
--   luajit -jprof=fi1 tests/qa_repros/cjson_native_name.lua
--   luajit -joff -jprof=fi1 tests/qa_repros/cjson_native_name.lua
local cjson = require("cjson")
local function enc(t) local s = cjson.encode(t); return s end
local t = {a = 1, b = {1, 2, 3, "x\"y"}, c = "hello world", d = 3.25}
local acc = 0
for _ = 1, tonumber(arg and arg[1]) or 200000 do acc = acc + #enc(t) end
print(acc)
