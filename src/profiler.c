/*
** Public C API (ljprof.h) and the context lifecycle.
**
** A context is created per Lua state on first use and lives until
** lua_close: a userdata in the registry owns it and its __gc stops the run
** and frees everything. Results of the last run stay readable after stop
** until the next start. Normal context only.
*/
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <lauxlib.h>

#include "ljp.h"
#include "objects.h"

static const char ctx_key = 'c'; /* registry key of the owning userdata */

uint64_t ljp_now_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void ljprof_options_init(ljprof_options *opt)
{
  memset(opt, 0, sizeof(*opt));
  opt->clock = LJPROF_CLOCK_CPU;
  opt->interval_us = 10000;
  opt->ring_size = 1024;
  opt->stack_fmt = "fZ;";
  opt->stack_depth = -100;
  opt->native = 1;
}

/* -- Context lifecycle ----------------------------------------------------- */

static void ctx_free(ljp_ctx *ctx)
{
  ljp_exit_signals_release(ctx);
  ljp_calls_free(ctx);
  ljp_zones_free(ctx);
  ljp_ring_free(&ctx->ring);
  ljp_codemap_free(&ctx->map);
  ljp_traces_reset(ctx);
  ljp_counts_free(&ctx->counts);
  ljp_counts_free(&ctx->fcounts);
  ljp_counts_free(&ctx->tcounts);
  ljp_strtab_free(&ctx->strs);
  ljp_native_names_reset(ctx);
  ljp_buf_free(&ctx->dump);
  ljp_buf_free(&ctx->scratch);
  free(ctx->stack_fmt);
  free(ctx->output);
  free(ctx->error);
  ljp_slot_free(ctx->slot);
  free(ctx);
}

static int ctx_gc(lua_State *L)
{
  ljp_ctx **ud = lua_touserdata(L, 1);
  ljp_ctx *ctx = ud ? *ud : NULL;
  if (ctx) {
    *ud = NULL;
    ctx->in_safepoint = 0;
    ljp_stop_ctx(ctx, L);
    ctx_free(ctx);
  }
  return 0;
}

ljp_ctx *ljp_ctx_get(lua_State *L, int create)
{
  const void *reg = lua_topointer(L, LUA_REGISTRYINDEX);
  ljp_ctx *ctx = ljp_slot_find(reg), **ud;
  if (ctx || !create) return ctx;
  if (!(ctx = calloc(1, sizeof(*ctx)))) return NULL;
  ctx->traces_ref = ctx->attach_ref = ctx->tracemc_ref = LUA_NOREF;
  ctx->funcinfo_ref = ctx->exit_fn_ref = LUA_NOREF;
  if ((ctx->slot = ljp_slot_alloc(ctx, reg)) < 0) {
    free(ctx);
    return NULL;
  }
  if (ljp_codemap_init(&ctx->map) != 0 || ljp_strtab_init(&ctx->strs) != 0 ||
      ljp_counts_init(&ctx->counts) != 0 ||
      ljp_counts_init(&ctx->fcounts) != 0 ||
      ljp_counts_init(&ctx->tcounts) != 0) {
    ctx_free(ctx);
    return NULL;
  }
  ctx->L = lua_newthread(L);
  ctx->anchor_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  lua_pushlightuserdata(L, (void *)&ctx_key);
  ud = lua_newuserdata(L, sizeof(ljp_ctx *));
  *ud = ctx;
  lua_newtable(L);
  lua_pushcfunction(L, ctx_gc);
  lua_setfield(L, -2, "__gc");
  lua_setmetatable(L, -2);
  lua_rawset(L, LUA_REGISTRYINDEX);
  return ctx;
}

static const ljp_timer_ops *timer_for(ljprof_clock c)
{
  switch (c) {
  case LJPROF_CLOCK_CPU: return &ljp_timer_cpu;
  case LJPROF_CLOCK_WALL: return &ljp_timer_wall;
  case LJPROF_CLOCK_ITIMER: return &ljp_timer_itimer;
  case LJPROF_CLOCK_THREAD: return &ljp_timer_thread;
  }
  return NULL;
}

static char *dup_or_null(const char *s)
{
  return s ? strdup(s) : NULL;
}

