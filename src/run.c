/*
** Run control: a run is a sequence of steps, each bringing one module up;
** start runs them in order, stop takes the ones that are up down in
** reverse. A step that fails at start takes down the steps before it the
** same way, so there is no hand-written unwinding.
**
**   results   fresh ring and tables,  | complete what never reached a safe
**             the start time, the     | point, aggregate, write the output
**             output's writer found   | (writer.c: the Lua writer)
**   code map  loaded objects, traces  | free retired arrays
**   vm        learn the VM (vm.h)     |
**   native    native frame capture    |
**   traces    jit.attach handler      | chained handler put back
**   calls     call counting (opt-in)  | JIT and the program's hook back
**   token     signals reach the ring  | token closed, handlers waited out
**   hook      samples arm the hook    | no more arming, rest hook state
**   timer     ticks                   | no more ticks
**
** Normal context, on the profiled thread. The input was validated by the
** caller (api.c). The VM is named through vm.h only (its layouts are
** learnt by vmlearn.c). Aggregation (ljp_aggregate: the completed records
** into the store, inside the exit signals' gate) is here too, for the
** entry points and the results step: the gate's callers sit above
** exit_signals.c. The parts of the context (timer, hook, traces) are
** written through their owners' functions.
*/
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <lauxlib.h>

#include "ljp.h"
#include "clocks.h"
#include "os.h"
#include "objects.h"
#include "ownstate.h"
#include "jitmode.h"
#include "sigowner.h"
#include "writer.h"
#include "calls.h"
#include "symbols.h"
#include "unwind.h"
#include "exit_signals.h"

static char *dup_or_null(const char *s)
{
  return s ? strdup(s) : NULL;
}

/* The profile's time starts now (a run's start; an export that takes the
** counts and starts afresh calls it too): pprof's time_nanos and
** duration_nanos. */
void ljp_run_clock_start(ljp_ctx *ctx)
{
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  ctx->start_unix_ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
  ctx->start_ns = ljp_now_ns();
  ctx->stop_ns = 0;
}

/* -- The steps ------------------------------------------------------------- */

static int results_up(ljp_ctx *ctx, lua_State *L, char *err, size_t n)
{
  const ljprof_options *o = &ctx->pending_opt;
  free(ctx->stack_fmt);
  free(ctx->output);
  free(ctx->out_path);
  free(ctx->out_cpath);
  ctx->out_path = ctx->out_cpath = NULL;
  free(ctx->error);
  ctx->error = NULL;
  ctx->stack_fmt = strdup(o->stack_fmt);
  ctx->output = dup_or_null(o->output);
  ctx->opt = *o;
  ctx->opt.stack_fmt = ctx->stack_fmt;
  ctx->opt.output = ctx->output;
  if (ljp_store_reset(&ctx->store) != 0) {
    snprintf(err, n, "ljprof: out of memory");
    return -1;
  }
  ljp_cname_memo_reset(&ctx->cnames);
  ljp_native_names_reset(ctx);  /* its ids are in the store */
  ljp_frames_reset(ctx);
  ctx->completed = ctx->safepoints = ctx->hook_ns = ctx->complete_ns = 0;
  ctx->recorder_kept = 0;
  atomic_store(&ctx->handler_ns, 0);
  ctx->cb_ticks = ctx->cb_host = 0;
  ctx->cb_host_L = NULL;
  memset(ctx->vm, 0, sizeof(ctx->vm));
  ljp_ring_free(&ctx->ring);
  if (!ctx->stack_fmt || (o->output && !ctx->output) ||
      ljp_ring_init(&ctx->ring, o->ring_size) != 0) {
    snprintf(err, n, "ljprof: out of memory");
    return -1;
  }
  /* The output's writer: found now, or no run. */
  if (ctx->output && ljp_writer_prepare(L, ctx->output, &ctx->out_path,
                                        &ctx->out_cpath, err, n) != 0)
    return -1;
  atomic_store(&ctx->seq, 0);
  atomic_store(&ctx->n_signals, 0);
  atomic_store(&ctx->n_ticks, 0);
  atomic_store(&ctx->n_dropped, 0);
  atomic_store(&ctx->n_missed, 0);
  atomic_store(&ctx->n_merged, 0);
  atomic_store(&ctx->n_native_unwinds, 0);
  atomic_store(&ctx->n_native_frames, 0);
  atomic_store(&ctx->n_native_truncated, 0);
  atomic_store(&ctx->n_native_skipped, 0);
  atomic_store(&ctx->n_lua_captures, 0);
  atomic_store(&ctx->n_host, 0);
  ctx->stack_checks = ctx->stack_mismatches = 0;
  ctx->inline_samples = ctx->inline_undecoded = 0;
  ctx->inline_estimated = ctx->inline_recorded = 0;
  ctx->names_late = ctx->names_late_found = 0;
  ctx->snap_checks = ctx->snap_mismatches = 0;
  ctx->pid = getpid();
  ctx->tid = ljp_gettid();
  ctx->thread = pthread_self();
  ljp_hook_new_run(&ctx->hook);
  ctx->stop_requested = 0;
  ctx->sig_lost = 0;
  ljp_timer_reset(&ctx->tmr, o->duration_us ?
                  ljp_now_ns() + o->duration_us * 1000u : 0);
  ljp_run_clock_start(ctx);
  memset(ctx->thread_name, 0, sizeof(ctx->thread_name));
  ljp_os_thread_name(ctx->thread_name);  /* "luajit", "nginx" */
  return 0;
}

