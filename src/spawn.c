/*
** The ljprof command's child process and its side channels (Lua functions
** of the module ljprof, registered by lua_ljprof.c from ljp_spawn_funcs):
**
**   spawn(argv [, opts]) -> "exit", code | "signal", signo
**                           (or after's results); nil, message
**   tmpfd()              -> fd, id: an unnamed temporary file (O_TMPFILE,
**                           else created and unlinked at once) in $TMPDIR
**                           or /tmp, close-on-exec; id is "fd:dev:ino"
**   fd_read(fd)          -> its whole content (from offset 0)
**   fd_close(fd)
**   isatty(fd)           -> is a terminal, the process is its foreground
**                           job
**   progress(id)         -> a handle (:close()): in the profiled program,
**                           a thread writes the run's sample count to the
**                           file id names about once a second
**
** spawn runs argv[1] (found on PATH) with the rest as its arguments and
** waits for it. opts: env = {"K=V", ...} added to the child's environment;
** keep = {fd, ...} descriptors the child inherits (tmpfd's are
** close-on-exec); tick = function(elapsed_s), called about once a second
** while waiting; after = function(how, n), called when the child has
** ended, while exit signals are still held (the outputs are written
** there: a late SIGTERM does not cut them short); int_grace = seconds
** (default 1).
**
** Signals, while the child runs (they are blocked and taken with
** sigtimedwait, so no handler runs; dispositions and the mask are
** restored before returning, and in the child before exec):
** - SIGINT, SIGTERM, SIGHUP and SIGQUIT sent to the command are passed on
**   to the child, each kind once (a repeat, such as timeout's second send
**   to its process group, would make luajit die of a second SIGINT
**   without its profile).
** - When the command is the foreground job of its terminal, the child
**   stays in the command's process group (reading the terminal, ^Z and ^C
**   work as without ljprof): signals from the terminal reach the child
**   directly and are not passed on again (si_code SI_KERNEL). Otherwise
**   (no terminal, a background job, under timeout, which makes a process
**   group of its own and signals it) the child gets a process group of
**   its own, so a signal sent to the command's group reaches the child
**   once, through the command; a terminal's signal goes to the child's
**   group.
** - luajit handles SIGINT only in interpreted code (an "interrupted!"
**   error at the next hook): in a compiled loop, or blocked in read(), it
**   never ends. int_grace seconds after a SIGINT, a child still running
**   gets SIGTERM, which the profiled child always answers at once with
**   its profile (exit_signals.c).
** - A signal ignored when the command starts (nohup) stays ignored, in
**   the command and in the child; except SIGINT, which luajit always
**   handles.
** - The child gets SIGTERM if the command dies (PR_SET_PDEATHSIG): a
**   command killed with SIGKILL leaves nothing running.
** ENTRY (called by Lua): normal context (Lua C functions); the progress
** thread (ENTRY, a thread's start) blocks every signal (sigowner.c) and
** only reads an atomic counter and pwrite()s.
*/
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <lauxlib.h>

#include "os.h"
#include "query.h"
#include "sigowner.h"
#include "spawn.h"

extern char **environ;

