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
**
** Lending (the export helper of auto.c): the helper asks (lend = ASKED)
** and signals the profiled thread; outside every region, the sampling
** handler on that thread lends the context at once (LENT), else the end
** of the region does; the helper then takes or copies the store and gives
** it back (0). A region entered meanwhile waits until it is given back.
** Both halves are here: the asker's (ljp_lend_sem/ask/withdraw/give_back,
** called by auto.c) and the grant (ljp_lend_grant, the gate).
** The grant is a compare-and-swap and a sem_post: async-signal-safe.
*/
#ifndef LJP_EXIT_SIGNALS_H
#define LJP_EXIT_SIGNALS_H

#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>

#include <lua.h>

#include "exit_part.h"   /* ljp_exitst, the part */

typedef struct ljp_ctx ljp_ctx;

#define LJP_LEND_ASKED 1
#define LJP_LEND_LENT 2
/* The sampling signal's value (SI_QUEUE from this process) for a lend
** request: the run token, this in the upper half (signal.c). */
#define LJP_LEND_MAGIC 0x6c656e64u

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
/* Signal context, each sampling tick: wrap luajit's SIGINT handler while
** it is installed (exit_signals.c). */
void ljp_exit_int_watch(void);
/* At a safe point after an exit signal: hand over, never return. */
void ljp_exit_handover(ljp_ctx *ctx);
/* Before exec, on the calling thread: the trapped run's outputs written
** (1), nothing to do here (0), or the writer failed (-1, said). */
int ljp_exit_write_now(void);

/* L's package.path and package.cpath with their relative templates made
** absolute from the working directory now (malloc'ed; NULL when absent
** or out of memory): for a helper's state (ljp_own_newstate), which must
** find ljprof's modules wherever the program went since (pkgpaths.c). */
void ljp_package_paths(lua_State *L, char **path, char **cpath);

void ljp_exit_close(ljp_exitst *x);
void ljp_exit_park(void) __attribute__((noreturn));
int ljp_exit_is_helper(void);

/* Lending: grant an ASKED lend (signal or normal context, on the profiled
** thread, outside every region: a compare-and-swap and a sem_post, both
** async-signal-safe; inline, so that the sampling handler names no file
** above it); wait while lent (normal context). */
static inline void ljp_lend_grant(ljp_exitst *x)
{
  int asked = LJP_LEND_ASKED;
  if (x->entered || x->closed) return;
  if (atomic_compare_exchange_strong(&x->lend, &asked, LJP_LEND_LENT) &&
      x->lend_sem)
    sem_post(x->lend_sem);
}
void ljp_lend_wait(ljp_exitst *x);
/* The asker's half (the export helper, auto.c; normal context): the
** semaphore a grant posts (NULL: none); ask; withdraw a request not
** answered (1: withdrawn, 0: it was granted meanwhile); give the context
** back (or drop a grant that came after an exit signal). */
static inline void ljp_lend_sem(ljp_exitst *x, sem_t *sem)
{
  if (x->lend_sem != sem)   /* written only when it changed: a handler of
                            ** an earlier lend reads it */
    x->lend_sem = sem;
}
static inline void ljp_lend_ask(ljp_exitst *x)
{
  atomic_store(&x->lend, LJP_LEND_ASKED);
}
static inline int ljp_lend_withdraw(ljp_exitst *x)
{
  int asked = LJP_LEND_ASKED;
  return atomic_compare_exchange_strong(&x->lend, &asked, 0);
}
static inline void ljp_lend_give_back(ljp_exitst *x)
{
  atomic_store_explicit(&x->lend, 0, memory_order_release);
}

static inline void ljp_gate_enter(ljp_exitst *x)
{
  if (x->closed && !ljp_exit_is_helper()) ljp_exit_park();
  x->entered++;
  atomic_signal_fence(memory_order_seq_cst);
  /* A close between the check and the count (the exit handler on this
  ** thread, or Windows' helper with the thread suspended, found it
  ** outside every region): the helper owns the context now. */
  if (x->closed && !ljp_exit_is_helper()) {
    x->entered--;
    ljp_exit_park();
  }
  /* After the count: a lend granted from now on waits for the leave. */
  if (atomic_load_explicit(&x->lend, memory_order_acquire) == LJP_LEND_LENT)
    ljp_lend_wait(x);
}

static inline void ljp_gate_leave(ljp_exitst *x)
{
  atomic_signal_fence(memory_order_seq_cst);
  if (--x->entered == 0) {
    if (x->close_at_leave && !x->closed) ljp_exit_close(x);
    if (atomic_load_explicit(&x->lend, memory_order_relaxed) ==
        LJP_LEND_ASKED)
      ljp_lend_grant(x);
  }
}

#endif