int ljprof_start_ex(lua_State *L, const ljprof_options *o, char *err,
                    size_t errlen)
{
  char dummy[8];
  ljp_ctx *ctx;
  ljprof_options opt;
  if (!err) { err = dummy; errlen = sizeof(dummy); }
  err[0] = '\0';
  if (o) opt = *o; else ljprof_options_init(&opt);
  if (!opt.stack_fmt) opt.stack_fmt = "fZ;";
  if (!opt.interval_us) opt.interval_us = 10000;
  if (!opt.ring_size) opt.ring_size = 1024;
  if (!timer_for(opt.clock)) {
    snprintf(err, errlen, "ljprof: bad clock %d (accepted: cpu, wall, "
             "itimer, thread)", (int)opt.clock);
    return -1;
  }
  if (opt.interval_us < 10 || opt.interval_us > 60000000) {
    snprintf(err, errlen, "ljprof: bad interval %u us (accepted: 10 us to "
             "60 s)", opt.interval_us);
    return -1;
  }
  if (opt.ring_size < 16 || opt.ring_size > (1u << 24)) {
    snprintf(err, errlen, "ljprof: bad ring size %u (accepted: 16 to %u "
             "records)", opt.ring_size, 1u << 24);
    return -1;
  }
  if (opt.clock == LJPROF_CLOCK_ITIMER) {
    if (opt.signo && opt.signo != SIGPROF) {
      snprintf(err, errlen, "ljprof: the itimer clock always uses SIGPROF "
               "(signal %d given)", opt.signo);
      return -1;
    }
    opt.signo = SIGPROF;
  } else if (!opt.signo) {
    opt.signo = LJPROF_DEFAULT_SIGNAL;
  }
  if (!(ctx = ljp_ctx_get(L, 1))) {
    snprintf(err, errlen, "ljprof: cannot set up profiling for this Lua "
             "state (out of memory, more than %d profiled states, or "
             "LuaJIT's code not found)", LJP_MAX_SLOTS);
    return -1;
  }
  if (ctx->state == LJP_FAILED) /* already reported; finish that run */
    ljp_stop_ctx(ctx, L);
  if (ctx->state != LJP_IDLE || ctx->timer_live) {
    snprintf(err, errlen, "ljprof: already running for this Lua state "
             "(call stop first)");
    return -1;
  }
  if (opt.output && ljp_check_writable(opt.output, err, errlen) != 0) return -1;
  if (ljp_signal_install(opt.signo, err, errlen) != 0) return -1;

  /* New run: fresh results. */
  free(ctx->stack_fmt);
  free(ctx->output);
  free(ctx->error);
  ctx->error = NULL;
  ctx->stack_fmt = strdup(opt.stack_fmt);
  ctx->output = dup_or_null(opt.output);
  opt.stack_fmt = ctx->stack_fmt;
  opt.output = ctx->output;
  ctx->opt = opt;
  ctx->timer = timer_for(opt.clock);
  ljp_aggregate_reset(ctx);
  ljp_ring_free(&ctx->ring);
  if (!ctx->stack_fmt || (opt.output && !ctx->output) ||
      ljp_ring_init(&ctx->ring, opt.ring_size) != 0) {
    snprintf(err, errlen, "ljprof: out of memory");
    return -1;
  }
  atomic_store(&ctx->seq, 0);
  atomic_store(&ctx->n_signals, 0);
  atomic_store(&ctx->n_ticks, 0);
  atomic_store(&ctx->n_dropped, 0);
  atomic_store(&ctx->n_merged, 0);
  atomic_store(&ctx->thr_overrun, 0);
  ctx->pid = getpid();
  ctx->tid = ljp_gettid();
  ctx->thread = pthread_self();
  ctx->user_hook = NULL;
  ctx->stop_requested = 0;
  ctx->expired = 0;
  ctx->deadline_ns = opt.duration_us ?
                     ljp_now_ns() + opt.duration_us * 1000u : 0;
  ljp_codemap_trace_flush(&ctx->map);
  ljp_objects_refresh();

  ljp_ffid_learn(L);
  ljp_vmprobe(L);
  ctx->vm_g = ljp_vm_global(ctx->L);
  atomic_store(&ctx->n_native_unwinds, 0);
  atomic_store(&ctx->n_native_frames, 0);
  atomic_store(&ctx->n_native_truncated, 0);
  atomic_store(&ctx->n_native_skipped, 0);
  ctx->native_on = 0;
  if (opt.native && !opt.cb) {  /* callbacks keep jit.profile's stacks */
    static int noticed;
    const char *why = "";
    if (ljp_native_setup(L, &why) == 0)
      ctx->native_on = 1;
    else if (!noticed++)
      fprintf(stderr, "ljprof: notice: native C frames are off: %s\n", why);
  }
  atomic_store(&ctx->token, ljp_slot_open(ctx->slot));
  ljp_traces_attach(ctx, L);
  /* Call counts (last, so that none of ljprof's own calls is counted). */
  if (!opt.calls) ljp_calls_free(ctx);  /* no counts from an earlier run */
  if (opt.calls && ljp_calls_start(ctx, L, err, errlen) != 0) {
    ljp_slot_close(ctx->slot);
    atomic_store(&ctx->token, 0);
    ljp_traces_detach(ctx, L);
    return -1;
  }
  ctx->state = LJP_RUNNING;
  if (ctx->timer->start(ctx, err, errlen) != 0) {
    ctx->state = LJP_IDLE;
    ljp_slot_close(ctx->slot);
    atomic_store(&ctx->token, 0);
    ljp_calls_stop(ctx, L);
    ljp_traces_detach(ctx, L);
    return -1;
  }
  ctx->timer_live = 1;
  return 0;
}