static const int passed[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
#define NPASS 4

static double mono(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Is this process's group the foreground job of its controlling terminal? */
static int foreground(void)
{
  int fd = open("/dev/tty", O_RDONLY | O_NOCTTY | O_CLOEXEC);
  pid_t fg;
  if (fd < 0) return 0;
  fg = tcgetpgrp(fd);
  close(fd);
  return fg >= 0 && fg == getpgrp();
}

/* The child's environment: environ with the "K=V" entries of the table at
** idx replacing or adding to it; NULL-terminated, in a userdata pushed on
** the stack (the strings live in environ and the table). */
static char **child_env(lua_State *L, int idx)
{
  size_t ne = 0, nx, i, k;
  char **env;
  while (environ[ne]) ne++;
  nx = idx ? lua_objlen(L, idx) : 0;
  env = lua_newuserdata(L, sizeof(char *) * (ne + nx + 1));
  k = 0;
  for (i = 0; i < ne; i++) {
    const char *eq = strchr(environ[i], '=');
    size_t kl = eq ? (size_t)(eq - environ[i]) + 1 : strlen(environ[i]);
    size_t j;
    int replaced = 0;
    for (j = 1; j <= nx && !replaced; j++) {
      const char *x;
      lua_rawgeti(L, idx, (int)j);
      x = lua_tostring(L, -1);
      if (x && !strncmp(x, environ[i], kl)) replaced = 1;
      lua_pop(L, 1);
    }
    if (!replaced) env[k++] = environ[i];
  }
  for (i = 1; i <= nx; i++) {
    lua_rawgeti(L, idx, (int)i);
    if (lua_type(L, -1) != LUA_TSTRING || !strchr(lua_tostring(L, -1), '='))
      luaL_error(L, "ljprof: spawn: env entry %d is not \"K=V\"", (int)i);
    env[k++] = (char *)lua_tostring(L, -1);  /* the table keeps it alive */
    lua_pop(L, 1);
  }
  env[k] = NULL;
  return env;
}

/* Call the function at idx with one number; errors are dropped (returns 0
** then: the caller stops calling it). */
static int call_tick(lua_State *L, int idx, double elapsed)
{
  lua_pushvalue(L, idx);
  lua_pushnumber(L, elapsed);
  if (lua_pcall(L, 1, 0, 0) != 0) {
    lua_pop(L, 1);
    return 0;
  }
  return 1;
}

/* The child's end as spawn() returns it: "exit", status or "signal", n. */
static void push_status(lua_State *L, int status)
{
  if (WIFSIGNALED(status)) {
    lua_pushliteral(L, "signal");
    lua_pushinteger(L, WTERMSIG(status));
  } else {
    lua_pushliteral(L, "exit");
    lua_pushinteger(L, WEXITSTATUS(status));
  }
}

static int l_spawn(lua_State *L)
{
  struct sigaction old_act[NPASS], old_chld;
  sigset_t set, old_mask;
  const char **argv;
  char **envp;
  int n, i, status = 0, err = 0, own_group, tick = 0, after = 0, nres;
  int ignored[NPASS], seen[NPASS], termed = 0, errpipe[2], keep[16], nkeep = 0;
  double grace = 1.0, start, next_tick, deadline = 0;
  pid_t pid, parent = getpid();
  luaL_checktype(L, 1, LUA_TTABLE);
  n = (int)lua_objlen(L, 1);
  if (n < 1) return luaL_error(L, "ljprof: spawn needs a program name");
  argv = lua_newuserdata(L, sizeof(char *) * (size_t)(n + 1));
  for (i = 0; i < n; i++) {
    lua_rawgeti(L, 1, i + 1);
    if (lua_type(L, -1) != LUA_TSTRING)
      return luaL_error(L, "ljprof: spawn: argument %d is not a string", i + 1);
    argv[i] = lua_tostring(L, -1);  /* the table keeps the string alive */
    lua_pop(L, 1);
  }
  argv[n] = NULL;
  if (lua_istable(L, 2)) {
    lua_getfield(L, 2, "env");
    envp = child_env(L, lua_istable(L, -1) ? lua_gettop(L) : 0);
    lua_getfield(L, 2, "int_grace");
    if (lua_isnumber(L, -1)) grace = lua_tonumber(L, -1);
    lua_pop(L, 1);
    lua_getfield(L, 2, "tick");
    if (lua_isfunction(L, -1)) tick = lua_gettop(L); else lua_pop(L, 1);
    lua_getfield(L, 2, "after");
    if (lua_isfunction(L, -1)) after = lua_gettop(L); else lua_pop(L, 1);
    lua_getfield(L, 2, "keep");
    for (i = 1; lua_istable(L, -1) && i <= (int)lua_objlen(L, -1) && nkeep < 16; i++) {
      lua_rawgeti(L, -1, i);
      keep[nkeep++] = (int)lua_tointeger(L, -1);
      lua_pop(L, 1);
    }
    lua_pop(L, 1);
  } else {
    lua_pushnil(L);
    envp = child_env(L, 0);
    lua_pushnil(L);
  }
  fflush(NULL);
  if (pipe2(errpipe, O_CLOEXEC) != 0) {
    lua_pushnil(L);
    lua_pushfstring(L, "cannot start %s: %s", argv[0], strerror(errno));
    return 2;
  }
  own_group = !foreground();
  sigemptyset(&set);
  for (i = 0; i < NPASS; i++) sigaddset(&set, passed[i]);
  sigaddset(&set, SIGCHLD);
  ljp_sig_mask(SIG_BLOCK, &set, &old_mask);
  for (i = 0; i < NPASS; i++) {
    ljp_sig_get(passed[i], &old_act[i]);
    ignored[i] = old_act[i].sa_handler == SIG_IGN && passed[i] != SIGINT;
    seen[i] = 0;
    /* Blocked and not ignored: pending until taken below. */
    if (!ignored[i]) ljp_sig_default(passed[i], NULL);
  }
  ljp_sig_default(SIGCHLD, &old_chld);  /* SIG_IGN would reap it for us */
  pid = fork();
  if (pid == 0) {
    int e;
    if (own_group) setpgid(0, 0);
    ljp_os_parent_death_signal(SIGTERM);
    if (getppid() != parent) _exit(127);  /* the command is already gone */
    for (i = 0; i < NPASS; i++) ljp_sig_put(passed[i], &old_act[i]);
    ljp_sig_put(SIGCHLD, &old_chld);
    for (i = 0; i < nkeep; i++) fcntl(keep[i], F_SETFD, 0);  /* inherited */
    ljp_sig_mask(SIG_SETMASK, &old_mask, NULL);
    execvpe(argv[0], (char *const *)argv, envp);
    e = errno;
    if (write(errpipe[1], &e, sizeof(e)) < 0) {}
    _exit(127);
  }
  err = errno;
  close(errpipe[1]);
  if (pid > 0) {
    int e;
    ssize_t r;
    if (own_group) setpgid(pid, pid);  /* also here: no race with a signal */
    while ((r = read(errpipe[0], &e, sizeof(e))) < 0 && errno == EINTR) {}
    if (r == (ssize_t)sizeof(e)) {  /* exec failed */
      while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
      pid = -1;
      err = e;
    }
  }
  close(errpipe[0]);
  start = mono();
  next_tick = start + 1.0;
  while (pid > 0) {
    siginfo_t info;
    struct timespec ts;
    double now, until;
    int sig;
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) break;
    if (r < 0 && errno != EINTR) break;
    now = mono();
    until = tick ? next_tick : now + 60;
    if (deadline > 0 && !termed && deadline < until) until = deadline;
    if (until < now) until = now;
    ts.tv_sec = (time_t)(until - now);
    ts.tv_nsec = (long)((until - now - (double)ts.tv_sec) * 1e9);
    sig = sigtimedwait(&set, &info, &ts);
    for (i = 0; sig > 0 && i < NPASS; i++) {
      int from_tty;
      if (passed[i] != sig) continue;
      from_tty = info.si_code == SI_KERNEL;
      if (!seen[i]) {
        seen[i] = 1;
        if (own_group) kill(from_tty ? -pid : pid, sig);
        else if (!from_tty) kill(pid, sig);
      }
      if (sig == SIGINT && deadline == 0) deadline = mono() + grace;
    }
    now = mono();
    if (deadline > 0 && !termed && now >= deadline) {
      termed = 1;
      kill(pid, SIGTERM);
    }
    if (tick && now >= next_tick) {
      if (!call_tick(L, tick, now - start)) tick = 0;
      while (next_tick <= now) next_tick += 1.0;
    }
  }
  nres = 2;
  if (pid > 0 && after) {
    int ok, top = lua_gettop(L);
    lua_pushvalue(L, after);
    push_status(L, status);
    ok = lua_pcall(L, 2, LUA_MULTRET, 0) == 0;
    nres = lua_gettop(L) - top;
    if (!ok) nres = -1;
  }
  {  /* exit signals that came meanwhile are dropped */
    struct timespec zero = {0, 0};
    while (sigtimedwait(&set, NULL, &zero) > 0) {}
  }
  for (i = 0; i < NPASS; i++) ljp_sig_put(passed[i], &old_act[i]);
  ljp_sig_put(SIGCHLD, &old_chld);
  ljp_sig_mask(SIG_SETMASK, &old_mask, NULL);
  if (nres < 0) return lua_error(L);
  if (pid < 0) {
    lua_pushnil(L);
    lua_pushfstring(L, "cannot run %s: %s", argv[0], strerror(err));
    return 2;
  }
  if (after) return nres;
  push_status(L, status);
  return 2;
}

/* tmpfd() -> fd, "fd:dev:ino"; nil, message */
static int l_tmpfd(lua_State *L)
{
  const char *dir = getenv("TMPDIR");
  char path[4096];
  struct stat st;
  int fd;
  if (!dir || !*dir) dir = "/tmp";
  fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) {
    snprintf(path, sizeof(path), "%s/ljprof.XXXXXX", dir);
    fd = mkostemp(path, O_CLOEXEC);
    if (fd >= 0) unlink(path);
  }
  if (fd < 0 || fstat(fd, &st) != 0) {
    int e = errno;
    if (fd >= 0) close(fd);
    lua_pushnil(L);
    lua_pushfstring(L, "cannot create a temporary file in %s: %s", dir, strerror(e));
    return 2;
  }
  lua_pushinteger(L, fd);
  snprintf(path, sizeof(path), "%d:%llu:%llu", fd,
           (unsigned long long)st.st_dev, (unsigned long long)st.st_ino);
  lua_pushstring(L, path);
  return 2;
}

