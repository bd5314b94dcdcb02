-- Tiny test helper for the Lua tests: named cases, assertions that say
-- what differed, and an exit status (non-zero on any failure).
local t = {failed = 0, passed = 0}

local function fmt(v)
  if type(v) == "string" then return string.format("%q", v) end
  return tostring(v)
end

-- Run fn as a named case; an error inside counts as a failure.
function t.case(name, fn)
  local before = t.failed
  local ok, err = xpcall(fn, debug.traceback)
  if not ok then
    t.failed = t.failed + 1
    io.stderr:write("ERROR in ", name, ": ", tostring(err), "\n")
  end
  if t.failed == before then
    t.passed = t.passed + 1
    print("ok   " .. name)
  else
    print("FAIL " .. name)
  end
end

function t.ok(cond, msg)
  if not cond then
    t.failed = t.failed + 1
    io.stderr:write("  check failed: ", msg or "?", "\n", debug.traceback("", 2), "\n")
  end
  return cond
end

function t.eq(a, b, msg)
  if a ~= b then
    t.failed = t.failed + 1
    io.stderr:write("  ", msg or "values differ", ": got ", fmt(a), ", expected ", fmt(b), "\n",
      debug.traceback("", 2), "\n")
  end
  return a == b
end

-- Expect fn to raise an error whose message contains pattern (plain text).
function t.raises(fn, pattern, msg)
  local ok, err = pcall(fn)
  if ok then return t.ok(false, (msg or "expected an error") .. " (none raised)") end
  return t.ok(tostring(err):find(pattern, 1, true) ~= nil,
    (msg or "error message") .. ": " .. tostring(err) .. " lacks '" .. pattern .. "'")
end

-- Burn CPU in the interpreter for about sec seconds of CPU time.
function t.burn(sec, fn)
  local t0 = os.clock()
  local r = 0
  while os.clock() - t0 < sec do r = r + (fn or function(n) local s = 0 for i = 1, n do s = s + i % 7 end return s end)(20000) end
  return r
end

-- Do tables a and b have the same keys and values? The first five
-- differences are reported, each as a failed check.
function t.same_keys(a, b, what)
  local bad = 0
  for k, v in pairs(a) do
    if b[k] ~= v then
      bad = bad + 1
      if bad <= 5 then t.eq(b[k], v, what .. ": " .. tostring(k)) end
    end
  end
  for k, v in pairs(b) do
    if a[k] == nil then
      bad = bad + 1
      if bad <= 5 then t.eq(v, nil, what .. ": unexpected " .. tostring(k)) end
    end
  end
  return bad == 0
end

-- A file's contents, or nil when it cannot be read.
function t.read(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("*a")
  f:close()
  return s
end

-- Write s to path (an error if it cannot be written).
function t.write(path, s)
  local f = assert(io.open(path, "wb"))
  f:write(s)
  f:close()
end

-- A fresh temporary file name ending in ext: os.tmpname() creates its
-- file, which is removed here, so that only the name with ext is used
-- (and removed by the test) and nothing is left behind in the temporary
-- directory.
function t.tmpname(ext)
  local n = os.tmpname()
  os.remove(n)
  return n .. (ext or "")
end

-- A shell word: s in single quotes.
function t.q(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

-- A fresh temporary directory (the test removes it: t.rmdir).
function t.tmpdir()
  if jit and jit.os == "Windows" then  -- (os.tmpname names a file in \)
    local d = string.format("%s\\ljp_%d_%d", os.getenv("TEMP") or ".", os.time(),
                            math.random(1, 1e9))
    assert(os.execute('mkdir "' .. d .. '"') == 0)
    return d
  end
  local d = os.tmpname()
  os.remove(d)
  assert(os.execute("mkdir -p " .. t.q(d)) == 0)
  return d
end

-- Remove directory d and what it holds.
function t.rmdir(d)
  if jit and jit.os == "Windows" then return os.execute('rmdir /s /q "' .. d .. '"') end
  return os.execute("rm -rf " .. t.q(d))
end

-- Run shell command cmd in directory dir: its output (stdout and stderr)
-- and its exit status.
function t.sh_in(dir, cmd)
  local p = io.popen("cd " .. t.q(dir) .. " && { " .. cmd .. "; } 2>&1; echo \"exit=$?\"")
  local s = p:read("*a")
  p:close()
  local body, code = s:match("^(.*)exit=(%d+)\n$")
  return body or s, tonumber(code)
end

-- For child processes: the luajit running the tests, the source and
-- build trees, and the environment that finds jit.prof and ljprof there.
t.LUAJIT = arg and arg[-1] or "luajit"
t.SRC = os.getenv("LJPROF_SRC") or "."
t.BUILD = os.getenv("LJPROF_BUILD") or "build"
t.CHILD_ENV = string.format("LUA_PATH='%s/?.lua;%s/jit/?.lua;;' LUA_CPATH='%s/lib?.so;;' ",
                            t.SRC, t.SRC, t.BUILD)

-- Windows (the tests of tests/windows, under Wine): no shell; cmd runs a
-- command, its output (stdout and stderr; stdout only with quiet: stderr
-- to NUL) and exit status.
t.WINDOWS = jit and jit.os == "Windows"
function t.run_win(cmd, quiet)
  -- (under Wine a popen fails now and then, nil and no reason: once in a
  -- CI run of win-jprof-views; tried again, up to 5 times)
  local line = cmd .. (quiet and " 2>NUL" or " 2>&1") .. " & call echo exit=%ERRORLEVEL%"
  local p, err
  for _ = 1, 5 do
    p, err = io.popen(line)
    if p then break end
  end
  assert(p, "io.popen failed 5 times: " .. tostring(err) .. ": " .. line)
  local s = p:read("*a")
  p:close()
  local body, code = s:match("^(.*)exit=(%d+)%s*$")
  -- (a console program's text-mode stdout ends its lines in CR LF)
  return (body or s):gsub("\r\n", "\n"), tonumber(code)
end

function t.done()
  print(string.format("%d cases passed, %d failed", t.passed, t.failed))
  os.exit(t.failed == 0 and 0 or 1)
end

return t
