-- The ljprof command (build/ljprof, jit/prof/cli.lua) and the raw profile:
-- outputs by file name, the closing "Samples:" line, the script's exit
-- status kept, profiles written on os.exit and on errors, --duration,
-- `ljprof report` re-rendering a saved raw profile, the text report's "Hot
-- but interpreted" section (also through a raw profile), --version, and
-- one-line errors for bad options and foreign or truncated files.
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

t.case("no samples: nothing written, one line, a failing status", function()
  -- A missing script and one too short for a sample (before: an empty
  -- nofile.svg was written)
  local quick = dir .. "/quick.lua"
  write(quick, "local x = 1\n")
  for _, c in ipairs({{dir .. "/nofile.lua", "nofile", "(exit status 1)"},
                      {quick, "quick", "(a longer run, or a higher --rate)"}}) do
    local code, _, err = sh("cd " .. dir .. " && " .. LJPROF .. " -r 1 " .. c[1])
    t.ok(code ~= 0, c[2] .. ": status " .. code)
    t.ok(err:find("ljprof: no samples from " .. c[1], 1, true) and
         err:find(c[3], 1, true) and err:find("nothing written", 1, true), c[2] .. ": " .. err)
    t.eq(read(dir .. "/" .. c[2] .. ".svg"), nil, c[2] .. ": no flame graph")
  end
end)

t.case("a script killed while writing its raw profile leaves no file in /tmp", function()
  -- What kill -9 (or the OOM killer) during the child's write leaves: its
  -- temporary file "<raw>.tmp.<pid>.<n>" beside the command's raw file
  -- (from os.tmpname(), in /tmp). The script makes exactly that file and
  -- kills itself. Before: the command removed its raw file only, and the
  -- temporary stayed in /tmp for good.
  local killer = dir .. "/killed.lua"
  write(killer, [==[
local ffi = require("ffi")
ffi.cdef("int getpid(void); int kill(int, int);")
local s = 0 for i = 1, 3e6 do s = s + i % 7 end
local rawpath = arg[-1]:match(",([^,]+)$")
local f = assert(io.open(rawpath .. ".tmp." .. ffi.C.getpid() .. ".0", "w"))
f:write("LJPROF-RAW 3\nmeta\tclock\twall\n")  -- half written
f:close()
print(rawpath)
io.stdout:flush()
ffi.C.kill(ffi.C.getpid(), 9)
]==])
  local code, out = sh(string.format("%s -c wall -r 1000 -o %s %s", LJPROF, dir .. "/k.svg", killer))
  t.eq(code, 128 + 9, "status of a script killed by SIGKILL")
  local rawpath = out:match("^(%S+)")
  t.ok(rawpath and rawpath:find("/", 1, true), "the script saw its raw output path: " .. out)
  if rawpath then
    local left = io.popen("ls -d " .. t.q(rawpath) .. "* 2>/dev/null"):read("*a")
    t.eq(left, "", "files left of the raw profile")
    os.execute("rm -f " .. t.q(rawpath) .. " " .. t.q(rawpath) .. ".tmp.*")
  end
end)

