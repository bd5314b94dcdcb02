/*
** Windows: the profile written when a console control event ends the
** program (exit_signals.h; ljprof.on_signal, used by jit/prof.lua), the
** part of exit_signals.c's protocol that has a Windows meaning. The
** names on_signal takes stand for the events: INT for Ctrl-C and
** Ctrl-Break, HUP for the console's close (CTRL_CLOSE_EVENT), TERM for
** logoff and shutdown.
**
** Only events that would end the program are written for. The C
** runtime's action for SIGINT (Ctrl-C) and SIGBREAK (Ctrl-Break) is read
** when the event comes (sigowner_win.c; luajit sets its SIGINT handler
** around each chunk it runs, not around -j commands): a program's own
** handler, or an ignored signal, is left alone (put back, the event
** passed on); the default is ours. One exception, as on Linux:
** luajit.exe's own SIGINT handler (the program is named luajit*, the
** handler lies in its image) sets a hook that raises "interrupted!" at
** the interpreter's next instruction, which compiled code never reaches.
** This handler calls it, as the C runtime would have, ends the event
** there, and a watcher thread gives the interpreter INT_GRACE_MS to take
** that hook and then ERR_GRACE_MS for the error to reach the run's own
** writing ("hold": the profile is written once, by the run); if the hook
** was not taken, or the run did not end, Ctrl-C ends the program as
** Ctrl-Break does (below), and the watcher ends the process as Windows'
** default handler would have (STATUS_CONTROL_C_EXIT) once the profile is
** written. (Under Wine, the error took 94-132 ms from the event to the
** run's writing, 3 runs: Wine's console is slow; Linux's one grace of
** 100 ms was too short for it.) A handler registered with
** SetConsoleCtrlHandler before the trap is not seen: it runs after this
** one (handlers run newest first), which writes the profile and passes
** the event on; if it then keeps the program running, the profiled
** thread stays parked at its next entry into ljprof.
**
** There are no signals here: Windows calls the console control handler
** on a thread it makes for the event, and that thread plays the part of
** Linux's helper (exit_signals.c), with the same protocol:
**   1. Record the event (ctx->exit.signal; under trap_mu, against the
**      run's own writing, "hold") and make the writer's state (ownstate.c
**      through exit_write.c: allocation, the loader for the writer's
**      modules) while the profiled thread runs on, never suspended.
**   2. Arm the safe point as a tick does: the thread stopped, the ring
**      taken (ljp_timer_win_stopped, timer_win.c: SuspendThread,
**      ljp_hook_arm, ResumeThread; nothing there allocates or takes a
**      lock). Within GRACE_MS the safe point normally comes: it completes
**      the pending samples with the Lua stack, hands the context over
**      ("closed") and parks the thread for good.
**   3. Otherwise force it, the thread stopped again: closed at once when
**      it is outside every ljprof region (the gate, exit_signals.h), else
**      the region's end closes. The thread goes on (blocked, or in its
**      compiled loop) and parks at its next entry into ljprof; pending
**      samples get the leaf known without the Lua stack (complete.c).
**   4. Write the outputs from the own state (exit_write.c), then return
**      to the system: the event goes to the next handler, as without
**      ljprof (Windows' default ends the process with
**      STATUS_CONTROL_C_EXIT).
** The writer allocates and may take the loader lock while the profiled
** thread is never suspended by this thread (only for the arm and the
** close, which allocate nothing), and no tick is taken once the context
** is closed (timer_win.c): no lock a suspended thread holds is waited
** for. Windows gives a close, logoff or shutdown handler 5 s (then ends
** the process): the forcing is bounded below that.
** A second event while the profile is written waits for the first to
** end the process. While the run writes its own outputs (hold), an
** event waits until the writing is done (ljp_exit_signals_off), then
** goes on to end the process; the profiled thread parks meanwhile.
** Normal context (the trap: the profiled thread; the handler and the
** watcher: their own threads).
*/
#ifdef _WIN32  /* the rock compiles every src file: nothing elsewhere */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>

