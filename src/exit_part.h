/*
** The exit-signal part of a context (ljp_exitst), its type only: the
** field ljp_ctx.exit (ljp.h) embeds it, so ljp.h includes this header and
** not exit_signals.h, whose functions take the whole context
** (exit_signals.c sits above the context; its callers include
** exit_signals.h, with the gate and lending inline functions). Written
** only by its owners, exit_signals.c/.h and, on Windows, exit_win.c
** (tests/structure.py). Types only:
** no inline function here.
*/
#ifndef LJP_EXIT_PART_H
#define LJP_EXIT_PART_H

#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>

/* The exit-signal part of a context (exit_signals.c). */
typedef struct ljp_exitst {
  volatile sig_atomic_t signal;   /* the exit signal that came (0: none) */
  volatile sig_atomic_t entered;  /* ljprof regions the thread is in */
  volatile sig_atomic_t close_at_leave; /* close when the last one ends */
  volatile sig_atomic_t closed;   /* the helper owns the context */
  _Atomic int lend;               /* 0, LJP_LEND_ASKED or LJP_LEND_LENT */
  sem_t *lend_sem;                /* posted when lent (the asker's) */
  uint64_t lend_waits, lend_wait_ns; /* regions that waited, how long */
} ljp_exitst;

#endif
