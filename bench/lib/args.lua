-- Command-line options of the bench scripts (bench/bench.lua,
-- bench/icount.lua): spec["--name"] = "flag", "number", "string" or
-- "list" (comma-separated). Returns the options keyed by name without the
-- dashes, "-" inside a name as "_" (--cost-reps -> cost_reps). An unknown
-- option or a bad value is one line naming it and what is accepted, and
-- exit status 2.
local M = {}

function M.parse(argv, spec, prog)
  local function die(msg)
    io.stderr:write(prog, ": ", msg, "\n")
    os.exit(2)
  end
  local opt = {}
  local i = 1
  while i <= #argv do
    local a = argv[i]
    local kind = spec[a]
    if not kind then
      local names = {}
      for k in pairs(spec) do names[#names + 1] = k end
      table.sort(names)
      die("unknown option " .. a .. " (accepted: " .. table.concat(names, ", ") .. ")")
    end
    local key = a:gsub("^%-%-", ""):gsub("%-", "_")
    if kind == "flag" then
      opt[key] = true
    else
      i = i + 1
      local v = argv[i]
      if v == nil then die(a .. " needs a value") end
      if kind == "number" then
        v = tonumber(v)
        if not v or v < 1 then die("bad " .. a .. " '" .. argv[i] .. "' (accepted: a positive number)") end
      elseif kind == "list" then
        local t = {}
        for x in v:gmatch("[^,]+") do t[#t + 1] = x end
        v = t
      end
      opt[key] = v
    end
    i = i + 1
  end
  return opt
end

return M