#include "ljp.h"
#include "exit_signals.h"
#include "exit_write.h"
#include "os.h"
#include "sigowner.h"
#include "timer.h"

#define GRACE_MS 20       /* for the safe point, before forcing */
#define INT_GRACE_MS 100  /* for luajit's hook to be taken */
#define ERR_GRACE_MS 2000 /* for its "interrupted!" to end the run */
#define FORCE_TRIES 16    /* forced closes tried, FORCE_MS apart (< 5 s) */
#define FORCE_MS 250
#ifndef SIGBREAK
#define SIGBREAK 21
#endif

enum { W_INT = 1, W_BREAK = 2, W_HUP = 4, W_TERM = 8 };

static struct {
  _Atomic(ljp_ctx *) ctx;     /* owner; NULL when nothing is trapped */
  int want;                   /* W_*: the events trapped */
  int handler_on;             /* the console handler is registered */
  volatile int hold;          /* the run writes its own outputs */
  volatile int quit;          /* the trap goes: the watcher ends */
  volatile int int_came;      /* luajit's handler had its Ctrl-C */
  int held_waiter;            /* an event waits for the run's writing */
  lua_Hook int_hook;          /* the hook luajit's handler set */
  _Atomic int writing;        /* an event's writer started */
  _Atomic pid_t writer;       /* its thread (ljp_exit_is_helper) */
  void *closed_ev, *off_ev;   /* the context handed over; off after hold */
  void *watcher;              /* the watcher thread (luajit's Ctrl-C) */
  ljp_exit_spec spec;         /* what the writer loads */
} trap;
/* Taken by on, off, hold (the profiled thread) and by an event's claim;
** never held while waiting or parking. */
static ljp_os_lock trap_mu = LJP_OS_LOCK_INIT;

static void say(const char *a, const char *b)
{
  fprintf(stderr, "%s%s\n", a, b ? b : "");
  fflush(stderr);
}

static const char *event_name(int ev)
{
  switch (ev) {
  case LJP_OS_CTRL_C: return "CTRL_C";
  case LJP_OS_CTRL_BREAK: return "CTRL_BREAK";
  case LJP_OS_CTRL_CLOSE: return "CTRL_CLOSE";
  case LJP_OS_CTRL_LOGOFF: return "CTRL_LOGOFF";
  case LJP_OS_CTRL_SHUTDOWN: return "CTRL_SHUTDOWN";
  }
  return NULL;
}

static int event_want(int ev)
{
  switch (ev) {
  case LJP_OS_CTRL_C: return W_INT;
  case LJP_OS_CTRL_BREAK: return W_BREAK;
  case LJP_OS_CTRL_CLOSE: return W_HUP;
  case LJP_OS_CTRL_LOGOFF: case LJP_OS_CTRL_SHUTDOWN: return W_TERM;
  }
  return 0;
}

/* -- The gate ---------------------------------------------------------------- */

int ljp_exit_is_helper(void)
{
  return atomic_load(&trap.writing) && atomic_load(&trap.writer) == ljp_gettid();
}

/* Hand the context to the writer (the profiled thread, or the writer
** with it stopped). */
void ljp_exit_close(ljp_exitst *x)
{
  ljp_ctx *ctx = atomic_load(&trap.ctx);
  if (x->closed) return;
  x->closed = 1;
  if (ctx && &ctx->exit == x) ljp_os_event_set(trap.closed_ev);
}

void ljp_exit_park(void) { ljp_os_park(); }

/* No lending on Windows (auto_win.c: no export helper). */
void ljp_lend_wait(ljp_exitst *x) { (void)x; }

/* At a safe point after an event (normal context, outside every region):
** the pending samples are complete; hand over and park. */
void ljp_exit_handover(ljp_ctx *ctx)
{
  ljp_exit_close(&ctx->exit);
  ljp_exit_park();
}

/* -- With the profiled thread stopped (sampling context) ------------------- */

static void arm_stopped(ljp_ctx *ctx, uintptr_t pc)
{
  if (!ctx->hook.busy && ljp_hook_arm_safe(&ctx->hook, pc))
    ljp_hook_arm(&ctx->hook);
}

