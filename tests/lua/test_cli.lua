-- The ljprof command (build/ljprof, jit/prof/cli.lua) and the raw profile:
-- outputs by file name, the closing "Samples:" line, the script's exit
-- status kept, profiles written on os.exit and on errors, --duration,
-- `ljprof report` re-rendering a saved raw profile, and one-line errors for
-- bad options and foreign or truncated files.
local t = require("t")

local BUILD = os.getenv("LJPROF_BUILD") or "build"
local LJPROF = BUILD .. "/ljprof"

local read = t.read

local write = t.write

-- Run a shell command; returns its exit status, stdout and stderr.
local function sh(cmd)
  local out, err = os.tmpname(), os.tmpname()
  local status = os.execute(cmd .. " >" .. out .. " 2>" .. err)
  local code = status >= 256 and math.floor(status / 256) or status
  local o, e = read(out) or "", read(err) or ""
  os.remove(out)
  os.remove(err)
  return code, o, e
end

local dir = os.tmpname()
os.remove(dir)
os.execute("mkdir -p " .. dir)

local script = dir .. "/app.lua"
write(script, [[
local function busy(n) local s = 0 for i = 1, n do s = s + i % 7 end return s end
jit.off(busy)
local function spin(sec) local t0 = os.clock() while os.clock() - t0 < sec do busy(1000) end end
local mode, secs = ...
spin(tonumber(secs) or 0.4)
if mode == "exit3" then os.exit(3) end
if mode == "error" then error("boom") end
]])

t.case("outputs by name, Samples line, the script's exit status", function()
  local raw, folded = dir .. "/a.ljprof", dir .. "/a.folded"
  local code, _, err = sh(string.format("%s -c wall -r 1000 -o %s -o %s %s exit3",
                                        LJPROF, raw, folded, script))
  t.eq(code, 3, "exit status of the script")
  local n, dropped = err:match("Samples: (%d+) %(dropped (%d+)%) %-> ")
  t.ok(n and tonumber(n) >= 100, "Samples line: " .. err)
  t.ok(err:find(raw, 1, true) and err:find(folded, 1, true), "names both outputs")
  local f = read(folded) or ""
  t.ok(f:find("busy %d+\n") ~= nil, "folded stacks end in busy:\n" .. f:sub(1, 300))
  t.ok((read(raw) or ""):sub(1, 10) == "LJPROF-RAW", "raw profile written")
end)

t.case("an error in the script: profile written, status 1", function()
  local raw = dir .. "/e.ljprof"
  local code, _, err = sh(string.format("%s -c wall -r 1000 -o %s %s error 0.2",
                                        LJPROF, raw, script))
  t.eq(code, 1, "luajit's status for an uncaught error")
  t.ok(err:find("boom", 1, true) ~= nil, "the script's error is shown")
  t.ok(err:find("Samples: %d+") ~= nil, "Samples line: " .. err)
end)

t.case("--duration samples only the first seconds", function()
  local raw = dir .. "/d.ljprof"
  local code, _, err = sh(string.format("%s -c wall -r 1000 -d 0.15 -o %s %s ok 0.8",
                                        LJPROF, raw, script))
  t.eq(code, 0, "exit status")
  local n = tonumber(err:match("Samples: (%d+)") or "0")
  t.ok(n >= 40 and n <= 350, "about 150 samples, not 800: " .. n)
end)

t.case("report re-renders a raw profile; bad files give one line", function()
  local raw = dir .. "/r.ljprof"
  sh(string.format("%s -c wall -r 1000 -o %s %s ok 0.3", LJPROF, raw, script))
  local code, out = sh(string.format("%s report %s -v F", LJPROF, raw))
  t.eq(code, 0, "report exit status")
  t.ok(out:find("^%s?%d+%%  app%.lua:busy") ~= nil, "text report, F view:\n" .. out)
  local folded = dir .. "/r.folded"
  code = sh(string.format("%s report %s -o %s", LJPROF, raw, folded))
  t.eq(code, 0, "report to a file")
  t.ok((read(folded) or ""):find("busy %d+\n") ~= nil, "folded from the raw profile")
  -- truncated and foreign files
  local data = read(raw)
  write(dir .. "/cut.ljprof", data:sub(1, math.floor(#data / 2)))
  local c2, _, e2 = sh(string.format("%s report %s/cut.ljprof", LJPROF, dir))
  t.eq(c2, 2, "truncated: exit 2")
  t.ok(e2:find("truncated", 1, true) and select(2, e2:gsub("\n", "")) == 1,
       "truncated: one line: " .. e2)
  local c3, _, e3 = sh(string.format("%s report %s", LJPROF, script))
  t.eq(c3, 2, "foreign: exit 2")
  t.ok(e3:find("not an ljprof raw profile", 1, true) ~= nil, "foreign: " .. e3)
end)

t.case("bad options: one line naming the input and what is accepted", function()
  local cases = {
    {"-r zero", "bad rate 'zero'"},
    {"-c sundial", "bad clock 'sundial' (accepted: cpu, wall, itimer, thread)"},
    {"-f png", "bad format 'png'"},
    {"--frobnicate", "unknown option '--frobnicate'"},
  }
  for _, c in ipairs(cases) do
    local code, _, err = sh(LJPROF .. " " .. c[1] .. " " .. script)
    t.eq(code, 2, c[1] .. ": exit 2")
    t.ok(err:find(c[2], 1, true) and select(2, err:gsub("\n", "")) == 1,
         c[1] .. ": " .. err)
  end
end)

os.execute("rm -rf " .. dir)
t.done()