/* The run is over: what never reached a safe point, then the output,
** by the Lua writer -jprof uses (writer.c). A start that failed writes
** nothing. An output that cannot be written is one line on stderr and the
** run's error (Lua's stop() returns false and it), unless the run already
** failed for another reason. */
static void results_down(ljp_ctx *ctx, lua_State *L)
{
  char err[512];
  if (!ctx->started) return;
  ctx->started = 0;
  ctx->stop_ns = ljp_now_ns();
  ljp_complete(ctx, L);
  ljp_aggregate(ctx);
  if (L) ljp_frames_name_late(ctx, L);
  if (ctx->output &&
      ljp_writer_write(ctx, ctx->output, ctx->stack_fmt, ctx->out_path,
                       ctx->out_cpath, err, sizeof(err))) {
    fprintf(stderr, "%s\n", err);
    if (!ctx->error) ctx->error = strdup(err);
  }
}

static int codemap_up(ljp_ctx *ctx, lua_State *L, char *err, size_t n)
{
  (void)L; (void)err; (void)n;
  ljp_codemap_trace_flush(&ctx->map);
  ljp_objects_refresh();
  return 0;
}

/* Retired code ranges and objects freed once no handler can hold them. */
static void codemap_down(ljp_ctx *ctx, lua_State *L)
{
  (void)ctx; (void)L;
  ljp_epoch_collect();
}

static int vm_up(ljp_ctx *ctx, lua_State *L, char *err, size_t n)
{
  (void)err; (void)n;
  ljp_vm_learn_start(ctx->opt.inline_frames == LJPROF_INLINE_RECORDED,
                     ctx->opt.inline_frames == LJPROF_INLINE_EXACT &&
                     !ctx->opt.cb);  /* PROF's opcode (jitmode_up) */
  ljp_cname_walk(&ctx->cnames, L);  /* the program's own modules (raw reads) */
  ctx->vm_g = ljp_vm_global(ctx->L);
  ljp_hook_set_global(&ctx->hook, ctx->vm_g);
  /* Lua frames captured at the signal (not for callbacks: they keep
  ** jit.profile's stacks). */
  ctx->exact_on = 0;
  if (ctx->vm_g && !ctx->opt.cb) {
    ljp_vmcaps caps;
    ljp_vm_caps(&caps);
    ctx->exact_on = caps.capture;
  }
  return 0;
}

