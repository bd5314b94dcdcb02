/*
** A thread's exit ends its ticks, on every clock, whatever the program
** forgot to stop. A run's timer is started and stopped here
** (ljp_ticks_start on the profiled thread, ljp_ticks_stop on any thread,
** once); while it is live the run is on a process-wide list, and the
** profiled thread holds a value under a pthread key whose destructor runs
** when the thread exits (pthread_exit, return from its start routine,
** cancellation). The destructor stops the timers of the runs this thread
** started (the wall and thread clocks' timer thread is joined, wall's
** kernel timer deleted: no tick is sent
** after it returns, and none was sent to a thread that was gone, see
** timer_thread.c), then closes their tokens and waits out the handlers
** inside them: a tick, a lend request or an itimer forward still in
** flight, landing on a thread that reuses the id, finds no context. The
** state is still the program's: stop or lua_close from another thread
** ends the run later (aggregation, output) as usual.
**
** One mutex orders the destructor against stops on other threads (a state
** closed while its thread is still in its exit): a run is on the list, and
** its context alive, until ljp_ticks_stop took it off under the mutex.
** Normal context; the destructor runs on the exiting thread, its signals
** still deliverable.
** Also the timers' shared schedule (every OS): the random first expiry
** and gaps (timer.h), async-signal-safe.
*/
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

#include "ljp.h"
#include "os.h"

static pthread_mutex_t live_mu = PTHREAD_MUTEX_INITIALIZER;
static ljp_ctx *live_head;              /* runs whose timer is live */
static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static pthread_key_t exit_key;
static int key_ok;

static void unlink_run(ljp_ctx *ctx)
{
  ljp_ctx **p;
  for (p = &live_head; *p; p = &(*p)->tmr.live_next)
    if (*p == ctx) {
      *p = ctx->tmr.live_next;
      break;
    }
  ctx->tmr.live_next = NULL;
}

/* live_mu held. */
static void stop_locked(ljp_ctx *ctx)
{
  ctx->tmr.ticking = 0;  /* first: a handler now no longer re-arms */
  if (ctx->tmr.live) {
    ctx->tmr.ops->stop(ctx);
    ctx->tmr.live = 0;
    unlink_run(ctx);
  }
}

/* The thread is exiting: the runs it started tick no more. */
/* ENTRY: a profiled thread's exit (the pthread key's destructor). */
static void thread_exit(void *v)
{
  pid_t tid = ljp_gettid(), pid = getpid();
  ljp_ctx *ctx, *next;
  (void)v;
  pthread_mutex_lock(&live_mu);
  for (ctx = live_head; ctx; ctx = next) {
    next = ctx->tmr.live_next;
    if (ctx->tid != tid || ctx->pid != pid) continue;
    stop_locked(ctx);
    atomic_store(&ctx->token, 0);  /* no lend request is sent (auto.c) */
    ljp_slot_close(ctx->slot);  /* in-flight signals find no context */
  }
  pthread_mutex_unlock(&live_mu);
}

static void key_init(void)
{
  key_ok = pthread_key_create(&exit_key, thread_exit) == 0;
}

int ljp_ticks_start(ljp_ctx *ctx, char *err, size_t n)
{
  int rc;
  pthread_once(&key_once, key_init);
  if (!key_ok) {
    snprintf(err, n, "ljprof: cannot watch the thread's exit (no pthread "
             "key left)");
    return -1;
  }
  /* (the library is pinned by now: the destructor stays mapped) */
  if (!pthread_getspecific(exit_key) &&
      pthread_setspecific(exit_key, (void *)1) != 0) {
    snprintf(err, n, "ljprof: cannot watch the thread's exit: out of memory");
    return -1;
  }
  pthread_mutex_lock(&live_mu);
  ctx->tmr.ticking = 1;
  rc = ctx->tmr.ops->start(ctx, err, n);
  if (rc != 0) {
    ctx->tmr.ticking = 0;
  } else {
    ctx->tmr.live = 1;
    ctx->tmr.live_next = live_head;
    live_head = ctx;
  }
  pthread_mutex_unlock(&live_mu);
  return rc;
}

void ljp_ticks_stop(ljp_ctx *ctx)
{
  ctx->tmr.ticking = 0;
  pthread_mutex_lock(&live_mu);
  stop_locked(ctx);
  pthread_mutex_unlock(&live_mu);
}

/* -- The schedule (timer.h; signal context too) --------------------------- */

static uint64_t rng_next(ljp_ctx *ctx)
{
  uint64_t x = ctx->tmr.rng;
  if (!x) x = ljp_now_ns() ^ ((uint64_t)ctx->tid << 32) ^ 0x9e3779b97f4a7c15ull;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  ctx->tmr.rng = x;
  return x;
}

uint64_t ljp_timer_first_ns(ljp_ctx *ctx)
{
  uint64_t period = (uint64_t)ctx->opt.interval_us * 1000u;
  return 1 + rng_next(ctx) % period;
}

uint64_t ljp_timer_gap_ns(ljp_ctx *ctx)
{
  uint64_t period = (uint64_t)ctx->opt.interval_us * 1000u;
  return period / 2 + rng_next(ctx) % (period ? period : 1);
}
