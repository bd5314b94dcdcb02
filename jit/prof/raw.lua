----------------------------------------------------------------------------
-- jit.prof.raw: ljprof's raw profile file, from which every other format
-- can be rendered again later (`ljprof report`), so a long workload never
-- has to run twice.
--
-- Format, version 3 (version 2 without the functions and aborts of the
-- "Hot but interpreted" section, version 1 also without call counts):
-- UTF-8/byte text, one record per line, fields separated by TAB; in text
-- fields TAB, LF, CR and backslash are written as \t \n \r \\.
--
--   LJPROF-RAW 3                     magic and version (first line); the
--                                    writer writes the lowest version that
--                                    holds the profile: 3 with functions or
--                                    aborts, else 2 with call counts, else 1
--   meta <key> <value>               clock, interval_us, program, samples,
--                                    dropped, created (any number; unknown
--                                    keys are kept and ignored)
--   frame <id> L <file> <line> <linedefined> <name>
--   frame <id> C <name>              ids count up from 1; "-" for a missing
--                                    linedefined or name
--   frame <id> C <name> native       a native frame (C code from the native
--                                    unwinder, shown in stack formats only);
--                                    readers that do not know the 5th field
--                                    read it as a C frame
--   sample <count> <vmstate> <zone> <id,id,...>   frames outermost first
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
--   end <frames> <samples> [<calls> [<functions> <aborts>]]
--                                    last line: the counts written (calls
--                                    in version 2; in version 3 calls is
--                                    "-" when the run did not count calls)
--
-- Readers load every version up to theirs: a version 1 file is a profile
-- without call counts (p.calls nil), a version 1 or 2 file one without
-- p.functions and p.aborts (no "Hot but interpreted" section).
-- A file that does not start with the magic line is not a raw profile; a
-- file without the end line, or whose counts differ, is truncated. Both are
-- reported in one line naming the file.
----------------------------------------------------------------------------

local M = {}

