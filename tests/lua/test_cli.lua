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
if mode == "jit" then print("jit " .. tostring(jit.status())) end
if mode == "say" then print("finished") end
if mode == "say3" then print("finished") os.exit(3) end
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

t.case("ulimit -n 10: the launcher runs (dash failed: 0: 3: Invalid argument)", function()
  local svg = dir .. "/ulimit.svg"
  local code, out, err = sh(string.format("(ulimit -n 10 && exec %s -c wall -r 1000 -o %s %s say 0.2)",
    LJPROF, svg, script))
  t.eq(code, 0, "exit status under ulimit -n 10: " .. err)
  t.ok(out:find("finished", 1, true) ~= nil, "the script ran: " .. out .. err)
  t.ok((read(svg) or ""):find("<svg", 1, true) ~= nil, "the flame graph is written: " .. err)
end)

t.case("raw profile: an empty stack is (no stack), control characters in names cleaned", function()
  local rawf = dir .. "/odd.ljprof"
  write(rawf, "LJPROF-RAW 1\nmeta\tinterval_us\t1000\nframe\t1\tC\tx\\ry;z\\nw\1q\tnative\n" ..
    "frame\t2\tL\t/s/a\\rb.lua\t3\t1\tf\\rg\nsample\t123\tI\t\t\nsample\t5\tC\t\t2,1\nend\t2\t2\n")
  local code, out, err = sh(LJPROF .. " report -v G " .. rawf)
  t.eq(code, 0, "report -v G: " .. err)
  t.eq(out, "(no stack) 123\nf g;x y,z w q 5\n", "report -v G: no empty key, one line per stack")
  code, out, err = sh(LJPROF .. " report -f folded " .. rawf)
  t.eq(code, 0, "report -f folded: " .. err)
  t.eq(out, "(no stack) 123\nf g;x y,z w q 5\n", "report -f folded: the same lines")
  code, out, err = sh(LJPROF .. " report -v f " .. rawf)
  t.ok(out:find("\n?96%%  %(no stack%)\n") ~= nil, "report -v f: (no stack) named:\n" .. out)
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
  -- another of ljprof's outputs given to report (issue 27): what it is,
  -- and what report reads, in one line
  local pb = dir .. "/r.pb.gz"
  t.eq(sh(string.format("%s report %s -o %s", LJPROF, raw, pb)), 0, "a pprof file made")
  local c4, _, e4 = sh(string.format("%s report %s", LJPROF, pb))
  t.eq(c4, 2, "pprof given to report: exit 2")
  t.eq(e4, "ljprof: " .. pb .. ": a gzip file (pprof's .pb.gz, for go tool pprof), not a raw profile: " ..
       "report reads ljprof's raw profiles (.ljprof, written by -o app.ljprof or /format=raw)\n",
       "pprof given to report: one line")
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
  -- (the function by its name, as in the view above: issue 27)
  t.ok(s:find("\n%s?%d+%%  app%.lua:busy  %(why its traces aborted: run with /aborts=on%)") ~= nil,
       "busy (jit.off) is listed, aborts not recorded:\n" .. s)
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
  -- --aborts: a trace-event handler records why traces aborted
  code, _, err = sh(string.format("%s --aborts -c wall -r 1000 -o %s %s ok 0.4",
                                  LJPROF, txt, script))
  t.eq(code, 0, "--aborts: exit status: " .. err)
  s = read(txt) or ""
  t.ok(s:find("\n%s?%d+%%  app%.lua:busy  no trace aborts reported") ~= nil,
       "--aborts: busy (jit.off) is listed without aborts:\n" .. s)
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
  local VIEW = "-jp's view letters f F l s p v z r a A G <n> -<n> m<n> (depth up to 100000); " ..
               "-jprof's also take i<n>, the interval"
  local cases = {
    {"-r zero", "bad rate 'zero' (accepted: 0.017 to 100000 samples per second)"},
    {"-c sundial", "bad clock 'sundial' (accepted: cpu, wall, itimer, thread)"},
    {"-f png", "ljprof: bad format 'png' (accepted: text, folded, speedscope, pprof, svg, raw)\n"},
    {"--frobnicate", "unknown option '--frobnicate'"},
    {"-v q", "ljprof: bad view 'q' (letter 'q' unknown; accepted: " .. VIEW .. ")\n"},
    -- the interval is --rate: -v's letters refused it (it was ignored)
    {"-v fi5", "ljprof: bad view 'fi5' (letter 'i': the interval is a key of its own here; " ..
               "accepted: " .. VIEW .. ")\n"},
    {"-d -1", "ljprof: bad duration '-1' (accepted: 0.000001 to 1e9 seconds)\n"},
    -- checked here, not by the child (it was two lines and status 1)
    {"-d 2e9", "ljprof: bad duration '2e9' (accepted: 0.000001 to 1e9 seconds)\n"},
    {"--inline all", "ljprof: bad inline 'all' (accepted: recorded, snapshots, exact, off)\n"},
  }
  for _, c in ipairs(cases) do
    local code, _, err = sh(LJPROF .. " " .. c[1] .. " " .. script)
    t.eq(code, 2, c[1] .. ": exit 2")
    t.ok(err:find(c[2], 1, true) and select(2, err:gsub("\n", "")) == 1,
         c[1] .. ": " .. err)
  end
end)

