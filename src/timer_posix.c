/*
** Timers from timer_create(2), delivered with SIGEV_THREAD_ID to the
** thread that started profiling:
**   cpu   CLOCK_THREAD_CPUTIME_ID: the thread's CPU time only. The kernel
**         checks CPU timers once per tick (250 Hz here), so a shorter
**         interval fires at tick rate.
**   wall  CLOCK_MONOTONIC: precise, also while the thread sleeps.
** The signal's value carries the run token.
**
** Each signal re-arms the timer (posix_rearm, signal context:
** timer_settime is async-signal-safe) at an absolute time: a random gap
** in [interval/2, 3/2 interval) after the last *scheduled* expiry, not
** after delivery, so expiries average one per interval whatever the
** delivery delay. A fixed phase would sample a periodic program (a frame
** loop) at one phase only (aliasing). The timer is also periodic from
** there: an expiry the thread could not take (tick quantisation,
** preemption) is counted by the kernel as the signal's overrun
** (si_overrun), and the signal's weight is 1 plus that, so the handler
** reads no clock (one system call per signal, down from two with the cpu
** clock, whose thread CPU time is no vDSO read).
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

/* First expiry at when (absolute), then one per interval (a phase that
** is not moved on, e.g. while the handler is not re-arming at stop). */
static int arm_at(ljp_ctx *ctx, uint64_t when)
{
  struct itimerspec its;
  uint64_t period = (uint64_t)ctx->opt.interval_us * 1000u;
  its.it_value.tv_sec = (time_t)(when / 1000000000u);
  its.it_value.tv_nsec = (long)(when % 1000000000u);
  its.it_interval.tv_sec = (time_t)(period / 1000000000u);
  its.it_interval.tv_nsec = (long)(period % 1000000000u);
  ctx->tmr.next_ns = when;
  return timer_settime(ctx->tmr.u.posix, TIMER_ABSTIME, &its, NULL);
}

/* Signal context. The signal stands for the expiry scheduled (next_ns)
** and the overrun ones after it; the next comes a random gap after the
** last of them. An expiry already past fires at once, and the kernel
** counts the periods it skipped as that signal's overrun: no clock read. */
static uint32_t posix_rearm(ljp_ctx *ctx, int overrun)
{
  uint64_t period = (uint64_t)ctx->opt.interval_us * 1000u;
  uint64_t w = 1 + (uint64_t)(overrun > 0 ? overrun : 0);
  arm_at(ctx, ctx->tmr.next_ns + (w - 1) * period + ljp_timer_gap_ns(ctx));
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
                                     posix_rearm, posix_halt};
const ljp_timer_ops ljp_timer_wall = {"wall", wall_start, posix_stop,
                                      posix_rearm, posix_halt};
