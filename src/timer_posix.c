/*
** Timers from timer_create(2), delivered with SIGEV_THREAD_ID to the
** thread that started profiling:
**   cpu   CLOCK_THREAD_CPUTIME_ID: the thread's CPU time only. The kernel
**         checks CPU timers once per tick (250 Hz here), so a shorter
**         interval fires at tick rate.
**   wall  CLOCK_MONOTONIC: precise, also while the thread sleeps.
** The signal's value carries the run token.
**
** The timer is one-shot with an absolute expiry, re-armed from the signal
** handler (posix_rearm, signal context: clock_gettime and timer_settime
** are async-signal-safe). Each gap is random in [interval/2, 3/2 interval)
** and counts from the previous *scheduled* expiry, not from delivery, so
** the expiries average one per interval whatever the delivery delay (tick
** quantisation, preemption), and expiries the thread could not take are
** added to the weight of the signal that does arrive. Periodic timers would
** sample a periodic program at one phase only (aliasing).
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

static clockid_t clock_of(ljp_ctx *ctx)
{
  return ctx->opt.clock == LJPROF_CLOCK_CPU ? CLOCK_THREAD_CPUTIME_ID
                                            : CLOCK_MONOTONIC;
}

static uint64_t clock_ns(clockid_t c)
{
  struct timespec ts;
  clock_gettime(c, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int arm_at(ljp_ctx *ctx, uint64_t when)
{
  struct itimerspec its;
  memset(&its, 0, sizeof(its));
  its.it_value.tv_sec = (time_t)(when / 1000000000u);
  its.it_value.tv_nsec = (long)(when % 1000000000u);
  ctx->tmr.next_ns = when;
  return timer_settime(ctx->tmr.u.posix, TIMER_ABSTIME, &its, NULL);
}

/* Signal context. */
static uint32_t posix_rearm(ljp_ctx *ctx)
{
  uint64_t period = (uint64_t)ctx->opt.interval_us * 1000u;
  uint64_t now = clock_ns(clock_of(ctx)), next = ctx->tmr.next_ns;
  uint64_t w = 1, missed;
  if (now >= next) {  /* expiries passed while the signal was on its way */
    missed = (now - next) / period;
    w += missed;
    next += missed * period;
  }
  next += ljp_timer_gap_ns(ctx);
  if (next <= now) next = now + 1;
  arm_at(ctx, next);
  return w > UINT32_MAX ? UINT32_MAX : (uint32_t)w;
}

static int posix_start(ljp_ctx *ctx, clockid_t clock, char *err, size_t n)
{
  struct sigevent sev;
  memset(&sev, 0, sizeof(sev));
  sev.sigev_notify = SIGEV_THREAD_ID;
  sev.sigev_signo = ctx->opt.signo;
  sev.sigev_value.sival_int = (int)atomic_load(&ctx->token);
  sev._sigev_un._tid = ctx->tid;
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

const ljp_timer_ops ljp_timer_cpu = {"cpu", cpu_start, posix_stop,
                                     posix_rearm};
const ljp_timer_ops ljp_timer_wall = {"wall", wall_start, posix_stop,
                                      posix_rearm};
