-- How much trace machine code src/mcmap.c maps exactly to one IR
-- instruction, per bench workload: `luajit bench/mcmap_cover.lua
-- bench/workloads/NAME.lua ...` (run from the repository with LUA_CPATH
-- finding the built libljprof). Each workload runs in its own process
-- (this script re-runs itself with --one); at its end (or at os.exit) the
-- traces alive are mapped and summed: traces, mapped, code bytes, bytes
-- mapped exactly, snapshot spans, spans whose anchors were not trusted.
local function one(path)
  local ljprof = require("ljprof")
  local util = require("jit.util")
  local report
  report = function()
    jit.off()
    collectgarbage("stop")
    local n, mapped, bytes, exact, spans, untr = 0, 0, 0, 0, 0, 0
    for tr = 1, 65535 do
      local info = util.traceinfo(tr)
      if info then
        n = n + 1
        local st = ljprof._mcmap(tr)
        if st then
          mapped = mapped + 1
          bytes, exact = bytes + st.bytes, exact + st.exact_bytes
          spans, untr = spans + st.spans, untr + st.untrusted
        end
      end
    end
    io.stderr:write(string.format("MCMAP %d %d %d %d %d %d\n", n, mapped, bytes, exact, spans, untr))
  end
  -- LJP_MCMAP_AT=stop: each trace mapped when it is made (jit.attach's
  -- "stop"), so that traces flushed later count too.
  local atstop = os.getenv("LJP_MCMAP_AT") == "stop"
  local made = {0, 0, 0, 0, 0, 0}
  if atstop then
    jit.attach(function(what, tr)
      if what ~= "stop" then return end
      made[1] = made[1] + 1
      local st, why = ljprof._mcmap(tr)
      if st then
        made[2], made[3], made[4] = made[2] + 1, made[3] + st.bytes, made[4] + st.exact_bytes
        made[5], made[6] = made[5] + st.spans, made[6] + st.untrusted
        if st.untrusted > 0 and os.getenv("LJP_MCMAP_SHOW") then
          io.stderr:write(string.format("untrusted: trace %d (%d of %d spans)\n", tr, st.untrusted, st.spans))
        end
      elseif os.getenv("LJP_MCMAP_SHOW") then
        io.stderr:write(string.format("unmapped: trace %d: %s\n", tr, tostring(why)))
      end
    end, "trace")
    report = function()
      jit.attach(function() end)
      io.stderr:write(string.format("MCMAP %d %d %d %d %d %d\n", made[1], made[2], made[3], made[4], made[5], made[6]))
    end
  end
  local exit = os.exit
  os.exit = function(...) report() return exit(...) end
  local dir = path:match("^(.*)/[^/]*$") or "."
  local chunk = assert(loadfile(path))
  arg = {[0] = path}
  local ok, err = pcall(chunk)
  if not ok then io.stderr:write("error: ", tostring(err), "\n") end
  report()
end

if arg[1] == "--one" then return one(arg[2]) end
local tot = {0, 0, 0, 0, 0, 0}
print(string.format("%-14s %6s %6s %9s %7s %6s %9s", "workload", "traces", "mapped", "bytes", "exact", "spans", "untrusted"))
for i = 1, #arg do
  local p = io.popen(string.format("%s %s --one %s 2>&1 >/dev/null", arg[-1] or "luajit", arg[0], arg[i]))
  local out = p:read("*a")
  p:close()
  local v = {out:match("MCMAP (%d+) (%d+) (%d+) (%d+) (%d+) (%d+)")}
  if v[1] then
    for k = 1, 6 do v[k] = tonumber(v[k]) tot[k] = tot[k] + v[k] end
    print(string.format("%-14s %6d %6d %9d %6.1f%% %6d %9d", arg[i]:match("([^/]*)%.lua$"),
                        v[1], v[2], v[3], 100 * v[4] / math.max(v[3], 1), v[5], v[6]))
  else
    print(arg[i], "failed: " .. out:sub(1, 200))
  end
end
print(string.format("%-14s %6d %6d %9d %6.1f%% %6d %9d", "all", tot[1], tot[2], tot[3],
                    100 * tot[4] / math.max(tot[3], 1), tot[5], tot[6]))
