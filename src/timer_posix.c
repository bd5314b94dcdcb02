/*
** Timers from timer_create(2), delivered with SIGEV_THREAD_ID to the
** thread that started profiling:
**   cpu   CLOCK_THREAD_CPUTIME_ID: the thread's CPU time only. The kernel
**         checks CPU timers once per tick (250 Hz here), so a shorter
**         interval fires at tick rate.
**   wall  CLOCK_MONOTONIC: precise, also while the thread sleeps; each
**         tick ends a blocking call (EINTR: nanosleep, poll, epoll_wait).
**         Only the fallback of the wall clock (timer_thread.c), which
**         does not signal a blocked thread, when the thread's
**         /proc/self/task/<tid>/syscall cannot be opened.
** The signal's value carries the run token.
**
** Each signal re-arms the timer (signal context: timer_settime and
** clock_gettime are async-signal-safe) as a one-shot timer at an absolute
** time: a random gap in [interval/2, 3/2 interval) after the last
** *scheduled* expiry, not after delivery, so expiries average one per
** interval whatever the delivery delay. A fixed phase would sample a
** periodic program (a frame loop) at one phase only (aliasing). The
** signal stands for every scheduled expiry the clock has passed (a cpu
** timer fires only on the kernel's tick; a preempted thread takes its
** signal late): the handler reads the timer's clock and weighs the
** signal by that count, and the next expiry is the first one still
** ahead, so a late signal is never followed by a burst of catch-up ones.
**
** One-shot, not periodic: re-arming a queued periodic CLOCK_MONOTONIC
** timer from the handler moves an hrtimer the kernel has just queued
** again, and on this VM that cost about 10 us per signal on top of the
** ~20 us of the delivery itself (bench/sigcost.c, modes periodic, moved
** and oneshot: 18, 29 and 18 us); a one-shot re-arm plus a clock read
** costs about what the kernel's own periodic re-arm does. The clock read
** is the vDSO for wall and a system call for cpu (thread CPU time has no
** vDSO read), whose timer fires at most once per kernel tick.
*/
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "ljp.h"

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

static uint64_t clock_ns(clockid_t c)
{
  struct timespec ts;
  clock_gettime(c, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* One expiry at when (absolute) on the timer's clock. */
static int arm_at(ljp_ctx *ctx, uint64_t when)
{
  struct itimerspec its;
  memset(&its, 0, sizeof(its));
  its.it_value.tv_sec = (time_t)(when / 1000000000u);
  its.it_value.tv_nsec = (long)(when % 1000000000u);
  ctx->tmr.next_ns = when;
  return timer_settime(ctx->tmr.u.posix, TIMER_ABSTIME, &its, NULL);
}

/* Signal context. The signal stands for the expiry scheduled (next_ns)
** and for every later one of the random schedule the clock has passed;
** the timer is re-armed at the first one still ahead. Bounded: a thread
** late by more than 64 intervals (stopped, preempted for long) has those
** counted at one per interval in one step. */
static uint32_t posix_rearm(ljp_ctx *ctx)
{
  uint64_t period = (uint64_t)ctx->opt.interval_us * 1000u;
  uint64_t now = clock_ns(ctx->tmr.clock), next = ctx->tmr.next_ns, w = 1;
  atomic_store_explicit(&ctx->tmr.seen_ns, now, memory_order_relaxed);
  if (!period) period = 1;
  if (now > next && now - next > 64 * period) {
    uint64_t skip = (now - next) / period - 1;
    w += skip;
    next += skip * period;
  }
  next += ljp_timer_gap_ns(ctx);
  while (next <= now) {
    w++;
    next += ljp_timer_gap_ns(ctx);
  }
  arm_at(ctx, next);
  return w > UINT32_MAX ? UINT32_MAX : (uint32_t)w;
}

/* Signal context: the duration is over. */
static void posix_halt(ljp_ctx *ctx)
{
  struct itimerspec its;
  memset(&its, 0, sizeof(its));
  timer_settime(ctx->tmr.u.posix, 0, &its, NULL);
}

static int posix_start(ljp_ctx *ctx, clockid_t clock, char *err, size_t n)
{
  struct sigevent sev;
  memset(&sev, 0, sizeof(sev));
  sev.sigev_notify = SIGEV_THREAD_ID;
  sev.sigev_signo = ctx->opt.signo;
  sev.sigev_value.sival_int = (int)atomic_load(&ctx->token);
  sev._sigev_un._tid = ctx->tid;
  ctx->tmr.clock = clock;
  if (timer_create(clock, &sev, &ctx->tmr.u.posix) != 0) {
    snprintf(err, n, "ljprof: timer_create failed: %s", strerror(errno));
    return -1;
  }
  if (arm_at(ctx, clock_ns(clock) + ljp_timer_first_ns(ctx)) != 0) {
    snprintf(err, n, "ljprof: timer_settime failed: %s", strerror(errno));
    timer_delete(ctx->tmr.u.posix);
    return -1;
  }
  return 0;
}

static int cpu_start(ljp_ctx *ctx, char *err, size_t n)
{
  return posix_start(ctx, CLOCK_THREAD_CPUTIME_ID, err, n);
}

static int wall_start(ljp_ctx *ctx, char *err, size_t n)
{
  return posix_start(ctx, CLOCK_MONOTONIC, err, n);
}

static void posix_stop(ljp_ctx *ctx)
{
  timer_delete(ctx->tmr.u.posix);  /* also discards its pending signal */
}

const ljp_timer_ops ljp_timer_cpu = {cpu_start, posix_stop,
                                     posix_rearm, posix_halt};
const ljp_timer_ops ljp_timer_wall_kernel = {wall_start, posix_stop,
                                             posix_rearm, posix_halt};