static void stop_timer(ljp_ctx *ctx)
{
  if (ctx->timer_live) {
    ctx->timer->stop(ctx);
    ctx->timer_live = 0;
  }
}

void ljp_fail(ljp_ctx *ctx, const char *msg)
{
  size_t len = strlen(msg);
  free(ctx->error);
  if ((ctx->error = malloc(len + 1))) memcpy(ctx->error, msg, len + 1);
  ctx->state = LJP_FAILED;  /* first: the handler re-arms only if running */
  stop_timer(ctx);
  fprintf(stderr, "ljprof: profiler callback failed, profiling stopped: %s\n",
          msg);
}

void ljp_stop_ctx(ljp_ctx *ctx, lua_State *L)
{
  char err[256];
  if (ctx->state == LJP_IDLE && !ctx->timer_live) return;
  if (ctx->in_safepoint) {  /* stop from the callback: finish in the hook */
    stop_timer(ctx);
    ctx->stop_requested = 1;
    return;
  }
  ctx->stop_requested = 0;
  ljp_slot_close(ctx->slot);     /* no handler inside; later signals inert */
  atomic_store(&ctx->token, 0);
  ctx->state = LJP_IDLE;
  stop_timer(ctx);               /* no handler can re-arm it any more */
  ljp_calls_stop(ctx, L);        /* JIT, debug functions back; counts kept */
  ljp_disarm(ctx);
  ljp_complete(ctx, L);          /* what never reached a safe point */
  ljp_aggregate(ctx);
  ljp_traces_detach(ctx, L);
  ljp_epoch_collect();
  if (ctx->output && ljp_write_folded(ctx, ctx->output, err, sizeof(err)))
    fprintf(stderr, "%s\n", err);
}

int ljprof_watch_traces(lua_State *L)
{
  ljp_ctx *ctx = ljp_ctx_get(L, 1);
  if (!ctx) return -1;
  ljp_vmprobe(L);
  ctx->vm_g = ljp_vm_global(ctx->L);
  ctx->watching = 1;
  if (ctx->state == LJP_IDLE) ljp_traces_attach(ctx, L);
  return ctx->traces_key ? 0 : -1;
}

/* -- jit.profile-shaped API ------------------------------------------------ */

void ljp_parse_mode(const char *mode, ljprof_options *opt)
{
  while (mode && *mode) {
    int m = *mode++;
    if (m == 'i') {
      long ms = 0;
      while (*mode >= '0' && *mode <= '9') {
        if (ms < 1000000) ms = ms * 10 + (*mode - '0');
        mode++;
      }
      opt->interval_us = (uint32_t)(ms <= 0 ? 1 : ms) * 1000u;
    }
    /* 'f' and 'l' ask the built-in to flush and instrument traces; the
    ** PC taken at signal time makes that unnecessary here. Unknown letters
    ** are ignored, as by jit.profile. */
  }
}

