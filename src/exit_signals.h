/*
** Exit signals (exit_signals.c): the profile is written when SIGTERM,
** SIGHUP or SIGINT kill the program, by a helper thread that needs no safe
** point, then the program dies of that signal.
**
** The gate: the profiled thread marks the regions where it changes what
** the helper reads (ljp_gate_enter/leave; plain counters, read only by
** the exit handler on the same thread). Once "closed", the helper owns
** the context and the profiled thread parks at its next entry into
** ljprof.
*/
#ifndef LJP_EXIT_SIGNALS_H
#define LJP_EXIT_SIGNALS_H

#include <signal.h>
#include <stdatomic.h>

#include <lua.h>

typedef struct ljp_ctx ljp_ctx;

/* The exit-signal part of a context (exit_signals.c). */
typedef struct ljp_exitst {
  volatile sig_atomic_t signal;   /* the exit signal that came (0: none) */
  volatile sig_atomic_t entered;  /* ljprof regions the thread is in */
  volatile sig_atomic_t close_at_leave; /* close when the last one ends */
  volatile sig_atomic_t closed;   /* the helper owns the context */
} ljp_exitst;

/* Exit signals (exit_signals.c). on: trap the signals named in the table
** at index names; after one, the helper thread calls
** require(module)[func](arg, "TERM") in a Lua state of its own, whose
** ljprof functions read this context. */
int ljp_exit_signals_on(ljp_ctx *ctx, lua_State *L, int names,
                        const char *module, const char *func,
                        const char *arg, size_t arglen);
void ljp_exit_signals_off(ljp_ctx *ctx);
void ljp_exit_signals_hold(ljp_ctx *ctx);
void ljp_exit_signals_release(ljp_ctx *ctx);
/* At a safe point after an exit signal: hand over, never return. */
void ljp_exit_handover(ljp_ctx *ctx);
/* The context the helper's Lua state reads, or NULL (api.c). */
ljp_ctx *ljp_exit_view(const void *registry);

void ljp_exit_close(ljp_exitst *x);
void ljp_exit_park(void) __attribute__((noreturn));
int ljp_exit_is_helper(void);

static inline void ljp_gate_enter(ljp_exitst *x)
{
  if (x->closed && !ljp_exit_is_helper()) ljp_exit_park();
  x->entered++;
  atomic_signal_fence(memory_order_seq_cst);
}

static inline void ljp_gate_leave(ljp_exitst *x)
{
  atomic_signal_fence(memory_order_seq_cst);
  if (--x->entered == 0 && x->close_at_leave && !x->closed)
    ljp_exit_close(x);
}

#endif
