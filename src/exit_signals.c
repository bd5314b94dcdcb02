/*
** Exit signals: write the profile when the program is killed by SIGTERM,
** SIGHUP or SIGINT, then die of that signal, so the exit status does not
** change (ljprof.on_signal, used by jit/prof.lua).
**
** Only signals whose disposition is the default are trapped: a program's
** own handler, or an ignored signal, is left alone (luajit installs its
** own SIGINT handler while -j options and the script run, and turns ^C
** into an "interrupted!" error, which already ends in lua_close).
**
** The handler runs in signal context (async-signal-safe only, errno
** saved): on another thread it forwards the signal to the profiled thread;
** there it records the signal and arms the safe-point hook like a sample.
** A second signal before the first was handled kills at once. At the safe
** point (ljp_exit_signal_run, normal context) the Lua function gets the
** signal's name, then the default action is restored and the signal
** raised again. A signal that arrives during a long C call or in compiled
** code waits for the next safe point, as samples do.
*/
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <lauxlib.h>

#include "ljp.h"

static const struct { const char *name; int signo; } exit_sigs[] = {
  {"TERM", SIGTERM}, {"HUP", SIGHUP}, {"INT", SIGINT},
};
#define NSIGS (sizeof(exit_sigs) / sizeof(exit_sigs[0]))

static struct {
  _Atomic(ljp_ctx *) ctx;      /* owner; NULL when nothing is trapped */
  struct sigaction old[NSIGS];
  int trapped[NSIGS];
} trap;

static void exit_signal_handler(int sig, siginfo_t *si, void *uc)
{
  int saved = errno;
  ljp_ctx *ctx = atomic_load(&trap.ctx);
  (void)si;
  (void)uc;
  if (!ctx) {
    signal(sig, SIG_DFL);
    raise(sig);
  } else if (ljp_gettid() != ctx->tid) {
    syscall(SYS_tgkill, ctx->pid, ctx->tid, sig);
  } else if (ctx->exit.signal) {  /* second signal: no more waiting */
    signal(sig, SIG_DFL);
    raise(sig);
  } else {
    ctx->exit.signal = sig;
    if (!ctx->hook.busy) ljp_hook_arm(&ctx->hook);  /* else the next sample arms */
  }
  errno = saved;
}

static void restore(void)
{
  size_t i;
  for (i = 0; i < NSIGS; i++) {
    struct sigaction cur;
    if (!trap.trapped[i]) continue;
    trap.trapped[i] = 0;
    if (sigaction(exit_sigs[i].signo, NULL, &cur) == 0 &&
        (cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == exit_signal_handler)
      sigaction(exit_sigs[i].signo, &trap.old[i], NULL);
  }
  atomic_store(&trap.ctx, NULL);
}

/* Stop trapping, and forget the function (on_signal(nil)). */
void ljp_exit_signals_off(ljp_ctx *ctx, lua_State *L)
{
  if (atomic_load(&trap.ctx) == ctx) restore();
  if (ctx->exit.fn_ref != LUA_NOREF) {
    luaL_unref(L, LUA_REGISTRYINDEX, ctx->exit.fn_ref);
    ctx->exit.fn_ref = LUA_NOREF;
  }
}

/* Trap the signals named in the table at index names ("TERM", "HUP",
** "INT") for the running context; the function at index fn is called at
** the safe point that follows one. Pushes the list of names trapped. */
int ljp_exit_signals_on(ljp_ctx *ctx, lua_State *L, int names, int fn)
{
  size_t i;
  int n = 0;
  if (ctx->state != LJP_RUNNING)
    return luaL_error(L, "ljprof: on_signal needs a running profile");
  if (atomic_load(&trap.ctx) && atomic_load(&trap.ctx) != ctx)
    return luaL_error(L, "ljprof: exit signals are trapped for another "
                      "Lua state");
  if (ctx->exit.fn_ref != LUA_NOREF)
    luaL_unref(L, LUA_REGISTRYINDEX, ctx->exit.fn_ref);
  lua_pushvalue(L, fn);
  ctx->exit.fn_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  ctx->exit.signal = 0;
  atomic_store(&trap.ctx, ctx);
  lua_newtable(L);
  for (i = 0; i < NSIGS; i++) {
    struct sigaction sa, old;
    int want = 0, k;
    for (k = 1; !want; k++) {
      const char *s;
      lua_rawgeti(L, names, k);
      if (lua_isnil(L, -1)) { lua_pop(L, 1); break; }
      s = lua_tostring(L, -1);
      want = s && !strcmp(s, exit_sigs[i].name);
      lua_pop(L, 1);
    }
    if (!want || trap.trapped[i]) continue;
    if (sigaction(exit_sigs[i].signo, NULL, &old) != 0 ||
        (old.sa_flags & SA_SIGINFO) || old.sa_handler != SIG_DFL)
      continue;  /* the program's, or ignored: not ours to take */
    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = exit_signal_handler;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigfillset(&sa.sa_mask);
    if (sigaction(exit_sigs[i].signo, &sa, NULL) == 0) {
      trap.old[i] = old;
      trap.trapped[i] = 1;
      lua_pushstring(L, exit_sigs[i].name);
      lua_rawseti(L, -2, ++n);
    }
  }
  return 1;
}

/* At a safe point: a trapped signal arrived. Normal context. */
void ljp_exit_signal_run(ljp_ctx *ctx, lua_State *L)
{
  int sig = ctx->exit.signal;
  size_t i;
  const char *name = "?";
  sigset_t set;
  if (!sig) return;
  for (i = 0; i < NSIGS; i++)
    if (exit_sigs[i].signo == sig) name = exit_sigs[i].name;
  if (ctx->exit.fn_ref != LUA_NOREF) {
    lua_rawgeti(L, LUA_REGISTRYINDEX, ctx->exit.fn_ref);
    lua_pushstring(L, name);
    if (lua_pcall(L, 1, 0, 0) != 0) {
      fprintf(stderr, "ljprof: writing the profile on SIG%s failed: %s\n",
              name, lua_tostring(L, -1) ? lua_tostring(L, -1) : "?");
      lua_pop(L, 1);
    }
  }
  restore();
  signal(sig, SIG_DFL);
  sigemptyset(&set);
  sigaddset(&set, sig);
  sigprocmask(SIG_UNBLOCK, &set, NULL);
  raise(sig);
  ctx->exit.signal = 0;  /* the default action was not fatal */
}

/* At lua_close or when the context goes: never leave a handler that
** points at a freed context. */
void ljp_exit_signals_release(ljp_ctx *ctx)
{
  if (atomic_load(&trap.ctx) == ctx) restore();
}