/* fd_read(fd) -> the file's content from offset 0; nil, message */
static int l_fd_read(lua_State *L)
{
  int fd = (int)luaL_checkinteger(L, 1);
  luaL_Buffer b;
  off_t off = 0;
  luaL_buffinit(L, &b);
  for (;;) {
    char *p = luaL_prepbuffer(&b);
    ssize_t r = pread(fd, p, LUAL_BUFFERSIZE, off);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      int e = errno;
      luaL_pushresult(&b);
      lua_pushnil(L);
      lua_pushstring(L, strerror(e));
      return 2;
    }
    if (r == 0) break;
    luaL_addsize(&b, (size_t)r);
    off += r;
  }
  luaL_pushresult(&b);
  return 1;
}

static int l_fd_close(lua_State *L)
{
  close((int)luaL_checkinteger(L, 1));
  return 0;
}

/* isatty(fd) -> is a terminal, this process is its foreground job */
static int l_isatty(lua_State *L)
{
  int fd = (int)luaL_checkinteger(L, 1), tty = isatty(fd);
  lua_pushboolean(L, tty);
  lua_pushboolean(L, tty && tcgetpgrp(fd) == getpgrp());
  return 2;
}

/* ---- The progress writer, in the profiled program. ---- */

#define PROGRESS_MT "ljprof.progress"

