----------------------------------------------------------------------------
-- jit.prof.cli: the `ljprof` command.
--
--   ljprof [options] app.lua [args...]
--   ljprof record [options] -- luajit [luajit options] app.lua [args...]
--       Runs the script under luajit with ljprof sampling, then writes the
--       requested outputs and prints "Samples: N (dropped M) -> file".
--       The exit status is the script's. The short form's interpreter is
--       --luajit PATH (default luajit); after --, the command is a luajit
--       (by its name: luajit, luajit-2.1...) whose own flags stay, or a
--       .lua script. Anything else (a C host, a shell script) is refused
--       in one line: -jprof can only be added to a luajit command line.
--   ljprof report RAW [-f FORMAT] [-o FILE] [-v VIEW]
--       Renders a saved raw profile (.ljprof) into any format.
--       ljprof report --help prints its own usage.
--   ljprof report --diff BEFORE AFTER [-o FILE] [-f text|svg]
--       What changed between two sides, each a raw profile, a directory
--       of them or a comma-separated list: a text report (the functions
--       whose share changed beyond the noise, grown most first) or a
--       differential flame graph (.svg: red grew, blue shrank, grey within
--       the noise), shares normalized by each side's total (jit.prof.diff).
--   ljprof --version
--       Prints "ljprof <version>" (meson's project version, which the
--       launcher src/ljprof.in passes in LJPROF_VERSION).
--
-- The script runs in a child luajit (`-jprof=.../format=raw,/dev/fd/N`),
-- which writes a raw profile at exit (normal exit, os.exit, an error,
-- SIGINT, SIGTERM and SIGHUP, which the command passes on to it:
-- ljprof.spawn, src/spawn.c) to an unnamed temporary file it inherits
-- (ljprof.tmpfd: nothing is ever named in /tmp, so nothing is left, even
-- when the command is killed); every output is then rendered here from
-- that raw profile, so `report` and the command share one path. Killed by
-- a signal, the script's status is 128 + the signal's number. On a
-- terminal (standard error), unless -q, a progress line ("ljprof: N
-- samples, S s") is redrawn once a second from the count the child's
-- ljprof writes to a second unnamed file (LJPROF_PROGRESS, jit/prof.lua),
-- and cleared before the Samples line. Choosing formats, rendering and
-- writing files is jit.prof.output's job (the same as for -jprof); this
-- file parses the command line, runs the child and reports. Errors are
-- one line on standard error and exit status 2; an option's value is
-- checked here, before the child runs, by jit.prof.options.value (the
-- same line as -jprof's and LJPROF's for that key). Options: see usage().
----------------------------------------------------------------------------

local model = require("jit.prof.model")
local output = require("jit.prof.output")
local raw = require("jit.prof.raw")
local options = require("jit.prof.options")

local M = {}

local function usage()
  return [[
usage: ljprof [options] app.lua [args...]
       ljprof record [options] -- luajit [luajit options] app.lua [args...]
       ljprof report RAW.ljprof [-f FORMAT] [-o FILE] [-v VIEW]
       ljprof report --diff BEFORE AFTER [-o FILE]
       ljprof --version

The first two run the script under luajit with ljprof sampling (-jprof is
added after the interpreter's name), then write the outputs and print
"Samples: N (dropped M) -> files". The exit status is the script's.
SIGINT, SIGTERM and SIGHUP are passed on to the script, which writes its
profile; a run interrupted by ^C still gets its outputs.

options:
  -o FILE          output file; repeatable. The format comes from the name:
                   .svg flame graph, .speedscope.json, .pb.gz (pprof),
                   .folded, .ljprof (raw profile), .txt or anything else:
                   text report. Default: <app>.svg
  -f, --format F   format (text, folded, speedscope, pprof, svg, raw): with
                   one output, its format whatever the name; with several,
                   that of the names without a known ending (.txt is text)
  -r, --rate HZ    samples per second (default 100)
  -c, --clock C    cpu (default), wall, itimer or thread
  -d, --duration S sample only the first S seconds
  -v, --view V     -jp view letters for text reports and the frame labels
                   of folded stacks (default f)
  -z, --zones      zones as root frames ("[zone AI]") in the stack formats
  -n, --no-native  Lua frames only (no C frames above the Lua caller)
  -N, --show-native  text reports show the C frames above the Lua caller
                   too (by default only the stack formats do)
      --calls      also count every call exactly (JIT off while counting);
                   text outputs end with calls, self/total time and time
                   per call per function and an annotated source listing;
                   without -o that report goes to standard output
      --aborts     also record why traces were aborted, for the text
                   report's "Hot but interpreted" section (a handler on
                   every trace event)
      --inline MODE  frames LuaJIT inlined into traces: recorded
                   (default: the frames each instruction was recorded in,
                   from a handler on the recorder's first 500,000
                   bytecodes; compiled code unchanged), snapshots (the
                   traces' snapshots only, no handler), exact (LuaJIT's
                   profiling mode, as -jp's: exact per function, compiled
                   code changed) or off
      --private    output files 0600 (owner only) instead of 0644
      --luajit PATH  the interpreter of the short form (default: luajit on
                   PATH); after --, the command names its own
  -q, --quiet      no progress line (samples so far and seconds, shown on
                   standard error once a second when it is a terminal)
  -V, --version    print "ljprof <version>"
  -h, --help       this text (ljprof report --help: report's)
Long options take their value as "--rate 1000" or "--rate=1000".
]]
end

local function report_usage()
  return [[
usage: ljprof report RAW.ljprof [-f FORMAT] [-o FILE]... [-v VIEW] [-z] [-N]
       ljprof report --diff BEFORE AFTER [-f text|svg] [-o FILE]...

Renders a raw profile saved by "ljprof -o app.ljprof" or
"luajit -jprof=...,app.ljprof" into any format, without running the
script again. Without -o, the report goes to standard output (the text
report unless -f says otherwise).

With --diff, compares two sides of one program, each a raw profile, a
directory of them (*.ljprof) or a comma-separated list; give several
runs per side (e.g. 5). The text report lists the functions whose self
or total share changed beyond the noise (the spread between a side's
profiles, at least sampling noise; 5% family-wise), grown most first,
with the threshold ("noise") of each; an .svg output is a differential
flame graph (widths from AFTER; red grew, blue shrank, grey within the
noise). Shares are normalized by each side's total samples, so runs of
different lengths compare.

options:
  -o FILE          output file; repeatable. The format comes from the name:
                   .svg flame graph, .speedscope.json, .pb.gz (pprof),
                   .folded, .ljprof (raw profile), .txt or anything else:
                   text report; "-" is standard output
  -f, --format F   format (text, folded, speedscope, pprof, svg, raw): with
                   one output, its format whatever the name; with several,
                   that of the names without a known ending (.txt is text)
  -v, --view V     -jp view letters for text reports and the frame labels
                   of folded stacks (default f)
  -z, --zones      zones as root frames ("[zone AI]") in the stack formats
  -N, --show-native  text reports show the C frames above the Lua caller
      --diff       compare two sides (text or svg outputs only)
      --private    output files 0600 (owner only) instead of 0644
  -h, --help       this text
Long options take their value as "--format pprof" or "--format=pprof".
]]
end

local function fail(msg)
  io.stderr:write("ljprof: ", msg, "\n")
  os.exit(2)
end

-- Render p into each output (jit.prof.output); a failure ends the command
-- with one line.
local function write_outputs(p, meta, outputs, o)
  local opts = {view = o.view or "f", zones = o.zones, native = o.show_native}
  for _, path in ipairs(outputs) do
    local fmt = output.format(path, o.format, #outputs)
    local data, err = output.render_parts(p, meta, fmt, opts)
    if not data then fail((path == "-" and "" or (path .. ": ")) .. err) end
    local ok, werr = output.write(path, data)
    if not ok then fail(werr) end
  end
end

-- Options start at argv[first]. For the command they end at the script
-- name (what follows is the script's); with anywhere (report), options
-- and file names may be mixed.
local function parse_args(argv, first, anywhere)
  local o = {outputs = {}, rest = {}}
  local i = first
  while i <= #argv do
    local a = argv[i]
    -- --key=value, as well as --key value
    local inline
    if a:match("^%-%-[%w%-]+=") then a, inline = a:match("^(%-%-[%w%-]+)=(.*)$") end
    local function val()
      if inline then
        local v = inline
        inline = nil
        return v
      end
      i = i + 1
      if argv[i] == nil then fail("option " .. a .. " needs a value") end
      return argv[i]
    end
    if a == "-o" or a == "--output" then o.outputs[#o.outputs + 1] = val()
    elseif a == "-f" or a == "--format" then o.format = val()
    elseif a == "-r" or a == "--rate" then o.rate = val()
    elseif a == "-c" or a == "--clock" then o.clock = val()
    elseif a == "-d" or a == "--duration" then o.duration = val()
    elseif a == "-v" or a == "--view" then o.view = val()
    elseif a == "-z" or a == "--zones" then o.zones = true
    elseif a == "-n" or a == "--no-native" then o.native = "off"
    elseif a == "-N" or a == "--show-native" then o.show_native = true
    elseif a == "--calls" then o.calls = true
    elseif a == "--aborts" then o.aborts = true
    elseif a == "--inline" then o.inline = val()
    elseif a == "--private" then o.private = true
    elseif a == "--diff" and anywhere then o.diff = true
    elseif a == "--luajit" then o.luajit = val()
    elseif a == "-q" or a == "--quiet" then o.quiet = true
    elseif a == "-h" or a == "--help" then
      io.stdout:write(anywhere and report_usage() or usage())
      os.exit(0)
    elseif a == "-V" or a == "--version" then
      local version = os.getenv("LJPROF_VERSION")
      if not version or version == "" then
        fail("version unknown (it comes from the ljprof launcher, build/ljprof or the installed ljprof)")
      end
      io.stdout:write("ljprof ", version, "\n")
      os.exit(0)
    elseif a == "--" then o.dashdash = true; i = i + 1; break
    elseif a:sub(1, 1) == "-" and a ~= "-" then
      fail("unknown option '" .. a .. "' (ljprof --help lists the options)")
    elseif anywhere then o.rest[#o.rest + 1] = a
    else break end
    if inline then fail("option " .. a .. " takes no value ('" .. a .. "=" .. inline .. "' given)") end
    i = i + 1
  end
  for j = i, #argv do o.rest[#o.rest + 1] = argv[j] end
  -- The values, checked by the one key table's check (the same line as
  -- -jprof's and LJPROF's for each key); kept as given, for -jprof.
  for _, k in ipairs({"format", "view", "rate", "duration", "clock", "inline"}) do
    if o[k] then
      local ok, err = options.value(k, o[k])
      if not ok then fail(err) end
    end
  end
  return o
end

local function shell_word(x) return "'" .. tostring(x):gsub("'", "'\\''") .. "'" end

-- The raw profiles of one side of report --diff: a file, a directory (its
-- *.ljprof files, sorted) or a comma-separated list of files.
local function side_files(arg)
  local list = {}
  local p = io.popen("test -d " .. shell_word(arg) .. " && ls -1 " .. shell_word(arg) ..
                     " 2>/dev/null")
  local ls = p and p:read("*a") or ""
  if p then p:close() end
  if ls ~= "" then
    for name in ls:gmatch("[^\n]+") do
      if name:match("%.ljprof$") then list[#list + 1] = arg:gsub("/*$", "") .. "/" .. name end
    end
    table.sort(list)
    if #list == 0 then fail("report --diff: directory " .. arg .. " holds no .ljprof file") end
    return list
  end
  for f in (arg .. ","):gmatch("([^,]*),") do
    if f ~= "" then list[#list + 1] = f end
  end
  return list
end

-- ljprof report --diff BEFORE AFTER: a text report or a differential
-- flame graph per output (jit.prof.diff). Each side is one raw profile,
-- a directory of them or a comma-separated list: with several, the noise
-- between runs is estimated and only changes beyond it are shown.
local function report_diff(o)
  if #o.rest ~= 2 then
    fail("report --diff needs two sides, before and after: each a raw profile, a directory " ..
         "of them or a comma-separated list (" .. #o.rest .. " given)")
  end
  local diff = require("jit.prof.diff")
  local svg = require("jit.prof.svg")
  local sides, mb = {}, nil
  for i = 1, 2 do
    local list = {}
    for _, f in ipairs(side_files(o.rest[i])) do
      local p, m = raw.read(f)
      if not p then fail(m) end
      if p.total == 0 then fail("report --diff: " .. f .. " has no samples (nothing to compare)") end
      list[#list + 1] = p
      if i == 2 then mb = mb or m end
    end
    if #list == 0 then fail("report --diff: no raw profile in '" .. o.rest[i] .. "'") end
    sides[i] = list
  end
  local d = diff.compare_sets(sides[1], sides[2])
  local outputs = #o.outputs > 0 and o.outputs or {"-"}
  for _, path in ipairs(outputs) do
    local fmt = output.format(path, o.format, #outputs)
    local data
    if fmt == "text" then
      data = diff.text(d, {before = o.rest[1], after = o.rest[2]})
    elseif fmt == "svg" then
      local meta = {}
      for k, v in pairs(mb) do meta[k] = v end
      meta.diff_scale = d.scale
      meta.program = tostring(mb.program or o.rest[2]) .. " (diff against " .. o.rest[1] .. ")"
      data = svg.render(diff.profile(d), meta)
    else
      fail((path == "-" and "" or (path .. ": ")) .. "report --diff writes text or svg " ..
           "(got " .. fmt .. ")")
    end
    local ok, werr = output.write(path, data)
    if not ok then fail(werr) end
  end
  if #o.outputs > 0 then
    io.stderr:write(string.format("Diff: %d samples -> %d samples -> %s\n", d.a.total, d.b.total,
      table.concat(o.outputs, ", ")))
  end
  return 0
end

local function report(argv)
  local o = parse_args(argv, 2, true)
  if o.private then require("ljprof").output_private(true) end
  if o.diff then return report_diff(o) end
  local src = o.rest[1]
  if not src then
    io.stderr:write("ljprof: report needs a raw profile file\n",
      "usage: ljprof report RAW.ljprof [-f FORMAT] [-o FILE] [-v VIEW]   (ljprof report --help for more)\n")
    os.exit(2)
  end
  local p, meta = raw.read(src)
  if not p then fail(meta) end
  if #o.outputs == 0 then  -- to standard output, no Samples line
    write_outputs(p, meta, {"-"}, o)
    return 0
  end
  write_outputs(p, meta, o.outputs, o)
  io.stderr:write(string.format("Samples: %d (dropped %d) -> %s\n", p.total,
    tonumber(meta.dropped) or 0, table.concat(o.outputs, ", ")))
  return 0
end

-- Is prog (a command name or path) a LuaJIT interpreter? By its name:
-- luajit, luajit-2.1.0-beta3, luajit2.1...
local function is_luajit(prog)
  local base = prog:match("([^/]+)$") or prog
  return base:match("^luajit") ~= nil
end

-- The script a luajit command line runs (args after the interpreter's
-- name), or nil: the first argument that is not an option or an
-- option's value (-e, -l, -j take one, attached or not; "-" is standard
-- input; "--" ends the options).
local function script_of(args)
  local i = 1
  while i <= #args do
    local a = args[i]
    if a == "--" then return args[i + 1]
    elseif a == "-" then return nil
    elseif a:sub(1, 1) ~= "-" then return a
    elseif a:match("^%-[elj]$") then i = i + 1
    elseif a:match("^%-b") then return nil  -- -b: saves bytecode, runs nothing
    end
    i = i + 1
  end
  return nil
end

-- "ljprof: 1234 samples, 12 s" redrawn in place on standard error (a
-- terminal), from the count the child writes to status_fd once a second.
local function progress_line(status_fd)
  local ljprof = require("ljprof")
  local drawn = false
  local function tick(elapsed)
    local n = tonumber((ljprof.fd_read(status_fd) or ""):match("%d+"))
    if not n then return end  -- the child has not counted yet
    local _, fg = ljprof.isatty(2)
    if not fg then return end  -- a background job: not on the user's line
    io.stderr:write(string.format("\r\27[Kljprof: %d samples, %d s", n, math.floor(elapsed)))
    io.stderr:flush()
    drawn = true
  end
  local function clear()
    if drawn then io.stderr:write("\r\27[K"); io.stderr:flush() end
    drawn = false
  end
  return tick, clear
end

local function run(argv, luajit, record)
  local o = parse_args(argv, record and 2 or 1)
  local ljprof = require("ljprof")
  if o.private then ljprof.output_private(true) end
  local cmd, app = {}, nil
  if o.dashdash then
    -- ljprof [record] [options] -- command args...
    local prog = o.rest[1]
    if not prog then fail("nothing to run after -- (ljprof record [options] -- luajit app.lua)") end
    if o.luajit then fail("--luajit is for the short form: after --, the command names its interpreter") end
    local args = {}
    for k = 2, #o.rest do args[#args + 1] = o.rest[k] end
    if prog:match("%.lua$") then  -- a script: run by luajit
      cmd[1], app = luajit, prog
      table.insert(args, 1, prog)
    elseif is_luajit(prog) then
      cmd[1], app = prog, script_of(args) or "luajit"
    else
      -- The library is the Lua module ljprof: where this command found it.
      local lib = package.searchpath("ljprof", package.cpath) or "libljprof.so"
      fail("'" .. prog .. "' is not luajit: ljprof runs luajit commands only (it adds -jprof after " ..
           "the interpreter's name); for a program that embeds LuaJIT, run it as LJPROF=output=" ..
           "prof-%p.pb.gz LD_PRELOAD=" .. lib .. " " .. prog .. " ... (docs/operators.md)")
    end
    cmd.args = args
  else
    app = o.rest[1]
    if not app then io.stderr:write(usage()); os.exit(2) end
    cmd[1], cmd.args = o.luajit or luajit, o.rest
  end
  local to_stdout = o.calls and #o.outputs == 0  -- the calls report
  if #o.outputs == 0 and not to_stdout then
    o.outputs[1] = (app:match("([^/]+)$"):gsub("%.lua$", "")) ..
      model.extension(o.format or "svg")
  end
  for _, path in ipairs(o.outputs) do  -- unwritable outputs: say so first
    local ok, err = output.check(path)
    if not ok then fail(err) end
  end
  -- The raw profile goes to an unnamed temporary file the child inherits
  -- (/dev/fd/N): nothing is left in /tmp, whatever kills the command.
  local raw_fd, rerr = ljprof.tmpfd()
  if not raw_fd then fail(rerr) end
  local opts = "f"
  if o.rate then opts = opts .. "/rate=" .. o.rate end
  if o.clock then opts = opts .. "/clock=" .. o.clock end
  if o.duration then opts = opts .. "/duration=" .. o.duration end
  if o.native then opts = opts .. "/native=" .. o.native end
  if o.calls then opts = opts .. "/calls=on" end
  if o.aborts then opts = opts .. "/aborts=on" end
  if o.inline then opts = opts .. "/inline=" .. o.inline end
  opts = opts .. "/format=raw"
  local child = {cmd[1], "-jprof=" .. opts .. ",/dev/fd/" .. raw_fd}
  for _, a in ipairs(cmd.args) do child[#child + 1] = a end
  local spawn_opts = {keep = {raw_fd}}
  local status_fd, clear
  if not o.quiet and ljprof.isatty(2) and os.getenv("TERM") ~= "dumb" then
    local id
    status_fd, id = ljprof.tmpfd()
    if status_fd then
      spawn_opts.keep[2] = status_fd
      spawn_opts.env = {"LJPROF_PROGRESS=" .. id}
      spawn_opts.tick, clear = progress_line(status_fd)
    end
  end
  -- After the child: with exit signals still held, so that the outputs
  -- are written whatever comes meanwhile (ljprof.spawn, src/spawn.c).
  spawn_opts.after = function(how, n)
    if clear then clear() end
    local code = how == "signal" and 128 + n or n
    local data = ljprof.fd_read(raw_fd)
    ljprof.fd_close(raw_fd)
    if status_fd then ljprof.fd_close(status_fd) end
    local p, meta
    if data and data ~= "" then p, meta = raw.parse(data, app)
    else meta = "the script wrote no profile" end
    if not p then
      io.stderr:write("ljprof: no profile from ", app, ": ", meta, "\n")
      return code ~= 0 and code or 1
    end
    if p.total == 0 and not o.calls then  -- nothing to show: no empty flame graph
      io.stderr:write("ljprof: no samples from ", app, code ~= 0 and
        (" (exit status " .. code .. ")") or "", "; nothing written",
        code == 0 and " (a longer run, or a higher --rate)" or "", "\n")
      return code ~= 0 and code or 1
    end
    if to_stdout then
      write_outputs(p, meta, {"-"}, o)
      io.stderr:write(string.format("Samples: %d (dropped %d) -> standard output\n", p.total,
        tonumber(meta.dropped) or 0))
      return code
    end
    write_outputs(p, meta, o.outputs, o)
    io.stderr:write(string.format("Samples: %d (dropped %d) -> %s\n", p.total,
      tonumber(meta.dropped) or 0, table.concat(o.outputs, ", ")))
    return code
  end
  local code, err = ljprof.spawn(child, spawn_opts)
  if not code then
    ljprof.fd_close(raw_fd)
    if status_fd then ljprof.fd_close(status_fd) end
    fail(err)
  end
  return code
end

function M.main(argv, luajit)
  if argv[1] == "report" then return report(argv) end
  if argv[1] == "record" then return run(argv, luajit or "luajit", true) end
  return run(argv, luajit or "luajit")
end

-- Run as a script (the launcher): the arguments are the command line.
local first = ...
if first ~= "jit.prof.cli" then
  os.exit(M.main({...}, "luajit"))
end

return M