M.MAGIC = "LJPROF-RAW"
M.VERSION = 3

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
  local out = {M.MAGIC .. " " .. (hot and 3 or p.calls and 2 or 1)}
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
  for _, s in ipairs(p.samples) do
    out[#out + 1] = string.format("sample\t%.0f\t%s\t%s\t%s", s.count, esc(s.vmstate),
                                  esc(s.zone or ""), table.concat(s.stack, ","))
  end
  for _, c in ipairs(p.calls or {}) do
    out[#out + 1] = string.format("call\t%.0f\t%s\t%s\t%s\t%s\t%d\t%d", c.calls,
      esc(c.what or "Lua"), esc(c.func), c.name and esc(c.name) or "-",
      esc(c.source or "=[C]"), c.linedefined or -1, c.lastlinedefined or -1)
  end
  if hot then
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
    out[#out + 1] = string.format("end\t%d\t%d\t%s\t%d\t%d", #p.frames, #p.samples,
      p.calls and tostring(#p.calls) or "-", #funcs, #aborts)
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

-- Parse a raw profile: returns p (as jit.prof.model.collect builds it) and
-- meta, or nil and one line saying what is wrong. name: for messages.
function M.parse(data, name)
  name = name or "profile"
  local lines, n = {}, 0
  for l in data:gmatch("([^\n]*)\n") do n = n + 1; lines[n] = l end
  local head = lines[1] or data:sub(1, 40)
  local ver = head:sub(1, #M.MAGIC + 1) == M.MAGIC .. " " and
              head:sub(#M.MAGIC + 2):match("^(%d+)$")
  if not ver then
    return nil, name .. ": not an ljprof raw profile (it does not start with '" ..
      M.MAGIC .. " <version>')"
  end
  if tonumber(ver) > M.VERSION then
    return nil, string.format("%s: raw profile version %s is newer than this ljprof " ..
      "reads (up to %d)", name, ver, M.VERSION)
  end
  ver = tonumber(ver)
  local p, meta = {frames = {}, samples = {}, total = 0}, {}
  local calls = ver >= 2 and {} or nil
  if ver >= 3 then p.functions, p.aborts = {}, {} end
  local ended
  for i = 2, n do
    local f = fields(lines[i])
    local kind = f[1]
    if kind == "meta" and #f >= 3 then
      local k, v = unesc(f[2]), unesc(f[3])
      meta[k] = tonumber(v) or v
    elseif kind == "frame" and f[3] == "L" and #f >= 7 then
      local id = tonumber(f[2])
      p.frames[id] = {id = id, lua = true, file = unesc(f[4]), line = tonumber(f[5]),
                      linedefined = tonumber(f[6]), name = f[7] ~= "-" and unesc(f[7]) or nil}
    elseif kind == "frame" and f[3] == "C" and #f >= 4 then
      local id = tonumber(f[2])
      p.frames[id] = {id = id, lua = false, name = unesc(f[4]),
                      native = f[5] == "native" or nil}
    elseif kind == "sample" and #f >= 4 then
      local stack = {}
      for id in (f[5] or ""):gmatch("%d+") do stack[#stack + 1] = tonumber(id) end
      local count = tonumber(f[2])
      if not count then
        return nil, string.format("%s: line %d: bad sample count '%s'", name, i, f[2])
      end
      p.samples[#p.samples + 1] = {stack = stack, count = count, vmstate = unesc(f[3]),
                                   zone = unesc(f[4])}
      p.total = p.total + count
    elseif kind == "call" and calls and #f >= 8 then
      local n = tonumber(f[2])
      if not n then
        return nil, string.format("%s: line %d: bad call count '%s'", name, i, f[2])
      end
      calls[#calls + 1] = {calls = n, what = unesc(f[3]), func = unesc(f[4]),
        name = f[5] ~= "-" and unesc(f[5]) or nil, source = unesc(f[6]),
        linedefined = tonumber(f[7]), lastlinedefined = tonumber(f[8])}
    elseif kind == "function" and p.functions and #f >= 8 then
      local fn = {func = unesc(f[2]), total = tonumber(f[3])}
      for k, st in ipairs(STATES) do
        local n = tonumber(f[3 + k])
        if not n or not fn.total then
          return nil, string.format("%s: line %d: bad function record", name, i)
        end
        if n ~= 0 then fn[st] = n end  -- as ljprof.functions(): states seen
      end
      p.functions[#p.functions + 1] = fn
    elseif kind == "abort" and p.aborts and #f >= 8 then
      local count, line, code = tonumber(f[2]), tonumber(f[4]), tonumber(f[6])
      if not (count and line and code) then
        return nil, string.format("%s: line %d: bad abort record", name, i)
      end
      p.aborts[#p.aborts + 1] = {count = count, func = unesc(f[3]), line = line,
        at = unesc(f[5]), code = code, reason = unesc(f[7]), info = unesc(f[8])}
    elseif kind == "end" then
      ended = {tonumber(f[2]), tonumber(f[3]), tonumber(f[4]), tonumber(f[5]),
               tonumber(f[6]), calls = f[4]}
      break
    else
      return nil, string.format("%s: line %d: not a raw profile record: '%s'", name, i,
                                lines[i]:sub(1, 60))
    end
  end
  -- call counts: always in version 2; in version 3 unless the end record
  -- says "-" (then there must be no call records)
  if calls and not (ver >= 3 and ended and ended.calls == "-") then p.calls = calls end
  if not ended or ended[1] ~= #p.frames or ended[2] ~= #p.samples or
     (p.calls and ended[3] ~= #p.calls) or (not p.calls and calls and #calls > 0) or
     (p.functions and (ended[4] ~= #p.functions or ended[5] ~= #p.aborts)) then
    return nil, name .. ": truncated raw profile (the end record is missing or its " ..
      "counts differ from what was read)"
  end
  for _, s in ipairs(p.samples) do
    for _, id in ipairs(s.stack) do
      if not p.frames[id] then
        return nil, string.format("%s: sample names frame %d, which is not defined", name, id)
      end
    end
  end
  return p, meta
end

-- Read and parse a raw profile file.
function M.read(path)
  local f, err = io.open(path, "rb")
  if not f then return nil, "cannot read raw profile: " .. tostring(err) end
  local data = f:read("*a")
  f:close()
  return M.parse(data, path)
end

return M
