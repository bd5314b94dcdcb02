----------------------------------------------------------------------------
-- jit.prof.cli: the `ljprof` command.
--
--   ljprof [options] app.lua [args...]
--       Runs app.lua under luajit with ljprof sampling, then writes the
--       requested outputs and prints "Samples: N (dropped M) -> file".
--       The exit status is the script's.
--   ljprof report RAW [-f FORMAT] [-o FILE] [-v VIEW]
--       Renders a saved raw profile (.ljprof) into any format.
--   ljprof --version
--       Prints "ljprof <version>" (meson's project version, which the
--       launcher src/ljprof.in passes in LJPROF_VERSION).
--
-- The script runs in a child luajit (`-jprof=.../format=raw,<tmp>`), which
-- writes a raw profile at exit (normal exit, os.exit, an error, SIGTERM
-- and SIGHUP, which the command passes on to it: ljprof.spawn); every
-- output is then rendered here from that raw profile, so `report` and the
-- command share one path. Killed by a signal, the script's status is
-- 128 + the signal's number. Choosing formats, rendering and writing files is
-- jit.prof.output's job (the same as for -jprof); this file parses the
-- command line, runs the child and reports. Errors are one line on
-- standard error and exit status 2. Options: see usage() below.
----------------------------------------------------------------------------

local model = require("jit.prof.model")
local output = require("jit.prof.output")
local raw = require("jit.prof.raw")

local M = {}

local function usage()
  return [[
usage: ljprof [options] app.lua [args...]
       ljprof report RAW.ljprof [-f FORMAT] [-o FILE] [-v VIEW]

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
  -V, --version    print "ljprof <version>"
  -h, --help       this text
Long options take their value as "--rate 1000" or "--rate=1000".
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
    local data, err = output.render(p, meta, fmt, opts)
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
    elseif a == "-h" or a == "--help" then io.stdout:write(usage()); os.exit(0)
    elseif a == "-V" or a == "--version" then
      local version = os.getenv("LJPROF_VERSION")
      if not version or version == "" then
        fail("version unknown (it comes from the ljprof launcher, build/ljprof or the installed ljprof)")
      end
      io.stdout:write("ljprof ", version, "\n")
      os.exit(0)
    elseif a == "--" then i = i + 1; break
    elseif a:sub(1, 1) == "-" and a ~= "-" then
      fail("unknown option '" .. a .. "' (ljprof --help lists the options)")
    elseif anywhere then o.rest[#o.rest + 1] = a
    else break end
    if inline then fail("option " .. a .. " takes no value ('" .. a .. "=" .. inline .. "' given)") end
    i = i + 1
  end
  for j = i, #argv do o.rest[#o.rest + 1] = argv[j] end
  if o.format then
    local known = false
    for _, f in ipairs(model.FORMATS) do if f == o.format then known = true end end
    if not known then
      fail("bad format '" .. o.format .. "' (accepted: " .. table.concat(model.FORMATS, ", ") .. ")")
    end
  end
  if o.view then
    local ok, err = output.view(o.view)
    if not ok then fail((err:gsub("^jit%.prof: ", ""))) end
  end
  local r = o.rate and tonumber(o.rate)
  if o.rate and not (r and r >= 1 / 60 and r <= 100000) then
    fail("bad rate '" .. o.rate .. "' (accepted: 0.017 to 100000 samples per second)")
  end
  if o.duration and not (tonumber(o.duration) and tonumber(o.duration) > 0) then
    fail("bad duration '" .. o.duration .. "' (accepted: a positive number of seconds)")
  end
  if o.clock and not ({cpu = 1, wall = 1, itimer = 1, thread = 1})[o.clock] then
    fail("bad clock '" .. o.clock .. "' (accepted: cpu, wall, itimer, thread)")
  end
  return o
end

local function report(argv)
  local o = parse_args(argv, 2, true)
  local src = o.rest[1]
  if not src then fail("report needs a raw profile file (ljprof report FILE.ljprof)") end
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

local function run(argv, luajit)
  local o = parse_args(argv, 1)
  local app = o.rest[1]
  if not app then io.stderr:write(usage()); os.exit(2) end
  local to_stdout = o.calls and #o.outputs == 0  -- the calls report
  if #o.outputs == 0 and not to_stdout then
    o.outputs[1] = (app:match("([^/]+)$"):gsub("%.lua$", "")) ..
      model.extension(o.format or "svg")
  end
  for _, path in ipairs(o.outputs) do  -- unwritable outputs: say so first
    local ok, err = output.check(path)
    if not ok then fail(err) end
  end
  local tmp = os.tmpname()
  local opts = "f"
  if o.rate then opts = opts .. "/rate=" .. o.rate end
  if o.clock then opts = opts .. "/clock=" .. o.clock end
  if o.duration then opts = opts .. "/duration=" .. o.duration end
  if o.native then opts = opts .. "/native=" .. o.native end
  if o.calls then opts = opts .. "/calls=on" end
  opts = opts .. "/format=raw"
  local argv = {luajit, "-jprof=" .. opts .. "," .. tmp}
  for _, a in ipairs(o.rest) do argv[#argv + 1] = a end
  -- The child, with SIGTERM and SIGHUP passed on to it (it writes its raw
  -- profile and dies of the signal; the outputs are written here).
  -- The raw file goes with the temporary the child leaves when it is
  -- killed while writing it (kill -9, the OOM killer): remove_output.
  local ljprof = require("ljprof")
  local how, n = ljprof.spawn(argv)
  if not how then ljprof.remove_output(tmp); fail(n) end
  local code = how == "signal" and 128 + n or n
  local p, meta = raw.read(tmp)
  ljprof.remove_output(tmp)
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

function M.main(argv, luajit)
  if argv[1] == "report" then return report(argv) end
  return run(argv, luajit or "luajit")
end

-- Run as a script (the launcher): the arguments are the command line.
local first = ...
if first ~= "jit.prof.cli" then
  os.exit(M.main({...}, "luajit"))
end

return M
