----------------------------------------------------------------------------
-- ljprof high-level profiler: luajit -jprof[=options[,output]] app.lua
--
-- The -jp of ljprof. Sampling and aggregation happen in the ljprof C
-- library: each sample's stack key is dumped at the safe point with the
-- format the options ask for, so this module only parses options and
-- prints the aggregated table.
--
-- Options (as for -jp): f (functions, default), F (functions with module
-- prefix), l (lines), p (full paths), <n> / -<n> (stack depth, callers
-- first when negative), v (split by VM state), r (raw counts), m<n>
-- (minimum percent shown, default 3), i<n> (interval in ms, default 10),
-- G (folded stacks "a;b;c count"). Zones (z), split (s) and annotation
-- (a, A) come with later work and are rejected with a clear error.
--
-- Output: to stdout, to the file named after the comma, or to
-- $LUAJIT_PROFILEFILE. Written on stop(), at normal exit and on os.exit().
----------------------------------------------------------------------------

local ljprof = require("ljprof")
local model = require("jit.prof.model")

local vmnames = model.VMNAMES

local M = {}
local run        -- options of the active run, or nil
local exit_proxy -- __gc proxy that stops at lua_close

-- Parse -jp style options into a run description.
local function parse(opts, output)
  opts = opts or "f"
  local r = {min = 3, depth = 1, interval = ""}
  opts = opts:gsub("i%d*", function(s) r.interval = s; return "" end)
  opts = opts:gsub("m(%d+)", function(s) r.min = tonumber(s); return "" end)
  opts = opts:gsub("%-?%d+", function(s) r.depth = tonumber(s); return "" end)
  local m = {}
  for c in opts:gmatch(".") do
    if c:find("[zsaA]") then
      error("jit.prof: option '" .. c .. "' is not supported yet "
        .. "(accepted: f F l p v r G m<n> i<n> <n> -<n>)", 0)
    end
    m[c] = true
  end
  r.raw = m.r or m.G
  r.folded = m.G
  r.states = m.v
  r.scope = m.l and "l" or m.F and "F" or m.f and "f" or (m.v and "" or "f")
  r.fullpath = m.p or false
  r.split = (r.scope == "" or opts:find("v.*[lfF]")) and 1 or 0
  if m.G and r.scope ~= "" then r.depth, r.min = -100, 0 end
  -- Samples are recorded with structured stacks (jit.prof.model) as deep
  -- as the view needs; the view is rendered at the end.
  r.record_depth = -math.max(1, math.abs(r.depth))
  r.output = output or os.getenv("LUAJIT_PROFILEFILE")
  return r
end

-- Sort keys of a count table by count, most first (ties by name).
local function sorted(counts)
  local keys = {}
  for k in pairs(counts) do keys[#keys + 1] = k end
  table.sort(keys, function(a, b)
    if counts[a] ~= counts[b] then return counts[a] > counts[b] end
    return a < b
  end)
  return keys
end

local function report(r, out)
  local prof = model.collect(ljprof.summary())
  local total = 0
  local count1, count2 = {}, {}
  for _, e in ipairs(prof.samples) do
    local stack = r.scope ~= "" and
      model.view(prof, e.stack, r.scope, r.fullpath, r.depth, r.folded and ";") or nil
    local state = vmnames[e.vmstate] or e.vmstate
    local k1, k2
    if r.split == 1 then k1, k2 = state, stack
    else k1, k2 = stack, r.states and state or nil end
    total = total + e.count
    count1[k1] = (count1[k1] or 0) + e.count
    if k2 then
      local t = count2[k1] or {}
      count2[k1] = t
      t[k2] = (t[k2] or 0) + e.count
    end
  end
  if total == 0 then
    if not r.folded then out:write("[No samples collected]\n") end
    return
  end
  local function top(counts, sum, indent, children)
    for _, k in ipairs(sorted(counts)) do
      local v = counts[k]
      local pct = math.floor(v * 100 / sum + 0.5)
      if pct < r.min then break end
      if r.folded then
        out:write(string.format("%s %d\n", k, v))
      elseif r.raw then
        out:write(string.format("%s%5d  %s\n", indent, v, k))
      else
        out:write(string.format("%s%2d%%  %s\n", indent, pct, k))
      end
      if children and children[k] then
        local sub = r.split == 1 and "  -- " or r.depth < 0 and "  -> " or "  <- "
        top(children[k], v, r.folded and "" or sub)
      end
    end
  end
  top(count1, total, "", count2)
  if not r.raw then M.hot_interpreted(out, total, r.min) end
end

-- "Hot but interpreted": functions where at least min percent of all
-- samples were spent in the interpreter, with the trace aborts LuaJIT
-- reported for traces starting in them (why the hot code did not compile).
function M.hot_interpreted(out, total, min)
  local aborts = {}
  for _, a in ipairs(ljprof.aborts()) do
    local t = aborts[a.func] or {}
    aborts[a.func] = t
    t[#t + 1] = a
  end
  local lines = {}
  for _, f in ipairs(ljprof.functions()) do
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
  if #lines > 0 then
    out:write("\nHot but interpreted (percent of all samples in the interpreter; trace aborts):\n")
    for _, l in ipairs(lines) do out:write(l, "\n") end
  end
end

function M.stop()
  if not run then return end
  local r = run
  run = nil
  ljprof.stop()
  local out = io.stdout
  if r.output and r.output ~= "-" then
    local f, err = io.open(r.output, "w")
    if not f then
      io.stderr:write("jit.prof: cannot write ", r.output, ": ", tostring(err), "\n")
      return
    end
    out = f
  end
  report(r, out)
  if out ~= io.stdout then out:close() else out:flush() end
end

function M.start(opts, output)
  if run then M.stop() end
  local r = parse(opts, output)
  if r.output and r.output ~= "-" then  -- unwritable output: say so now
    local f, err = io.open(r.output, "a")
    if not f then error("jit.prof: cannot write output file " .. tostring(err), 0) end
    f:close()
  end
  ljprof.record({mode = r.interval, fmt = model.KEY_FMT, depth = r.record_depth})
  run = r
  -- Stop (and write) at lua_close, and before os.exit, which skips it.
  exit_proxy = newproxy(true)
  local this = exit_proxy
  getmetatable(exit_proxy).__gc = function()
    if exit_proxy == this then M.stop() end
  end
  if not M.os_exit then
    M.os_exit = os.exit
    os.exit = function(...)
      M.stop()
      return M.os_exit(...)
    end
  end
end

return M
