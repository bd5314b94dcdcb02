----------------------------------------------------------------------------
-- jit.prof.speedscope: an ljprof profile as a speedscope JSON file
-- (https://www.speedscope.app/file-format-schema.json).
--
-- render(p, meta) -> the file's text (render_parts: the same as a list of
-- strings), with p from jit.prof.model.collect()
-- and meta = {clock=, interval_us=, program=, samples=, dropped=}.
--
-- The file holds one "sampled" profile (ljprof profiles one thread per
-- Lua state), named after the program and the clock:
--
-- - shared.frames: one frame per function. A Lua frame has name, file and
--   line: name is what -jp's f view prints (the function's name, or
--   chunk:firstline when it has none, chunk without its directories),
--   qualified with the end of its file's path and its first line when two
--   different functions would share it ("run (check.lua:12)",
--   model.names), file the full chunk path, line the function's first
--   line when the profile carries it (always from a run; an old raw
--   profile keeps it only for functions without a name); otherwise the
--   lowest line sampled in the function. The lines sampled in one
--   function are one frame, as in the f view. C functions and builtins
--   have a name only.
-- - samples: frame indices, root (outermost) first. ljprof aggregates, so
--   there is no time order: each distinct stack is one sample, weighted by
--   its ticks, and samples are sorted by their frame names so that
--   speedscope's time-order view reads like a flame graph.
-- - weights: ticks * interval in nanoseconds (unit "nanoseconds", of CPU
--   or wall time as the clock measures); startValue 0, endValue their sum
--   (from p's counts: meta.samples is not needed; meta.dropped > 0 is
--   noted in the profile's name). A sample with an empty stack still
--   counts, under a frame "(no stack)".
--
-- The VM state, zone and labels of samples are not written: speedscope has
-- no labels, and pseudo-frames for them would distort the stacks (use the
-- -jprof text report's v option to split by VM state).
----------------------------------------------------------------------------

local model = require("jit.prof.model")

local M = {}

M.SCHEMA = "https://www.speedscope.app/file-format-schema.json"
M.NO_STACK = model.NO_STACK

local byte, format = string.byte, string.format
local concat = table.concat

local ESC = {['"'] = '\\"', ['\\'] = '\\\\', ['\b'] = '\\b', ['\f'] = '\\f',
             ['\n'] = '\\n', ['\r'] = '\\r', ['\t'] = '\\t'}

-- A JSON string literal: quotes, backslashes and control characters
-- escaped; everything else (UTF-8 included) as is.
function M.string(s)
  s = model.utf8(s)     -- valid UTF-8 whatever chunk names contain
  return '"' .. s:gsub('[%z\1-\31"\\]', function(c)
    return ESC[c] or format("\\u%04x", byte(c))
  end) .. '"'
end

-- A JSON number: integers in full (up to 2^53), others to 17 digits.
function M.number(x)
  assert(x == x and x ~= math.huge and x ~= -math.huge,
    "speedscope: number is not finite")
  if x == math.floor(x) and math.abs(x) < 2^53 then
    return format("%.0f", x)
  end
  return format("%.17g", x)
end

local str, num = M.string, M.number

local function interval_text(us)
  if us >= 1000 and us % 1000 == 0 then return (us / 1000) .. " ms" end
  if us >= 1000 then return format("%.3g ms", us / 1000) end
  return format("%g us", us)
end

-- The profile's name: program, clock and interval (and drops, if any).
function M.profile_name(meta)
  local s = format("%s (%s clock, %s interval", tostring(meta.program or "ljprof"),
    tostring(meta.clock or "cpu"), interval_text(meta.interval_us))
  local dropped = tonumber(meta.dropped) or 0
  if dropped > 0 then s = s .. format(", %d samples dropped", dropped) end
  return s .. ")"
end

function M.render_parts(p, meta)
  meta = meta or {}
  local interval_us = tonumber(meta.interval_us)
  assert(interval_us and interval_us > 0,
    "speedscope: meta.interval_us (the sampling interval) is required")
  local ns_per_tick = interval_us * 1000

  -- Frames: model frames (one per function and current line) merged into
  -- one speedscope frame per function.
  local frames, by_key, of_model = {}, {}, {}
  local function frame_for(key, make)
    local f = by_key[key]
    if not f then
      f = make()
      by_key[key] = f
      frames[#frames + 1] = f
    end
    return f
  end
  local names = model.names(p, "f", false)
  for id, fr in ipairs(p.frames) do
    local f
    if fr.lua then
      local name = names[id]
      f = frame_for("L\0" .. name .. "\0" .. fr.file, function()
        return {name = name, file = fr.file, line = fr.linedefined}
      end)
      if not fr.linedefined and fr.line and (not f.line or fr.line < f.line) then
        f.line = fr.line
      end
    else
      f = frame_for("C\0" .. fr.name, function() return {name = fr.name} end)
    end
    of_model[id] = f
  end

  -- Samples: one per distinct (merged) stack, root first, sorted by their
  -- key (each frame's name "\0" file, joined by "\30"). Made without a
  -- table, key or hash entry per sample: the samples are sorted by their
  -- speedscope frames' numbers and equal neighbours merged (a group: its
  -- first sample, its count); the groups are sorted by key, compared frame
  -- by frame without joining it; each line is made as it is output, 1024
  -- at a time joined into the parts returned (render_parts). A profile of
  -- 74,000 distinct stacks took ~1 KB per stack more to write before.
  -- speedscope frame -> number of its key text (frames of one text are
  -- one, as in the key), number -> text
  local fno, ftext, tno = {}, {}, {}
  local function number(f)
    local t = f.name .. "\0" .. (f.file or "")
    local u = tno[t]
    if not u then u = #ftext + 1 ftext[u] = t tno[t] = u end
    fno[f] = u
  end
  for _, f in ipairs(frames) do number(f) end
  local nostack_f
  local function seq(s)   -- a sample's frames (model ids; 0: no stack)
    return #s.stack > 0 and s.stack or nil
  end
  local NOSTACK = {0}
  local function fr(id)
    if id == 0 then
      if not nostack_f then
        nostack_f = frame_for("N\0", function() return {name = M.NO_STACK} end)
        number(nostack_f)
      end
      return nostack_f
    end
    return of_model[id]
  end
  local samples = p.samples
  local stk, cnt = {}, {}
  for i, s in ipairs(samples) do
    stk[i] = seq(s) or NOSTACK
    cnt[i] = s.count
    if not seq(s) then fr(0) end
  end
  -- (a group's frames: its first sample's in p's order)
  local rep, counts = model.group_stacks(stk, cnt, function(id) return fno[fr(id)] end)
  stk, cnt = nil, nil
  local function key(st)   -- (the rare case below)
    local t = {}
    for i = 1, #st do t[i] = ftext[fno[fr(st[i])]] end
    return concat(t, "\30")
  end
  local sub = string.sub
  local function key_lt(a, b)
    local na, nb = #a, #b
    for i = 1, na < nb and na or nb do
      local x, y = ftext[fno[fr(a[i])]], ftext[fno[fr(b[i])]]
      if x ~= y then
        local lx, ly = #x, #y
        if lx < ly and sub(y, 1, lx) == x then
          local c = sub(y, lx + 1, lx + 1)
          if i == na then return true end
          if c ~= "\30" then return "\30" < c end
          return key(a) < key(b)     -- a name holding "\30"
        elseif ly < lx and sub(x, 1, ly) == y then
          local c = sub(x, ly + 1, ly + 1)
          if i == nb then return false end
          if c ~= "\30" then return c < "\30" end
          return key(a) < key(b)
        end
        return x < y
      end
    end
    return na < nb
  end
  local idx = {}
  for g = 1, #rep do idx[g] = g end
  table.sort(idx, function(a, b) return key_lt(rep[a], rep[b]) end)

  -- Frame indices (0-based) in order of first use by the sorted samples.
  local order = {}
  for _, g in ipairs(idx) do
    local st = rep[g]
    for i = 1, #st do
      local f = fr(st[i])
      if not f.index then
        order[#order + 1] = f
        f.index = #order - 1
      end
    end
  end

  local parts, out = {}, {}
  local function w(s)
    out[#out + 1] = s
    if #out >= 1024 then
      parts[#parts + 1] = concat(out)
      for i = #out, 1, -1 do out[i] = nil end
    end
  end
  w('{"$schema":' .. str(M.SCHEMA) .. ',\n')
  w('"name":' .. str(meta.program or "ljprof") .. ',\n')
  w('"exporter":"ljprof",\n"activeProfileIndex":0,\n')
  w('"shared":{"frames":[\n')
  for i, f in ipairs(order) do
    w('{"name":' .. str(f.name))
    if f.file then w(',"file":' .. str(f.file)) end
    if f.line then w(',"line":' .. num(f.line)) end
    w(i < #order and '},\n' or '}\n')
  end
  w(']},\n"profiles":[{"type":"sampled","name":' .. str(M.profile_name(meta)))
  local total = 0
  for _, g in ipairs(idx) do total = total + counts[g] * ns_per_tick end
  w(',"unit":"nanoseconds","startValue":0,"endValue":' .. num(total) .. ',\n')
  w('"samples":[\n')
  local ix = {}
  for i, g in ipairs(idx) do
    local st = rep[g]
    for m = 1, #st do ix[m] = fr(st[m]).index end
    w('[' .. concat(ix, ",", 1, #st) .. (i < #idx and '],\n' or ']\n'))
  end
  w('],\n"weights":[')
  for i, g in ipairs(idx) do
    w(num(counts[g] * ns_per_tick) .. (i < #idx and "," or ""))
  end
  w(']}]}\n')
  parts[#parts + 1] = concat(out)
  return parts
end

function M.render(p, meta)
  return concat(M.render_parts(p, meta))
end

return M
