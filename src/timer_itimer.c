/*
** setitimer(ITIMER_PROF): process CPU time of all threads, SIGPROF, what
** LuaJIT's jit.profile uses. Only one per process, so one state at a time;
** it cannot run together with jit.profile. A signal that lands on another
** thread is handed to the profiled thread by the handler (tgkill), so CPU
** time burnt by any thread is charged to the Lua state, as with jit.p.
**
** The kernel checks the timer once per tick (250 Hz here) and moves its
** expiry on by one interval each time, so an interval shorter than a tick
** still fires once per tick. Each signal is therefore weighted by the
** expiries it stands for: the process CPU time since the last one,
** counted in intervals (itimer_weigh, signal context: clock_gettime only).
** Start and stop are normal context.
*/
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include "ljp.h"

static uint64_t process_cpu_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Signal context, on the profiled thread: the expiries this signal stands
** for (>= 1). next_ns is the process CPU time of the next expiry. */
static uint32_t itimer_weigh(ljp_ctx *ctx)
{
  uint64_t period = (uint64_t)ctx->opt.interval_us * 1000u;
  uint64_t now = process_cpu_ns(), next = ctx->tmr.next_ns, w = 1;
  atomic_store_explicit(&ctx->tmr.seen_ns, now, memory_order_relaxed);
  if (now >= next) w = (now - next) / period + 1;
  ctx->tmr.next_ns = next + w * period;
  return w > UINT32_MAX ? UINT32_MAX : (uint32_t)w;
}

static int itimer_start(ljp_ctx *ctx, char *err, size_t n)
{
  struct itimerval it;
  uint64_t first = ljp_timer_first_ns(ctx) / 1000u;
  if (ljp_itimer_bound()) {
    snprintf(err, n, "ljprof: the itimer clock is process-wide and already "
             "used by another Lua state");
    return -1;
  }
  ljp_itimer_bind(atomic_load(&ctx->token));
  it.it_interval.tv_sec = ctx->opt.interval_us / 1000000u;
  it.it_interval.tv_usec = ctx->opt.interval_us % 1000000u;
  if (first == 0) first = 1;
  it.it_value.tv_sec = (time_t)(first / 1000000u);
  it.it_value.tv_usec = (suseconds_t)(first % 1000000u);
  ctx->tmr.next_ns = process_cpu_ns() + first * 1000u;
  if (setitimer(ITIMER_PROF, &it, NULL) != 0) {
    snprintf(err, n, "ljprof: setitimer failed");
    ljp_itimer_bind(0);
    return -1;
  }
  return 0;
}

static void itimer_stop(ljp_ctx *ctx)
{
  struct itimerval it;
  (void)ctx;
  memset(&it, 0, sizeof(it));
  setitimer(ITIMER_PROF, &it, NULL);
  ljp_itimer_bind(0);  /* a late SIGPROF now finds no context */
}

/* Periodic, like jit.p: setitimer takes only relative times, so a random
** gap from delivery would be biased by the delivery delay. */
static void itimer_halt(ljp_ctx *ctx)
{
  struct itimerval it;
  (void)ctx;
  memset(&it, 0, sizeof(it));
  setitimer(ITIMER_PROF, &it, NULL);  /* async-signal-safe */
}

const ljp_timer_ops ljp_timer_itimer = {"itimer", itimer_start, itimer_stop,
                                        itimer_weigh, itimer_halt};