static void close_stopped(ljp_ctx *ctx, uintptr_t pc)
{
  (void)pc;
  if (ctx->exit.closed) return;
  if (ctx->exit.entered) ctx->exit.close_at_leave = 1;
  else ljp_exit_close(&ctx->exit);
}

/* -- The writer (the event's thread, or the watcher) ------------------------ */

enum { EV_PASS, EV_WRITTEN, EV_HELD };

/* Claim the context for the event: EV_PASS (nothing trapped any more),
** EV_HELD (the run writes its outputs; wait: the caller waits for them,
** ljp_exit_signals_off lets it go on), else recorded (0). */
static int claim(ljp_ctx *ctx, int sig, int wait)
{
  int rc = 0;
  ljp_os_lock_take(&trap_mu);
  if (trap.quit || atomic_load(&trap.ctx) != ctx) rc = EV_PASS;
  else if (trap.hold) {
    rc = EV_HELD;
    if (wait) trap.held_waiter = 1;
  } else if (!ctx->exit.signal) ctx->exit.signal = sig;
  ljp_os_lock_drop(&trap_mu);
  return rc;
}

/* Steps 1-4 of the top. EV_WRITTEN (or not: said in one line), EV_HELD
** (wait: the caller waits for trap.off_ev) or EV_PASS. */
static int write_on_event(ljp_ctx *ctx, const char *name, int sig, int wait)
{
  char err[512];
  lua_State *HL, *empty = NULL;
  int rc, closed, i;
  if (atomic_exchange(&trap.writing, 1)) {
    /* A second event: the first one's writer ends the process. */
    ljp_os_park();
  }
  atomic_store(&trap.writer, ljp_gettid());
  if ((rc = claim(ctx, sig, wait)) != 0) {
    atomic_store(&trap.writing, 0);
    return rc;
  }
  /* 1. The writer's state while the safe point may come; 2. arm. */
  ljp_timer_win_stopped(ctx, arm_stopped);
  HL = ljp_exit_writer(&trap.spec, ctx, &empty, err, sizeof(err));
  if (!HL) {
    say("ljprof: no profile on ", name);
    say("ljprof: ", err);
    return EV_WRITTEN;            /* as without ljprof */
  }
  closed = ctx->exit.closed || ljp_os_event_wait(trap.closed_ev, GRACE_MS);
  /* 3. Force. */
  for (i = 0; !closed && i < FORCE_TRIES; i++) {
    ljp_timer_win_stopped(ctx, close_stopped);
    closed = ctx->exit.closed || ljp_os_event_wait(trap.closed_ev, FORCE_MS);
  }
  if (!closed) {
    say("ljprof: the profile was not written: the profiled thread stayed "
        "inside ljprof after ", name);
    return EV_WRITTEN;
  }
  /* 4. */
  if (ljp_exit_write(HL, empty, ctx, name, err, sizeof(err)) != 0)
    say("ljprof: writing the profile failed: ", err);
  fflush(NULL);
  return EV_WRITTEN;
}

/* The watcher (a thread), after luajit's handler had Ctrl-C: until the
** run writes itself (hold) or the trap goes, ERR_GRACE_MS at most, and
** INT_GRACE_MS only while luajit's hook is still the program's hook (not
** taken: a compiled loop); then the profile is written as on Ctrl-Break
** and the process ends as the default handler ends it. */
static unsigned int_watch(void *arg)
{
  ljp_ctx *ctx = arg;
  int i;
  for (i = 0; i < ERR_GRACE_MS / 5; i++) {
    if (trap.quit || trap.hold || ctx->exit.signal) return 0;
    /* luajit's hook not taken within INT_GRACE_MS: a compiled loop */
    if (i >= INT_GRACE_MS / 5 && trap.int_hook &&
        ljp_hook_program(&ctx->hook) == trap.int_hook)
      break;
    ljp_os_sleep_ms(5);
  }
  if (write_on_event(ctx, "CTRL_C", SIGINT, 0) == EV_WRITTEN)
    ljp_os_exit_ctrl_c();
  return 0;
}

