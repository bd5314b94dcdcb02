-- The "methods" workload (vector-style methods that read and write
-- tables, which LuaJIT inlines into step's loop; their own work is calls
-- of sin: add 6, scale 3, norm 1, step 2 per iteration). A fragment: it
-- needs a local `sin` before it, and defines V, ps, vs and step(n). Its
-- text is read by bench/accuracy/inline.lua, tests/lua/test_inline.lua and
-- tests/lua/test_merge_inline.lua, each with its own prologue and driver.
-- luacheck: read globals sin, ignore step, no max line length
local V = {} V.__index = V
function V:add(o) self.x = self.x + sin(o.x) + sin(o.x + 1) + sin(o.x + 2); self.y = self.y + sin(o.y) + sin(o.y + 1) + sin(o.y + 2); return self end
function V:scale(k) self.x = self.x * 0.5 + sin(k); self.y = self.y * 0.5 + sin(k + 1) + sin(k + 2); return self end
function V:norm() local x, y = self.x, self.y; self.n = sin(x * y); return self end
local ps, vs = {}, {}
for i = 1, 64 do ps[i] = setmetatable({x = i, y = i, n = 0}, V) vs[i] = setmetatable({x = i / 3, y = i / 7}, V) end
local function step(n)
  local s = 0
  for i = 1, n do
    local k = i % 64 + 1
    local p = ps[k]
    p:add(vs[k]); p:scale(i); p:norm()
    s = s + sin(i + 0.25) + sin(i + 0.5)
  end
  return s
end
