----------------------------------------------------------------------------
-- jit.prof.output: ljprof's one output path. Both front ends, -jprof
-- (jit/prof.lua) and the `ljprof` command (jit/prof/cli.lua), turn a
-- recorded profile into files only through this module:
--
--   local fmt = output.format(path, forced, n)   -- which format
--   local ok, err = output.check(path)           -- writable? (before a run)
--   local data, err = output.render(p, meta, fmt, {view = v, zones = z})
--   local ok, err = output.write(path, data)     -- "-" is standard output
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
local text = require("jit.prof.text")

local M = {}

-- The format of output path (forced: /format= or -f, n: the number of
-- outputs), and whether path can be written now: jit/prof/options.lua,
-- which a starting run loads without this module.
M.format, M.check = options.format, options.check

-- -jp view letters -> a view (jit.prof.text.parse), or nil and one line.
function M.view(letters)
  local ok, v = pcall(text.parse, letters or "f")
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
-- blank line), or "".
function M.hot_interpreted(p, min)
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
    if i > 0 and pct >= math.max(min, 1) and #lines < 10 then
      local head = string.format("%2d%%  %s", pct, f.func)
      local list = aborts[f.func]
      if not list then
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
    s = s .. M.hot_interpreted(p, v.min)
  end
  return s
end

-- The content of one output of format fmt, or nil and one line. opts:
-- view (a view table or letters; default "f"), zones (zones at the root),
-- native (true: text views show native frames too, as view.native does;
-- by default they show Lua frames only, see jit/prof/text.lua).
function M.render(p, meta, fmt, opts)
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
  local ok, data = pcall(mod.render, p, meta)
  if not ok then return nil, "format " .. fmt .. " failed: " .. tostring(data) end
  if type(data) ~= "string" then
    return nil, "format " .. fmt .. " failed: render returned no data"
  end
  return data
end

-- Write one output: "-" is standard output, anything else goes through
-- the output routine. Returns true, or nil and "cannot write <path>:
-- <why>".
function M.write(path, data)
  if path == "-" then
    io.stdout:write(data)
    io.stdout:flush()
    return true
  end
  local ok, err = lib().write_file(path, data)
  if not ok then return nil, strip(err) end
  return true
end

return M
