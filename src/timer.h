/*
** Timers (timer_posix.c: cpu; timer_itimer.c; timer_thread.c: thread and
** wall, wall falling back to timer_posix.c's kernel timer; on Windows
** timer_win.c, which takes the ticks itself on its thread):
** ticks delivered as a signal to the profiled thread, each carrying the
** run's token. The handler calls rearm (signal context) for the weight of
** each signal and, now and then, a new random phase; start and stop are
** normal context.
*/
#ifndef LJP_TIMER_H
#define LJP_TIMER_H

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "os.h"   /* siginfo_t (os_win.h declares it on Windows) */

typedef struct ljp_ctx ljp_ctx;
typedef struct ljp_timer_ops ljp_timer_ops;

/* The timer's part of a context, written by the timers (timer_*.c and
** the functions below) and the handler (signal.c). */
typedef struct ljp_timerst {
  const ljp_timer_ops *ops;
  union {
    timer_t posix;          /* cpu, wall_kernel */
    struct {
      pthread_t th;
      pthread_mutex_t mu;
      pthread_cond_t cv;
      int stop;
      pid_t pid;            /* the process the thread runs in (fork) */
      clockid_t cpuclk;     /* the profiled thread's CPU clock */
      int sysfd;            /* its /proc/self/task/<tid>/syscall (-1: none,
                               every tick is sent) */
      int precise;          /* wall: woken without timer slack, and ticks
                               for a thread not on a CPU by ktimer */
      timer_t ktimer;       /* wall: CLOCK_MONOTONIC, SIGEV_THREAD_ID to
                               the profiled thread, one expiry at a time */
    } thr;                  /* wall, thread */
    struct {
      void *ticker;         /* the timer thread (os_win.h) */
      void *target;         /* the profiled thread, to suspend */
      _Atomic int stop;
      uint64_t cycles;      /* cpu: its CPU cycles at the last tick */
    } win;                  /* Windows, every clock (timer_win.c) */
  } u;
  int live;                 /* started, not yet stopped */
  int wall_kernel;          /* wall on the kernel timer (its thread cannot
                               be looked at: ticks end its sleeps) */
  volatile sig_atomic_t ticking; /* the handler may re-arm the timer */
  clockid_t clock;          /* cpu, wall: the clock the timer runs on */
  uint64_t rng;             /* xorshift state (expiry jitter) */
  uint64_t next_ns;         /* next scheduled expiry, on the timer's clock */
  uint32_t jump_n;          /* cpu: signals since the phase was redrawn */
  uint64_t deadline_ns;     /* CLOCK_MONOTONIC end of sampling (0: none) */
  volatile sig_atomic_t expired; /* the duration is over: ignore signals */
  _Atomic uint32_t thr_overrun; /* ticks the timer thread could not send */
  _Atomic uint64_t seen_ns; /* the run's clock at the last tick taken by
                               ljprof's handler (rearm; 0: none yet) */
  _Atomic uint64_t thr_sent; /* wall, thread: ticks the timer thread sent
                               (signals queued, kernel timers armed) */
  _Atomic uint64_t thr_sent_seen; /* thr_sent at the last tick taken by
                               ljprof's handler (or a blocked tick) */
  struct ljp_ctx *live_next; /* the list of live timers (timer_exit.c) */
} ljp_timerst;


/* A clock's ticks; its name and the rest of what it is are in clocks.c's
** table. */
struct ljp_timer_ops {
  int (*start)(ljp_ctx *ctx, char *err, size_t errlen);
  void (*stop)(ljp_ctx *ctx);
  /* Signal context: called for each of the timer's signals (si: its
  ** siginfo) on the profiled thread; returns the weight of the signal
  ** (the expiries it stands for, >= 1, from a read of the timer's clock
  ** or, cpu, from si_overrun), stores the run's clock in seen_ns (the
  ** clock read, or cpu the last expiry passed: run.c's signal check) and
  ** may reschedule the timer. */
  uint32_t (*rearm)(ljp_ctx *ctx, const siginfo_t *si);
  /* Signal context, may be NULL: no more expiries (the duration is over). */
  void (*halt)(ljp_ctx *ctx);
};

extern const ljp_timer_ops ljp_timer_cpu, ljp_timer_wall, ljp_timer_itimer,
    ljp_timer_thread;
#ifdef _WIN32
/* timer_win.c: fn(ctx, pc) with the profiled thread stopped and the ring
** taken, as a tick (the console event's helper, exit_win.c): 0, or -1. */
int ljp_timer_win_stopped(ljp_ctx *ctx, void (*fn)(ljp_ctx *, uintptr_t));
#endif
/* timer_posix.c: the wall clock's kernel timer (timer_thread.c's wall
** falls back to it). */
extern const ljp_timer_ops ljp_timer_wall_kernel;

/* Run control's writes to the part (normal context, no tick coming):
** bind the clock's ticks, reset for a run (deadline_ns: the end of
** sampling, 0 none), end sampling (the duration is over, or the signal
** was lost). */
static inline void ljp_timer_bind(ljp_timerst *t, const ljp_timer_ops *ops)
{
  t->ops = ops;
}
static inline void ljp_timer_reset(ljp_timerst *t, uint64_t deadline_ns)
{
  atomic_store(&t->thr_overrun, 0);
  t->expired = 0;
  atomic_store(&t->seen_ns, 0);
  atomic_store(&t->thr_sent, 0);
  atomic_store(&t->thr_sent_seen, 0);
  t->deadline_ns = deadline_ns;
}
static inline void ljp_timer_expire(ljp_timerst *t) { t->expired = 1; }

/* timer_exit.c, normal context. Start ctx's timer (ops, ticking, live),
** on the profiled thread; its ticks end when the thread exits. */
int ljp_ticks_start(ljp_ctx *ctx, char *err, size_t n);
/* No more ticks; any thread, idempotent. */
void ljp_ticks_stop(ljp_ctx *ctx);

/* Random first expiry in (0, interval], so that short runs are sampled
** with a probability proportional to their length. */
uint64_t ljp_timer_first_ns(ljp_ctx *ctx);
/* Random gap in [interval/2, 3*interval/2): the phase of the expiries
** changes, so a periodic program (a frame loop) is not sampled at one
** phase only. Async-signal-safe (xorshift on ctx->tmr.rng). */
uint64_t ljp_timer_gap_ns(ljp_ctx *ctx);

/* Are ctx's ticks sent by the timer thread (wall, thread)? Then the run's
** signal check counts them in thr_sent: a starved timer thread sends
** none, and its silence is not a lost signal. */
int ljp_timer_thread_sends(const ljp_ctx *ctx);

/* Clock itimer's process timer around an exec (exec.c): paused, its
** setting kept in *saved (0: there is none), then set again if the exec
** failed. Normal context. */
int ljp_itimer_pause(struct itimerspec *saved);
void ljp_itimer_resume(const struct itimerspec *saved);


#endif
