/*
** Timers from timer_create(2), delivered with SIGEV_THREAD_ID to the
** thread that started profiling:
**   cpu   CLOCK_THREAD_CPUTIME_ID: the thread's CPU time only. The kernel
**         checks CPU timers once per tick (250 Hz here), so a shorter
**         interval fires at tick rate; si_overrun carries the missed
**         expiries, which the handler adds to the sample's weight.
**   wall  CLOCK_MONOTONIC: precise, also while the thread sleeps.
** The signal's value carries the run token. Normal context.
*/
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "ljp.h"

uint64_t ljp_timer_first_ns(ljp_ctx *ctx)
{
  uint64_t x = ctx->rng, period = (uint64_t)ctx->opt.interval_us * 1000u;
  if (!x) x = ljp_now_ns() ^ ((uint64_t)ctx->tid << 32) ^ 0x9e3779b97f4a7c15ull;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  ctx->rng = x;
  return 1 + x % period;
}

static int posix_start(ljp_ctx *ctx, clockid_t clock, char *err, size_t n)
{
  struct sigevent sev;
  struct itimerspec its;
  uint64_t first = ljp_timer_first_ns(ctx);
  uint64_t period = (uint64_t)ctx->opt.interval_us * 1000u;
  memset(&sev, 0, sizeof(sev));
  sev.sigev_notify = SIGEV_THREAD_ID;
  sev.sigev_signo = ctx->opt.signo;
  sev.sigev_value.sival_int = (int)atomic_load(&ctx->token);
  sev._sigev_un._tid = ctx->tid;
  if (timer_create(clock, &sev, &ctx->tm.posix) != 0) {
    snprintf(err, n, "ljprof: timer_create failed: %s", strerror(errno));
    return -1;
  }
  its.it_interval.tv_sec = (time_t)(period / 1000000000u);
  its.it_interval.tv_nsec = (long)(period % 1000000000u);
  its.it_value.tv_sec = (time_t)(first / 1000000000u);
  its.it_value.tv_nsec = (long)(first % 1000000000u);
  if (timer_settime(ctx->tm.posix, 0, &its, NULL) != 0) {
    snprintf(err, n, "ljprof: timer_settime failed: %s", strerror(errno));
    timer_delete(ctx->tm.posix);
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
  timer_delete(ctx->tm.posix);  /* also discards its pending signal */
}

const ljp_timer_ops ljp_timer_cpu = {"cpu", cpu_start, posix_stop};
const ljp_timer_ops ljp_timer_wall = {"wall", wall_start, posix_stop};