/* luajit.exe's SIGINT handler: h in the program's image, the program
** named luajit*. */
static int luajit_handler(uintptr_t h)
{
  uintptr_t lo, hi;
  return h > 1 && !_strnicmp(ljp_os_prog_name(), "luajit", 6) &&
         ljp_os_module_of(h, &lo, &hi) == 0 && lo == ljp_os_exe_base();
}

/* The console control handler (the thread Windows makes for the event):
** 1 to end the event's handling, 0 to pass it on. */
static int console_event(int ev)   /* ENTRY */
{
  ljp_ctx *ctx = atomic_load(&trap.ctx);
  const char *name = event_name(ev);
  if (!ctx || !name || !(trap.want & event_want(ev)) || trap.quit) return 0;
  if ((ev == LJP_OS_CTRL_C || ev == LJP_OS_CTRL_BREAK) && !trap.hold &&
      !atomic_load(&trap.writing)) {
    /* The C runtime's action for it, read now (luajit sets its handler
    ** around each chunk it runs, not around -j commands). */
    int signo = ev == LJP_OS_CTRL_C ? SIGINT : SIGBREAK;
    uintptr_t h = ljp_sig_crt_take(signo);
    if (signo == SIGINT && !trap.int_came && luajit_handler(h)) {
      /* luajit's handler (it sets its hook), then the watcher's grace:
      ** as the C runtime would have called it, the event ends here. */
      trap.int_came = 1;
      ((void (*)(int))h)(SIGINT);
      trap.int_hook = ljp_hook_program(&ctx->hook);
      if (ljp_os_thread_start(&trap.watcher, int_watch, ctx) != 0)
        trap.watcher = NULL;
      return 1;
    }
    if (h) {                        /* ignored, or the program's handler */
      ljp_sig_crt_put(signo, h);
      return 0;
    }
  }
  if (write_on_event(ctx, name, ev == LJP_OS_CTRL_C ? SIGINT : SIGTERM, 1) ==
      EV_HELD) {
    /* The run is writing: the event ends the process after it. */
    ljp_os_event_wait(trap.off_ev, LJP_OS_FOREVER);
  }
  return 0;
}

/* -- Trap and release ------------------------------------------------------------ */

/* Remove the trap (the profiled thread; no event came, or one came while
** the run wrote its outputs). */
static void untrap(void)
{
  ljp_os_lock_take(&trap_mu);
  trap.quit = 1;
  ljp_os_lock_drop(&trap_mu);
  if (trap.watcher) {
    ljp_os_ticker_join(trap.watcher);
    trap.watcher = NULL;
  }
  if (trap.handler_on) ljp_os_console_trap(console_event, 0);
  trap.handler_on = 0;
  ljp_os_event_free(trap.closed_ev);
  ljp_os_event_free(trap.off_ev);
  trap.closed_ev = trap.off_ev = NULL;
  ljp_exit_spec_free(&trap.spec);
  trap.want = 0;
  atomic_store(&trap.ctx, NULL);
}

/* Stop trapping. An event that came first: its writer is writing; hand
** over and park (the process is about to end). One that came while the
** run wrote its outputs: let it end the process now (park). */
void ljp_exit_signals_off(ljp_ctx *ctx)
{
  int sig, held, waiter;
  if (atomic_load(&trap.ctx) != ctx) return;
  ljp_os_lock_take(&trap_mu);
  sig = ctx->exit.signal;
  held = trap.hold;
  waiter = trap.held_waiter;
  ljp_os_lock_drop(&trap_mu);
  if (sig && !held) {
    ljp_exit_close(&ctx->exit);
    ljp_exit_park();
  }
  if (held && waiter) {
    ljp_os_event_set(trap.off_ev);  /* the event goes on: the end */
    ljp_exit_park();
  }
  untrap();
}

