-- Running the measured processes: each run is a fresh process started
-- with posix_spawn (stdout and stderr to files), timed with
-- CLOCK_MONOTONIC around spawn..wait4 (wall) and wait4's rusage (CPU =
-- user + sys). A run killed by a signal (a crash) is counted and repeated.
local ffi = require("ffi")

ffi.cdef[[
typedef int pid_t;
struct ljb_timeval { long tv_sec; long tv_usec; };
struct ljb_rusage {
  struct ljb_timeval ru_utime, ru_stime;
  long ru_maxrss, ru_ixrss, ru_idrss, ru_isrss, ru_minflt, ru_majflt, ru_nswap,
       ru_inblock, ru_oublock, ru_msgsnd, ru_msgrcv, ru_nsignals, ru_nvcsw,
       ru_nivcsw;
};
struct ljb_timespec { long tv_sec; long tv_nsec; };
int clock_gettime(int clk, struct ljb_timespec *ts);
int posix_spawn_file_actions_init(void *fa);
int posix_spawn_file_actions_addopen(void *fa, int fd, const char *path,
                                     int oflag, unsigned mode);
int posix_spawn_file_actions_destroy(void *fa);
int posix_spawnp(pid_t *pid, const char *file, const void *fa,
                 const void *attr, char *const argv[], char *const envp[]);
pid_t wait4(pid_t pid, int *status, int options, struct ljb_rusage *ru);
char *strerror(int errnum);
extern char **environ;
]]
local C = ffi.C

local M = {}

M.TMP = nil  -- scratch directory, set by the driver

function M.now()
  local ts = ffi.new("struct ljb_timespec")
  C.clock_gettime(1, ts)  -- CLOCK_MONOTONIC
  return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9
end

function M.log(...)
  io.stderr:write(string.format(...))
  io.stderr:flush()
end

