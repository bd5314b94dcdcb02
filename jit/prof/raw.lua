----------------------------------------------------------------------------
-- jit.prof.raw: ljprof's raw profile file, from which every other format
-- can be rendered again later (`ljprof report`), so a long workload never
-- has to run twice.
--
-- Format, version 4 (version 3 without labels, version 2 also without
-- the functions and aborts of the "Hot but interpreted" section, version
-- 1 also without call counts):
-- UTF-8/byte text, one record per line, fields separated by TAB; in text
-- fields TAB, LF, CR and backslash are written as \t \n \r \\.
--
--   LJPROF-RAW 4                     magic and version (first line); the
--                                    writer writes the lowest version that
--                                    holds the profile: 4 with labels, 3
--                                    with functions or aborts, else 2 with
--                                    call counts, else 1
--   meta <key> <value>               clock, interval_us, program, samples,
--                                    dropped, created (Unix seconds of the
--                                    start), duration_ns, thread,
--                                    thread_id, state (any number; unknown
--                                    keys are kept and ignored)
--   labels <id> <key> <value> [<key> <value>...]
--                                    version 4: a label set (ids count up
--                                    from 1; keys distinct)
--   frame <id> L <file> <line> <linedefined> <name>
--   frame <id> C <name>              ids count up from 1; "-" for a missing
--                                    linedefined or name
--   frame <id> C <name> native       a native frame (C code from the native
--                                    unwinder, shown in stack formats only);
--                                    readers that do not know the 5th field
--                                    read it as a C frame
--   sample <count> <vmstate> <zone> <id,id,...> [<labels id>]
--                                    frames outermost first; version 4: the
--                                    sample's label set (0 or none: no
--                                    labels)
--   call <count> <what> <func> <name> <source> <linedefined> <lastlinedefined>
--                                    version 2: one per counted function
--                                    (ljprof.calls(); what is Lua, main
--                                    or C; "-" for no name)
--   function <func> <total> <N> <I> <C> <G> <J>
--                                    version 3: samples per function and VM
--                                    state (ljprof.functions(); func as it
--                                    names it)
--   abort <count> <func> <line> <at> <code> <reason> <info>
--                                    version 3: a trace abort LuaJIT
--                                    reported (ljprof.aborts()), in order
--   end <frames> <samples> [<calls> [<functions> <aborts> [<labels>]]]
--                                    last line: the counts written (calls
--                                    in version 2; in version 3 calls is
--                                    "-" when the run did not count calls;
--                                    in version 4 functions and aborts are
--                                    "-" when the profile has none, and
--                                    labels counts the label sets)
--
-- Readers load every version up to theirs: a version 1 file is a profile
-- without call counts (p.calls nil), a version 1 or 2 file one without
-- p.functions and p.aborts (no "Hot but interpreted" section), a version
-- 1 to 3 file one without labels.
-- A file that does not start with the magic line is not a raw profile; a
-- file without the end line, or whose counts differ, is truncated. Every
-- field is checked (counts are decimal integers from 0 to 2^53, VM states
-- one of N I C G J, frame ids count up from 1 and samples name defined
-- frames, meta interval_us is present and from 1 to 60000000): anything
-- else is reported in one line, "<file>:<line>: expected <what>, got
-- '<text>'", and every format renders any profile the reader accepts.
----------------------------------------------------------------------------

local model = require("jit.prof.model")

local M = {}

M.MAGIC = "LJPROF-RAW"
M.VERSION = 4

local function esc(s)
  return (tostring(s):gsub("[\\\t\n\r]", {["\\"] = "\\\\", ["\t"] = "\\t",
                                          ["\n"] = "\\n", ["\r"] = "\\r"}))
end

local function unesc(s)
  return (s:gsub("\\(.)", {["\\"] = "\\", t = "\t", n = "\n", r = "\r"}))
end

local STATES = {"N", "I", "C", "G", "J"}