t.case("record -- luajit with its own flags; --luajit; what is not luajit", function()
  -- The interpreter's flags stay (-joff: jit.status() is false).
  local out = dir .. "/rec.folded"
  local code, o, err = sh(string.format("%s record -o %s -- %s -joff %s jit 0.3", LJPROF, out,
                                        t.q(t.LUAJIT), script))
  t.eq(code, 0, "record -- luajit: status: " .. err)
  t.eq(o, "jit false\n", "-joff reached luajit")
  t.ok((read(out) or ""):find("busy %d+\n"), "profile written: " .. err)
  t.ok(err:find("Samples: %d+ %(dropped %d+%) %-> " .. out), "Samples line: " .. err)
  -- Default output name from the script, not the interpreter.
  code, o, err = sh(string.format("cd %s && %s record -- %s -e 'x=1' %s jit 0.3", dir, LJPROF,
                                  t.q(t.LUAJIT), script))
  t.eq(code, 0, "default output: " .. err)
  t.ok(err:find("-> app.svg", 1, true) and read(dir .. "/app.svg"), "app.svg: " .. err)
  os.remove(dir .. "/app.svg")
  -- A .lua command runs under luajit; "record" without -- is the short form.
  for _, c in ipairs({"record -o %s -- %s ok 0.3", "record -o %s %s ok 0.3"}) do
    os.remove(out)
    code, o, err = sh(LJPROF .. " " .. string.format(c, out, script))
    t.eq(code, 0, c .. ": " .. err)
    t.ok((read(out) or ""):find("busy %d+\n"), c .. ": profile written")
  end
  -- --luajit PATH: the short form's interpreter.
  local fake = dir .. "/myluajit"
  write(fake, "#!/bin/sh\necho used >" .. t.q(dir .. "/used") .. "\nexec " .. t.q(t.LUAJIT) .. " \"$@\"\n")
  os.execute("chmod +x " .. t.q(fake))
  code, o, err = sh(string.format("%s --luajit %s -o %s %s jit 0.3", LJPROF, fake, out, script))
  t.eq(code, 0, "--luajit: " .. err)
  t.eq(read(dir .. "/used"), "used\n", "--luajit: that interpreter ran")
  code, _, err = sh(string.format("%s --luajit=%s -o %s -- %s ok", LJPROF, fake, out, t.q(t.LUAJIT)))
  t.ok(code == 2 and err:find("--luajit is for the short form", 1, true), "--luajit with --: " .. err)
  -- Not luajit: one line, status 2, nothing run.
  code, o, err = sh(LJPROF .. " record -- sh -c 'echo ran'")
  t.eq(code, 2, "sh: status")
  t.eq(o, "", "sh: nothing ran")
  t.ok(err:find("^ljprof: 'sh' is not luajit: ") and select(2, err:gsub("\n", "")) == 1, "sh: " .. err)
  -- it says how such a program is profiled: LJPROF and LD_PRELOAD of
  -- this library (issue 27), not "require ljprof in the host"
  t.ok(err:find("LJPROF=output=prof-%p.pb.gz LD_PRELOAD=", 1, true) and err:find("libljprof.so sh ", 1, true) and
       not err:find("for now", 1, true), "sh: points at LJPROF and LD_PRELOAD: " .. err)
  code, _, err = sh(LJPROF .. " record -- luajit-nonexistent x.lua")
  t.ok(code == 2 and err == "ljprof: cannot run luajit-nonexistent: No such file or directory\n",
       "a missing interpreter: " .. code .. " " .. err)
  code, _, err = sh(LJPROF .. " record --")
  t.ok(code == 2 and err:find("nothing to run after --", 1, true), "nothing after --: " .. err)
end)