function M.readfile(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("*a")
  f:close()
  return s
end

function M.writefile(path, s)
  local f = assert(io.open(path, "wb"))
  f:write(s)
  f:close()
end

-- Output of a shell command, trailing space removed.
function M.sh(cmd)
  local f = io.popen(cmd .. " 2>&1")
  local s = f:read("*a"):gsub("%s+$", "")
  f:close()
  return s
end

-- s with the scratch directory written as TMP (for commands in the report).
function M.untmp(s)
  return (s:gsub(M.TMP:gsub("%p", "%%%0"), "TMP"))
end

-- For a bench script run by path from anywhere (its own chunk name,
-- "@.../bench/NAME.lua"): the source tree's absolute path, the build
-- directory (LJPROF_BUILD, else the tree's build/) and a new temporary
-- directory.
function M.tree(chunkname)
  local src = chunkname:match("^@(.*)bench/[^/]+%.lua$") or ""
  if src:sub(1, 1) ~= "/" then src = M.sh("pwd") .. "/" .. src end
  src = src:gsub("/$", "")
  local dir = M.sh("mktemp -d ${TMPDIR:-/tmp}/ljprof-bench.XXXXXX")
  return src, os.getenv("LJPROF_BUILD") or (src .. "/build"), dir
end

-- The shell command that runs the shell commands cmds, n at a time
-- (xargs -P), each from its own script in dir (dir/job-i.sh, listed in
-- dir/jobs): for os.execute, or io.popen to read their output.
function M.parallel(cmds, dir, n)
  local list = {}
  for i, cmd in ipairs(cmds) do
    list[i] = string.format("%s/job-%d.sh", dir, i)
    M.writefile(list[i], cmd .. "\n")
  end
  M.writefile(dir .. "/jobs", table.concat(list, "\n") .. "\n")
  return "xargs -n 1 -P " .. n .. " sh < " .. dir .. "/jobs"
end

function M.shellquote(s)
  if s:match("^[%w%./_=,:+-]+$") then return s end
  return "'" .. s:gsub("'", "'\\''") .. "'"
end

local function cstrings(list)  -- NULL-terminated char *[], with anchors
  local arr = ffi.new("char *[?]", #list + 1)
  local keep = {}
  for i, s in ipairs(list) do
    keep[i] = ffi.new("char[?]", #s + 1, s)
    arr[i - 1] = keep[i]
  end
  arr[#list] = nil
  return arr, keep
end

-- The environment of the children: ours, with `set` overriding or adding
-- variables (a value of false removes one).
local function environment(set)
  local env = {}
  local i = 0
  while C.environ[i] ~= nil do
    local e = ffi.string(C.environ[i])
    local k = e:match("^([^=]*)=")
    if k and set[k] == nil then env[#env + 1] = e end
    i = i + 1
  end
  for k, v in pairs(set) do
    if v then env[#env + 1] = k .. "=" .. v end
  end
  table.sort(env)
  return env
end

local O_WRONLY_CREAT_TRUNC = 1 + 64 + 512

-- Run argv once. Returns {wall=, cpu=, out=} on exit status 0; nil, signal,
-- stderr when killed by a signal; raises an error on a nonzero exit.
function M.run(argv, envset)
  local out, err = M.TMP .. "/stdout", M.TMP .. "/stderr"
  local fa = ffi.new("uint8_t[256]")  -- posix_spawn_file_actions_t (80 bytes on glibc)
  C.posix_spawn_file_actions_init(fa)
  C.posix_spawn_file_actions_addopen(fa, 1, out, O_WRONLY_CREAT_TRUNC, 420)
  C.posix_spawn_file_actions_addopen(fa, 2, err, O_WRONLY_CREAT_TRUNC, 420)
  local cargv, k1 = cstrings(argv)
  local cenv, k2 = cstrings(environment(envset or {}))
  local pid = ffi.new("pid_t[1]")
  local status = ffi.new("int[1]")
  local ru = ffi.new("struct ljb_rusage")
  local t0 = M.now()
  local rc = C.posix_spawnp(pid, argv[1], fa, nil, cargv, cenv)
  if rc ~= 0 then error("posix_spawnp " .. argv[1] .. ": " .. ffi.string(C.strerror(rc))) end
  assert(C.wait4(pid[0], status, 0, ru) == pid[0], "wait4 failed")
  local wall = M.now() - t0
  C.posix_spawn_file_actions_destroy(fa)
  local _ = {k1, k2}
  local cpu = tonumber(ru.ru_utime.tv_sec) + tonumber(ru.ru_utime.tv_usec) * 1e-6 +
              tonumber(ru.ru_stime.tv_sec) + tonumber(ru.ru_stime.tv_usec) * 1e-6
  local st = status[0]
  if st ~= 0 then
    local stderr = M.readfile(err) or ""
    local sig = bit.band(st, 0x7f)
    if sig ~= 0 and sig ~= 0x7f then return nil, sig, stderr end
    error(string.format("%s exited with status %d:\n%s", table.concat(argv, " "),
                        bit.rshift(st, 8), stderr))
  end
  return {wall = wall, cpu = cpu, maxrss_kb = tonumber(ru.ru_maxrss),
          out = M.readfile(out) or "", err = M.readfile(err) or ""}
end

-- Crashes, for the report: crashes[label] = {crashed=, given_up=}.
M.MAX_ATTEMPTS = 5
M.crashes, M.crash_order = {}, {}

-- M.run, repeating a run killed by a signal up to MAX_ATTEMPTS times; then
-- gives up and returns nil (that round of that configuration is left out).
function M.run_retry(label, argv, envset)
  for _ = 1, M.MAX_ATTEMPTS do
    local r, sig, stderr = M.run(argv, envset)
    if r then return r end
    local c = M.crashes[label]
    if not c then
      c = {crashed = 0, given_up = 0}
      M.crashes[label] = c
      M.crash_order[#M.crash_order + 1] = label
    end
    c.crashed = c.crashed + 1
    M.log("\n!! %s: killed by signal %d (%s)\n%s", label, sig, table.concat(argv, " "), stderr)
  end
  M.crashes[label].given_up = M.crashes[label].given_up + 1
  M.log("!! %s: crashed %d times in a row, round left out\n", label, M.MAX_ATTEMPTS)
  return nil
end

-- "key value" lines (written by bench/probe.lua and bench/with_ljprof.lua).
function M.read_kv(path)
  local s = M.readfile(path)
  if not s then return nil end
  local t = {}
  for k, v in s:gmatch("([%w_.]+) ([^\n]*)") do t[k] = tonumber(v) or v end
  return t
end

return M