/* Callbacks keep jit.profile's stacks: no native frames for them. Why
** native frames are off (ctx->native_why: runs on other threads start at
** the same time) is said once per process, after the run has started
** (native_notice): a start that fails later (a clock that does not exist
** here) prints its one error line only. */
static int native_up(ljp_ctx *ctx, lua_State *L, char *err, size_t n)
{
  (void)err; (void)n;
  ctx->native_on = 0;
  ctx->native_why = NULL;
  if (ctx->opt.native && !ctx->opt.cb) {
    const char *why = "";
    if (ljp_native_setup(ctx, L, &why) == 0)
      ctx->native_on = 1;
    else
      ctx->native_why = why;
  }
  return 0;
}

static void native_notice(ljp_ctx *ctx)
{
  static atomic_int noticed;
  if (ctx->native_why && atomic_fetch_add(&noticed, 1) == 0)
    fprintf(stderr, "ljprof: notice: native C frames are off: %s\n",
            ctx->native_why);
  ctx->native_why = NULL;
}

static int traces_up(ljp_ctx *ctx, lua_State *L, char *err, size_t n)
{
  (void)err; (void)n;
  ljp_traces_attach(ctx, L);
  if (ljp_luastack_checking()) ljp_vm_learn_snapshots();  /* a test mode */
  ljp_traces_exitcheck(ctx, L, 1);
  return 0;
}

/* inline=exact: LuaJIT's profiling mode, after the trace readers (its
** start flushes every trace). */
static int jitmode_up(ljp_ctx *ctx, lua_State *L, char *err, size_t n)
{
  ctx->jitmode_on = ctx->jitmode_run = 0;
  if (ctx->opt.inline_frames != LJPROF_INLINE_EXACT || ctx->opt.cb) return 0;
  if (ljp_jitmode_start(L, ctx->opt.clock, err, n))
    return -1;
  ctx->jitmode_on = ctx->jitmode_run = 1;
  return 0;
}

static void jitmode_down(ljp_ctx *ctx, lua_State *L)
{
  if (ctx->jitmode_on && L) ljp_jitmode_stop(L);
  ctx->jitmode_on = 0;
}

/* inline=recorded: the "record" handler, from the start (traces recorded
** before the first sample are mapped too). */
static int irmap_up(ljp_ctx *ctx, lua_State *L, char *err, size_t n)
{
  (void)err; (void)n;
  if (ctx->opt.inline_frames == LJPROF_INLINE_RECORDED && ctx->tr.mem)
    ljp_vm_learn_irmap();
  ljp_irmap_start(ctx, L);
  return 0;
}

static void irmap_down(ljp_ctx *ctx, lua_State *L)
{
  if (L) ljp_irmap_stop(ctx, L);
}

static void traces_down(ljp_ctx *ctx, lua_State *L)
{
  ljp_traces_exitcheck(ctx, L, 0);
  ljp_traces_detach(ctx, L);
}

/* Last among the Lua-side steps, so that none of ljprof's own calls is
** counted. */
static int calls_up(ljp_ctx *ctx, lua_State *L, char *err, size_t n)
{
  if (!ctx->opt.calls) {
    ljp_calls_free(ctx);  /* no counts from an earlier run */
    return 0;
  }
  return ljp_calls_start(ctx, L, err, n);
}

static void calls_down(ljp_ctx *ctx, lua_State *L)
{
  ljp_calls_stop(ctx, L);  /* counts kept */
}

/* Runs whose signals reach their rings, and the process that started
** them (a forked child inherits the count, not the timers), for exec.c. */
_Atomic int ljp_live_runs;
_Atomic int ljp_live_pid;

static int token_up(ljp_ctx *ctx, lua_State *L, char *err, size_t n)
{
  (void)L; (void)err; (void)n;
  atomic_store(&ctx->token, ljp_slot_open(ctx->slot));
  atomic_fetch_add(&ljp_live_runs, 1);
  atomic_store(&ljp_live_pid, (int)getpid());
  return 0;
}

