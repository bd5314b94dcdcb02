/*
** Exit signals (exit_signals.c): the profile is written when SIGTERM,
** SIGHUP or SIGINT kill the program, then it dies of that signal.
*/
#ifndef LJP_EXIT_SIGNALS_H
#define LJP_EXIT_SIGNALS_H

#include <signal.h>

#include <lua.h>

typedef struct ljp_ctx ljp_ctx;

/* The exit-signal part of a context (exit_signals.c). */
typedef struct ljp_exitst {
  volatile sig_atomic_t signal; /* trapped, waiting for a safe point */
  int fn_ref;               /* Lua function to call then (registry ref) */
} ljp_exitst;

/* Exit signals (exit_signals.c). */
int ljp_exit_signals_on(ljp_ctx *ctx, lua_State *L, int names, int fn);
void ljp_exit_signals_off(ljp_ctx *ctx, lua_State *L);
void ljp_exit_signal_run(ljp_ctx *ctx, lua_State *L); /* safe point */
void ljp_exit_signals_release(ljp_ctx *ctx);

#endif