/* The run writes its own outputs now (jit.prof's stop): an event that
** comes meanwhile waits for ljp_exit_signals_off. One that came before:
** its writer is writing; hand over and park. */
void ljp_exit_signals_hold(ljp_ctx *ctx)
{
  int sig;
  if (atomic_load(&trap.ctx) != ctx) return;
  ljp_os_lock_take(&trap_mu);
  sig = ctx->exit.signal;
  if (!sig) trap.hold = 1;
  ljp_os_lock_drop(&trap_mu);
  if (sig) {
    ljp_exit_close(&ctx->exit);
    ljp_exit_park();
  }
}

void ljp_exit_signals_release(ljp_ctx *ctx) { ljp_exit_signals_off(ctx); }

int ljp_exit_signals_on(ljp_ctx *ctx, lua_State *L, int names,
                        const char *module, const char *func,
                        const char *arg, size_t arglen)
{
  static const struct { const char *name; int w; } sigs[] = {
    {"TERM", W_TERM}, {"HUP", W_HUP}, {"INT", W_INT | W_BREAK}};
  int want = 0, got = 0, k, n = 0;
  size_t i;
  if (ctx->state != LJP_RUNNING)
    return luaL_error(L, "ljprof: on_signal needs a running profile");
  for (k = 1;; k++) {
    const char *s;
    lua_rawgeti(L, names, k);
    if (lua_isnil(L, -1)) { lua_pop(L, 1); break; }
    s = lua_tostring(L, -1);
    for (i = 0; s && i < sizeof(sigs) / sizeof(sigs[0]); i++)
      if (!strcmp(s, sigs[i].name)) want |= sigs[i].w;
    lua_pop(L, 1);
  }
  if (atomic_load(&trap.ctx) && atomic_load(&trap.ctx) != ctx)
    return luaL_error(L, "ljprof: exit signals are trapped for another "
                      "Lua state");
  if (atomic_load(&trap.ctx) == ctx) untrap();  /* a new writer */
  /* (Ctrl-C and Ctrl-Break: the C runtime's action is read when one
  ** comes: console_event) */
  got = want;
  if (ljp_exit_spec_copy(&trap.spec, L, module, func, arg, arglen) != 0)
    return luaL_error(L, "ljprof: on_signal: out of memory");
  memset(&ctx->exit, 0, sizeof(ctx->exit));
  trap.quit = trap.hold = trap.int_came = trap.held_waiter = 0;
  trap.int_hook = NULL;
  atomic_store(&trap.writing, 0);
  trap.want = got;
  trap.closed_ev = ljp_os_event_new();
  trap.off_ev = ljp_os_event_new();
  atomic_store(&trap.ctx, ctx);
  if (!trap.closed_ev || !trap.off_ev ||
      ljp_os_console_trap(console_event, 1) != 0) {
    untrap();
    return luaL_error(L, "ljprof: on_signal: cannot set a console control "
                      "handler");
  }
  trap.handler_on = 1;
  lua_newtable(L);
  for (i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
    if (!(got & sigs[i].w)) continue;
    lua_pushstring(L, sigs[i].name);
    lua_rawseti(L, -2, ++n);
  }
  return 1;
}

/* Tests only (tests/windows/host_ctrl.c): Wine delivers neither
** CTRL_CLOSE_EVENT (no console window to close, headless) nor
** CTRL_BREAK_EVENT (GenerateConsoleCtrlEvent fails). ev is delivered to
** the handler as Windows' control routine delivers it: on a new thread;
** if the handler passes it on, the default ends the process with
** STATUS_CONTROL_C_EXIT (Wine's default handler ends it with 0). */
static unsigned test_event_main(void *arg)
{
  if (!console_event((int)(intptr_t)arg)) ljp_os_exit_ctrl_c();
  return 0;
}

__declspec(dllexport) int ljp_win_test_ctrl_event(int ev)
{
  void *th;
  return ljp_os_thread_start(&th, test_event_main, (void *)(intptr_t)ev);
}

/* No signals, no exec interposer on Windows. */
void ljp_exit_int_watch(void) {}
int ljp_exit_write_now(void) { return 0; }

#endif /* _WIN32 */
