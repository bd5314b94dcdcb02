/*
** Windows: the clocks' timer, a thread that takes each tick itself (there
** are no signals): it sleeps the interval on a high-resolution waitable
** timer (timeBeginPeriod(1) besides; Sleep takes whole milliseconds, which
** would round away the random gaps in [interval/2, 3/2 interval), counted
** from the previous scheduled wake-up as on Linux; under Wine the two gave
** the same shares on a 1 ms frame loop, measured), then
**   ring: ring_owner 0 -> 1 (the handler's role; a busy ring defers the
**         tick's weight to the next one, thr_overrun)
**   ljp_os_thread_stop: SuspendThread + GetThreadContext (PC, SP, RBP)
**   ljp_sample: the same sampler as Linux's handler (VM state, Lua frames,
**         zone, labels, ring; arms the safe point with lua_sethook)
**   ljp_os_thread_go: ResumeThread
**   ring_owner back to 0.
** Between suspend and resume only ljp_sample runs (sampling context: no
** allocation, no lock, no stdio; its reads of the VM are plain reads of
** what the stopped thread cannot free, or ljp_peek, ReadProcessMemory),
** plus ljp_now_ns (QueryPerformanceCounter): nothing there takes a lock
** the suspended thread may hold (heap, loader, CRT). The time from
** before the suspend to after the resume is added to the run's
** handler_ns (stats().handler_ns / stats().signals: the cost of a
** sample).
** Clocks: wall and thread are this timer; cpu is this timer taking a tick
** only when the thread's CPU cycles (QueryThreadCycleTime) advanced since
** the last one (every tick when they cannot be read: Wine); itimer
** (a process timer and SIGPROF) does not exist here, and says so.
** Ticks overslept (the thread woke late) are counted as missed, not taken,
** as on Linux. The profiled thread is the one that starts the run;
** native frames are not captured (unwind_win.c).
** ljp_timer_win_stopped runs a function of the console event's helper
** (exit_win.c: arming the safe point, closing the gate) the same way,
** the thread stopped, the ring taken. Once that helper owns the context
** (exit.closed) no tick is taken.
** Normal context (start, stop: the profiled thread; the loop: its own).
*/
#ifdef _WIN32  /* the rock compiles every src file: nothing elsewhere */
#include <stdio.h>
#include <string.h>

#include "ljp.h"
#include "os.h"

/* the timer thread */
static unsigned ticker_main(void *arg)
{
  ljp_ctx *ctx = arg;
  uint64_t next = ljp_now_ns() + ljp_timer_first_ns(ctx), now, gap;
  int cpu = ctx->tmr.ops == &ljp_timer_cpu;
  void *sleeper = ljp_os_sleeper_open();
  while (!atomic_load(&ctx->tmr.u.win.stop)) {
    uint32_t w;
    uint64_t t0, missed = 0;
    uintptr_t pc = 0;
    int free_ = 0;
    now = ljp_now_ns();
    if (now < next) {
      ljp_os_sleep_ns(sleeper, next - now);
      continue;
    }
    do {                           /* overslept ticks: missed */
      gap = ljp_timer_gap_ns(ctx);
      next += gap;
      if (next <= now) missed++;
    } while (next <= now);
    if (missed)
      atomic_fetch_add_explicit(&ctx->n_missed, missed, memory_order_relaxed);
    if (ctx->tmr.expired) continue;
    if (ctx->tmr.deadline_ns && now >= ctx->tmr.deadline_ns) {
      ctx->tmr.expired = 1;        /* duration over: no more ticks */
      continue;
    }
    if (!ctx->tmr.ticking || ctx->autos.paused) continue;
    /* A console event's writer owns the context (exit_win.c): no more
    ** records while it reads the ring. */
    if (ctx->exit.closed) continue;
    if (cpu) {
      uint64_t c = ljp_os_thread_cycles(ctx->tmr.u.win.target);
      if (c && c == ctx->tmr.u.win.cycles) continue;  /* did not run */
      ctx->tmr.u.win.cycles = c;
    }
    w = 1 + atomic_exchange_explicit(&ctx->tmr.thr_overrun, 0,
                                     memory_order_relaxed);
    if (!atomic_compare_exchange_strong_explicit(&ctx->ring_owner, &free_,
            1, memory_order_acquire, memory_order_relaxed)) {
      atomic_fetch_add_explicit(&ctx->tmr.thr_overrun, w,
                                memory_order_relaxed);
      continue;
    }
    t0 = ljp_now_ns();
    if (ljp_os_thread_stop(ctx->tmr.u.win.target, NULL, &pc) == 0) {
      /* -- the thread is stopped: sampling context ------------------ */
      uint64_t t1 = ljp_now_ns(), t2;
      ljp_sample(ctx, pc, NULL, w, 0);
      t2 = ljp_now_ns();
      ljp_os_thread_go(ctx->tmr.u.win.target);
      /* -- it runs again ---------------------------------------------- */
      /* ljp_sample counted [t1, t2); the rest of the stop is the OS's */
      atomic_fetch_add_explicit(&ctx->handler_ns,
                                (t1 - t0) + (ljp_now_ns() - t2),
                                memory_order_relaxed);
      atomic_store_explicit(&ctx->tmr.seen_ns, t1, memory_order_relaxed);
    } else {
      atomic_fetch_add_explicit(&ctx->n_missed, w, memory_order_relaxed);
    }
    atomic_store_explicit(&ctx->ring_owner, 0, memory_order_release);
  }
  ljp_os_sleeper_close(sleeper);
  return 0;
}