function M.render(p, meta)
  local hot = p.functions ~= nil or p.aborts ~= nil
  -- Label sets, numbered as samples first use them.
  local sets, set_of = {}, {}
  for _, s in ipairs(p.samples) do
    local k = s.labels and next(s.labels) ~= nil and model.labels_key(s.labels)
    if k and not set_of[k] then
      sets[#sets + 1] = s.labels
      set_of[k] = #sets
    end
  end
  local labeled = #sets > 0
  local version = labeled and 4 or hot and 3 or p.calls and 2 or 1
  local out = {M.MAGIC .. " " .. version}
  local keys = {}
  for k in pairs(meta or {}) do keys[#keys + 1] = k end
  table.sort(keys)
  for _, k in ipairs(keys) do
    out[#out + 1] = "meta\t" .. esc(k) .. "\t" .. esc(meta[k])
  end
  for id, fr in ipairs(p.frames) do
    if fr.lua then
      out[#out + 1] = string.format("frame\t%d\tL\t%s\t%d\t%s\t%s", id, esc(fr.file),
        fr.line or -1, fr.linedefined and tostring(fr.linedefined) or "-",
        fr.name and esc(fr.name) or "-")
    else
      out[#out + 1] = string.format("frame\t%d\tC\t%s%s", id, esc(fr.name or "?"),
                                    fr.native and "\tnative" or "")
    end
  end
  for id, l in ipairs(sets) do
    local keys = {}
    for k in pairs(l) do keys[#keys + 1] = tostring(k) end
    table.sort(keys)
    local t = {"labels", tostring(id)}
    for _, k in ipairs(keys) do
      t[#t + 1] = esc(k)
      t[#t + 1] = esc(l[k])
    end
    out[#out + 1] = table.concat(t, "\t")
  end
  for _, s in ipairs(p.samples) do
    local line = string.format("sample\t%.0f\t%s\t%s\t%s", s.count, esc(s.vmstate),
                               esc(s.zone or ""), table.concat(s.stack, ","))
    if labeled then
      local k = s.labels and next(s.labels) ~= nil and model.labels_key(s.labels)
      line = line .. "\t" .. (k and set_of[k] or 0)
    end
    out[#out + 1] = line
  end
  for _, c in ipairs(p.calls or {}) do
    out[#out + 1] = string.format("call\t%.0f\t%s\t%s\t%s\t%s\t%d\t%d", c.calls,
      esc(c.what or "Lua"), esc(c.func), c.name and esc(c.name) or "-",
      esc(c.source or "=[C]"), c.linedefined or -1, c.lastlinedefined or -1)
  end
  if hot or labeled then
    local funcs, aborts = p.functions or {}, p.aborts or {}
    for _, f in ipairs(funcs) do
      local t = {"function", esc(f.func), string.format("%.0f", f.total or 0)}
      for _, st in ipairs(STATES) do t[#t + 1] = string.format("%.0f", f[st] or 0) end
      out[#out + 1] = table.concat(t, "\t")
    end
    for _, a in ipairs(aborts) do
      out[#out + 1] = string.format("abort\t%.0f\t%s\t%d\t%s\t%d\t%s\t%s", a.count or 0,
        esc(a.func), a.line or -1, esc(a.at or "?"), a.code or -1, esc(a.reason or "?"),
        esc(a.info or ""))
    end
    if labeled then
      out[#out + 1] = string.format("end\t%d\t%d\t%s\t%s\t%s\t%d", #p.frames, #p.samples,
        p.calls and tostring(#p.calls) or "-", p.functions and tostring(#funcs) or "-",
        p.aborts and tostring(#aborts) or "-", #sets)
    else
      out[#out + 1] = string.format("end\t%d\t%d\t%s\t%d\t%d", #p.frames, #p.samples,
        p.calls and tostring(#p.calls) or "-", #funcs, #aborts)
    end
  elseif p.calls then
    out[#out + 1] = string.format("end\t%d\t%d\t%d", #p.frames, #p.samples, #p.calls)
  else
    out[#out + 1] = string.format("end\t%d\t%d", #p.frames, #p.samples)
  end
  return table.concat(out, "\n") .. "\n"
end

local function fields(line)
  local t = {}
  for f in (line .. "\t"):gmatch("(.-)\t") do t[#t + 1] = f end
  return t
end

-- Numbers as the writer writes them: counts are decimal integers from 0
-- to 2^53 (no sign, exponent, hex, inf or nan), lines are integers (-1:
-- unknown). nil for anything else.
local function count_of(s)
  if type(s) ~= "string" or not s:match("^%d+$") or #s > 16 then return nil end
  local n = tonumber(s)
  return n <= 2 ^ 53 and n or nil
end

local function int_of(s)
  if type(s) ~= "string" or not s:match("^%-?%d+$") or #s > 11 then return nil end
  return tonumber(s)
end

local VMSTATES = {N = true, I = true, C = true, G = true, J = true}

-- What a meta value must be, for the keys the writers read.
local META = {
  interval_us = function(v) return type(v) == "number" and v == v and v >= 1 and v <= 6e7 end,
  samples = function(v) return type(v) == "number" and v >= 0 and v <= 2 ^ 53 end,
  dropped = function(v) return type(v) == "number" and v >= 0 and v <= 2 ^ 53 end,
  created = function(v) return type(v) == "number" and v >= 0 and v <= 2 ^ 53 end,
  duration_ns = function(v) return type(v) == "number" and v >= 0 and v < 2 ^ 53 and
                                   v == math.floor(v) end,
  thread_id = function(v) return type(v) == "number" and v >= 0 and v < 2 ^ 53 and
                                 v == math.floor(v) end,
}
local META_WHAT = {
  interval_us = "a sampling interval from 1 to 60000000 (us)",
  samples = "a count", dropped = "a count", created = "a time in seconds",
  duration_ns = "a duration in nanoseconds (an integer below 2^53)",
  thread_id = "a thread id (an integer >= 0)",
}

-- Parse a raw profile: returns p (as jit.prof.model.collect builds it) and
-- meta, or nil and one line saying what is wrong and where:
-- "<name>:<line>: expected <what>, got '<text>'". name: for messages.
-- Everything a writer relies on is checked here, so every format renders
-- any profile this accepts.
function M.parse(data, name)
  name = name or "profile"
  if type(data) ~= "string" then return nil, name .. ": expected a raw profile, got no data" end
  local function bad(i, what, got)
    got = tostring(got or ""):gsub("[%c\128-\255]", "?")
    if #got > 40 then got = got:sub(1, 37) .. "..." end
    return nil, string.format("%s:%d: expected %s, got '%s'", name, i, what, got)
  end
  -- Lines by plain find: a pattern like "([^\n]*)\n" backtracks over a
  -- long last line without a newline for every position (quadratic: a
  -- truncated 64 KB line took 17 s). A last line without "\n" is a
  -- truncated file: it is kept, so the error names it.
  local lines, n, pos, partial = {}, 0, 1, false
  while true do
    local e = data:find("\n", pos, true)
    if not e then
      if pos <= #data then n = n + 1; lines[n] = data:sub(pos); partial = true end
      break
    end
    n = n + 1
    lines[n] = data:sub(pos, e - 1)
    pos = e + 1
  end
  local head = lines[1] or data:sub(1, 40)
  local ver = head:sub(1, #M.MAGIC + 1) == M.MAGIC .. " " and
              head:sub(#M.MAGIC + 2):match("^(%d+)\r?$")
  if not ver then
    return bad(1, "'" .. M.MAGIC .. " <version>' (not an ljprof raw profile)", head)
  end
  if #ver > 6 or tonumber(ver) > M.VERSION or tonumber(ver) < 1 then
    return bad(1, "a raw profile version from 1 to " .. M.VERSION ..
      " (a newer file needs a newer ljprof)", head)
  end
  ver = tonumber(ver)
  local p, meta = {frames = {}, samples = {}, total = 0}, {}
  local calls = ver >= 2 and {} or nil
  if ver >= 3 then p.functions, p.aborts = {}, {} end
  local sets = ver >= 4 and {} or nil
  local ended, ended_at, last_sample
  local meta_at = {}  -- the line of each meta key
  for i = 2, n do
    if i == n and partial then
      return bad(i, "a whole last line (the file is truncated)", lines[i])
    end
    local line = lines[i]:gsub("\r$", "")
    local f = fields(line)
    local kind = f[1]
    if kind == "meta" and #f >= 3 then
      local k, v = unesc(f[2]), unesc(f[3])
      v = tonumber(v) or v
      if META[k] and not META[k](v) then return bad(i, "meta " .. k .. ": " .. META_WHAT[k], f[3]) end
      meta[k] = v
      meta_at[k] = i
    elseif kind == "frame" and (f[3] == "L" and #f >= 7 or f[3] == "C" and #f >= 4) then
      local id = count_of(f[2])
      if id ~= #p.frames + 1 then return bad(i, "frame id " .. (#p.frames + 1), f[2]) end
      if f[3] == "L" then
        local l, ld = int_of(f[5]), f[6] == "-" and -1 or int_of(f[6])
        if not l then return bad(i, "a line number", f[5]) end
        if not ld then return bad(i, "a first line number or '-'", f[6]) end
        p.frames[id] = {id = id, lua = true, file = unesc(f[4]), line = l,
                        linedefined = ld >= 0 and ld or nil,
                        name = f[7] ~= "-" and unesc(f[7]) or nil}
      else
        p.frames[id] = {id = id, lua = false, name = unesc(f[4]),
                        native = f[5] == "native" or nil}
      end
    elseif kind == "sample" and #f >= 4 then
      local count = count_of(f[2])
      if not count then return bad(i, "a sample count (an integer >= 0)", f[2]) end
      local vm = unesc(f[3])
      if not VMSTATES[vm] then return bad(i, "a VM state (N, I, C, G or J)", f[3]) end
      local stack = {}
      local ids = f[5] or ""
      if not ids:match("^[%d,]*$") then return bad(i, "frame ids separated by commas", ids) end
      for id in ids:gmatch("[^,]+") do
        local k = count_of(id)
        if not k or not p.frames[k] then return bad(i, "the id of a frame defined above", id) end
        stack[#stack + 1] = k
      end
      local labels
      if sets and f[6] ~= nil and f[6] ~= "0" then
        local k = count_of(f[6])
        if not k or not sets[k] then return bad(i, "the id of a label set defined above", f[6]) end
        labels = sets[k]
      end
      p.samples[#p.samples + 1] = {stack = stack, count = count, vmstate = vm,
                                   zone = unesc(f[4]), labels = labels}
      p.total = p.total + count
      last_sample = i
      if p.total > 2 ^ 53 then return bad(i, "a total of samples below 2^53", f[2]) end
    elseif kind == "labels" and sets and #f >= 4 and #f % 2 == 0 then
      local id = count_of(f[2])
      if id ~= #sets + 1 then return bad(i, "label set id " .. (#sets + 1), f[2]) end
      local l = {}
      for k = 3, #f, 2 do
        local key = unesc(f[k])
        if key == "" or l[key] then return bad(i, "distinct non-empty label keys", f[k]) end
        l[key] = unesc(f[k + 1])
      end
      sets[id] = l
    elseif kind == "call" and calls and #f >= 8 then
      local c, ld, lld = count_of(f[2]), int_of(f[7]), int_of(f[8])
      if not c then return bad(i, "a call count (an integer >= 0)", f[2]) end
      if not (ld and lld) then return bad(i, "first and last line numbers", f[7] .. " " .. f[8]) end
      calls[#calls + 1] = {calls = c, what = unesc(f[3]), func = unesc(f[4]),
        name = f[5] ~= "-" and unesc(f[5]) or nil, source = unesc(f[6]),
        linedefined = ld, lastlinedefined = lld}
    elseif kind == "function" and p.functions and #f >= 8 then
      local fn = {func = unesc(f[2]), total = count_of(f[3])}
      if not fn.total then return bad(i, "a function's total (an integer >= 0)", f[3]) end
      for k, st in ipairs(STATES) do
        local c = count_of(f[3 + k])
        if not c then return bad(i, "a count of " .. st .. " samples", f[3 + k]) end
        if c ~= 0 then fn[st] = c end  -- as ljprof.functions(): states seen
      end
      p.functions[#p.functions + 1] = fn
    elseif kind == "abort" and p.aborts and #f >= 8 then
      local count, l, code = count_of(f[2]), int_of(f[4]), int_of(f[6])
      if not count then return bad(i, "an abort count (an integer >= 0)", f[2]) end
      if not l then return bad(i, "a line number", f[4]) end
      if not code then return bad(i, "a trace error code", f[6]) end
      p.aborts[#p.aborts + 1] = {count = count, func = unesc(f[3]), line = l,
        at = unesc(f[5]), code = code, reason = unesc(f[7]), info = unesc(f[8])}
    elseif kind == "end" then
      ended = {count_of(f[2]), count_of(f[3]), count_of(f[4]), count_of(f[5]),
               count_of(f[6]), count_of(f[7]), calls = f[4], funcs = f[5], aborts = f[6]}
      ended_at = i
      break
    else
      return bad(i, "a raw profile record (meta, frame, labels, sample, call, function, " ..
                 "abort, end)", line)
    end
  end
  -- call counts: always in version 2; in version 3 unless the end record
  -- says "-" (then there must be no call records)
  if calls and not (ver >= 3 and ended and ended.calls == "-") then p.calls = calls end
  if not ended then
    return bad(n + 1, "the end record (the file is truncated)", "end of file")
  end
  -- version 4: "-" for no functions or aborts (the profile had none)
  if ver >= 4 and ended.funcs == "-" and ended.aborts == "-" and #p.functions == 0 and
     #p.aborts == 0 then
    p.functions, p.aborts = nil, nil
    ended[4], ended[5] = 0, 0
  end
  if sets and ended[6] ~= #sets then
    return bad(ended_at, "an end record with the counts of the records above (frames, " ..
      "samples, calls, functions, aborts, label sets; a record is missing: the file was " ..
      "truncated or edited)", lines[ended_at])
  end
  if ended[1] ~= #p.frames or ended[2] ~= #p.samples or
     (p.calls and ended[3] ~= #p.calls) or (not p.calls and calls and #calls > 0) or
     (p.functions and (ended[4] ~= #p.functions or ended[5] ~= #p.aborts)) then
    return bad(ended_at, "an end record with the counts of the records above (frames, " ..
      "samples, calls, functions, aborts; a record is missing: the file was truncated or " ..
      "edited)", lines[ended_at])
  end
  if meta.interval_us == nil then
    return bad(1, "a meta interval_us record (the sampling interval)", "none")
  end
  -- Times in nanoseconds (counts times the interval, as pprof and
  -- speedscope write them) must be exact integers too: below 2^53 ns
  -- (104 days of samples). Counts alone below 2^53 are not enough.
  local period = math.floor(meta.interval_us * 1000 + 0.5)
  if p.total * period > 2 ^ 53 then
    return bad(last_sample, "samples whose total time (counts times interval_us) is below " ..
      "2^53 ns", lines[last_sample])
  end
  if type(meta.samples) == "number" and meta.samples * period > 2 ^ 53 then
    return bad(meta_at.samples, "meta samples: ticks whose time (times interval_us) is below " ..
      "2^53 ns", meta.samples)
  end
  -- One name per function (a file written before names were unified, or
  -- by another writer): the profile's own rule, no source read.
  model.unify_names(p)
  return p, meta
end

-- Read and parse a raw profile file.
function M.read(path)
  local f, err = io.open(path, "rb")
  if not f then return nil, "cannot read raw profile: " .. tostring(err) end
  local data = f:read("*a")
  f:close()
  -- Another of ljprof's outputs given where a raw profile is read: say
  -- what it is and what is read (one line).
  local what
  if data:sub(1, 2) == "\31\139" then
    what = "a gzip file (pprof's .pb.gz, for go tool pprof)"
  elseif data:find("^%s*<") then
    what = "an SVG or other XML file (a flame graph)"
  elseif data:find("^%s*{") then
    what = "a JSON file (speedscope's .speedscope.json)"
  end
  if what then
    return nil, string.format("%s: %s, not a raw profile: report reads ljprof's raw " ..
      "profiles (.ljprof, written by -o app.ljprof or /format=raw)", path, what)
  end
  return M.parse(data, path)
end

return M
