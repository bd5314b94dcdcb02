-- Outputs: one routine (src/outfile.c) writes for every face, and never
-- turns a device node, a FIFO, a link or a redirected stream into
-- something else. Each case runs through every face that takes a path:
--   jprof    luajit -jprof=f,PATH script
--   command  build/ljprof -f folded -o PATH script
--   report   build/ljprof report RAW -f folded -o PATH
--   record   ljprof.record{output = PATH} ... ljprof.stop()  (the C option)
-- Device nodes are private ones made with mknod in a temporary directory
-- (as root; skipped with a message otherwise), never the system's.
local t = require "t"

local LUAJIT, BUILD, ENV = t.LUAJIT, t.BUILD, t.CHILD_ENV
local CLI = BUILD .. "/ljprof"
-- Each face runs under a hard bound: a write that blocks (a FIFO with no
-- reader, before the fix) fails the case instead of hanging the suite.
local RUN = "timeout 60 env " .. ENV

local q = t.q
local function sh(cmd)  -- status, combined output
  local p = io.popen(cmd .. " 2>&1; echo \"rc=$?\"")
  local out = p:read("*a")
  p:close()
  local rc = tonumber(out:match("rc=(%d+)%s*$"))
  return rc, out:gsub("rc=%d+%s*$", "")
end

local dir = t.tmpdir()
local ROOT = io.popen("id -u"):read("*l") == "0"

local SCRIPT = dir .. "/prog.lua"
do
  local f = assert(io.open(SCRIPT, "w"))
  f:write("local s = 0 for i = 1, 2e7 do s = s + i % 3 end print('prog', s)\n")
  f:close()
end
local RAW = dir .. "/prof.ljprof"
assert(sh(ENV .. LUAJIT .. " -jprof=/format=raw/clock=wall/rate=1000," .. q(RAW) .. " " .. q(SCRIPT)) == 0)

local faces = {
  jprof = function(path)
    return sh(RUN .. LUAJIT .. " -jprof=f/clock=wall/rate=1000," .. q(path) .. " " .. q(SCRIPT))
  end,
  command = function(path)
    return sh(RUN .. CLI .. " -c wall -r 1000 -f folded -o " .. q(path) .. " " .. q(SCRIPT))
  end,
  report = function(path)
    return sh(RUN .. CLI .. " report " .. q(RAW) .. " -f folded -o " .. q(path))
  end,
  record = function(path)
    local code = string.format([[local p = require('ljprof') p.record{clock = 'wall', output = %q}
      local s = 0 for i = 1, 2e7 do s = s + i %% 3 end print('prog', s) p.stop()]], path)
    return sh(RUN .. LUAJIT .. " -e " .. q(code))
  end,
}
local FACES = {"jprof", "command", "report", "record"}

local function kind(path)
  local p = io.popen("stat -c %F " .. q(path) .. " 2>/dev/null")
  local k = p:read("*l")
  p:close()
  return k
end