static void token_down(ljp_ctx *ctx, lua_State *L)
{
  (void)L;
  ljp_slot_close(ctx->slot);  /* no handler inside; later signals inert */
  atomic_store(&ctx->token, 0);
  atomic_fetch_sub(&ljp_live_runs, 1);
}

static int hook_up(ljp_ctx *ctx, lua_State *L, char *err, size_t n)
{
  (void)L; (void)err; (void)n;
  ctx->state = LJP_RUNNING;
  ljp_hook_live(&ctx->hook, 1);
  return 0;
}

static void hook_down(ljp_ctx *ctx, lua_State *L)
{
  (void)L;
  ctx->state = LJP_IDLE;
  ljp_hook_live(&ctx->hook, 0);
  ljp_hook_disarm(&ctx->hook);
}

/* The time of the run's clock: ticks are due in proportion to it. */
static uint64_t run_clock_ns(const ljp_ctx *ctx)
{
  struct timespec ts;
  if (clock_gettime(ljp_clock(ctx->opt.clock)->run_clock, &ts) != 0)
    return 0;
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int timer_up(ljp_ctx *ctx, lua_State *L, char *err, size_t n)
{
  (void)L;
  /* The signal check's window starts with the ticks. */
  ctx->sig_ticks = 0;
  ctx->sig_sent = 0;
  ctx->sig_clock_ns = ctx->sig_run_clock_ns = run_clock_ns(ctx);
  ctx->sig_checked_ns = ljp_now_ns();
  return ljp_ticks_start(ctx, err, n);
}

/* First: a handler that runs now no longer re-arms a one-shot timer. */
static void timer_down(ljp_ctx *ctx, lua_State *L)
{
  (void)L;
  ljp_ticks_stop(ctx);
}

typedef struct ljp_step {
  int (*up)(ljp_ctx *ctx, lua_State *L, char *err, size_t n);
  void (*down)(ljp_ctx *ctx, lua_State *L);
} ljp_step;

static const ljp_step steps[] = {
  {results_up, results_down},
  {codemap_up, codemap_down},
  {vm_up, NULL},
  {native_up, NULL},
  {traces_up, traces_down},
  {jitmode_up, jitmode_down},
  {irmap_up, irmap_down},
  {calls_up, calls_down},
  {token_up, token_down},
  {hook_up, hook_down},
  {timer_up, timer_down},
};
#define NSTEPS ((int)(sizeof(steps) / sizeof(steps[0])))

static void take_down(ljp_ctx *ctx, lua_State *L)
{
  ljp_gate_enter(&ctx->exit);
  while (ctx->steps_up > 0) {
    const ljp_step *s = &steps[--ctx->steps_up];
    if (s->down) s->down(ctx, L);
  }
  ljp_gate_leave(&ctx->exit);
}

/* -- Control ---------------------------------------------------------------- */

void ljp_aggregate(ljp_ctx *ctx)
{
  ljp_gate_enter(&ctx->exit);
  ljp_store_drain(&ctx->store, &ctx->ring, &ctx->n_dropped);
  ljp_gate_leave(&ctx->exit);
}

void ljp_run_check_signal(ljp_ctx *ctx, lua_State *L, int now)
{
  uint64_t t = ljp_now_ns(), ticks, clk, seen, period, quiet, due, sent;
  int disp, thr;
  if (ctx->sig_lost || !ctx->tmr.live || ctx->tmr.expired ||
      (ctx->tmr.deadline_ns && t >= ctx->tmr.deadline_ns))
    return;                             /* no tick is due */
  if (!now && t - ctx->sig_checked_ns < 100000000u) return;
  ctx->sig_checked_ns = t;
  ticks = atomic_load(&ctx->n_ticks);   /* timer expiries, weighted */
  clk = run_clock_ns(ctx);
  sent = atomic_load(&ctx->tmr.thr_sent);
  period = (uint64_t)ctx->opt.interval_us * 1000u;
  disp = ljp_sig_sampler_disposition(ctx->opt.signo);
  /* Ours: ticks come. Ignored or reset (SIG_IGN, SIG_DFL): none can come,
  ** lost at once, however late the change (a window of ticks still
  ** holding those from before a change 100-300 ms before stop did not
  ** see it). Another handler may be a wrapper that passes the ticks on to
  ** ours: lost when ljprof's handler has taken no tick for 8 intervals
  ** (and 50 ms) of the run's clock (the timers' rearm notes each one's
  ** time, so this holds however late the change), or when, over at least
  ** three intervals since the last look, not a quarter of the ticks due
  ** came. The timer thread's ticks (wall, thread) are due only once sent:
  ** on a loaded machine that thread may not run for 50 ms, and ticks it
  ** did not send are no sign of a lost signal; there it takes 8 ticks
  ** sent and not taken (and 50 ms), or not a quarter of 12 or more sent
  ** since the last look. The check runs at safe points, which ticks
  ** bring, and at stop: a lost signal is often seen only at stop. */
  if (disp == LJP_SIG_OURS) {
    ctx->sig_ticks = ticks;
    ctx->sig_clock_ns = clk;
    ctx->sig_sent = sent;
    return;
  }
  if (disp == LJP_SIG_OTHER) {
    seen = atomic_load_explicit(&ctx->tmr.seen_ns, memory_order_relaxed);
    if (!seen) seen = ctx->sig_run_clock_ns;  /* none yet: since start */
    /* (a thread's CPU clock read on another thread: cannot tell) */
    if (clk < seen || clk < ctx->sig_clock_ns) return;
    quiet = 8 * period > 50000000u ? 8 * period : 50000000u;
    thr = ljp_timer_thread_sends(ctx);
    if (clk < seen + quiet ||
        (thr && sent - atomic_load(&ctx->tmr.thr_sent_seen) < 8)) {
      /* ticks due since the last look: sent, or by the run's clock */
      due = thr ? sent - ctx->sig_sent : (clk - ctx->sig_clock_ns) / period;
      if (due < (thr ? 12u : 3u)) return;                   /* too early */
      if (ticks - ctx->sig_ticks >= due / 4) {
        ctx->sig_ticks = ticks;
        ctx->sig_clock_ns = clk;
        ctx->sig_sent = sent;
        return;
      }
    }
  }
  /* Taken over, ignored or reset by the program: no more ticks (a reset
  ** real-time signal would end the process at the next one), keep what
  ** was sampled. */
  ctx->sig_lost = 1;
  ljp_timer_expire(&ctx->tmr);
  timer_down(ctx, L);
  fprintf(stderr, "ljprof: the program changed the handling of signal %d "
          "(%s), which ljprof samples with; sampling stopped, the profile "
          "keeps the %llu samples taken before (choose another signal with "
          "the signal option)\n", ctx->opt.signo, strsignal(ctx->opt.signo),
          (unsigned long long)atomic_load(&ctx->n_ticks));
}

int ljp_run_busy(ljp_ctx *ctx, lua_State *L, char *err, size_t errlen)
{
  if (ctx->state == LJP_FAILED) /* already reported; finish that run */
    ljp_run_stop(ctx, L);
  if (ctx->state != LJP_IDLE || ctx->steps_up) {
    snprintf(err, errlen, "ljprof: already running for this Lua state "
             "(call stop first)");
    return -1;
  }
  return 0;
}

static void restart_forget(ljp_ctx *ctx)
{
  ctx->restart_pending = 0;
  free((char *)ctx->restart_opt.stack_fmt);
  free((char *)ctx->restart_opt.output);
  memset(&ctx->restart_opt, 0, sizeof(ctx->restart_opt));
}

/* stop() then start() from the callback, as jit.profile allows: the stop
** finishes when the callback returns (ljp_run_stop), then this start. */
static int restart_later(ljp_ctx *ctx, const ljprof_options *opt,
                         const ljp_entries *entries, char *err, size_t n)
{
  restart_forget(ctx);
  ctx->restart_opt = *opt;
  ctx->restart_opt.stack_fmt = dup_or_null(opt->stack_fmt);
  ctx->restart_opt.output = dup_or_null(opt->output);
  if ((opt->stack_fmt && !ctx->restart_opt.stack_fmt) ||
      (opt->output && !ctx->restart_opt.output)) {
    restart_forget(ctx);
    snprintf(err, n, "ljprof: out of memory");
    return -1;
  }
  ctx->restart_entries = entries;
  ctx->restart_pending = 1;
  return 0;
}

int ljp_run_stopping(const ljp_ctx *ctx)
{
  return ctx->stop_requested && !ctx->restart_pending;
}

int ljp_run_start(ljp_ctx *ctx, lua_State *L, const ljprof_options *opt,
                  const ljp_entries *entries, char *err, size_t errlen)
{
  if (ctx->in_safepoint && ljp_run_stopping(ctx) && ctx->state != LJP_FAILED)
    return restart_later(ctx, opt, entries, err, errlen);
  if (ljp_run_busy(ctx, L, err, errlen)) return -1;
  ctx->pending_opt = *opt;
  ljp_timer_bind(&ctx->tmr, ljp_clock(opt->clock)->timer);
  ctx->entries = entries;
  ljp_hook_bind(&ctx->hook, entries->hook);
  ljp_gate_enter(&ctx->exit);
  while (ctx->steps_up < NSTEPS) {
    if (steps[ctx->steps_up].up(ctx, L, err, errlen) != 0) {
      take_down(ctx, L);
      ljp_gate_leave(&ctx->exit);
      return -1;
    }
    ctx->steps_up++;
  }
  ctx->started = 1;
  ljp_gate_leave(&ctx->exit);
  native_notice(ctx);
  return 0;
}

void ljp_run_fail(ljp_ctx *ctx, const char *msg)
{
  size_t len = strlen(msg);
  free(ctx->error);
  if ((ctx->error = malloc(len + 1))) memcpy(ctx->error, msg, len + 1);
  ctx->state = LJP_FAILED;  /* first: the handler re-arms only if running */
  ljp_hook_live(&ctx->hook, 0);
  timer_down(ctx, NULL);
  fprintf(stderr, "ljprof: profiler callback failed, profiling stopped: %s\n",
          msg);
}

void ljp_run_stop(ljp_ctx *ctx, lua_State *L)
{
  if (!ctx->steps_up) {
    ctx->state = LJP_IDLE;
    return;
  }
  if (ctx->in_safepoint) {  /* stop from the callback: finish in the hook */
    timer_down(ctx, L);
    ctx->stop_requested = 1;
    restart_forget(ctx);  /* a start() before it is undone */
    return;
  }
  ctx->stop_requested = 0;
  if (ctx->state == LJP_RUNNING) ljp_run_check_signal(ctx, L, 1);
  take_down(ctx, L);
  if (ctx->restart_pending) {
    ljprof_options opt = ctx->restart_opt;
    char err[256];
    memset(&ctx->restart_opt, 0, sizeof(ctx->restart_opt));
    ctx->restart_pending = 0;
    if (ljp_run_start(ctx, L, &opt, ctx->restart_entries, err,
                      sizeof(err)) != 0)
      fprintf(stderr, "%s (start from the profiler callback)\n", err);
    free((char *)opt.stack_fmt);
    free((char *)opt.output);
  }
}

int ljp_run_watch(ljp_ctx *ctx, lua_State *L, const ljp_entries *entries)
{
  ljp_vm_learn_layouts();
  ctx->vm_g = ljp_vm_global(ctx->L);
  /* Traces are read from memory whenever a sample needs them, however
  ** long before the start they were compiled: nothing to watch. */
  if (ctx->vm_g && ljp_traces_from_memory()) return 0;
  ljp_traces_watch(ctx);
  if (ctx->state == LJP_IDLE && !ctx->steps_up) {
    ctx->entries = entries;
    ljp_traces_attach(ctx, L);
  }
  return ctx->tr.key ? 0 : -1;
}
