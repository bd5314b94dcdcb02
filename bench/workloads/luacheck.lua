-- Workload "luacheck": a real program nobody here wrote. Runs luacheck
-- (Debian package lua-check; bench/run installs it when missing) on a fixed
-- tree of Lua sources that ships with the system (luacheck's own modules,
-- argparse and the other Lua 5.1 libraries in /usr/share/lua/5.1, and
-- LuaJIT's jit.* modules), ~1 s unprofiled: lexing, parsing, the
-- analysis passes, tables, strings and GC, in code written for PUC Lua.
--
-- luacheck ends by calling os.exit, which skips lua_close and with it the
-- report of `-jp` (and of any profiler that writes at close). Here its
-- main chunk runs in a coroutine whose os.exit yields the exit code
-- instead, so the script returns normally under every profiler. The
-- report luacheck prints and its exit code are the check values.
local path = package.searchpath and package.searchpath("luacheck.main", package.path)
if not path then
  io.stderr:write("luacheck workload: luacheck is not installed (apt-get install lua-check)\n")
  os.exit(3)
end

-- The trees checked: the arguments, else these (the cost gate names
-- luacheck's own modules only: bench/cost/gate.lua)
local TREES = {...}
if #TREES == 0 then TREES = {"/usr/share/lua/5.1", "/usr/share/luajit-2.1.0-beta3/jit"} end

local main = assert(loadfile(path))
local exit = os.exit
local saved_arg = arg
arg = {[0] = "luacheck", "--no-config", "--no-cache", "--jobs", "1", "--no-color"}
for _, t in ipairs(TREES) do arg[#arg + 1] = t end

os.exit = function(code) coroutine.yield(code) end
local co = coroutine.create(main)
local ok, code = coroutine.resume(co, "luacheck.main")
os.exit, arg = exit, saved_arg
if not ok then error(code, 0) end
io.stdout:flush()
print("luacheck exit", code)