/* The console event's helper (exit_win.c, its own thread): fn(ctx, pc)
** run with the profiled thread stopped, as a tick's sample is, the ring
** taken the same way (a tick in progress finishes first): 0, or -1 when
** the thread could not be stopped (not running, or no timer). fn runs in
** sampling context: no allocation, no lock. */
int ljp_timer_win_stopped(ljp_ctx *ctx, void (*fn)(ljp_ctx *, uintptr_t))
{
  void *t = ctx->tmr.u.win.target;
  uintptr_t pc = 0;
  int i, rc = -1;
  if (!t || ctx->tmr.ops == &ljp_timer_itimer) return -1;
  for (i = 0;; i++) {
    int free_ = 0;
    if (atomic_compare_exchange_strong_explicit(&ctx->ring_owner, &free_, 1,
            memory_order_acquire, memory_order_relaxed))
      break;
    if (i == 2000) return -1;       /* ~2 s of a ring never given back */
    ljp_os_sleep_ms(1);
  }
  if (ljp_os_thread_stop(t, NULL, &pc) == 0) {
    fn(ctx, pc);
    ljp_os_thread_go(t);
    rc = 0;
  }
  atomic_store_explicit(&ctx->ring_owner, 0, memory_order_release);
  return rc;
}

static int win_start(ljp_ctx *ctx, char *err, size_t n)
{
  atomic_store(&ctx->tmr.u.win.stop, 0);
  atomic_store(&ctx->ring_owner, 0);
  ctx->tmr.u.win.cycles = 0;
  if (!(ctx->tmr.u.win.target = ljp_os_thread_open())) {
    snprintf(err, n, "ljprof: cannot open the Lua thread to sample it "
             "(its handle cannot suspend it or read its registers)");
    return -1;
  }
  ljp_os_timer_res(1);
  if (ljp_os_ticker_start(&ctx->tmr.u.win.ticker, ticker_main, ctx) != 0) {
    ljp_os_timer_res(0);
    ljp_os_thread_close(ctx->tmr.u.win.target);
    ctx->tmr.u.win.target = NULL;
    snprintf(err, n, "ljprof: cannot create the timer thread");
    return -1;
  }
  return 0;
}

/* The profiled thread (never stopped by the timer thread while it waits
** here: a tick in progress resumes it before the timer thread ends). */
static void win_stop(ljp_ctx *ctx)
{
  atomic_store(&ctx->tmr.u.win.stop, 1);
  ljp_os_ticker_join(ctx->tmr.u.win.ticker);
  ctx->tmr.u.win.ticker = NULL;
  ljp_os_timer_res(0);
  ljp_os_thread_close(ctx->tmr.u.win.target);
  ctx->tmr.u.win.target = NULL;
  /* Ticks deferred to a next sample that never came: missed. */
  atomic_fetch_add(&ctx->n_missed, atomic_exchange(&ctx->tmr.thr_overrun, 0));
}

static int itimer_start(ljp_ctx *ctx, char *err, size_t n)
{
  (void)ctx;
  snprintf(err, n, "ljprof: clock itimer does not exist on Windows "
           "(accepted: cpu, wall, thread)");
  return -1;
}

static void itimer_stop(ljp_ctx *ctx) { (void)ctx; }

/* No signal comes: rearm and halt are never called. */
const ljp_timer_ops ljp_timer_cpu = {win_start, win_stop, NULL, NULL};
const ljp_timer_ops ljp_timer_wall = {win_start, win_stop, NULL, NULL};
const ljp_timer_ops ljp_timer_thread = {win_start, win_stop, NULL, NULL};
const ljp_timer_ops ljp_timer_itimer = {itimer_start, itimer_stop, NULL,
                                        NULL};

/* The run's signal check (run.c) has no signal to watch here. */
int ljp_timer_thread_sends(const ljp_ctx *ctx)
{
  (void)ctx;
  return 0;
}

#endif /* _WIN32 */
