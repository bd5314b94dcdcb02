/*
** The ljprof command's child process: ljprof.spawn(argv) runs argv[1]
** (found on PATH) with the rest as its arguments and waits for it.
**
** The command writes its outputs from the raw profile the child leaves,
** so the child must end the way it would without the command: SIGTERM
** and SIGHUP sent to the command while it waits are passed on to the
** child (which writes its profile and dies of the signal; see
** exit_signals.c), and the command then reports how it ended. SIGINT and
** SIGQUIT are ignored meanwhile, as system() does: from a terminal the
** child gets them itself (a second SIGINT would kill luajit at once).
** The forwarding handler only calls kill(); dispositions and the signal
** mask are restored before returning, and in the child before exec.
** Normal context (a Lua C function).
*/
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <lauxlib.h>

#include "spawn.h"

static volatile sig_atomic_t child;

static void forward(int sig)
{
  int saved = errno;
  if (child > 0) kill((pid_t)child, sig);
  errno = saved;
}

static const int forwarded[] = {SIGTERM, SIGHUP};
static const int ignored[] = {SIGINT, SIGQUIT};
#define NFWD 2
#define NIGN 2

int ljp_spawn(lua_State *L)
{
  struct sigaction sa, ign, old_fwd[NFWD], old_ign[NIGN];
  sigset_t block, old_mask;
  const char **argv;
  int n, i, status, err;
  pid_t pid;
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
  fflush(NULL);
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = forward;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  memset(&ign, 0, sizeof(ign));
  ign.sa_handler = SIG_IGN;
  sigemptyset(&block);
  for (i = 0; i < NFWD; i++) sigaddset(&block, forwarded[i]);
  for (i = 0; i < NIGN; i++) sigaddset(&block, ignored[i]);
  sigprocmask(SIG_BLOCK, &block, &old_mask);
  for (i = 0; i < NFWD; i++) sigaction(forwarded[i], &sa, &old_fwd[i]);
  for (i = 0; i < NIGN; i++) sigaction(ignored[i], &ign, &old_ign[i]);
  child = 0;
  pid = fork();
  if (pid == 0) {
    for (i = 0; i < NFWD; i++) sigaction(forwarded[i], &old_fwd[i], NULL);
    for (i = 0; i < NIGN; i++) sigaction(ignored[i], &old_ign[i], NULL);
    sigprocmask(SIG_SETMASK, &old_mask, NULL);
    execvp(argv[0], (char *const *)argv);
    _exit(127);
  }
  err = errno;
  if (pid > 0) child = pid;
  sigprocmask(SIG_SETMASK, &old_mask, NULL);  /* forwarding from here */
  status = 0;
  while (pid > 0 && waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
  sigprocmask(SIG_BLOCK, &block, NULL);
  child = 0;
  for (i = 0; i < NFWD; i++) sigaction(forwarded[i], &old_fwd[i], NULL);
  for (i = 0; i < NIGN; i++) sigaction(ignored[i], &old_ign[i], NULL);
  sigprocmask(SIG_SETMASK, &old_mask, NULL);
  if (pid < 0) {
    lua_pushnil(L);
    lua_pushfstring(L, "cannot start %s: %s", argv[0], strerror(err));
    return 2;
  }
  if (WIFSIGNALED(status)) {
    lua_pushliteral(L, "signal");
    lua_pushinteger(L, WTERMSIG(status));
  } else {
    lua_pushliteral(L, "exit");
    lua_pushinteger(L, WEXITSTATUS(status));
  }
  return 2;
}