typedef struct progress {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  pthread_t th;
  pid_t owner;               /* the process the thread runs in */
  int fd, quit, up;
  const _Atomic uint64_t *ticks;
} progress;

/* ENTRY: the progress thread (ljp_thread_start, every signal blocked). */
static void *progress_main(void *arg)
{
  progress *p = arg;
  pthread_mutex_lock(&p->mu);
  while (!p->quit) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += 1;
    pthread_cond_timedwait(&p->cv, &p->mu, &ts);
    if (!p->quit) {
      char buf[32];
      /* Fixed width at offset 0: the reader takes the latest number. */
      int len = snprintf(buf, sizeof(buf), "%20llu\n",
                         (unsigned long long)atomic_load(p->ticks));
      if (pwrite(p->fd, buf, (size_t)len, 0) < 0) {}
    }
  }
  pthread_mutex_unlock(&p->mu);
  return NULL;
}

static int progress_close(lua_State *L)
{
  progress *p = luaL_checkudata(L, 1, PROGRESS_MT);
  if (p->up) {
    p->up = 0;
    if (p->owner == getpid()) {  /* not in a forked copy: no thread there */
      pthread_mutex_lock(&p->mu);
      p->quit = 1;
      pthread_cond_signal(&p->cv);
      pthread_mutex_unlock(&p->mu);
      pthread_join(p->th, NULL);
      close(p->fd);
    }
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
  }
  return 0;
}

/* progress("fd:dev:ino") -> handle; nil, message. The descriptor must be
** the file the id names (an inherited number may be anything else). */
static int l_progress(lua_State *L)
{
  const char *id = luaL_checkstring(L, 1);
  unsigned long long dev, ino;
  int fd, r;
  struct stat st;
  progress *p;
  pthread_condattr_t ca;
  const _Atomic uint64_t *ticks = ljp_q_ticks(L);
  if (sscanf(id, "%d:%llu:%llu", &fd, &dev, &ino) != 3 || fd < 0 ||
      fstat(fd, &st) != 0 || (unsigned long long)st.st_dev != dev ||
      (unsigned long long)st.st_ino != ino || !S_ISREG(st.st_mode)) {
    lua_pushnil(L);
    lua_pushfstring(L, "no progress file '%s'", id);
    return 2;
  }
  if (!ticks) {
    lua_pushnil(L);
    lua_pushliteral(L, "no run to report on");
    return 2;
  }
  fcntl(fd, F_SETFD, FD_CLOEXEC);  /* not for the program's own children */
  p = lua_newuserdata(L, sizeof(*p));
  memset(p, 0, sizeof(*p));
  p->fd = fd;
  p->ticks = ticks;
  p->owner = getpid();
  pthread_mutex_init(&p->mu, NULL);
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&p->cv, &ca);
  pthread_condattr_destroy(&ca);
  if (luaL_newmetatable(L, PROGRESS_MT)) {
    lua_pushcfunction(L, progress_close);
    lua_setfield(L, -2, "__gc");
    lua_newtable(L);
    lua_pushcfunction(L, progress_close);
    lua_setfield(L, -2, "close");
    lua_setfield(L, -2, "__index");
  }
  lua_setmetatable(L, -2);
  r = ljp_thread_start(&p->th, progress_main, p);  /* it takes no signal */
  if (r != 0) {
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    lua_pushnil(L);
    lua_pushfstring(L, "cannot start a thread: %s", strerror(r));
    return 2;
  }
  p->up = 1;
  return 1;
}

const luaL_Reg ljp_spawn_funcs[] = {
  {"spawn", l_spawn},
  {"tmpfd", l_tmpfd},
  {"fd_read", l_fd_read},
  {"fd_close", l_fd_close},
  {"isatty", l_isatty},
  {"progress", l_progress},
  {NULL, NULL}
};