t.case("--key=value as well as --key value", function()
  local out = dir .. "/eq.folded"
  os.remove(out)
  local code, _, err = sh(LJPROF .. " --rate=200 --clock=cpu --output=" .. out .. " " .. script)
  t.eq(code, 0, "status: " .. err)
  t.ok((read(out) or ""):find("busy %d+\n"), "--output= and --rate= taken: " .. (read(out) or ""))
  os.remove(out)
  code, _, err = sh(LJPROF .. " --zones=yes " .. script)
  t.eq(code, 2, "a flag with a value")
  t.ok(err:find("ljprof: option --zones takes no value ('--zones=yes' given)", 1, true), err)
  code, _, err = sh(LJPROF .. " --rate=fast " .. script)
  t.ok(code == 2 and err:find("bad rate 'fast'", 1, true), "a bad value: " .. err)
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

-- The section's heading at the start of a line.
local function has_section(s) return ("\n" .. s):find("\nHot but interpreted %(") ~= nil end

t.case("text report: Hot but interpreted, also from a raw profile", function()
  local txt, rawf = dir .. "/h.txt", dir .. "/h.ljprof"
  local code, _, err = sh(string.format("%s -c wall -r 1000 -o %s -o %s %s ok 0.4",
                                        LJPROF, txt, rawf, script))
  t.eq(code, 0, "exit status: " .. err)
  local s = read(txt) or ""
  t.ok(has_section(s), "the command's text report has the section:\n" .. s)
  t.ok(s:find("\n%s?%d+%%  app%.lua:1  no trace aborts reported") ~= nil,
       "busy (jit.off) is listed:\n" .. s)
  t.eq((read(rawf) or ""):match("^[^\n]*"), "LJPROF-RAW 3", "raw profile version")
  local c2, rep = sh(string.format("%s report %s", LJPROF, rawf))
  t.eq(c2, 0, "report exit status")
  t.eq(rep, s, "ljprof report: the same text report, section included")
  local _, rr = sh(string.format("%s report %s -v r", LJPROF, rawf))
  t.ok(rr:find("busy", 1, true) and not has_section(rr), "not with r:\n" .. rr)
  -- "-" is standard output
  local c3, out = sh(string.format("%s report %s -o -", LJPROF, rawf))
  t.eq(c3, 0, "-o -: exit status")
  t.eq(out, s, "-o -: the text report on standard output")
end)

t.case("raw profile: functions and aborts round-trip; older versions load", function()
  local raw, output = require("jit.prof.raw"), require("jit.prof.output")
  local p = {frames = {{id = 1, lua = true, file = "/x/a.lua", line = 3, linedefined = 1}},
             samples = {{stack = {1}, vmstate = "I", zone = "", count = 90},
                        {stack = {1}, vmstate = "N", zone = "", count = 10}}, total = 100,
             functions = {{func = "a.lua:1", total = 100, I = 90, N = 10}},
             aborts = {{func = "a.lua:1", line = 2, at = "a.lua:3", code = 7, count = 4,
                        reason = "NYI: FastFunc\tstring.dump", info = "string.dump"}}}
  local data = raw.render(p, {clock = "wall", interval_us = 10000})
  t.eq(data:match("^[^\n]*"), "LJPROF-RAW 3", "written as version 3")
  local q, err = raw.parse(data, "x")
  t.ok(q, "parsed: " .. tostring(err))
  if not q then return end
  t.ok(q.calls == nil, "no call counts")
  t.same_keys(q.functions[1], p.functions[1], "function record")
  t.same_keys(q.aborts[1], p.aborts[1], "abort record")
  local s = output.text(q, {}, "f")
  t.ok(s:find("\nHot but interpreted %(") and
       s:find("\n90%%  a%.lua:1  4x NYI: FastFunc\tstring%.dump %(trace at line 2, aborted at a%.lua:3%)\n"),
       "the section from the parsed profile:\n" .. s)
  t.eq(s, output.text(p, {}, "f"), "the same text as before the round trip")
  local cut = data:gsub("abort\t[^\n]*\n", "")
  local c, cerr = raw.parse(cut, "cut")
  t.ok(not c and cerr:find("truncated", 1, true), "a missing abort record: " .. tostring(cerr))
  -- versions 1 and 2: no section, still a report
  local v2 = "LJPROF-RAW 2\nmeta\tclock\twall\nmeta\tinterval_us\t10000\nframe\t1\tL\t/x.lua\t3\t1\t-\nsample\t5\tI\t\t1\nend\t1\t1\t0\n"
  local p2, err2 = raw.parse(v2, "v2")
  t.ok(p2 and p2.calls and #p2.calls == 0 and p2.functions == nil, "version 2 loads: " .. tostring(err2))
  if p2 then
    local s2 = output.text(p2, {}, "f")
    t.ok(s2:find("x.lua:1", 1, true) and not has_section(s2), "no section from version 2:\n" .. s2)
  end
end)

t.case("--version and -V print meson's project version", function()
  local mb = read((os.getenv("LJPROF_SRC") or ".") .. "/meson.build") or ""
  local version = mb:match("project%b()"):match("version%s*:%s*'([^']+)'")
  t.ok(version, "meson.build names a version")
  for _, opt in ipairs({"--version", "-V"}) do
    local code, out, err = sh(LJPROF .. " " .. opt)
    t.eq(code, 0, opt .. ": exit status " .. err)
    t.eq(out, "ljprof " .. tostring(version) .. "\n", opt)
  end
end)

t.case("bad options: one line naming the input and what is accepted", function()
  local cases = {
    {"-r zero", "bad rate 'zero'"},
    {"-c sundial", "bad clock 'sundial' (accepted: cpu, wall, itimer, thread)"},
    {"-f png", "bad format 'png'"},
    {"--frobnicate", "unknown option '--frobnicate'"},
    {"-v q", "bad option 'q' in 'q'"},
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
