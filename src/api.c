/*
** The C API: all of include/ljprof.h, and the context lifecycle. ENTRY
** (called by a C host).
**
** A context is created per Lua state on first use and lives until
** lua_close: a userdata in the registry owns it and its __gc stops the run
** and frees everything. Results of the last run stay readable after stop
** until the next start. Input is validated here, with one error line
** naming the bad value and what is accepted; run.c brings a run up and
** down. Normal context only.
*/
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <lauxlib.h>

#include "ljp.h"
#include "vm.h"
#include "clocks.h"
#include "objects.h"
#include "outfile.h"
#include "ownstate.h"
#include "query.h"
#include "calls.h"
#include "symbols.h"
#include "auto.h"
#include "exit_signals.h"

static const char ctx_key = 'c'; /* registry key of the owning userdata */

/* -- Context lifecycle ----------------------------------------------------- */

static void ctx_free(ljp_ctx *ctx)
{
  ljp_auto_release(ctx);          /* first: no export borrows it now */
  ljp_exit_signals_release(ctx);
  ljp_calls_free(ctx);
  ljp_zones_free(&ctx->zones);
  ljp_labels_free(&ctx->labels);
  ljp_ring_free(&ctx->ring);
  ljp_codemap_free(&ctx->map);
  ljp_traces_free(ctx);
  ljp_irmap_free(ctx);
  ljp_store_free(&ctx->store);
  ljp_fnames_free(&ctx->fnames, NULL);
  ljp_native_names_reset(ctx);
  ljp_frames_reset(ctx);
  ljp_buf_free(&ctx->scratch);
  free(ctx->stack_fmt);
  free(ctx->output);
  free(ctx->out_path);
  free(ctx->out_cpath);
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
    ljp_run_stop(ctx, L);
    ctx_free(ctx);
  }
  return 0;
}

