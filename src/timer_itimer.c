/*
** Clock itimer: process CPU time of all threads, SIGPROF, what LuaJIT's
** jit.profile's ITIMER_PROF measures. Only one per process, so one state
** at a time; it cannot run together with jit.profile (both need SIGPROF).
** A signal that lands on another thread is handed to the profiled thread
** by the handler (tgkill), so CPU time burnt by any thread is charged to
** the Lua state, as with jit.p.
**
** The timer is a POSIX one on CLOCK_PROCESS_CPUTIME_ID (SIGEV_SIGNAL, the
** state's token in si_value), not setitimer's ITIMER_PROF: the same
** clock, the same kernel-tick expiries, but exec deletes it. An
** ITIMER_PROF outlives exec, and the new program, whose SIGPROF is back
** to its default action, died of it ("Profiling timer expired", 155)
** under -jprof, where ljprof cannot see the exec (exec.c).
**
** The kernel checks the timer once per tick (250 Hz here) and moves its
** expiry on by one interval each time, so an interval shorter than a tick
** still fires once per tick. Each signal is therefore weighted by the
** expiries it stands for: the process CPU time since the last one,
** counted in intervals (itimer_weigh, signal context: clock_gettime only).
** Start and stop are normal context.
*/
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
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
static uint32_t itimer_weigh(ljp_ctx *ctx, const siginfo_t *si)
{
  uint64_t period = (uint64_t)ctx->opt.interval_us * 1000u;
  uint64_t now = process_cpu_ns(), next = ctx->tmr.next_ns, w = 1;
  (void)si;
  atomic_store_explicit(&ctx->tmr.seen_ns, now, memory_order_relaxed);
  if (now >= next) w = (now - next) / period + 1;
  ctx->tmr.next_ns = next + w * period;
  return w > UINT32_MAX ? UINT32_MAX : (uint32_t)w;
}

/* The one itimer timer of the process (exec.c pauses it around exec). */
static timer_t itimer_id;
static _Atomic int itimer_made;

static int itimer_start(ljp_ctx *ctx, char *err, size_t n)
{
  struct sigevent sev;
  struct itimerspec its;
  uint64_t first = ljp_timer_first_ns(ctx);
  uint32_t token = atomic_load(&ctx->token);
  if (ljp_itimer_bound()) {
    snprintf(err, n, "ljprof: the itimer clock is process-wide and already "
             "used by another Lua state");
    return -1;
  }
  memset(&sev, 0, sizeof(sev));
  sev.sigev_notify = SIGEV_SIGNAL;
  sev.sigev_signo = SIGPROF;
  sev.sigev_value.sival_int = (int)token;
  if (timer_create(CLOCK_PROCESS_CPUTIME_ID, &sev, &ctx->tmr.u.posix) != 0) {
    snprintf(err, n, "ljprof: timer_create failed: %s", strerror(errno));
    return -1;
  }
  ljp_itimer_bind(token);
  its.it_interval.tv_sec = ctx->opt.interval_us / 1000000u;
  its.it_interval.tv_nsec = (long)(ctx->opt.interval_us % 1000000u) * 1000;
  if (first == 0) first = 1000;
  its.it_value.tv_sec = (time_t)(first / 1000000000u);
  its.it_value.tv_nsec = (long)(first % 1000000000u);
  ctx->tmr.next_ns = process_cpu_ns() + first;
  if (timer_settime(ctx->tmr.u.posix, 0, &its, NULL) != 0) {
    snprintf(err, n, "ljprof: timer_settime failed: %s", strerror(errno));
    ljp_itimer_bind(0);
    timer_delete(ctx->tmr.u.posix);
    return -1;
  }
  itimer_id = ctx->tmr.u.posix;
  atomic_store(&itimer_made, 1);
  return 0;
}

static void itimer_stop(ljp_ctx *ctx)
{
  atomic_store(&itimer_made, 0);
  timer_delete(ctx->tmr.u.posix);  /* also discards its pending signal */
  ljp_itimer_bind(0);  /* a late (forwarded) SIGPROF now finds no context */
}

/* Periodic, like jit.p: relative times, so a random gap from delivery
** would be biased by the delivery delay. */
static void itimer_halt(ljp_ctx *ctx)
{
  static const struct itimerspec zero;
  timer_settime(ctx->tmr.u.posix, 0, &zero, NULL);  /* async-signal-safe */
}

int ljp_itimer_pause(struct itimerspec *saved)
{
  static const struct itimerspec zero;
  return atomic_load(&itimer_made) &&
         timer_settime(itimer_id, 0, &zero, saved) == 0;
}

void ljp_itimer_resume(const struct itimerspec *saved)
{
  if (atomic_load(&itimer_made)) timer_settime(itimer_id, 0, saved, NULL);
}

const ljp_timer_ops ljp_timer_itimer = {itimer_start, itimer_stop,
                                        itimer_weigh, itimer_halt};