-- The progress line: only on a terminal (script(1) gives a pty), redrawn
-- in place ("\r\27[K"), cleared before the Samples line; off with -q and
-- when standard error is not a terminal. The script's output and status
-- are its own.
t.case("progress line on a terminal: samples so far, seconds; -q and pipes: none", function()
  if not t.ok(os.execute("command -v script >/dev/null 2>&1") == 0,
              "script (util-linux) is needed for a pty") then return end
  local out = dir .. "/pg.folded"
  local function pty(opts)
    local log = dir .. "/pty.log"
    local code, s = sh(string.format("script -qec %s /dev/null </dev/null",
      t.q(string.format("%s %s -c cpu -o %s %s say3 2.5", LJPROF, opts, out, script))))
    return code, s
  end
  local code, s = pty("")
  t.eq(code, 3, "the script's status through the pty")
  t.ok(s:find("finished\r\n", 1, true), "the script's output: " .. s)
  local lines, last = {}, 0
  for n, sec in s:gmatch("\r\27%[Kljprof: (%d+) samples, (%d+) s") do
    lines[#lines + 1] = {tonumber(n), tonumber(sec)}
  end
  t.ok(#lines >= 1, "progress lines drawn: " .. s:gsub("\27", "ESC"))
  for i, l in ipairs(lines) do
    t.ok(l[1] >= last, "samples never go down: " .. l[1])
    last = l[1]
    if i > 1 then t.ok(l[2] >= lines[i - 1][2], "seconds never go down") end
  end
  t.ok(last > 0, "samples counted so far: " .. last)
  t.ok(s:find("\r\27%[KSamples: %d+ %(dropped %d+%) %-> ") ~= nil, "cleared before the Samples line")
  t.ok(not s:find("Samples:.*\27%["), "nothing drawn after the Samples line")
  code, s = pty("-q")
  t.eq(code, 3, "-q: status")
  t.ok(s:find("finished", 1, true) and s:find("Samples: ", 1, true), "-q: output and Samples line")
  t.ok(not s:find("\27", 1, true) and not s:find("ljprof: %d"), "-q: no progress line: " .. s)
  local c2, o2, e2 = sh(string.format("%s -o %s %s say 1.5", LJPROF, out, script))
  t.eq(c2, 0, "pipe: status")
  t.eq(o2, "finished\n", "pipe: the script's output")
  t.ok(not e2:find("\27", 1, true) and not e2:find("\r", 1, true), "pipe: no progress line: " .. e2)
end)

t.case("help: the command's and report's; bare report: one line and a hint", function()
  local code, out = sh(LJPROF .. " --help")
  t.eq(code, 0, "--help status")
  t.ok(out:find("ljprof record [options] -- luajit", 1, true) and out:find("--luajit PATH", 1, true)
       and out:find("-q, --quiet", 1, true), "--help names record, --luajit, --quiet:\n" .. out)
  code, out = sh(LJPROF .. " report --help")
  t.eq(code, 0, "report --help status")
  t.ok(out:find("^usage: ljprof report RAW%.ljprof") and out:find("-o FILE", 1, true) and
       out:find("speedscope", 1, true) and not out:find("--rate", 1, true),
       "report's own usage:\n" .. out)
  local e
  code, out, e = sh(LJPROF .. " report")
  t.eq(code, 2, "bare report: status")
  t.eq(out, "", "bare report: nothing on standard output")
  t.ok(e:find("^ljprof: report needs a raw profile file\n") and e:find("ljprof report --help", 1, true)
       and select(2, e:gsub("\n", "")) == 2, "bare report: an error line and a hint:\n" .. e)
end)

os.execute("rm -rf " .. dir)
t.done()