local function slurp(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("*a")
  f:close()
  return s
end

-- A FIFO reader: opens FIFO (non-blocking, so at once), says "open" in
-- READY, waits with poll for a writer's data and its close, copies all
-- of it to GOT and says "done" in READY: luajit FIFO_READER FIFO GOT READY.
local FIFO_READER = dir .. "/fifo_reader.lua"
t.write(FIFO_READER, [=[
local ffi = require "ffi"
ffi.cdef[[
int open(const char *, int, ...); long read(int, void *, unsigned long); int close(int);
struct pollfd { int fd; short events, revents; };
int poll(struct pollfd *, unsigned long, int);
]]
local fifo, got, ready = ...
local function put(path, s) local f = assert(io.open(path, "wb")) f:write(s) f:close() end
local fd = ffi.C.open(fifo, 0x800)   -- O_RDONLY | O_NONBLOCK
assert(fd >= 0, "open " .. fifo)
put(ready, "open")
local pfd, buf, parts = ffi.new("struct pollfd[1]"), ffi.new("char[65536]"), {}
pfd[0].fd, pfd[0].events = fd, 1     -- POLLIN
while true do  -- no POLLHUP before a writer has come (Linux): waits for it
  if ffi.C.poll(pfd, 1, -1) > 0 then
    local n = tonumber(ffi.C.read(fd, buf, 65536))
    if n > 0 then parts[#parts + 1] = ffi.string(buf, n)
    elseif n == 0 and bit.band(pfd[0].revents, 0x10) ~= 0 then break end  -- POLLHUP: writer gone
  end
end
ffi.C.close(fd)
put(got, table.concat(parts))
put(ready, "done")
]=])

local function leftovers(prefix)
  local p = io.popen("ls -a " .. q(dir))
  local n = {}
  for name in p:lines() do
    if name:find(prefix, 1, true) == 1 and name:find(".tmp.", 1, true) then n[#n + 1] = name end
  end
  p:close()
  return n
end

t.case("a regular file: written whole, atomically, nothing left behind", function()
  for _, face in ipairs(FACES) do
    local path = dir .. "/out-" .. face .. ".txt"
    local rc, out = faces[face](path)
    t.eq(rc, 0, face .. ": status\n" .. out)
    local data = slurp(path) or ""
    t.ok(#data > 0 and data:sub(-1) == "\n", face .. ": a complete file")
    t.eq(#leftovers("out-" .. face), 0, face .. ": no temporary file left")
    os.remove(path)
  end
end)

t.case("private device nodes stay device nodes (full: one-line error; null: success)", function()
  if not ROOT then
    print("  skipped: mknod needs root")
    return
  end
  for _, face in ipairs(FACES) do
    local full, null = dir .. "/full-" .. face, dir .. "/null-" .. face
    assert(os.execute("mknod " .. q(full) .. " c 1 7 && mknod " .. q(null) .. " c 1 3") == 0)
    local _, out = faces[face](full)
    t.eq(kind(full), "character special file", face .. ": full is still a device")
    t.ok(out:find("cannot write " .. full .. ": No space left on device", 1, true) ~= nil,
         face .. ": one line naming the device:\n" .. out)
    t.ok(not out:find("traceback", 1, true), face .. ": no traceback")
    local rc2, out2 = faces[face](null)
    t.eq(rc2, 0, face .. ": writing to null works\n" .. out2)
    t.eq(kind(null), "character special file", face .. ": null is still a device")
    os.remove(full)
    os.remove(null)
  end
end)

t.case("record{output}: an output that cannot be written makes stop() return false and why", function()
  -- A FIFO without a reader passes the check at start (never opened
  -- there) and fails at stop. Before: one line on stderr, but stop()
  -- returned true, so a program could not tell its profile was lost.
  local fifo = dir .. "/fifo-stop"
  assert(os.execute("mkfifo " .. q(fifo)) == 0)
  local code = string.format([[local p = require('ljprof') p.record{clock = 'wall', output = %q}
    local s = 0 for i = 1, 2e7 do s = s + i %% 3 end print('stop', p.stop())
    print('error', p.stats().error)]], fifo)
  local rc, out = sh(RUN .. LUAJIT .. " -e " .. q(code))
  t.eq(rc, 0, "status\n" .. out)
  t.ok(out:find("stop\tfalse\tljprof: cannot write " .. fifo .. ": a FIFO with no reader", 1, true) ~= nil,
       "stop() returns false and the line:\n" .. out)
  t.ok(out:find("error\tljprof: cannot write", 1, true) ~= nil, "stats().error says it too:\n" .. out)
  os.remove(fifo)
end)

t.case("a FIFO with a reader gets the whole profile; without one, one line", function()
  for _, face in ipairs(FACES) do
    local fifo, got = dir .. "/fifo-" .. face, dir .. "/fifo-" .. face .. ".got"
    assert(os.execute("mkfifo " .. q(fifo)) == 0)
    -- The reader holds the FIFO open before the writer starts (a reader
    -- merely started, as `cat fifo &` was, may not have opened it yet on
    -- a loaded machine: the writer then rightly says "no reader").
    local ready = got .. ".ready"
    os.execute("(timeout 60 " .. LUAJIT .. " " .. q(FIFO_READER) .. " " .. q(fifo) .. " " ..
               q(got) .. " " .. q(ready) .. " &)")
    for _ = 1, 600 do
      if slurp(ready) then break end
      os.execute("sleep 0.1")
    end
    t.ok(slurp(ready) ~= nil, face .. ": the reader has the FIFO open")
    local rc, out = faces[face](fifo)
    t.eq(rc, 0, face .. ": status\n" .. out)
    local data
    for _ = 1, 100 do  -- the reader finishes right after the writer closes
      if slurp(ready) == "done" then break end
      os.execute("sleep 0.1")
    end
    data = slurp(got)
    t.ok(data and #data > 0 and data:sub(-1) == "\n", face .. ": the reader got the profile")
    t.eq(kind(fifo), "fifo", face .. ": still a FIFO")
    if face ~= "record" then  -- the C option says it on stderr, stop() still returns
      local _, out2 = faces[face](fifo)
      t.ok(out2:find("cannot write " .. fifo .. ": a FIFO with no reader", 1, true) ~= nil,
           face .. ": no reader is one line, not a hang:\n" .. out2)
    end
    os.remove(fifo)
    os.remove(got)
    os.remove(ready)
  end
end)

t.case("/dev/stdout redirected to a file keeps the program's own output", function()
  local path = dir .. "/redirected.txt"
  local rc = os.execute("{ echo before; " .. ENV .. LUAJIT .. " -jprof=f,/dev/stdout " ..
                        q(SCRIPT) .. "; } > " .. q(path) .. " 2>&1")
  t.eq(rc, 0, "status")
  local data = slurp(path) or ""
  t.ok(data:find("^before\nprog\t") ~= nil, "the program's output is still there:\n" .. data)
  t.ok(data:find("%d+%%%s+prog%.lua") ~= nil, "the profile follows it:\n" .. data)
end)

t.case("symlinks: ours are written through and stay links; a directory is refused", function()
  for _, face in ipairs(FACES) do
    local link, target = dir .. "/link-" .. face, dir .. "/target-" .. face
    assert(os.execute("ln -s " .. q(target) .. " " .. q(link)) == 0)
    local rc, out = faces[face](link)
    t.eq(rc, 0, face .. ": status\n" .. out)
    t.eq(kind(link), "symbolic link", face .. ": the link is still a link")
    t.eq(kind(target), "regular file", face .. ": its target was written")
    os.remove(link)
    os.remove(target)
    local d = dir .. "/adir-" .. face
    assert(os.execute("mkdir " .. q(d)) == 0)
    local _, out2 = faces[face](d)
    t.ok(out2:find("cannot write " .. d .. ": a directory", 1, true) ~= nil,
         face .. ": one line for a directory:\n" .. out2)
    os.execute("rmdir " .. q(d))
  end
end)

t.case("someone else's symlink in a sticky shared directory is not followed", function()
  if not ROOT then
    print("  skipped: needs root to create another user's link")
    return
  end
  local shared = dir .. "/shared"
  local victim = dir .. "/victim.txt"
  assert(os.execute("mkdir " .. q(shared) .. " && chmod 1777 " .. q(shared)) == 0)
  local f = assert(io.open(victim, "w"))
  f:write("precious\n")
  f:close()
  local link = shared .. "/out.txt"
  assert(os.execute("ln -s " .. q(victim) .. " " .. q(link) .. " && chown -h nobody " .. q(link)) == 0)
  local _, out = faces.jprof(link)
  t.ok(out:find("not followed", 1, true) ~= nil, "refused in one line:\n" .. out)
  t.eq(slurp(victim), "precious\n", "the link's target is untouched")
end)

t.case("a temporary file left by a killed writer is removed by the next write", function()
  -- The name of ours (<path>.tmp.<pid>.<n>) with a pid that no longer runs.
  local p = io.popen("sh -c 'echo $$'")
  local dead = p:read("*l")
  p:close()
  local path = dir .. "/killed.txt"
  local stale = path .. ".tmp." .. dead .. ".0"
  local other = path .. ".tmp.notapid"
  for _, name in ipairs({stale, other}) do
    local f = assert(io.open(name, "w"))
    f:write("half")
    f:close()
  end
  local rc = faces.jprof(path)
  t.eq(rc, 0, "status")
  t.eq(slurp(stale), nil, "the stale temporary file is gone")
  t.eq(slurp(other), "half", "a file that is not ours is kept")
  os.remove(other)
  os.remove(path)
end)

t.case("two processes writing one output: one whole file, never a mix", function()
  local path = dir .. "/race.txt"
  os.execute("(" .. ENV .. LUAJIT .. " -jprof=f," .. q(path) .. " " .. q(SCRIPT) .. " >/dev/null 2>&1 &) ; " ..
             ENV .. LUAJIT .. " -jprof=f," .. q(path) .. " " .. q(SCRIPT) .. " >/dev/null 2>&1")
  os.execute("sleep 2")
  local data = slurp(path) or ""
  local _, headers = data:gsub("prog%.lua", "")
  t.ok(#data > 0 and data:sub(-1) == "\n", "a complete file")
  t.ok(headers >= 1 and headers <= 2, "one profile's lines, not two interleaved: " .. headers)
  t.eq(#leftovers("race.txt"), 0, "no temporary file left")
end)

local function mode_of(path)
  local p = io.popen("stat -c %a " .. q(path) .. " 2>/dev/null")
  local m = p:read("*l")
  p:close()
  return m
end

-- nginx runs its workers with umask 0: every profile came out
-- -rw-rw-rw- (issue 27). New files are 0644 whatever the umask, 0600 when
-- private output is asked for (each face's own option, and LJPROF's).
t.case("umask 0: new profiles are 0644, 0600 with the private option (every face)", function()
  local U = "umask 0; " .. RUN
  local function face(name, path, priv)
    if name == "jprof" then
      return sh(U .. LUAJIT .. " -jprof=f/clock=wall/rate=1000" .. (priv and "/private=on" or "") .. "," ..
                q(path) .. " " .. q(SCRIPT))
    elseif name == "command" then
      return sh(U .. CLI .. (priv and " --private" or "") .. " -c wall -r 1000 -f folded -o " .. q(path) ..
                " " .. q(SCRIPT))
    elseif name == "report" then
      return sh(U .. CLI .. " report" .. (priv and " --private" or "") .. " " .. q(RAW) .. " -f folded -o " ..
                q(path))
    elseif name == "record" then
      local code = string.format([[local p = require('ljprof') %s p.record{clock = 'wall', output = %q}
        local s = 0 for i = 1, 2e7 do s = s + i %% 3 end print('prog', s) p.stop()]],
        priv and "p.output_private(true)" or "", path)
      return sh(U .. LUAJIT .. " -e " .. q(code))
    else  -- LJPROF
      return sh(U .. "LJPROF=" .. q("output=" .. path .. (priv and ",private=on" or "")) .. " " .. LUAJIT ..
                " -l ljprof.auto " .. q(SCRIPT))
    end
  end
  for _, name in ipairs({"jprof", "command", "report", "record", "auto"}) do
    for _, priv in ipairs({false, true}) do
      local path = dir .. "/mode-" .. name .. (priv and "-private" or "") .. ".txt"
      local rc, out = face(name, path, priv)
      t.eq(rc, 0, name .. " runs: " .. out)
      t.eq(mode_of(path), priv and "600" or "644", name .. (priv and " private" or "") .. ": the file's mode")
    end
  end
  -- A file that is replaced keeps its permissions, less the group's and
  -- others' when private.
  local path = dir .. "/mode-kept.txt"
  t.write(path, "x")
  os.execute("chmod 0664 " .. q(path))
  face("jprof", path, false)
  t.eq(mode_of(path), "664", "a replaced file keeps its mode")
  face("jprof", path, true)
  t.eq(mode_of(path), "600", "a replaced file, private")
  t.raises(function() require("jit.prof").parse_options("f/private=yes", {}) end,
    "bad private 'yes' (accepted: on, off)")
end)

os.execute("rm -rf " .. q(dir))
t.done()
