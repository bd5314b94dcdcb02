-- Real programs, profiled the hard way: every clock, 10 kHz, native frames,
-- call counting, every output format. Each program runs once unprofiled
-- and then several times under `luajit -jprof=...`; a profiled run must
-- end with the same exit status and the same standard output, print no
-- ljprof error, finish (no hang: a hard timeout) and leave a non-empty
-- profile (a raw one must read back). The counts are printed:
--   runs, crashes, hangs, changed outputs, lost profiles.
--
-- The programs are third-party code where installed (luacheck over its own
-- sources: it ends with os.exit; cjson behind a wrapper) and programs of
-- the kinds users run: a compiled driver loop calling libm through the FFI
-- and math.sin, allocation in compiled loops, a C module behind a small Lua
-- wrapper, coroutines with errors and finalizers, an uncaught error and
-- os.exit with a status. CI runs a few configurations per program;
-- LJPROF_STRESS_RUNS=N runs N per program (e.g. 25 for ~250 runs).
local t = require "t"

local LUAJIT, SRC, ENV = t.LUAJIT, t.SRC, t.CHILD_ENV
local PER_PROGRAM = tonumber(os.getenv("LJPROF_STRESS_RUNS") or "") or 3
local TIMEOUT = 120  -- seconds; a run that takes longer is a hang

