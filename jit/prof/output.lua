----------------------------------------------------------------------------
-- jit.prof.output: ljprof's one output path. Both front ends, -jprof
-- (jit/prof.lua) and the `ljprof` command (jit/prof/cli.lua), turn a
-- recorded profile into files only through this module:
--
--   local fmt = output.format(path, forced, n)   -- which format
--   local ok, err = output.check(path)           -- writable? (before a run)
--   local data, err = output.render(p, meta, fmt, {view = v, zones = z})
--   local parts, err = output.render_parts(...)   -- a string or a list
--   local ok, err = output.write(path, data)     -- "-" is standard output
--                                                -- (data: string or list)
--   local errs = output.write_run(r, name_of)    -- a recorded run, whole
--
-- Rules:
-- - An output's format comes from its name (options.format_for); a forced
--   format (/format=, -f) wins over the name when it is the only output,
--   and otherwise applies to the names without a known ending (.txt stays
--   text).
-- - Every format is rendered from one jit.prof.model profile (one
--   recording, many views). The text view is -jp's report (jit.prof.text)
--   followed by ljprof's "Hot but interpreted" section (not with the r or
--   G letters or annotation); with call counts (p.calls) it is -jp's report
--   followed by the calls report (jit.prof.calls) instead, which takes the
--   place of -jp's annotation for a/A. The folded format labels frames
--   with the view's f/F/l/p letters. zones = true puts each sample's zone
--   at the root of the stack formats (not raw, not text). The other
--   formats come from the module jit.prof.<format>.
-- - Text views other than G show Lua frames only: native frames are
--   stripped from the top of each stack unless the view asks for them
--   (view.native, opts.native). The stack formats keep them.
-- - The section needs p.functions (ljprof.functions()) and p.aborts
--   (ljprof.aborts()); a profile without them (an older raw profile) has
--   no section.
-- - Files are written by the library's output routine (src/outfile.c):
--   atomically for regular files, in place for devices and FIFOs, never
--   replacing anything that is not a regular file.
-- - Nothing here prints or exits: failures return nil and one line, and
--   the caller says it in its own voice.
----------------------------------------------------------------------------

local model = require("jit.prof.model")
local options = require("jit.prof.options")
-- The text views (jit.prof.text) load when a text output is rendered: a
-- writer of stack formats only (the C API's output) does not parse them.
local text = setmetatable({}, {__index = function(t, k)
  local mod = require("jit.prof.text")
  setmetatable(t, {__index = mod})
  return mod[k]
end})

local M = {}

-- The format of output path (forced: /format= or -f, n: the number of
-- outputs), and whether path can be written now: jit/prof/options.lua,
-- which a starting run loads without this module.
M.format, M.check = options.format, options.check

-- -jp view letters -> a view (jit.prof.options.parse, which
-- jit.prof.text.parse is), or nil and one line.
function M.view(letters)
  local ok, v = pcall(options.parse, letters or "f")
  if not ok then return nil, tostring(v):match("^[^\n]*") end
  return v
end

-- Files are written by the library's one output routine (ljprof's
-- write_file, src/outfile.c): atomically for regular files, in place for
-- devices and FIFOs, through a standard stream for /dev/stdout and
-- /dev/fd/N, symlinks followed only when they cannot surprise. Its errors
-- read "ljprof: cannot write <path>: <why>"; here without "ljprof: ".
local function lib()
  return require("ljprof")
end

local function strip(err)
  return (tostring(err):gsub("^ljprof: ", ""))
end