void ljprof_start(lua_State *L, const char *mode, ljprof_callback cb,
                  void *data)
{
  ljprof_options opt;
  char err[256];
  ljprof_options_init(&opt);
  ljp_parse_mode(mode, &opt);
  opt.cb = cb;
  opt.cb_data = data;
  if (ljprof_start_ex(L, &opt, err, sizeof(err)) != 0)
    fprintf(stderr, "%s\n", err);
}

void ljprof_stop(lua_State *L)
{
  ljp_ctx *ctx = ljp_ctx_get(L, 0);
  if (ctx) ljp_stop_ctx(ctx, L);
}

int ljprof_running(lua_State *L)
{
  ljp_ctx *ctx = ljp_ctx_get(L, 0);
  return ctx && ctx->state == LJP_RUNNING;
}

/* Per-OS-thread dump buffer for ljprof_dumpstack. */
static pthread_key_t dump_key;
static pthread_once_t dump_once = PTHREAD_ONCE_INIT;

static void dump_free(void *p)
{
  ljp_buf_free(p);
  free(p);
}

static void dump_key_init(void) { pthread_key_create(&dump_key, dump_free); }

const char *ljprof_dumpstack(lua_State *L, const char *fmt, int depth,
                             size_t *len)
{
  ljp_buf *sb;
  pthread_once(&dump_once, dump_key_init);
  if (!ljp_ffid_known()) ljp_ffid_learn(L); /* first use, never profiled */
  if (!(sb = pthread_getspecific(dump_key))) {
    if (!(sb = calloc(1, sizeof(*sb)))) { if (len) *len = 0; return ""; }
    pthread_setspecific(dump_key, sb);
  }
  if (ljp_dumpstack(L, NULL, sb, fmt ? fmt : "", depth) != 0) {
    if (len) *len = 0;
    return "";
  }
  if (len) *len = sb->n;
  return sb->b;
}

/* -- Results ----------------------------------------------------------------- */

int ljprof_get_stats(lua_State *L, ljprof_stats *st)
{
  ljp_ctx *ctx = ljp_ctx_get(L, 0);
  memset(st, 0, sizeof(*st));
  if (!ctx) return -1;
  st->signals = atomic_load(&ctx->n_signals);
  st->ticks = atomic_load(&ctx->n_ticks);
  st->dropped = atomic_load(&ctx->n_dropped);
  st->merged = atomic_load(&ctx->n_merged);
  st->completed = ctx->completed;
  st->pending = st->ticks > st->completed + st->dropped
                    ? st->ticks - st->completed - st->dropped : 0;
  st->safepoints = ctx->safepoints;
  st->batches = ctx->batches;
  st->stacks = ctx->strs.n ? ctx->strs.n - 1 : 0; /* not the empty id 0 */
  st->entries = ctx->counts.n;
  st->hook_ns = ctx->hook_ns;
  st->handler_ns = atomic_load(&ctx->handler_ns);
  st->complete_ns = ctx->complete_ns;
  st->aggregate_ns = ctx->aggregate_ns;
  st->aggregated = ctx->aggregated;
  st->native_unwinds = atomic_load(&ctx->n_native_unwinds);
  st->native_frames = atomic_load(&ctx->n_native_frames);
  st->native_truncated = atomic_load(&ctx->n_native_truncated);
  st->native_skipped = atomic_load(&ctx->n_native_skipped);
  st->bytes = (uint64_t)ctx->ring.cap * sizeof(ljp_record) + ctx->strs.bytes +
              (uint64_t)ctx->counts.cap * sizeof(ljp_count);
  memcpy(st->vm, ctx->vm, sizeof(st->vm));
  return 0;
}

int ljprof_summary(lua_State *L, ljprof_visit fn, void *data)
{
  ljp_ctx *ctx = ljp_ctx_get(L, 0);
  uint32_t i;
  if (!ctx) return -1;
  ljp_aggregate(ctx);
  for (i = 0; i < ctx->counts.cap; i++) {
    const ljp_count *c = &ctx->counts.slot[i];
    if (c->key) {
      const ljp_str *s = ljp_strtab_get(&ctx->strs, ljp_key_stack(c->key));
      fn(data, s->s, s->len, ljp_key_vmstate(c->key),
         ljp_zone_name(ctx, ljp_key_zone(c->key)), c->count);
    }
  }
  return 0;
}
