/*
** A timer thread that wakes every interval (wall clock) and signals the
** profiled thread, the shape LuaJIT uses on Windows. Two calls make it
** portable: the wake-up (a condition-variable timed wait, so stop wakes it
** at once) and the signalling (rt_tgsigqueueinfo to the profiled thread's
** id in this process, carrying the run token, as pthread_sigqueue would,
** but never through a pthread_t: a descriptor is freed or reused when its
** thread exits). The thread is alive whenever a tick is sent: the tick is
** sent with the mutex held, and the profiled thread's exit stops (and
** joins) this thread first, taking the mutex (timer_exit.c).
** Gaps are random in [interval/2, 3/2 interval), counted from the
** previous scheduled wake-up (see timer_posix.c). Ticks the thread could
** not deliver (it overslept, or the signal queue was full) are added to
** the next sample's weight. A forked child that stops the run leaves the
** parent's thread alone (it does not exist there). A tick is not sent while the signal's action
** is SIG_DFL: a program that reset it (many daemons reset every signal)
** would be ended by the kernel, its profile lost; the run's signal check
** (run.c) then finds the ticks missing and says so in one line, keeping
** the samples. Normal context.
*/
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "ljp.h"

static void ts_add(struct timespec *ts, uint64_t ns)
{
  ns += (uint64_t)ts->tv_nsec;
  ts->tv_sec += (time_t)(ns / 1000000000u);
  ts->tv_nsec = (long)(ns % 1000000000u);
}

static int64_t ts_diff(const struct timespec *a, const struct timespec *b)
{
  return (int64_t)(a->tv_sec - b->tv_sec) * 1000000000 +
         (a->tv_nsec - b->tv_nsec);
}

static void *timer_main(void *arg)
{
  ljp_ctx *ctx = arg;
  uint64_t period = (uint64_t)ctx->opt.interval_us * 1000u;
  siginfo_t si;
  struct timespec next, now;
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, NULL);  /* never run handlers here */
  memset(&si, 0, sizeof(si));  /* what pthread_sigqueue would send */
  si.si_signo = ctx->opt.signo;
  si.si_code = SI_QUEUE;
  si.si_pid = ctx->tmr.u.thr.pid;
  si.si_uid = getuid();
  si.si_value.sival_ptr = NULL;  /* upper half zero: a tick, not a lend */
  si.si_value.sival_int = (int)atomic_load(&ctx->token);
  clock_gettime(CLOCK_MONOTONIC, &next);
  ts_add(&next, ljp_timer_first_ns(ctx));
  pthread_mutex_lock(&ctx->tmr.u.thr.mu);
  while (!ctx->tmr.u.thr.stop) {
    int rc = pthread_cond_timedwait(&ctx->tmr.u.thr.cv, &ctx->tmr.u.thr.mu, &next);
    if (ctx->tmr.u.thr.stop) break;
    if (rc != ETIMEDOUT) continue;
    /* SIG_DFL would kill: no tick (the schedule goes on below). */
    if (!ljp_signal_is_default(ctx->opt.signo) &&
        syscall(SYS_rt_tgsigqueueinfo, ctx->pid, ctx->tid, ctx->opt.signo,
                &si) != 0)
      atomic_fetch_add(&ctx->tmr.thr_overrun, 1);
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (ts_diff(&now, &next) > 0) {  /* overslept: skip, but count, ticks */
      uint64_t late = (uint64_t)ts_diff(&now, &next) / period;
      atomic_fetch_add(&ctx->tmr.thr_overrun, (uint32_t)late);
      ts_add(&next, late * period);
    }
    ts_add(&next, ljp_timer_gap_ns(ctx));  /* random gap: no aliasing */
  }
  pthread_mutex_unlock(&ctx->tmr.u.thr.mu);
  return NULL;
}

static int thread_start(ljp_ctx *ctx, char *err, size_t n)
{
  pthread_condattr_t ca;
  int rc;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_mutex_init(&ctx->tmr.u.thr.mu, NULL);
  pthread_cond_init(&ctx->tmr.u.thr.cv, &ca);
  pthread_condattr_destroy(&ca);
  ctx->tmr.u.thr.stop = 0;
  ctx->tmr.u.thr.pid = getpid();
  if ((rc = pthread_create(&ctx->tmr.u.thr.th, NULL, timer_main, ctx)) != 0) {
    snprintf(err, n, "ljprof: cannot create the timer thread: %s",
             strerror(rc));
    pthread_cond_destroy(&ctx->tmr.u.thr.cv);
    pthread_mutex_destroy(&ctx->tmr.u.thr.mu);
    return -1;
  }
  return 0;
}

static void thread_stop(ljp_ctx *ctx)
{
  /* A forked child stopping the run: the timer thread is the parent's
  ** (threads do not survive fork) and its condition variable may have
  ** been copied with the thread waiting on it: joining or destroying
  ** would wait for ever. The child leaves them alone. */
  if (getpid() != ctx->tmr.u.thr.pid) return;
  pthread_mutex_lock(&ctx->tmr.u.thr.mu);
  ctx->tmr.u.thr.stop = 1;
  pthread_cond_signal(&ctx->tmr.u.thr.cv);
  pthread_mutex_unlock(&ctx->tmr.u.thr.mu);
  pthread_join(ctx->tmr.u.thr.th, NULL);
  pthread_cond_destroy(&ctx->tmr.u.thr.cv);
  pthread_mutex_destroy(&ctx->tmr.u.thr.mu);
}

/* Signal context: a tick stands for one expiry (and the overrun the
** handler adds); its time is the run's clock (CLOCK_MONOTONIC, vDSO). */
static uint32_t thread_rearm(ljp_ctx *ctx)
{
  atomic_store_explicit(&ctx->tmr.seen_ns, ljp_now_ns(), memory_order_relaxed);
  return 1;
}

const ljp_timer_ops ljp_timer_thread = {"thread", thread_start, thread_stop,
                                        thread_rearm, NULL};