-- "Hot but interpreted": functions where at least min percent of all
-- samples were spent in the interpreter, with the trace aborts LuaJIT
-- reported for traces starting in them (why the hot code did not compile).
-- From p.functions and p.aborts; returns the section (from its leading
-- blank line), or "". The aborts are recorded only when the run asked for
-- them (/aborts=on: a handler on every trace event); meta.aborts == "off"
-- says they were not.
function M.hot_interpreted(p, min, meta)
  local off = meta and meta.aborts == "off"
  local total = p.total
  local aborts = {}
  for _, a in ipairs(p.aborts or {}) do
    local t = aborts[a.func] or {}
    aborts[a.func] = t
    t[#t + 1] = a
  end
  local lines = {}
  local funcs = {}
  for i, f in ipairs(p.functions or {}) do funcs[i] = f end
  table.sort(funcs, function(a, b)  -- by time in the interpreter
    if (a.I or 0) ~= (b.I or 0) then return (a.I or 0) > (b.I or 0) end
    return a.func < b.func
  end)
  for _, f in ipairs(funcs) do
    local i = f.I or 0
    local pct = math.floor(i * 100 / total + 0.5)
    -- ("[ljprof]", the profiler's own work, is no function of the program:
    -- its interpreted time is its own start or stop, nothing to compile)
    if i > 0 and pct >= math.max(min, 1) and #lines < 10 and f.func ~= "[ljprof]" then
      local head = string.format("%2d%%  %s", pct, f.func)
      local list = aborts[f.func]
      if not list and off then
        lines[#lines + 1] = head .. "  (why its traces aborted: run with /aborts=on)"
      elseif not list then
        lines[#lines + 1] = head .. "  no trace aborts reported (JIT off for it, or not hot enough to compile)"
      else
        for k, a in ipairs(list) do
          if k > 5 then
            lines[#lines + 1] = string.rep(" ", #head) .. "  ... " .. (#list - 5) .. " more"
            break
          end
          lines[#lines + 1] = (k == 1 and head or string.rep(" ", #head))
            .. string.format("  %dx %s (trace at line %d, aborted at %s)", a.count, a.reason, a.line, a.at)
        end
      end
    end
  end
  if #lines == 0 then return "" end
  return "\nHot but interpreted (percent of all samples in the interpreter; trace aborts):\n"
    .. table.concat(lines, "\n") .. "\n"
end

-- The text view of p for view v (a view table or letters).
function M.text(p, meta, v)
  if type(v) ~= "table" then v = assert(M.view(v)) end
  if p.calls then  -- -jp's report, then the calls
    local calls = require("jit.prof.calls")
    local s = v.ann and "" or (text.render(p, v) .. "\n")
    return s .. calls.render(p, meta, v)
  end
  local s = text.render(p, v)
  if p.total > 0 and not (v.letters.r or v.letters.G or v.ann) then
    s = s .. M.hot_interpreted(p, v.min, meta) .. M.inline_note(meta)
  end
  return s
end

-- One line on the frames of compiled code that LuaJIT had inlined: which
-- mode gave them and how many were estimated (a sample between two
-- snapshots that show different frames); "" when the mode is the default
-- and they were under 1% of the samples.
function M.inline_note(meta)
  local n, est = tonumber(meta and meta.inline_samples) or 0,
                 tonumber(meta and meta.inline_estimated) or 0
  local total = tonumber(meta and meta.samples) or 0
  local function samples(k) return k == 1 and "1 sample" or (k .. " samples") end
  if meta and meta.inline == "exact" then
    return string.format("\nInlined frames: exact, LuaJIT's profiling mode (/inline=exact: " ..
      "the compiled code had a check at each function change); %s.\n", samples(n))
  elseif meta and meta.inline == "recorded" and n > 0 and n * 100 >= total then
    return string.format("\nInlined frames: recorded, from the frames each trace " ..
      "instruction was recorded in, for %s (%d of them from the record map), %d " ..
      "estimated (their place in the trace's code estimated; /inline=exact is exact " ..
      "per function).\n", samples(n), tonumber(meta.inline_recorded) or 0, est)
  elseif meta and meta.inline == "snapshots" and n > 0 and n * 100 >= total then
    return string.format("\nInlined frames: from trace snapshots for %s, %d of them " ..
      "estimated (between two snapshots whose frames differ; /inline=exact is exact " ..
      "per function).\n", samples(n), est)
  end
  return ""
end

-- The content of one output of format fmt, or nil and one line. opts:
-- view (a view table or letters; default "f"), zones (zones at the root),
-- native (true: text views show native frames too, as view.native does;
-- by default they show Lua frames only, see jit/prof/text.lua).
local function render(p, meta, fmt, opts, parts)
  opts = opts or {}
  local v = opts.view or "f"
  if type(v) ~= "table" then
    local err
    v, err = M.view(v)
    if not v then return nil, err end
  end
  if opts.native ~= nil then
    local c = {}
    for k, x in pairs(v) do c[k] = x end
    c.native = opts.native or nil
    v = c
  end
  if fmt == "text" then
    local ok, data = pcall(M.text, p, meta, v)
    if not ok then return nil, "format text failed: " .. tostring(data):match("^[^\n]*") end
    return data
  end
  local mod, err = model.renderer(fmt)
  if not mod then return nil, err end
  if opts.zones and fmt ~= "raw" then p = model.with_zones(p) end
  if fmt == "folded" then  -- frame labels from the f/F/l/p letters
    local m = {}
    for k, x in pairs(meta or {}) do m[k] = x end
    m.scope, m.fullpath = v.scope ~= "" and v.scope or "f", v.fullpath
    meta = m
  end
  local ok, data = pcall(parts and mod.render_parts or mod.render, p, meta)
  if not ok then return nil, "format " .. fmt .. " failed: " .. tostring(data) end
  if type(data) ~= "string" and not (parts and mod.render_parts and type(data) == "table") then
    return nil, "format " .. fmt .. " failed: render returned no data"
  end
  return data
end

function M.render(p, meta, fmt, opts)
  return render(p, meta, fmt, opts)
end

-- The same, as a string or a list of strings (parts, from a writer's
-- render_parts when it has one: a large profile never joined in memory;
-- M.write writes either).
function M.render_parts(p, meta, fmt, opts)
  return render(p, meta, fmt, opts, true)
end

-- Write one output: "-" is standard output, anything else goes through
-- the output routine. Returns true, or nil and "cannot write <path>:
-- <why>".
function M.write(path, data)
  if path == "-" then
    if type(data) == "table" then
      for _, part in ipairs(data) do io.stdout:write(part) end
    else
      io.stdout:write(data)
    end
    io.stdout:flush()
    return true
  end
  local ok, err = lib().write_file(path, data)
  if not ok then return nil, strip(err) end
  return true
end

-- The C API's output option (ljprof_options.output, ljprof.record's
-- output; src/writer.c calls this at stop in a Lua state of ljprof's own):
-- spec is "program\0letters\0path", and the file written is the one
-- `-jprof=<letters>/format=folded,<path>` writes for the same run: the
-- run description jit.prof makes of those options (view, format,
-- outputs), through write_run below. jit/prof.lua itself is not loaded
-- (its 21 KB parsed at every stop). A failure is an error "ljprof: <one
-- line>", which the library prints and stop() returns; nothing is printed
-- here.
function M.write_output(spec)
  local prog, letters, path = spec:match("^([^%z]*)%z([^%z]*)%z(.*)$")
  local r = {view = options.parse(letters), kv = {format = "folded"}, program = prog,
             outputs = {{path = path, format = "folded"}}, apart = true}
  local ljprof = lib()
  local errs = M.write_run(r, function(p) return ljprof.output_name and ljprof.output_name(p) or p end)
  if errs[1] then error("ljprof: " .. errs[1], 0) end
end

-- ljprof's own work (the safe point and call counting: "[ljprof]"; the
-- trace-event handler and what it calls) is shown once, as a root frame
-- of its own, never inside the program's stacks.
local OWN = {["[ljprof]"] = true, ["[ljprof trace events]"] = true}

local function own_work_apart(p)
  local own
  for id, fr in ipairs(p.frames) do
    if not fr.lua and OWN[fr.name] then
      own = own or {}
      own[id] = true
    end
  end
  if not own then return end
  local root = #p.frames + 1
  p.frames[root] = {id = root, lua = false, name = "[ljprof]"}
  local keep, merged = {}, {}
  for _, s in ipairs(p.samples) do
    local mine = false
    for _, id in ipairs(s.stack) do
      if own[id] then mine = true break end
    end
    if mine then
      local k = tostring(s.vmstate) .. "\0" .. tostring(s.zone) .. "\0" ..
                model.labels_key(s.labels)
      local m = merged[k]
      if m then
        m.count = m.count + s.count
      else
        m = {stack = {root}, vmstate = s.vmstate, zone = s.zone, labels = s.labels,
             count = s.count}
        merged[k] = m
        keep[#keep + 1] = m
      end
    else
      keep[#keep + 1] = s
    end
  end
  p.samples = keep
end

-- The whole output of a recorded run r (jit/prof.lua's run description:
-- outputs, view, kv.zones, kv.calls, program; apart: in a state of ljprof's
-- own), collected from the library
-- (ljprof's functions read the run: after stop, or in the exit helper's
-- state, the same run) and written, each output's file named by
-- name_of(path). Returns the failures, one line each (none: {}).
function M.write_run(r, name_of)
  local ljprof = lib()
  -- In ljprof's own state, the collector starts a cycle as soon as the
  -- last one ends and runs 5 times its usual speed: by default a cycle
  -- starts when the heap is twice what the last one kept, and the model
  -- of a large profile plus the garbage of rendering it then doubled the
  -- write's peak (with the model's one table per sample and the writers'
  -- parts, 74,000 distinct stacks to .pb.gz: 721 -> 323 bytes per stack;
  -- docs/performance.md, "Memory of the write at stop").
  if r.apart then
    collectgarbage("setpause", 100)
    collectgarbage("setstepmul", 1000)
  end
  local st = ljprof.stats()
  -- Structured frames (a named function keeps its first line); a library
  -- without profile() gives the summary's keys.
  local p = ljprof.profile and model.from_profile(ljprof.profile()) or
            model.collect(ljprof.summary())
  -- In ljprof's own state (r.apart: the exit write, exports, the exit
  -- helper), a full collection after each step: building the model and
  -- each rendering leave garbage as large as what they keep (the keys of
  -- merging, every output's string), and a fresh state's heap only
  -- grows until its first cycle; never in the program's state, whose
  -- finalizers this would run (and at lua_close the write runs from one).
  -- The compiled code of each step goes too (jit.flush): the traces of
  -- the renderers' loops held ~6 MB after writing 18,000 stacks to three
  -- formats, which the next output's peak added to.
  local function settle()
    if r.apart then
      if jit and jit.flush then jit.flush() end
      collectgarbage()
    end
  end
  settle()
  -- A C function without a Lua name prints as its address, another one
  -- every run (ASLR): name it by symbol, or object and offset
  -- ("luajit+0x86ca"), so that two runs can be compared.
  for _, fr in ipairs(p.frames) do
    local a = not fr.lua and fr.name and fr.name:match("^@0x(%x+)$")
    local name = a and ljprof.code_name and ljprof.code_name(tonumber(a, 16))
    if name then fr.name = name end
  end
  own_work_apart(p)
  if r.kv.calls == "on" then p.calls = ljprof.calls() end
  p.functions, p.aborts = ljprof.functions(), ljprof.aborts()  -- "Hot but interpreted"
  -- One name per function in every format: the name its source gives it,
  -- else the first in byte order of those samples found (model.unify_names).
  model.unify_names(p, {source = true, regular = lib().regular_file})
  local meta = {
    clock = st.clock, interval_us = st.interval_us, program = r.program,
    -- (periodic export: the last interval's, as start_time and duration)
    samples = st.interval and p.total or st.samples, dropped = st.dropped,
    -- when and how long it ran, and what: pprof's time_nanos and
    -- duration_nanos, its thread and state labels
    created = st.start_time, duration_ns = st.duration_ns, thread = st.thread,
    thread_id = st.thread_id, state = st.state_id,
    -- no trace-event handler ran: why traces aborted is not known
    aborts = st.aborts_recorded == false and "off" or nil,
    -- where compiled samples' inlined frames came from
    inline = st.inline_frames, inline_samples = st.inline_samples,
    inline_estimated = st.inline_estimated, inline_recorded = st.inline_recorded,
  }
  local opts = {view = r.view, zones = r.kv.zones == "root"}
  local errs = {}
  for _, o in ipairs(r.outputs) do
    local ok, data, err = pcall(M.render_parts, p, meta, o.format, opts)
    local werr
    local path = name_of(o.path)
    if ok and data then
      ok, werr = M.write(path, data)
      -- rotation of an auto-started run's files (keep=, maxbytes=)
      if ok and ljprof.output_written then ljprof.output_written(path) end
    elseif not ok then
      err = data
    end
    if werr then  -- names the path itself
      errs[#errs + 1] = tostring(werr):match("^[^\n]*")
    elseif not ok or not data then
      errs[#errs + 1] = (path == "-" and "" or (path .. ": ")) .. tostring(err):match("^[^\n]*")
    end
    data = nil
    settle()
  end
  return errs
end

return M