/* The context of L (created when create is set): NULL when there is none,
** or it cannot be made; then err (when given) says why, in one line. */
static ljp_ctx *ctx_get(lua_State *L, int create, char *err, size_t n)
{
  const void *reg = lua_topointer(L, LUA_REGISTRYINDEX);
  ljp_ctx *ctx = ljp_own_view(reg), **ud;  /* a writer's state */
  if (err && n) err[0] = '\0';
  if (ctx) return ctx;
  ctx = ljp_slot_find(reg);
  if (ctx && ctx->exit.closed && !ljp_exit_is_helper())
    ljp_exit_park();                /* the exit helper owns it now */
  if (ctx || !create) return ctx;
  if (!(ctx = calloc(1, sizeof(*ctx)))) {
    if (err) snprintf(err, n, "ljprof: cannot set up profiling for this Lua "
                      "state: out of memory");
    return NULL;
  }
  ljp_traces_init(&ctx->tr);
  if ((ctx->slot = ljp_slot_alloc(ctx, reg)) < 0) {
    free(ctx);
    if (err) snprintf(err, n, "ljprof: cannot set up profiling for this Lua "
                      "state: more than %d profiled states", LJP_MAX_SLOTS);
    return NULL;
  }
  if (ljp_codemap_init(&ctx->map) != 0) {
    ctx_free(ctx);
    if (err) snprintf(err, n, "ljprof: cannot set up profiling for this Lua "
                      "state: LuaJIT's code not found in the process "
                      "(lua_atpanic is not in its global scope: LuaJIT "
                      "loaded with RTLD_LOCAL?)");
    return NULL;
  }
  if (ljp_store_init(&ctx->store) != 0) {
    ctx_free(ctx);
    if (err) snprintf(err, n, "ljprof: cannot set up profiling for this Lua "
                      "state: out of memory");
    return NULL;
  }
  ctx->L = lua_newthread(L);
  ctx->anchor_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  ljp_hook_init(&ctx->hook, ctx->L, &ctx->ring);
  ljp_fnames_init(&ctx->fnames);
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

ljp_ctx *ljp_ctx_get(lua_State *L, int create)
{
  return ctx_get(L, create, NULL, 0);
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
  opt->inline_frames = LJPROF_INLINE_RECORDED;
}

int ljprof_start_ex(lua_State *L, const ljprof_options *o, char *err,
                    size_t errlen)
{
  char dummy[8];
  ljp_ctx *ctx;
  ljprof_options opt;
  const ljp_clock_info *clk;
  if (!err) { err = dummy; errlen = sizeof(dummy); }
  err[0] = '\0';
  if (o) opt = *o; else ljprof_options_init(&opt);
  if (!opt.stack_fmt) opt.stack_fmt = "fZ;";
  if (!opt.interval_us) opt.interval_us = 10000;
  if (!opt.ring_size) opt.ring_size = 1024;
  if (!(clk = ljp_clock(opt.clock))) {
    char acc[128];
    snprintf(err, errlen, "ljprof: bad clock %d (accepted: %s)",
             (int)opt.clock, ljp_clock_accepted(acc, sizeof(acc), 0));
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
  if (clk->signo) {
    if (opt.signo && opt.signo != clk->signo) {
      snprintf(err, errlen, "ljprof: the %s clock always uses %s "
               "(signal %d given)", clk->name, clk->signame, opt.signo);
      return -1;
    }
    opt.signo = clk->signo;
  } else if (!opt.signo) {
    opt.signo = LJPROF_DEFAULT_SIGNAL;
  }
  if (!(ctx = ctx_get(L, 1, err, errlen))) return -1;
  if (!(ctx->in_safepoint && ljp_run_stopping(ctx)) &&
      ljp_run_busy(ctx, L, err, errlen))
    return -1;
  if (opt.output && ljp_outfile_check(opt.output, err, errlen) != 0)
    return -1;
  if (ljp_signal_install(opt.signo, err, errlen) != 0) return -1;
  return ljp_run_start(ctx, L, &opt, &ljp_safepoint_entries, err, errlen);
}

int ljprof_watch_traces(lua_State *L)
{
  ljp_ctx *ctx = ljp_ctx_get(L, 1);
  if (!ctx) return -1;
  return ljp_run_watch(ctx, L, &ljp_safepoint_entries);
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
  if (ctx) ljp_run_stop(ctx, L);
}

int ljprof_running(lua_State *L)
{
  ljp_ctx *ctx = ljp_ctx_get(L, 0);
  return ctx && ctx->state == LJP_RUNNING && !ljp_run_stopping(ctx);
}

/* Per-OS-thread dump buffer for ljprof_dumpstack. */
static pthread_key_t dump_key;
static pthread_once_t dump_once = PTHREAD_ONCE_INIT;

static void dump_free(void *p)
{
  ljp_buf_free(p);
  free(p);
}

static int dump_key_made;

static void dump_key_init(void)
{
  dump_key_made = pthread_key_create(&dump_key, dump_free) == 0;
}

/* The library is unloaded (lua_close of a state that loaded the ljprof
** module dlcloses it) or the process exits. A run pins the library (its
** signal handler stays installed) and then nothing is freed here; until
** then the process-wide tables are freed, so that loading and unloading
** the module leaks nothing. */
__attribute__((destructor)) static void ljp_unload(void)
{
  if (ljp_signal_pinned()) return;
  ljp_names_release();
  ljp_objects_release();
  if (dump_key_made) {
    void *sb = pthread_getspecific(dump_key);
    if (sb) dump_free(sb);
    pthread_key_delete(dump_key);
    dump_key_made = 0;
  }
}

ljp_buf *ljp_q_dump_buffer(void)
{
  ljp_buf *sb;
  pthread_once(&dump_once, dump_key_init);
  if (!dump_key_made) return NULL;
  if (!(sb = pthread_getspecific(dump_key))) {
    if (!(sb = calloc(1, sizeof(*sb)))) return NULL;
    pthread_setspecific(dump_key, sb);
  }
  return sb;
}

int ljp_q_dumpstack(lua_State *L, lua_State *helper, ljp_buf *sb,
                    const char *fmt, int depth)
{
  ljp_ctx *ctx = ljp_slot_find(lua_topointer(L, LUA_REGISTRYINDEX));
  if (ctx && ctx->cb_host_L == L) {  /* the callback's host ticks */
    ljp_dumpstack_marker(sb, fmt, depth, "[host]");
    return 0;
  }
  return ljp_dumpstack(L, helper, sb, fmt, depth);
}

const char *ljprof_dumpstack(lua_State *L, const char *fmt, int depth,
                             size_t *len)
{
  ljp_buf *sb;
  ljp_vm_learn_layouts();  /* once: a dump before any run needs them */
  if (!(sb = ljp_q_dump_buffer())) { if (len) *len = 0; return ""; }
  if (ljp_q_dumpstack(L, NULL, sb, fmt ? fmt : "", depth) != 0) {
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
  ljp_gate_enter(&ctx->exit);       /* the store: not while lent */
  st->signals = atomic_load(&ctx->n_signals);
  st->ticks = atomic_load(&ctx->n_ticks);
  st->dropped = atomic_load(&ctx->n_dropped);
  st->merged = atomic_load(&ctx->n_merged);
  st->completed = ctx->completed;
  st->pending = st->ticks > st->completed + st->dropped
                    ? st->ticks - st->completed - st->dropped : 0;
  st->safepoints = ctx->safepoints;
  st->batches = ctx->store.batches;
  st->stacks = ljp_store_nstacks(&ctx->store);
  st->entries = ctx->store.stacks.n;
  st->hook_ns = ctx->hook_ns;
  st->handler_ns = atomic_load(&ctx->handler_ns);
  st->complete_ns = ctx->complete_ns;
  st->aggregate_ns = ctx->store.aggregate_ns;
  st->aggregated = ctx->store.aggregated;
  st->native_unwinds = atomic_load(&ctx->n_native_unwinds);
  st->native_frames = atomic_load(&ctx->n_native_frames);
  st->native_truncated = atomic_load(&ctx->n_native_truncated);
  st->native_skipped = atomic_load(&ctx->n_native_skipped);
  st->bytes = (uint64_t)ctx->ring.cap * sizeof(ljp_record) +
              ljp_store_bytes(&ctx->store) +
              (uint64_t)(ctx->store.stacks.cap + ctx->store.funcs.cap +
                         ctx->store.traces.cap) * sizeof(ljp_count);
  memcpy(st->vm, ctx->vm, sizeof(st->vm));
  ljp_gate_leave(&ctx->exit);
  return 0;
}

/* The summary: each (stack, VM state, zone, label set) count with its
** stack rendered in the run's format; counts whose stacks render alike (a
** format that leaves lines out, a depth that cuts them) are merged.
** Without labels, counts that differ only by label set are merged too. */
typedef void (*summary_fn)(void *d, const ljp_str *text, int vmstate,
                           uint16_t zone, uint16_t labels, uint64_t count);

static int summary_each(ljp_ctx *ctx, int with_labels, summary_fn fn,
                        void *d)
{
  const ljp_store *s;
  ljp_strtab texts;
  ljp_counts sum;
  ljp_buf b;
  uint32_t i, *rendered = NULL;
  if (!ctx) return -1;
  ljp_gate_enter(&ctx->exit);       /* the store: not while lent */
  ljp_aggregate(ctx);
  s = &ctx->store;
  memset(&b, 0, sizeof(b));
  if (ljp_strtab_init(&texts) != 0) {
    ljp_gate_leave(&ctx->exit);
    return -1;
  }
  if (ljp_counts_init(&sum) != 0 ||
      !(rendered = calloc(s->stks.n ? s->stks.n : 1, sizeof(uint32_t)))) {
    ljp_strtab_free(&texts);
    ljp_counts_free(&sum);
    ljp_gate_leave(&ctx->exit);
    return -1;
  }
  for (i = 0; i < s->stacks.cap; i++) {
    const ljp_count *c = &s->stacks.slot[i];
    uint32_t st, t, tag;
    if (!c->key) continue;
    st = ljp_stack_key_stack(c->key);
    if (!(t = rendered[st])) {  /* text id + 1 */
      b.n = 0;
      ljp_dumpstack_frames(s, st, ctx->stack_fmt, ctx->opt.stack_depth, 1,
                           &b);
      t = ljp_strtab_intern(&texts, b.b ? b.b : "", b.n);
      if (t == UINT32_MAX) continue;
      rendered[st] = ++t;
    }
    tag = ljp_stack_key_tag(c->key);
    if (!with_labels) {         /* the zone alone */
      uint16_t zone, labels;
      ljp_store_untag(s, tag, &zone, &labels);
      tag = zone;
    }
    ljp_counts_add(&sum, ljp_stack_key(t - 1, ljp_stack_key_vmstate(c->key),
                                       tag), c->count);
  }
  for (i = 0; i < sum.cap; i++) {
    const ljp_count *c = &sum.slot[i];
    uint16_t zone, labels;
    if (!c->key) continue;
    ljp_store_untag(s, ljp_stack_key_tag(c->key), &zone, &labels);
    fn(d, ljp_strtab_get(&texts, ljp_stack_key_stack(c->key)),
       ljp_stack_key_vmstate(c->key), zone, labels, c->count);
  }
  free(rendered);
  ljp_buf_free(&b);
  ljp_counts_free(&sum);
  ljp_strtab_free(&texts);
  ljp_gate_leave(&ctx->exit);
  return 0;
}

typedef struct summary_cb {
  ljp_ctx *ctx;
  ljprof_visit fn;
  ljprof_entry_visit efn;
  void *data;
  int ffnames;              /* [builtin#N] -> its Lua name (C callers) */
  ljp_buf nb;               /* the key so named */
} summary_cb;

/* The key t for a C caller: each fast function by its Lua name ("pcall",
** not "[builtin#20]": a C host has no jit.vmdef to map ids with); ids
** without a learnt name stay. The Lua binding keeps jit.profile's form
** (its writers map ids themselves). */
static const char *summary_text(summary_cb *cb, const ljp_str *t, size_t *len)
{
  static const char tag[] = "[builtin#";
  const char *s = t->s, *end = t->s + t->len, *p;
  if (!cb->ffnames || !memmem(t->s, t->len, tag, 9)) {
    *len = t->len;
    return t->s;
  }
  cb->nb.n = 0;
  while ((p = memmem(s, (size_t)(end - s), tag, 9)) != NULL) {
    const char *q = p + 9;
    int id = 0;
    char name[64];
    ljp_buf_put(&cb->nb, s, (size_t)(p - s));
    while (q < end && *q >= '0' && *q <= '9' && id < 100000) id = id * 10 + (*q++ - '0');
    if (q < end && *q == ']' && q > p + 9 && ljp_ffid_name(id, name, sizeof(name))) {
      ljp_buf_put(&cb->nb, name, strlen(name));
      s = q + 1;
    } else {
      ljp_buf_put(&cb->nb, tag, 9);
      s = p + 9;
    }
  }
  ljp_buf_put(&cb->nb, s, (size_t)(end - s));
  if (!cb->nb.b) {                  /* out of memory: the key as it is */
    *len = t->len;
    return t->s;
  }
  cb->nb.b[cb->nb.n] = '\0';       /* (reserve keeps room for it) */
  *len = cb->nb.n;
  return cb->nb.b;
}

static void summary_plain(void *d, const ljp_str *t, int vmstate,
                          uint16_t zone, uint16_t labels, uint64_t count)
{
  summary_cb *cb = d;
  size_t len;
  const char *s = summary_text(cb, t, &len);
  (void)labels;
  cb->fn(cb->data, s, len, vmstate,
         ljp_zone_name(&cb->ctx->zones, zone), count);
}

typedef struct label_ptrs {
  const char *p[2 * LJP_LABEL_PAIRS];
  int n;
} label_ptrs;

static void label_ptr(void *d, const char *k, size_t kn, const char *v,
                      size_t vn)
{
  label_ptrs *lp = d;
  (void)kn; (void)vn;   /* each is NUL-terminated in the set's text */
  lp->p[lp->n++] = k;
  lp->p[lp->n++] = v;
}

static void summary_entry(void *d, const ljp_str *t, int vmstate,
                          uint16_t zone, uint16_t labels, uint64_t count)
{
  summary_cb *cb = d;
  ljprof_entry e;
  label_ptrs lp;
  lp.n = 0;
  ljp_label_each(&cb->ctx->labels, labels, label_ptr, &lp);
  e.stack = summary_text(cb, t, &e.len);
  e.vmstate = vmstate;
  e.zone = ljp_zone_name(&cb->ctx->zones, zone);
  e.nlabels = lp.n / 2;
  e.labels = lp.p;
  e.count = count;
  cb->efn(cb->data, &e);
}

int ljprof_summary(lua_State *L, ljprof_visit fn, void *data)
{
  ljp_ctx *ctx = ljp_ctx_get(L, 0);
  summary_cb cb;
  int r;
  if (!ctx) return -1;
  memset(&cb, 0, sizeof(cb));
  cb.ctx = ctx;
  cb.fn = fn;
  cb.data = data;
  cb.ffnames = 1;
  r = summary_each(ctx, 0, summary_plain, &cb);
  ljp_buf_free(&cb.nb);
  return r;
}

static int summary_ex(lua_State *L, ljprof_entry_visit fn, void *data,
                      int ffnames)
{
  ljp_ctx *ctx = ljp_ctx_get(L, 0);
  summary_cb cb;
  int r;
  if (!ctx) return -1;
  memset(&cb, 0, sizeof(cb));
  cb.ctx = ctx;
  cb.efn = fn;
  cb.data = data;
  cb.ffnames = ffnames;
  r = summary_each(ctx, 1, summary_entry, &cb);
  ljp_buf_free(&cb.nb);
  return r;
}

int ljprof_summary_ex(lua_State *L, ljprof_entry_visit fn, void *data)
{
  return summary_ex(L, fn, data, 1);
}

int ljp_q_summary(lua_State *L, ljprof_entry_visit fn, void *data)
{
  return summary_ex(L, fn, data, 0);
}

/* The samples as frames (query.h): each count with its stack as frame
** ids, outermost first, the innermost |depth| of the run's depth. */
int ljp_q_samples(lua_State *L, ljp_q_sample_fn fn, void *d)
{
  ljp_ctx *ctx = ljp_ctx_get(L, 0);
  const ljp_store *s;
  uint32_t *ids = NULL, cap = 0, i;
  int depth;
  if (!ctx) return -1;
  ljp_aggregate(ctx);
  s = &ctx->store;
  depth = ctx->opt.stack_depth;
  for (i = 0; i < s->stacks.cap; i++) {
    const ljp_count *c = &s->stacks.slot[i];
    uint32_t st, n, keep, k;
    uint16_t zone, labels;
    if (!c->key) continue;
    st = ljp_stack_key_stack(c->key);
    n = ljp_store_stack_len(s, st);
    keep = depth == INT32_MIN ? n
           : (uint32_t)(depth < 0 ? -(int64_t)depth : depth) < n
               ? (uint32_t)(depth < 0 ? -(int64_t)depth : depth) : n;
    if (keep > cap) {
      uint32_t *t = realloc(ids, (size_t)keep * sizeof(uint32_t));
      if (!t) { free(ids); return -1; }
      ids = t;
      cap = keep;
    }
    for (k = 0; k < keep; k++)          /* frame keep-1 is outermost kept */
      ids[k] = ljp_store_stack_at(s, st, keep - 1 - k);
    ljp_store_untag(s, ljp_stack_key_tag(c->key), &zone, &labels);
    fn(d, ids, keep, ljp_stack_key_vmstate(c->key),
       ljp_zone_name(&ctx->zones, zone), labels, c->count);
  }
  free(ids);
  return 0;
}

int ljp_q_frame(lua_State *L, uint32_t id, ljp_q_frameinfo *fi, ljp_buf *sb)
{
  ljp_ctx *ctx = ljp_ctx_get(L, 0);
  const ljp_store *s;
  ljp_frame f;
  memset(fi, 0, sizeof(*fi));
  if (!ctx || !id || id >= ctx->store.frames.n) return -1;
  s = &ctx->store;
  ljp_store_frame_get(s, id, &f);
  sb->n = 0;
  if (f.kind == LJP_FR_LUA && f.linedefined != -1) {
    const ljp_str *src = ljp_store_text(s, f.source);
    fi->kind = 'L';
    ljp_put_chunk(sb, src->s, f.linedefined, 0);
    fi->file_len = sb->n;
    if (f.name) {
      const ljp_str *nm = ljp_store_text(s, f.name);
      ljp_buf_put(sb, nm->s, nm->len);
      fi->name_len = nm->len;
      fi->has_name = 1;
    }
    fi->line = f.line;
    fi->linedefined = f.linedefined;
  } else {
    fi->kind = f.kind == LJP_FR_NATIVE ? 'N' : 'C';
    ljp_dumpstack_frame(s, id, "f", 1, sb);
    fi->name_len = sb->n;
    fi->has_name = 1;
  }
  if (ljp_buf_reserve(sb, 0) != 0) return -1;
  sb->b[sb->n] = '\0';
  return 0;
}

int ljp_q_label_pairs(lua_State *L, int id, ljp_label_visit fn, void *d)
{
  ljp_ctx *ctx = ljp_ctx_get(L, 0);
  if (!ctx || id <= 0 || id > 65535) return 0;
  return ljp_label_each(&ctx->labels, (uint16_t)id, fn, d);
}

/* -- Zones ---------------------------------------------------------------- */

int ljprof_zone_push(lua_State *L, const char *name)
{
  ljp_ctx *ctx = ljp_ctx_get(L, 1);
  int id;
  if (!ctx || !name) return -1;
  ljp_gate_enter(&ctx->exit);
  id = ljp_zone_id(&ctx->zones, name, strlen(name));
  ljp_gate_leave(&ctx->exit);
  return ljp_zone_push_id(&ctx->zones, id);
}

const char *ljprof_zone_pop(lua_State *L)
{
  ljp_ctx *ctx = ljp_ctx_get(L, 0);
  uint16_t id = ctx ? ljp_zone_pop(&ctx->zones) : 0;
  return id ? ljp_zone_name(&ctx->zones, id) : NULL;
}

/* The FFI fast path: a handle for the state, then pushes and pops by id
** (ids from ljprof_zone_intern). Each is a few stores. */
void *ljprof_zone_handle(lua_State *L)
{
  return ljp_ctx_get(L, 1);
}

int ljprof_zone_intern(void *handle, const char *name)
{
  ljp_ctx *ctx = handle;
  int id;
  if (!ctx) return 0;
  ljp_gate_enter(&ctx->exit);
  id = ljp_zone_id(&ctx->zones, name, strlen(name));
  ljp_gate_leave(&ctx->exit);
  return id;
}

int ljprof_zone_push_h(void *handle, int id)
{
  return ljp_zone_push_id(&((ljp_ctx *)handle)->zones, (uint16_t)id);
}

int ljprof_zone_pop_h(void *handle)
{
  return ljp_zone_pop(&((ljp_ctx *)handle)->zones);
}

/* Is a run of the handle's state active? (ljprof.wrap's fast check) */
int ljprof_zone_active_h(void *handle)
{
  return handle && ((ljp_ctx *)handle)->state == LJP_RUNNING;
}

/* -- Labels --------------------------------------------------------------- */

static int label_set(ljp_ctx *ctx, const char *const *kv, int npairs,
                     uint16_t *id)
{
  size_t len[2 * LJP_LABEL_PAIRS];
  int i;
  ljp_label_err e;
  if (npairs < 0 || npairs > LJP_LABEL_PAIRS) return -LJP_LABEL_TOOMANY;
  if (npairs && !kv) return -LJP_LABEL_BADKEY;
  for (i = 0; i < 2 * npairs; i++) len[i] = kv[i] ? strlen(kv[i]) : 0;
  ljp_gate_enter(&ctx->exit);
  e = ljp_label_set(&ctx->labels, kv, len, npairs, id);
  ljp_gate_leave(&ctx->exit);
  return e == LJP_LABEL_OK ? 0 : -(int)e;
}

static int label_push(ljp_ctx *ctx, uint16_t id)
{
  ljp_label_err e = ljp_label_push(&ctx->labels, id, 0);
  if (e == LJP_LABEL_MISS) {    /* a merge not seen before interns */
    ljp_gate_enter(&ctx->exit);
    e = ljp_label_push(&ctx->labels, id, 1);
    ljp_gate_leave(&ctx->exit);
  }
  return e == LJP_LABEL_OK ? 0 : -(int)e;
}

int ljprof_label_push(lua_State *L, const char *const *kv, int npairs)
{
  ljp_ctx *ctx = ljp_ctx_get(L, 1);
  uint16_t id;
  int rc;
  if (!ctx) return LJPROF_LABEL_EFULL;
  if ((rc = label_set(ctx, kv, npairs, &id)) != 0) return rc;
  return label_push(ctx, id);
}

int ljprof_label_pop(lua_State *L)
{
  ljp_ctx *ctx = ljp_ctx_get(L, 0);
  return ctx && ljp_label_pop(&ctx->labels) >= 0 ? 0 : LJPROF_LABEL_EEMPTY;
}

/* The FFI fast path, on the zones' handle: sets interned once, then
** pushes and pops by id (a push seen before: a lookup and two stores). */
int ljprof_label_intern(void *handle, const char *const *kv, int npairs)
{
  uint16_t id;
  int rc;
  if (!handle) return LJPROF_LABEL_EFULL;
  if ((rc = label_set(handle, kv, npairs, &id)) != 0) return rc;
  return id;
}

int ljprof_label_push_h(void *handle, int id)
{
  ljp_labels *l = &((ljp_ctx *)handle)->labels;
  if (id > 0 && !l->cur && l->depth < LJP_LABEL_DEPTH && l->ready &&
      (uint32_t)id < l->sets.n) {     /* the outermost push: two stores */
    l->stack[l->depth++] = (uint16_t)id;
    l->cur = (uint16_t)id;
    return 0;
  }
  if (id < 0 || id > 65535) return LJPROF_LABEL_ESET;
  return label_push(handle, (uint16_t)id);
}

int ljprof_label_pop_h(void *handle)
{
  int id = ljp_label_pop(&((ljp_ctx *)handle)->labels);
  return id >= 0 ? id : LJPROF_LABEL_EEMPTY;
}

int ljprof_label_current_h(void *handle)
{
  return ((ljp_ctx *)handle)->labels.cur;
}

/* -- Queries of the Lua binding (query.h) ----------------------------------- */

const _Atomic uint64_t *ljp_q_ticks(lua_State *L)
{
  ljp_ctx *ctx = ljp_ctx_get(L, 0);
  return ctx ? &ctx->n_ticks : NULL;
}

int ljp_q_run_info(lua_State *L, ljp_q_run *ri)
{
  ljp_ctx *ctx = ljp_ctx_get(L, 0);
  ljp_vmcaps caps;
  memset(ri, 0, sizeof(*ri));
  if (!ctx) return -1;
  ljp_vm_caps(&caps);
  ri->clock = ljp_clock_name_of(ctx->tmr.ops);
  ri->interval_us = ctx->opt.interval_us;
  ri->signo = ctx->opt.signo;
  ri->running = ctx->state == LJP_RUNNING;
  ri->vmstate_exact = ctx->vm_g != 0;
  ri->cfunc_names = ctx->vm_g && caps.cfunc;
  ri->jit_state = ctx->vm_g && caps.jstate;
  /* (the wall and thread clocks' timer thread ends at the deadline by
  ** itself: no tick may come to say so) */
  ri->expired = (ctx->tmr.expired ||
                 (ctx->tmr.deadline_ns &&
                  (ctx->stop_ns ? ctx->stop_ns : ljp_now_ns()) >=
                      ctx->tmr.deadline_ns)) && !ctx->sig_lost;
  ri->signal_lost = ctx->sig_lost;
  ri->aborts_lost = ctx->tr.aborts_lost;
  ri->trace_events = ctx->tr.events;
  ri->trace_event_ns = ctx->tr.event_ns;
  ri->trace_source = ctx->tr.mem ? "memory" : ctx->tr.aborts_on ? "events" : "none";
  ri->recorder_kept = ctx->recorder_kept;
  ri->aborts_recorded = ctx->tr.aborts_on;
  ri->exact = ctx->exact_on;
  ri->exact_lines = ctx->exact_on && caps.lines;
  ri->lua_captures = atomic_load(&ctx->n_lua_captures);
  ri->host_detect = ctx->vm_g && caps.host;
  ri->host_main = ri->host_detect && caps.host_main;
  ri->host_ticks = atomic_load(&ctx->n_host);
  ri->missed = atomic_load(&ctx->n_missed);
  ri->stack_checks = ctx->stack_checks;
  ri->stack_mismatches = ctx->stack_mismatches;
  ri->inline_frames =
      ctx->opt.inline_frames == LJPROF_INLINE_OFF || !ctx->tr.mem ? "off"
      : caps.snap_off ? caps.snap_off
      : ctx->jitmode_run ? "exact"
      : ctx->opt.inline_frames == LJPROF_INLINE_RECORDED && ljp_irmap_ok()
          ? "recorded" : "snapshots";
  ri->inline_samples = ctx->inline_samples;
  ri->inline_undecoded = ctx->inline_undecoded;
  ri->inline_estimated = ctx->inline_estimated;
  ri->names_late = ctx->names_late;
  ri->names_late_found = ctx->names_late_found;
  ri->inline_recorded = ctx->inline_recorded;
  ljp_irmap_stats(ctx, &ri->record_events, &ri->record_traces,
                  &ri->record_refused, &ri->record_spent, &ri->record_off);
  ri->snap_checks = ctx->snap_checks;
  ri->snap_mismatches = ctx->snap_mismatches;
  ri->error = ctx->error;
  ri->lend_waits = ctx->exit.lend_waits;
  ri->lend_wait_ns = ctx->exit.lend_wait_ns;
  ljp_auto_counts(ctx, &ri->exports, &ri->export_ns);
  ri->start_unix_ns = ctx->start_unix_ns;
  ri->duration_ns = !ctx->start_ns ? 0
                    : (ctx->stop_ns ? ctx->stop_ns : ljp_now_ns()) -
                      ctx->start_ns;
  if (ctx->autos.x && ctx->autos.seq > 1 &&
      ctx->autos.t0 > ctx->start_unix_ns) {
    /* Periodic export took the store: what it holds began at the last
    ** take (the file written at stop is the last interval's). */
    uint64_t skip = ctx->autos.t0 - ctx->start_unix_ns;
    ri->start_unix_ns = ctx->autos.t0;
    ri->duration_ns = ri->duration_ns > skip ? ri->duration_ns - skip : 0;
    ri->interval = ctx->autos.seq;
  }
  ri->tid = ctx->tid;
  ri->thread_name = ctx->thread_name;
  ri->state_id = ctx->slot + 1;
  return 0;
}

void ljp_q_fail(lua_State *L, const char *msg)
{
  ljp_ctx *ctx = ljp_ctx_get(L, 0);
  if (ctx) ljp_run_fail(ctx, msg);
}

uint64_t ljp_q_stale_signals(void) { return atomic_load(&ljp_stale_signals); }

int ljp_q_code_name(uintptr_t a, char *buf, size_t len)
{
  ljp_objinfo ob;
  if (!a || !ljp_objects_lookup(a, &ob)) return 0;
  if (ob.sym_lo && ob.sym_lo <= a && a < ob.sym_hi && ob.sym[0])
    snprintf(buf, len, "%s", ob.sym);
  else
    snprintf(buf, len, "%s+0x%lx", ob.short_name, (unsigned long)(a - ob.base));
  return 1;
}

void ljp_q_functions(lua_State *L, ljp_func_visit fn, void *d)
{
  ljp_ctx *ctx = ljp_ctx_get(L, 0);
  if (!ctx) return;
  ljp_gate_enter(&ctx->exit);
  ljp_aggregate(ctx);
  ljp_store_each_func(&ctx->store, fn, d);
  ljp_gate_leave(&ctx->exit);
}

void ljp_q_traces(lua_State *L, ljp_trace_visit fn, void *d)
{
  ljp_ctx *ctx = ljp_ctx_get(L, 0);
  if (!ctx) return;
  ljp_gate_enter(&ctx->exit);
  ljp_aggregate(ctx);
  ljp_store_each_trace(&ctx->store, fn, d);
  ljp_gate_leave(&ctx->exit);
}

void ljp_q_aborts(lua_State *L, ljp_abort_visit fn, void *d)
{
  ljp_ctx *ctx = ljp_ctx_get(L, 0);
  uint32_t i;
  if (!ctx) return;
  ljp_gate_enter(&ctx->exit);
  for (i = 0; i < ctx->tr.naborts; i++) {
    const ljp_abort *a = &ctx->tr.aborts[i];
    fn(d, a->func, a->line, a->code, a->info, a->info_is_num, a->at,
       a->count);
  }
  ljp_gate_leave(&ctx->exit);
}

void ljp_q_calls_push(lua_State *L)
{
  ljp_calls_push(ljp_ctx_get(L, 0), L);
}

int ljp_q_exit_signals(lua_State *L, int names, const char *module,
                       const char *func, const char *arg, size_t arglen)
{
  ljp_ctx *ctx = ljp_ctx_get(L, 0);
  if (names <= 0) {
    if (ctx && names < 0) ljp_exit_signals_hold(ctx);
    else if (ctx) ljp_exit_signals_off(ctx);
    return 0;
  }
  if (!ctx) return luaL_error(L, "ljprof: on_signal needs a running profile");
  return ljp_exit_signals_on(ctx, L, names, module, func, arg, arglen);
}

int ljp_q_write_apart(lua_State *L, const char *module, const char *func,
                      const char *arg, size_t arglen)
{
  ljp_ctx *ctx = ljp_ctx_get(L, 0);
  char *path, *cpath, err[512];
  int rc;
  if (!ctx || ljprof_running(L)) {
    lua_pushnil(L);
    lua_pushstring(L, ctx ? "ljprof: write_apart: the run is not stopped"
                          : "ljprof: write_apart: no profile");
    return 2;
  }
  ljp_package_paths(L, &path, &cpath);
  rc = ljp_own_write(path, cpath, module, func, ctx, arg, arglen, err,
                     sizeof(err));
  free(path);
  free(cpath);
  if (rc != 0) {
    lua_pushnil(L);
    lua_pushfstring(L, "ljprof: write_apart: %s", err);
    return 2;
  }
  lua_pushboolean(L, 1);
  return 1;
}

int ljp_q_zone_intern(lua_State *L, const char *name, size_t len)
{
  ljp_ctx *ctx = ljp_ctx_get(L, 1);
  int id;
  if (!ctx) return 0;
  ljp_gate_enter(&ctx->exit);
  id = ljp_zone_id(&ctx->zones, name, len);
  ljp_gate_leave(&ctx->exit);
  return id;
}

int ljp_q_label_set(lua_State *L, const char *const *kv, const size_t *len,
                    int npairs)
{
  ljp_ctx *ctx = ljp_ctx_get(L, 1);
  ljp_label_err e;
  uint16_t id;
  if (!ctx) return LJPROF_LABEL_EFULL;
  ljp_gate_enter(&ctx->exit);
  e = ljp_label_set(&ctx->labels, kv, len, npairs, &id);
  ljp_gate_leave(&ctx->exit);
  return e == LJP_LABEL_OK ? id : -(int)e;
}

void ljp_q_label_flush(lua_State *L)
{
  ljp_ctx *ctx = ljp_ctx_get(L, 0);
  if (ctx) ljp_label_flush(&ctx->labels);
}

const char *ljp_q_zone_name(lua_State *L, int id)
{
  ljp_ctx *ctx = ljp_ctx_get(L, 0);
  return ctx ? ljp_zone_name(&ctx->zones, (uint16_t)id) : "";
}

int ljp_q_zone_current(lua_State *L)
{
  ljp_ctx *ctx = ljp_ctx_get(L, 0);
  return ctx ? ctx->zones.cur : 0;
}

void ljp_q_zone_flush(lua_State *L)
{
  ljp_ctx *ctx = ljp_ctx_get(L, 0);
  if (ctx) ljp_zone_flush(&ctx->zones);
}

/* -- Started from LJPROF (auto.c, jit/prof/auto.lua) -------------------------- */

int ljp_q_auto_attach(lua_State *L, double every_s, uint32_t keep,
                      uint64_t maxbytes, char *err, size_t errlen)
{
  ljp_ctx *ctx = ctx_get(L, 1, err, errlen);
  int idx;
  if (!ctx) return -1;
  if ((idx = ljp_auto_attach(ctx, every_s, keep, maxbytes)) < 0)
    snprintf(err, errlen, "ljprof: out of memory");
  return idx;
}

int ljp_q_auto_start(lua_State *L, const char *spec, size_t speclen,
                     int control, int signo, int paused,
                     char *err, size_t errlen)
{
  ljp_ctx *ctx = ljp_ctx_get(L, 0);
  err[0] = '\0';
  if (!ctx || ctx->state != LJP_RUNNING) return 0;
  return ljp_auto_start(ctx, L, spec, speclen, control, signo, paused,
                        err, errlen);
}

void ljp_q_auto_stop(lua_State *L)
{
  ljp_ctx *ctx = ljp_ctx_get(L, 0);
  if (ctx) ljp_auto_stop(ctx);
}

size_t ljp_q_output_name(lua_State *L, const char *tmpl, char *out, size_t n)
{
  return ljp_auto_name(ljp_ctx_get(L, 0), tmpl, out, n);
}

void ljp_q_output_written(lua_State *L, const char *path)
{
  ljp_auto_written(ljp_ctx_get(L, 0), path);
}

void ljp_q_notice(const char *line)
{
  ljp_auto_notice(line);
}