local function sh_quote(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

local dir = os.tmpname()
os.remove(dir)
assert(os.execute("mkdir -p " .. sh_quote(dir)) == 0)

local function write(name, body)
  local path = dir .. "/" .. name
  local f = assert(io.open(path, "w"))
  f:write(body)
  f:close()
  return path
end

local function have_module(name)
  return package.searchpath(name, package.path) ~= nil or
         package.searchpath(name, package.cpath) ~= nil
end

-- -- The programs -------------------------------------------------------------

local programs = {}
local function program(name, script, args)
  programs[#programs + 1] = {name = name, script = script, args = args or ""}
end

program("compiled driver calling libm", write("libm_driver.lua", [[
local ffi = require("ffi")
ffi.cdef("double sin(double); double cos(double); double exp(double);")
local C = ffi.C
local function physics(n)
  local s = 0
  for i = 1, n do s = s + C.sin(i * 1e-3) * C.cos(i * 2e-3) + math.sin(i) end
  return s
end
local acc = 0
for frame = 1, 300 do acc = acc + physics(20000) + C.exp(-frame) end
print(string.format("%.6f", acc))
]]))

program("allocation in compiled loops", write("alloc.lua", [[
local function make(n)
  local t = {}
  for i = 1, n do t[i] = {x = i, y = i * 2, name = "e" .. (i % 100)} end
  return t
end
local total = 0
for r = 1, 150 do
  local t = make(5000)
  for i = 1, #t, 7 do total = total + t[i].y + #t[i].name end
  if r % 50 == 0 then collectgarbage() end
end
print(total)
]]))

program("coroutines, errors, finalizers", write("coro.lua", [[
local n, errors, finalized = 0, 0, 0
local mt = {__gc = function() finalized = finalized + 1 end}
local function gen(k)
  return coroutine.wrap(function()
    for i = 1, k do
      setmetatable({}, mt)
      coroutine.yield(i)
    end
  end)
end
for r = 1, 2000 do
  for v in gen(50) do n = n + v end
  local ok = pcall(function() if r % 3 == 0 then error("boom " .. r) end return r end)
  if not ok then errors = errors + 1 end
  table.sort({5, 3, 9, 1, 7, r % 10}, function(a, b) return a > b end)
end
collectgarbage()
collectgarbage()
print(n, errors, finalized > 0)
]]))

program("uncaught error (exit status 1)", write("dies.lua", [[
local function deep(k) if k == 0 then local s = 0 for i = 1, 2e7 do s = s + i % 3 end error("done: " .. s) end return deep(k - 1) + 1 end
print("starting")
deep(20)
]]))

program("os.exit with a status", write("exits.lua", [[
local s = 0
for i = 1, 3e7 do s = s + i % 5 end
print(s)
io.stdout:flush()
os.exit(3)
]]))

if have_module("cjson") then
  program("cjson behind a wrapper, compiled driver", write("cjson_wrap.lua", [[
local cjson = require("cjson")
local function encode(v) return cjson.encode(v) end
local function decode(s) return cjson.decode(s) end
local doc = {}
for i = 1, 200 do doc[i] = {id = i, name = "item" .. i, tags = {"a", "b"}, w = i * 0.5} end
local n = 0
for r = 1, 400 do n = n + #decode(encode(doc)) end
print(n)
]]))
end
program("examples/game_loop.lua", SRC .. "/examples/game_loop.lua")

-- luacheck, a real third-party program (Debian's lua-check), checking its
-- own sources; it reports through os.exit.
local LUACHECK = "/usr/bin/luacheck"
do
  local f = io.open(LUACHECK)
  if f and have_module("luacheck.main") then
    f:close()
    program("luacheck over its own sources", LUACHECK,
            "--no-color --codes --no-cache /usr/share/lua/5.1/luacheck")
  elseif f then
    f:close()
  end
end

-- -- Configurations ---------------------------------------------------------

local CLOCKS = {"wall", "cpu", "itimer", "thread"}
local FORMATS = {"raw", "text", "folded", "speedscope", "pprof", "svg"}
local EXT = {raw = "ljprof", text = "txt", folded = "folded", speedscope = "json",
             pprof = "pb.gz", svg = "svg"}
local VIEWS = {"f", "Fl", "zf", "vf", "G", "-3", "pl"}

-- Configuration k (deterministic): clocks, formats and views rotate; half
-- the runs count calls, a quarter turn native frames off; all at 10 kHz
-- (the cpu and itimer clocks deliver at the kernel tick, weighted).
local function config(k)
  local c = {
    clock = CLOCKS[(k - 1) % #CLOCKS + 1],
    format = FORMATS[(k - 1) % #FORMATS + 1],
    view = VIEWS[(k - 1) % #VIEWS + 1],
    calls = k % 2 == 0,
    native = k % 4 ~= 3,
  }
  c.opts = string.format("%s/clock=%s/rate=10000/format=%s%s%s", c.view, c.clock, c.format,
                         c.calls and "/calls=on" or "", c.native and "" or "/native=off")
  return c
end

-- -- Running ----------------------------------------------------------------

-- Run a command with a hard timeout; returns status (exit code, or 128 +
-- signal as the shell reports it), stdout, stderr.
local function run(cmd)
  local out, err = dir .. "/stdout", dir .. "/stderr"
  local full = string.format("cd %s && timeout -k 5 %d %s > %s 2> %s; echo $?", sh_quote(dir),
                             TIMEOUT, cmd, sh_quote(out), sh_quote(err))
  local p = io.popen(full)
  local status = tonumber(p:read("*a"):match("(%d+)%s*$"))
  p:close()
  local function slurp(path)
    local f = io.open(path, "rb")
    if not f then return "" end
    local s = f:read("*a")
    f:close()
    return s
  end
  return status, slurp(out), slurp(err)
end

local raw = require "jit.prof.raw"

local counts = {runs = 0, crashes = 0, hangs = 0, changed = 0, lost = 0, errors = 0}

local k = 0
for _, prog in ipairs(programs) do
  t.case(prog.name, function()
    local cmd = string.format("%s %s %s", LUAJIT, sh_quote(prog.script), prog.args)
    local base_status, base_out = run(cmd)
    t.ok(base_status ~= 124 and base_status < 128,
         prog.name .. ": unprofiled run ends normally (status " .. tostring(base_status) .. ")")
    for _ = 1, PER_PROGRAM do
      k = k + 1
      local c = config(k)
      local profile = string.format("%s/profile-%d.%s", dir, k, EXT[c.format])
      local status, out, err = run(string.format("env %s%s %s %s %s", ENV, LUAJIT,
        sh_quote("-jprof=" .. c.opts .. "," .. profile), sh_quote(prog.script), prog.args))
      counts.runs = counts.runs + 1
      local what = string.format("%s [-jprof=%s]", prog.name, c.opts)
      if status == 124 or status == 137 then
        counts.hangs = counts.hangs + 1
        t.ok(false, what .. ": hung (killed after " .. TIMEOUT .. " s)")
      elseif status >= 128 and status ~= base_status then
        counts.crashes = counts.crashes + 1
        t.ok(false, what .. ": died of signal " .. (status - 128) .. "\n" .. err)
      elseif status ~= base_status or out ~= base_out then
        counts.changed = counts.changed + 1
        t.ok(false, string.format("%s: status %d (unprofiled %d), stdout %s", what, status,
                                  base_status, out == base_out and "same" or "changed"))
      end
      -- ljprof's own complaints (notices about what a clock can do are fine)
      for line in err:gmatch("[^\n]+") do
        if line:find("ljprof", 1, true) and not line:find("notice", 1, true) then
          counts.errors = counts.errors + 1
          t.ok(false, what .. ": " .. line)
        end
      end
      local f = io.open(profile, "rb")
      local data = f and f:read("*a") or ""
      if f then f:close() end
      if #data == 0 then
        counts.lost = counts.lost + 1
        t.ok(false, what .. ": no profile written")
      elseif c.format == "raw" then
        local ok, p = pcall(raw.read, profile)
        t.ok(ok and p, what .. ": the raw profile reads back: " .. tostring(p))
      end
      os.remove(profile)
    end
  end)
end

print(string.format("%d programs, %d profiled runs: %d crashes, %d hangs, %d changed outputs, "
                    .. "%d lost profiles, %d ljprof error lines",
                    #programs, counts.runs, counts.crashes, counts.hangs, counts.changed,
                    counts.lost, counts.errors))
os.execute("rm -rf " .. sh_quote(dir))
t.done()
