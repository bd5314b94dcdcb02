/*
** Where compiled traces started and which trace a PC lies in, and the
** trace recorder's activity.
**
** By default (the memory readers of tracemem.h proven, and the trace
** compiler's state located by the VM probe) nothing is paid per trace
** event: a sample's trace is read from LuaJIT's trace object at the safe
** point (its machine code range for the code map, the prototype and line
** it started at, whether it is a side trace) and remembered by number,
** checked again against the object at each use (numbers are reused after
** a flush). The signal handler reads the recorder's state itself, and the
** safe point takes back the trace abort its own hook call asks for
** (safepoint.c). No jit.attach handler is installed.
**
** Through jit.attach(handler, "trace"), when the readers are not proven,
** when a run records why traces were aborted (the "hot but interpreted"
** report: the option aborts), or after ljprof.watch() without the readers:
** "start" .. "stop"/"abort" tell the signal handler when the recorder is
** active, since arming a hook then would abort the trace being recorded;
** a hook armed before the recorder started (a sample taken in a trace
** whose exit then starts a side trace) is held back by raising
** g->hookcount, and released when recording ends. Without the readers the
** events also keep the code map's trace ranges ("stop": jit.util.tracemc
** gives the machine code's address and size; "flush": all gone) and where
** each trace started (function and bytecode, as raw values). The aborts
** are counted by a hash of the event's values. An event costs a few
** stores; names, lines and machine code ranges are learnt for the traces
** samples land in, at the safe point.
**
** jit.attach keeps one handler per event, so attaching would silently
** disconnect -jv, -jdump or a user's tool. We find the registry slot of
** the "trace" event at run time, chain to the handler we replaced, restore
** it at stop, and if somebody replaces us while running we re-attach on
** top of them (chaining to theirs). Normal context only.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>

#include "ljp.h"
#include "names.h"
#include "traces.h"
#include "vmprobe.h"
#include "luastack.h"
#include "objects.h"
#include "tracemem.h"
#include "tracesnap.h"
#include "ffid.h"

_Static_assert(sizeof(lua_Integer) == sizeof(ptrdiff_t),
               "ljp_tracest.key holds a lua_Integer");

/* Trace infos by number, in pages that never move: a pointer to one
** stays good while another trace's info is added (a safe point holds the
** sample's while it looks at others). The pages up to the highest number
** seen are allocated (and zeroed) at the safe point that first sees it:
** 32 infos a page, 3.5 KB (256 a page zeroed 27.6 KB at the first trace
** sample, about 25k instructions under callgrind, which counts memset's
** stores byte by byte). */
#define TI_PAGE 32
#define TI(ctx, n) \
  (&(ctx)->tr.info[(uint32_t)(n) / TI_PAGE][(uint32_t)(n) % TI_PAGE])

#define UP_GEN    lua_upvalueindex(1)
#define UP_PREV   lua_upvalueindex(2)
#define UP_MC     lua_upvalueindex(3)

/* Learn trace tr's machine code (address and size; 0 when it has none)
** into the code map. */
static void trace_learn(ljp_ctx *ctx, lua_State *L, int mcidx, lua_Integer tr,
                        uintptr_t *addr, size_t *size)
{
  *addr = 0;
  *size = 0;
  if (!lua_isfunction(L, mcidx)) return;
  lua_pushvalue(L, mcidx);
  lua_pushinteger(L, tr);
  if (lua_pcall(L, 1, 2, 0) == 0) {
    size_t n = 0;
    if (lua_isstring(L, -2)) {
      lua_tolstring(L, -2, &n);
      if (n && lua_isnumber(L, -1)) {
        *addr = (uintptr_t)lua_tonumber(L, -1);
        *size = n;
        ljp_codemap_trace_set(&ctx->map, (int32_t)tr, *addr, n);
      }
    }
  }
  lua_pop(L, 2);
}

/* -- Where traces start, why they abort -------------------------------------- */

static void trinfo_clear(ljp_trinfo *t)
{
  free(t->source);
  free(t->name);
  memset(t, 0, sizeof(*t));
}

static void trinfo_unresolve(ljp_trinfo *t)
{
  free(t->source);
  free(t->name);
  t->source = t->name = NULL;
  t->resolved = 0;
  t->have_key = 0;
  t->tloc = 0;
}

void ljp_traces_aborts_free(ljp_tracest *t)
{
  uint32_t i;
  for (i = 0; i < t->naborts; i++) {
    free(t->aborts[i].func);
    free(t->aborts[i].info);
    free(t->aborts[i].at);
  }
  free(t->aborts);
  t->aborts = NULL;
  t->naborts = 0;
  if (t->tabs) memset(t->tabs->abort_index, 0, sizeof(t->tabs->abort_index));
  t->nindex = 0;
  t->aborts_lost = 0;
}

static void aborts_reset(ljp_ctx *ctx)
{
  ljp_traces_aborts_free(&ctx->tr);
}

/* A snapshot's aborts (auto.c, while the context is lent): moved out of
** the run (a periodic export: the run counts afresh) or copied. */
void ljp_traces_aborts_into(ljp_ctx *ctx, ljp_tracest *dst, int move)
{
  uint32_t i, n = ctx->tr.naborts;
  dst->aborts_lost = ctx->tr.aborts_lost;
  if (move) {
    dst->aborts = ctx->tr.aborts;
    dst->naborts = n;
    ctx->tr.aborts = NULL;
    ctx->tr.naborts = 0;
    aborts_reset(ctx);
    return;
  }
  dst->naborts = 0;
  if (!n || !(dst->aborts = calloc(n, sizeof(ljp_abort)))) return;
  for (i = 0; i < n; i++) {
    const ljp_abort *a = &ctx->tr.aborts[i];
    ljp_abort *d = &dst->aborts[i];
    *d = *a;
    d->func = a->func ? strdup(a->func) : NULL;
    d->info = a->info ? strdup(a->info) : NULL;
    d->at = a->at ? strdup(a->at) : NULL;
    dst->naborts++;
    if ((a->func && !d->func) || (a->info && !d->info) || (a->at && !d->at))
      break;  /* out of memory: the rest is left out */
  }
}

/* The stack keys a trace keeps for samples that do not find its start
** function name the store just taken by a periodic export (auto.c):
** forgotten, learnt again from the next sample that finds it. */
void ljp_traces_forget_keys(ljp_ctx *ctx)
{
  uint32_t i;
  for (i = 0; i < ctx->tr.ninfo; i++) {
    TI(ctx, i)->have_key = 0;
    TI(ctx, i)->tloc = 0;
  }
}

static void trinfo_clear_all(ljp_ctx *ctx)
{
  uint32_t i;
  for (i = 0; i < ctx->tr.ninfo; i++) trinfo_clear(TI(ctx, i));
}

void ljp_traces_init(ljp_tracest *t)
{
  t->handler_ref = t->attach_ref = t->tracemc_ref = LUA_NOREF;
  t->funcinfo_ref = LUA_NOREF;
}

void ljp_traces_watch(ljp_ctx *ctx) { ctx->tr.watching = 1; }

void ljp_traces_reset(ljp_ctx *ctx)
{
  uint32_t i;
  trinfo_clear_all(ctx);
  for (i = 0; i < ctx->tr.ninfo / TI_PAGE; i++) free(ctx->tr.info[i]);
  free(ctx->tr.info);
  ctx->tr.info = NULL;
  ctx->tr.ninfo = 0;
  trinfo_clear(&ctx->tr.pending);
  aborts_reset(ctx);
}

void ljp_traces_free(ljp_ctx *ctx)
{
  ljp_traces_reset(ctx);
  free(ctx->tr.tabs);
  ctx->tr.tabs = NULL;
}

/* Learn trace t's names: its start function must be proven alive (seen
** live before, in fnames, or found on the stack of the safe point now).
** A few tries, then it stays unknown (an honest shorter stack). */
static void trinfo_resolve(ljp_ctx *ctx, lua_State *L, ljp_trinfo *t)
{
  const ljp_fname *e = ljp_fnames_peek(&ctx->fnames, t->fn, t->bc);
  lua_Debug ar;
  int level;
  if (!e && L) e = ljp_fnames_get(&ctx->fnames, L, t->fn);
  if (e) {
    t->source = strdup(e->source);
    t->name = e->name ? strdup(e->name) : NULL;
    t->linedefined = e->linedefined;
  } else if (L) {
    for (level = 0; level < 32 && lua_getstack(L, level, &ar); level++) {
      lua_getinfo(L, "Snf", &ar);  /* pushes the function */
      if ((uintptr_t)lua_topointer(L, -1) == t->fn && ar.source &&
          ar.what[0] != 'C') {
        t->source = strdup(ar.source);
        t->name = ar.name ? strdup(ar.name) : NULL;
        t->linedefined = ar.linedefined;
        ljp_fnames_learn(&ctx->fnames, L, -1, ar.source, ar.name,
                         ar.linedefined);
        lua_pop(L, 1);
        break;
      }
      lua_pop(L, 1);
    }
  }
  if (!t->source) {
    free(t->name);
    t->name = NULL;
    /* Without a state (the helpers: complete.c, offline) nothing was
    ** tried: the safe point's tries are left to it. */
    if (L) t->resolved--;
    return;
  }
  if (t->line < 0) t->line = t->linedefined;
  t->resolved = 1;
}

/* The info slot of trace number tr, the array grown as needed. */
static ljp_trinfo *info_slot(ljp_ctx *ctx, int32_t tr)
{
  ljp_trinfo *t;
  if (tr <= 0 || tr > 65535) return NULL;
  while ((uint32_t)tr >= ctx->tr.ninfo) {  /* a page more; none moves */
    uint32_t np = ctx->tr.ninfo / TI_PAGE;
    ljp_trinfo **pages = realloc(ctx->tr.info, (np + 1) * sizeof(*pages));
    if (!pages) return NULL;
    ctx->tr.info = pages;
    if (!(t = calloc(TI_PAGE, sizeof(ljp_trinfo)))) return NULL;
    pages[np] = t;
    ctx->tr.ninfo += TI_PAGE;
  }
  return TI(ctx, tr);
}

/* Trace tr read from its object at this safe point (the trace, and the
** prototype it holds, are alive until the program runs on): its names
** again only when another trace has taken the number since. The name of
** its start function is the one a live frame of that prototype was last
** called by, if one was seen (fnames); the chunk name and first line
** come from the prototype. */
static ljp_trinfo *trace_from_memory(ljp_ctx *ctx, int32_t tr)
{
  ljp_tmtrace m;
  ljp_trinfo *t;
  const char *src, *name;
  if (!ljp_tm_read(ctx->vm_g, tr, &m) || !m.bc || !(t = info_slot(ctx, tr)))
    return NULL;
  if (t->resolved > 0 && t->T == m.T && t->mcode == m.mcode &&
      t->bc == m.bc && t->pc == m.pc)
    return t;
  trinfo_clear(t);
  t->T = m.T;
  t->mcode = m.mcode;
  t->bc = m.bc;
  t->pc = m.pc;
  t->side = m.root != 0;
  if (!(src = ljp_tm_chunkname(m.bc)) || !(t->source = strdup(src))) {
    t->resolved = -3;
    return NULL;
  }
  t->mcsize = m.size;
  name = ljp_fnames_proto_name(&ctx->fnames, m.bc, m.sig);
  t->name = name ? strdup(name) : NULL;
  t->linedefined = ljp_proto_firstline(m.bc);
  t->line = ljp_luastack_line_bc(m.bc, m.pc);
  if (t->line < 0) t->line = t->linedefined;
  t->resolved = 1;
  ljp_codemap_trace_set(&ctx->map, tr, m.mcode, m.size);
  t->mc_known = 1;
  return t;
}

int ljp_trace_learn_offline(ljp_ctx *ctx, int32_t tr, uintptr_t T)
{
  ljp_tmtrace m;
  ljp_trinfo *t;
  char src[512];
  const char *name;
  int first, line;
  if (!ctx->tr.mem) return 1;                   /* events: as they said */
  if (tr <= 0 || !T) return 0;
  if ((uint32_t)tr < ctx->tr.ninfo) {
    t = TI(ctx, tr);
    if (t->resolved > 0 && t->T == T) return 1; /* known, the same trace */
  }
  /* The object the sample saw must still be the trace of that number (a
  ** flush frees it, and the number may be taken by another). */
  if (!ljp_tm_read_safe(ctx->vm_g, tr, &m, src, sizeof(src), &first, &line) ||
      m.T != T || !(t = info_slot(ctx, tr)))
    return 0;
  trinfo_clear(t);
  t->T = m.T;
  t->mcode = m.mcode;
  t->mcsize = m.size;
  t->bc = m.bc;
  t->pc = m.pc;
  t->side = m.root != 0;
  if (!(t->source = strdup(src))) return 0;
  name = ljp_fnames_proto_name(&ctx->fnames, m.bc, m.sig);
  t->name = name ? strdup(name) : NULL;
  t->linedefined = first;
  t->line = line >= 0 ? line : first;
  t->resolved = 1;
  return 1;
}

ljp_trinfo *ljp_trace_info(ljp_ctx *ctx, lua_State *L, int32_t trace)
{
  ljp_trinfo *t;
  if (trace <= 0) return NULL;
  if (ctx->tr.mem) {
    /* A helper thread reads nothing of LuaJIT's: what is known. */
    if (L) return trace_from_memory(ctx, trace);
    if ((uint32_t)trace >= ctx->tr.ninfo) return NULL;
    t = TI(ctx, trace);
    return t->resolved > 0 ? t : NULL;
  }
  if ((uint32_t)trace >= ctx->tr.ninfo) return NULL;
  t = TI(ctx, trace);
  if (!t->fn) return NULL;
  if (t->resolved <= 0 && t->resolved > -3) trinfo_resolve(ctx, L, t);
  return t->resolved > 0 ? t : NULL;
}

/* From memory: the trace the VM state named, else the one the code map
** says (checked against its object: the map may hold a range from before
** a flush), else every trace looked at. A PC in a loaded object's code
** (the code map's 'I' or 'C': a C function or a VM helper that the trace
** called, the usual case) lies in no trace's machine code, which LuaJIT
** allocates outside every object: nothing is looked at (the walk over the
** trace array cost ~9k instructions per such record). */
static void locate_in_memory(ljp_ctx *ctx, uintptr_t pc, int32_t *trace)
{
  ljp_tmtrace m;
  int32_t hit = 0;
  int st;
  uintptr_t T = ljp_vm_trace(ctx->vm_g, *trace);
  if (T && ljp_vm_trace_holds(T, pc)) return;
  st = ljp_codemap_classify(&ctx->map, pc, &hit);
  if (st == 'N' && hit > 0 && (T = ljp_vm_trace(ctx->vm_g, hit)) &&
      ljp_vm_trace_holds(T, pc)) {
    *trace = hit;
    return;
  }
  if (st == 'I' || st == 'C') return;
  if ((hit = ljp_tm_find(ctx->vm_g, pc, &m)) > 0) {
    *trace = hit;
    ljp_codemap_trace_set(&ctx->map, hit, m.mcode, m.size);
    ljp_epoch_collect();  /* code map arrays replaced */
  }
}

void ljp_trace_locate(ljp_ctx *ctx, lua_State *L, uintptr_t pc,
                      int32_t *trace)
{
  int32_t tr = *trace, hit = 0, vmst;
  uint32_t k;
  int top, mc;
  uintptr_t addr;
  size_t size;
  if (ctx->tr.mem) {
    locate_in_memory(ctx, pc, trace);
    return;
  }
  if (ljp_codemap_classify(&ctx->map, pc, &hit) == 'N' && hit > 0) {
    *trace = hit;
    return;
  }
  top = lua_gettop(L);
  vmst = ljp_vm_state_save(ctx->vm_g);  /* tracemc is a Lua call */
  lua_rawgeti(L, LUA_REGISTRYINDEX, ctx->tr.tracemc_ref);
  mc = lua_gettop(L);
  /* The trace the VM state names, then the newest traces. */
  if (tr > 0 && (uint32_t)tr < ctx->tr.ninfo && TI(ctx, tr)->fn &&
      !TI(ctx, tr)->mc_known) {
    TI(ctx, tr)->mc_known = 1;
    trace_learn(ctx, L, mc, tr, &addr, &size);
    if (addr && pc >= addr && pc < addr + size) goto out;
  }
  for (k = 0; k < 16 && k < ctx->tr.nrecent; k++) {
    int32_t r = ctx->tr.recent[(ctx->tr.nrecent - 1 - k) & 15];
    if (r <= 0 || (uint32_t)r >= ctx->tr.ninfo || TI(ctx, r)->mc_known)
      continue;
    TI(ctx, r)->mc_known = 1;
    trace_learn(ctx, L, mc, r, &addr, &size);
    if (addr && pc >= addr && pc < addr + size) {
      *trace = r;
      break;
    }
  }
out:
  lua_settop(L, top);
  ljp_vm_state_restore(ctx->vm_g, vmst);
  ljp_epoch_collect();  /* code map arrays replaced above */
}

/* Chunk, first line and line at pc of the Lua function at fidx. */
static uint64_t str_hash(const char *s)
{
  uint64_t h = 1469598103934665603ull;
  while (*s) h = (h ^ (unsigned char)*s++) * 1099511628211ull;
  return h;
}

/* pcidx 0: the first line only (no jit.util.funcinfo call). A trace
** event's (function, pc) recurs (a trace retried after aborts, a side
** trace of a known loop): the line of a (chunk, first line, pc) is
** remembered, as jit.util.funcinfo builds a whole table per call. */
static int func_where(ljp_ctx *ctx, lua_State *L, int fidx, int pcidx,
                      lua_Debug *ar, int *line)
{
  ljp_linecache *c = NULL;
  uint64_t h = 0;
  lua_Integer pc = 0;
  *line = -1;
  if (!lua_isfunction(L, fidx) || lua_iscfunction(L, fidx)) return 0;
  lua_pushvalue(L, fidx);
  if (!lua_getinfo(L, ">S", ar) || !ar->source) return 0;
  if (!pcidx) { *line = ar->linedefined; return 1; }
  if (lua_type(L, pcidx) == LUA_TNUMBER) {
    pc = lua_tointeger(L, pcidx);
    /* Read from the prototype where its layout was proven (luastack.c):
    ** no jit.util.funcinfo table per event. LJPROF_STACKS=check compares
    ** with funcinfo. */
    *line = ljp_luastack_line_at((uintptr_t)lua_topointer(L, fidx),
                                 (int32_t)pc);
    if (*line >= 0 && !ljp_luastack_checking()) return 1;
    h = str_hash(ar->source) ^ ((uint64_t)(uint32_t)ar->linedefined << 20) ^
        (uint64_t)pc;
    if (ctx->tr.tabs)
      c = &ctx->tr.tabs->linecache[(h ^ (h >> 17)) & (LJP_LINECACHE - 1)];
    if (c && c->h == h && c->linedefined == ar->linedefined && c->pc == pc) {
      *line = c->line;
      return 1;
    }
  }
  lua_rawgeti(L, LUA_REGISTRYINDEX, ctx->tr.funcinfo_ref);
  if (lua_isfunction(L, -1)) {
    int direct = *line;
    *line = -1;
    lua_pushvalue(L, fidx);
    lua_pushvalue(L, pcidx);
    if (lua_pcall(L, 2, 1, 0) == 0 && lua_istable(L, -1)) {
      lua_getfield(L, -1, "currentline");
      if (lua_isnumber(L, -1)) *line = (int)lua_tointeger(L, -1);
      lua_pop(L, 1);
    }
    if (direct >= 0) {  /* checking */
      ctx->stack_checks++;
      if (direct != *line) {
        char why[96];
        ctx->stack_mismatches++;
        snprintf(why, sizeof(why), "trace line: %d read from the prototype, "
                 "%d from jit.util.funcinfo", direct, *line);
        ljp_check_say(why);
      }
    }
  } else {
    *line = -1;
  }
  lua_pop(L, 1);
  if (*line < 0) *line = ar->linedefined;
  else if (c) {
    c->h = h;
    c->linedefined = ar->linedefined;
    c->pc = pc;
    c->line = *line;
  }
  return 1;
}

static char *buf_take(ljp_buf *b)
{
  char *s = malloc(b->n + 1);
  if (s) {
    memcpy(s, b->b ? b->b : "", b->n);
    s[b->n] = '\0';
  }
  return s;
}

/* Start event: (what, tr, func, pc, parent trace, exit): raw values. A
** start function not seen before (its code may then run only inside
** traces, never live at a safe point) gets its names now, from its frame
** a few levels below this handler: frames captured in its traces are
** named from them. A function seen before costs a hash lookup. */
static void trace_started(ljp_ctx *ctx, lua_State *L)
{
  ljp_trinfo *t = &ctx->tr.pending;
  if (t->source || t->name) trinfo_unresolve(t);
  t->fn = lua_isfunction(L, 3) && !lua_iscfunction(L, 3)
              ? (uintptr_t)lua_topointer(L, 3) : 0;
  t->pc = (int32_t)lua_tointeger(L, 4);
  /* (a stitched trace has its parent but exit -1: not a side trace) */
  t->side = lua_type(L, 5) == LUA_TNUMBER && lua_tointeger(L, 6) >= 0;
  t->bc = ljp_fn_bc(t->fn);  /* the function is alive: a few reads */
  t->line = t->fn ? ljp_luastack_line_at(t->fn, t->pc) : -1;
  if (t->fn && !ljp_fnames_has(&ctx->fnames, t->fn)) {
    lua_Debug ar;
    int level;
    for (level = 1; level < 8 && lua_getstack(L, level, &ar); level++) {
      lua_getinfo(L, "nSf", &ar);  /* pushes the function */
      if ((uintptr_t)lua_topointer(L, -1) == t->fn) {
        ljp_fnames_learn(&ctx->fnames, L, -1, ar.source, ar.name,
                         ar.linedefined);
        lua_pop(L, 1);
        return;
      }
      lua_pop(L, 1);
    }
    /* Not on the stack (a side trace's start): without a name. */
    if (lua_getinfo(L, ">S", (lua_pushvalue(L, 3), &ar)))
      ljp_fnames_learn(&ctx->fnames, L, 3, ar.source, NULL, ar.linedefined);
  }
}

/* LJPROF_STACKS=check, events and memory both on (aborts): the trace
** read from memory against what its events and jit.util.tracemc say. */
static void check_memory(ljp_ctx *ctx, lua_State *L, int32_t tr)
{
  const ljp_trinfo *p = &ctx->tr.pending;
  ljp_tmtrace m;
  uintptr_t addr;
  size_t size;
  if (!p->fn || !p->bc) return;
  trace_learn(ctx, L, UP_MC, tr, &addr, &size);
  ctx->stack_checks++;
  if (!ljp_tm_read(ctx->vm_g, tr, &m)) {
    ctx->stack_mismatches++;
    ljp_check_say("trace: its object could not be read");
  } else if (m.bc != p->bc || m.pc != p->pc ||
             (m.root != 0) != (p->side != 0) || m.mcode != addr ||
             m.size != size) {
    char why[160];
    ctx->stack_mismatches++;
    snprintf(why, sizeof(why), "trace %d: its object against its event "
             "(start %s, side %s, code %s)", (int)tr,
             m.bc == p->bc && m.pc == p->pc ? "same" : "differs",
             (m.root != 0) == (p->side != 0) ? "same" : "differs",
             m.mcode == addr && m.size == size ? "same" : "differs");
    ljp_check_say(why);
  }
}

static void trace_stopped(ljp_ctx *ctx, lua_State *L, lua_Integer tr)
{
  ljp_trinfo *t;
  if (ctx->tr.mem) {  /* read from the trace itself when a sample needs it */
    if (ljp_luastack_checking() && tr > 0 && tr <= 65535)
      check_memory(ctx, L, (int32_t)tr);
    trinfo_clear(&ctx->tr.pending);
    return;
  }
  if (!(t = info_slot(ctx, (int32_t)(tr > 65535 ? 0 : tr)))) return;
  if (t->source || t->name) trinfo_unresolve(t);
  *t = ctx->tr.pending;
  memset(&ctx->tr.pending, 0, sizeof(ctx->tr.pending));
  ctx->tr.recent[ctx->tr.nrecent++ & 15] = (int32_t)tr;
}

/* Abort event: (what, tr, func, pc, code, info). The same few kinds of
** abort recur by the thousand: an event whose values (the start
** function and bytecode, the code, the info value, where recording
** stopped) hash like a record's is counted there at once; only a new one
** is named (its start function searched on the stack, lines read). */
static uint64_t mixw(uint64_t h, uint64_t v)
{
  h = (h ^ v) * 0x9fb21c651e98df25ull;
  return h ^ (h >> 29);
}

static void trace_aborted(ljp_ctx *ctx, lua_State *L)
{
  ljp_buf b = {0};
  lua_Debug ar;
  ljp_trinfo *p = &ctx->tr.pending;
  char *func = NULL, *info = NULL, *at = NULL;
  int code = (int)lua_tointeger(L, 5), isnum = lua_type(L, 6) == LUA_TNUMBER;
  int line;
  uint32_t i, slot;
  uint64_t raw;
  if (!p->fn) return;
  if (!ctx->tr.tabs) {  /* out of memory at attach: no index */
    ctx->tr.aborts_lost++;
    return;
  }
  raw = mixw(mixw(mixw(mixw(mixw(mixw(1, p->fn), (uint32_t)p->pc),
                           (uint32_t)code),
                      isnum ? (uint64_t)lua_tointeger(L, 6)
                            : (uintptr_t)lua_topointer(L, 6)),
                 (uintptr_t)lua_topointer(L, 3)),
            (uint64_t)lua_tointeger(L, 4));
  for (i = (uint32_t)raw & (2 * LJP_MAX_ABORTS - 1);
       ctx->tr.tabs->abort_index[i].rec;
       i = (i + 1) & (2 * LJP_MAX_ABORTS - 1)) {
    if (ctx->tr.tabs->abort_index[i].raw == raw) {
      ctx->tr.aborts[ctx->tr.tabs->abort_index[i].rec - 1].count++;
      return;
    }
  }
  slot = i;
  if (ctx->tr.naborts >= LJP_MAX_ABORTS || ctx->tr.nindex >= LJP_MAX_ABORTS) {
    ctx->tr.aborts_lost++;
    return;
  }
  /* A new kind: its names. */
  if (p->resolved <= 0) trinfo_resolve(ctx, L, p);
  if (p->resolved <= 0) return;
  ljp_put_location(&b, p->source, p->linedefined, p->linedefined);
  func = buf_take(&b);
  b.n = 0;
  if (func_where(ctx, L, 3, 4, &ar, &line))
    ljp_put_location(&b, ar.source, ar.linedefined, line);
  at = buf_take(&b);
  b.n = 0;
  if (lua_iscfunction(L, 6)) {
    ljp_put_cfunc(&b, lua_tocfunction(L, 6));
  } else if (lua_isfunction(L, 6) && func_where(ctx, L, 6, 0, &ar, &line)) {
    ljp_put_location(&b, ar.source, ar.linedefined, ar.linedefined);
  } else if (lua_isstring(L, 6)) {
    size_t n;
    const char *s = lua_tolstring(L, 6, &n);
    if (ljp_buf_reserve(&b, n) == 0) { memcpy(b.b, s, n); b.n = n; }
  }
  info = buf_take(&b);
  ljp_buf_free(&b);
  if (!func || !at || !info) goto out;
  /* The same kind under other raw values (another closure of the same
  ** function): the same record, found by these values from now on. */
  for (i = 0; i < ctx->tr.naborts; i++) {
    ljp_abort *a = &ctx->tr.aborts[i];
    if (a->code == code && a->line == p->line && !strcmp(a->func, func) &&
        !strcmp(a->info, info) && !strcmp(a->at, at)) {
      a->count++;
      if (ctx->tr.nindex < LJP_MAX_ABORTS) {
        ctx->tr.nindex++;
        ctx->tr.tabs->abort_index[slot].raw = raw;
        ctx->tr.tabs->abort_index[slot].rec = i + 1;
      }
      goto out;
    }
  }
  if (!(ctx->tr.naborts & (ctx->tr.naborts + 1))) {  /* 0, 1, 3, 7...: grow */
    ljp_abort *t = realloc(ctx->tr.aborts,
                           (ctx->tr.naborts + 1) * 2 * sizeof(ljp_abort));
    if (!t) goto out;
    ctx->tr.aborts = t;
  }
  if (ctx->tr.nindex < LJP_MAX_ABORTS) {
    ctx->tr.nindex++;
    ctx->tr.tabs->abort_index[slot].raw = raw;
    ctx->tr.tabs->abort_index[slot].rec = ctx->tr.naborts + 1;
  }
  ctx->tr.aborts[ctx->tr.naborts].func = func;
  ctx->tr.aborts[ctx->tr.naborts].line = p->line;
  ctx->tr.aborts[ctx->tr.naborts].code = code;
  ctx->tr.aborts[ctx->tr.naborts].info = info;
  ctx->tr.aborts[ctx->tr.naborts].info_is_num = isnum;
  ctx->tr.aborts[ctx->tr.naborts].at = at;
  ctx->tr.aborts[ctx->tr.naborts].count = 1;
  ctx->tr.naborts++;
  return;
out:
  free(func);
  free(info);
  free(at);
}

/* -- The event handler ------------------------------------------------------- */

/* The jit.attach handler's work (safepoint.c's ljp_trace_event looks up
** the context): (what, tr, func, pc, otr, oex), then the handler we
** replaced. ctx may be NULL (a state no longer profiled). */
int ljp_traces_event(ljp_ctx *ctx, lua_State *L)
{
  int nargs = lua_gettop(L);
  /* Ours only while it is this state's current install: a handler left
  ** behind in somebody's chain by an earlier install does nothing. */
  if (ctx && (!ctx->tr.key ||
              ctx->tr.gen != (uint32_t)lua_tointeger(L, UP_GEN)))
    ctx = NULL;
  const char *what = lua_tostring(L, 1);
  if (ctx && what) {
    if (what[0] == 's' && what[2] == 'a') {  /* "start" */
      ljp_hook_recording(&ctx->hook, ctx->vm_g, 1);
      trace_started(ctx, L);
      ljp_vm_learn_jstate(ctx->vm_g, LJP_JS_START);
    } else if (what[0] == 's') {             /* "stop" */
      ljp_vm_learn_jstate(ctx->vm_g, LJP_JS_STOP);
      trace_stopped(ctx, L, lua_tointeger(L, 2));
    } else if (what[0] == 'a') {             /* "abort" */
      trace_aborted(ctx, L);
      trinfo_clear(&ctx->tr.pending);
    } else if (what[0] == 'f') {             /* "flush" */
      ljp_codemap_trace_flush(&ctx->map);
      trinfo_clear_all(ctx);
      ctx->tr.nrecent = 0;
      /* The replaced code map: freed once no handler can hold it. */
      ljp_epoch_collect();
    }
    /* Recording is over (any event but "start"): a hook held back is
    ** released, samples that waited for the recorder are armed. */
    if (!(what[0] == 's' && what[2] == 'a'))
      ljp_hook_recording(&ctx->hook, ctx->vm_g, 0);
  }
  return nargs;
}

/* Then the handler ours replaced, with the event's nargs arguments. */
int ljp_traces_chain(lua_State *L, int nargs)
{
  if (lua_isfunction(L, UP_PREV)) {
    lua_pushvalue(L, UP_PREV);
    lua_insert(L, 1);
    lua_call(L, nargs, 0);
  }
  return 0;
}

void ljp_push_jitfn(lua_State *L, const char *mod, const char *name)
{
  lua_getglobal(L, "require");
  lua_pushstring(L, mod);
  if (lua_pcall(L, 1, 1, 0) != 0 || !lua_istable(L, -1)) {
    lua_pop(L, 1);
    lua_pushnil(L);
    return;
  }
  lua_getfield(L, -1, name);
  lua_remove(L, -2);
}

static void unref(lua_State *L, int *ref)
{
  if (*ref != LUA_NOREF) luaL_unref(L, LUA_REGISTRYINDEX, *ref);
  *ref = LUA_NOREF;
}

/* Push _VMEVENTS (may be nil before the first jit.attach). */
static void push_vmevents(lua_State *L)
{
  lua_getfield(L, LUA_REGISTRYINDEX, "_VMEVENTS");
}

/* -- A jit.attach slot shared by chaining (vm.h: ljp_chain_*) --------------- */

int ljp_chain_install(lua_State *L, int attach_ref, lua_CFunction f,
                      uint32_t gen, const int *extra_ref, const char *event,
                      const char *label, lua_Integer *key, int *handler_ref)
{
  int top = lua_gettop(L), snap, attach, handler;
  *key = 0;
  lua_rawgeti(L, LUA_REGISTRYINDEX, attach_ref);
  attach = lua_gettop(L);
  if (!lua_isfunction(L, attach) || !f) goto out;  /* no JIT in this build */
  /* Snapshot the event table, then attach a fresh closure and find the
  ** slot it landed in: that slot's old value is the handler to chain. */
  lua_newtable(L);
  snap = lua_gettop(L);
  push_vmevents(L);
  if (lua_istable(L, -1)) {
    lua_pushnil(L);
    while (lua_next(L, -2)) {
      lua_pushvalue(L, -2);
      lua_insert(L, -2);
      lua_rawset(L, snap);
    }
  }
  lua_pop(L, 1);
  lua_pushinteger(L, (lua_Integer)gen);
  lua_pushnil(L);
  if (extra_ref) lua_rawgeti(L, LUA_REGISTRYINDEX, *extra_ref);
  lua_pushcclosure(L, f, extra_ref ? 3 : 2);
  handler = lua_gettop(L);
  ljp_cname_add(f, label);
  lua_pushvalue(L, attach);
  lua_pushvalue(L, handler);
  lua_pushstring(L, event);
  if (lua_pcall(L, 2, 0, 0) != 0) goto out;
  push_vmevents(L);
  if (lua_istable(L, -1)) {
    lua_pushnil(L);
    while (lua_next(L, -2)) {
      if (lua_rawequal(L, -1, handler) && lua_type(L, -2) == LUA_TNUMBER) {
        *key = lua_tointeger(L, -2);
        lua_pushvalue(L, -2);
        lua_rawget(L, snap);          /* previous handler (or nil) */
        lua_setupvalue(L, handler, 2);
        lua_pop(L, 2);
        break;
      }
      lua_pop(L, 1);
    }
  }
  lua_pop(L, 1);
  if (*key) {
    unref(L, handler_ref);
    lua_pushvalue(L, handler);
    *handler_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  }
out:
  lua_settop(L, top);
  return *key != 0;
}

int ljp_chain_installed(lua_State *L, lua_Integer key, int handler_ref)
{
  int ok = 0;
  if (!key || handler_ref == LUA_NOREF) return 0;
  push_vmevents(L);
  if (lua_istable(L, -1)) {
    lua_rawgeti(L, -1, (int)key);
    lua_rawgeti(L, LUA_REGISTRYINDEX, handler_ref);
    ok = lua_rawequal(L, -1, -2);
    lua_pop(L, 2);
  }
  lua_pop(L, 1);
  return ok;
}

void ljp_chain_remove(lua_State *L, int attach_ref, int handler_ref,
                      const char *event)
{
  int top = lua_gettop(L);
  lua_rawgeti(L, LUA_REGISTRYINDEX, attach_ref);
  lua_rawgeti(L, LUA_REGISTRYINDEX, handler_ref);
  lua_getupvalue(L, -1, 2);         /* the handler we replaced */
  if (lua_isfunction(L, -1)) {
    lua_pushstring(L, event);
    lua_remove(L, -3);
    lua_pcall(L, 2, 0, 0);          /* jit.attach(prev, event) */
  } else {
    lua_pop(L, 1);
    lua_pcall(L, 1, 0, 0);          /* jit.attach(ours): detach */
  }
  lua_settop(L, top);
}

/* Attach our handler chaining to whatever is in the "trace" slot now.
** Calls only jit.attach (resolved at start): this also runs at a safe
** point, where no module may be loaded. */
static int traces_install(ljp_ctx *ctx, lua_State *L)
{
  return ljp_chain_install(L, ctx->tr.attach_ref, ctx->entries->trace_event,
                           ++ctx->tr.gen, &ctx->tr.tracemc_ref, "trace",
                           "[ljprof trace events]", &ctx->tr.key,
                           &ctx->tr.handler_ref);
}

static int traces_installed(ljp_ctx *ctx, lua_State *L);

/* LJPROF_TRACES=events: the trace events even where memory can be read
** (the tests run both ways). */
static int events_forced(void)
{
  static _Atomic int forced = -1;
  return ljp_env_is(&forced, "LJPROF_TRACES", "events");
}

int ljp_traces_from_memory(void)
{
  return ljp_tml.ok && ljp_vml.jstate_ok && !events_forced();
}

void ljp_traces_attach(ljp_ctx *ctx, lua_State *L)
{
  int top = lua_gettop(L);
  lua_Integer tr;
  /* Installed since ljprof.watch(): keep it, and what it saw. */
  int keep = traces_installed(ctx, L);
  ctx->tr.mem = ctx->vm_g && ljp_traces_from_memory();
  ctx->tr.aborts_on = 0;
  if (ctx->tr.mem && !ctx->opt.aborts && !keep) {
    /* Nothing per trace event: no handler. Infos kept from an earlier run
    ** are checked against the trace objects when used; their ranges and
    ** stack keys go (the code map and store are new). */
    ctx->tr.key = 0;
    ljp_hook_forget_recorder(&ctx->hook);
    aborts_reset(ctx);
    ctx->tr.events = ctx->tr.event_ns = 0;
    for (tr = 1; tr < (lua_Integer)ctx->tr.ninfo; tr++) {
      TI(ctx, tr)->mc_known = 0;
      TI(ctx, tr)->have_key = 0;
      TI(ctx, tr)->tloc = 0;
    }
    return;
  }
  /* The handler's tables, once (kept for later runs; freed with the
  ** context). */
  if (!ctx->tr.tabs) ctx->tr.tabs = calloc(1, sizeof(*ctx->tr.tabs));
  if (!keep) {
    ctx->tr.key = 0;
    ljp_hook_forget_recorder(&ctx->hook);
    unref(L, &ctx->tr.attach_ref);
    unref(L, &ctx->tr.tracemc_ref);
    ljp_push_jitfn(L, "jit", "attach");
    ctx->tr.attach_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    ljp_push_jitfn(L, "jit.util", "tracemc");
    ctx->tr.tracemc_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    unref(L, &ctx->tr.funcinfo_ref);
    ljp_push_jitfn(L, "jit.util", "funcinfo");
    ctx->tr.funcinfo_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    trinfo_clear(&ctx->tr.pending);
  }
  aborts_reset(ctx);             /* per run */
  ctx->tr.events = ctx->tr.event_ns = 0;
  if (!keep && !traces_install(ctx, L)) {
    ljp_traces_reset(ctx);
    return;
  }
  ctx->tr.aborts_on = 1;
  /* Traces compiled before the start: their starts are unknown (unless
  ** ljprof.watch() kept the handler attached); their machine code ranges
  ** are learnt when a sample lands in one. Infos kept from an earlier run
  ** lose their ranges and stack keys (the code map and store are new). */
  if (!keep) {
    trinfo_clear_all(ctx);
    ctx->tr.nrecent = 0;
  }
  for (tr = 1; tr < (lua_Integer)ctx->tr.ninfo; tr++) {
    TI(ctx, tr)->mc_known = 0;
    TI(ctx, tr)->have_key = 0;
    TI(ctx, tr)->tloc = 0;
  }
  lua_settop(L, top);
}

void ljp_traces_exitcheck(ljp_ctx *ctx, lua_State *L, int on)
{
  int top = lua_gettop(L);
  if (on && !ctx->snapchk.handler_ref && ljp_tsl.ok &&
      ljp_luastack_checking() && ctx->entries->exit_event) {
    ljp_push_jitfn(L, "jit", "attach");
    if (lua_isfunction(L, -1)) {
      lua_pushcfunction(L, ctx->entries->exit_event);
      lua_pushvalue(L, -1);
      ctx->snapchk.handler_ref = luaL_ref(L, LUA_REGISTRYINDEX);
      lua_pushstring(L, "texit");
      if (lua_pcall(L, 2, 0, 0) != 0) {
        luaL_unref(L, LUA_REGISTRYINDEX, ctx->snapchk.handler_ref);
        ctx->snapchk.handler_ref = 0;
      }
    }
  } else if (!on && ctx->snapchk.handler_ref) {
    ljp_push_jitfn(L, "jit", "attach");
    lua_rawgeti(L, LUA_REGISTRYINDEX, ctx->snapchk.handler_ref);
    if (lua_isfunction(L, -2)) lua_pcall(L, 1, 0, 0);  /* detach */
    luaL_unref(L, LUA_REGISTRYINDEX, ctx->snapchk.handler_ref);
    ctx->snapchk.handler_ref = 0;
  }
  ctx->snapchk.pending = 0;
  lua_settop(L, top);
}

/* Is our handler still the one in the "trace" slot? */
static int traces_installed(ljp_ctx *ctx, lua_State *L)
{
  return ljp_chain_installed(L, ctx->tr.key, ctx->tr.handler_ref);
}

void ljp_traces_check(ljp_ctx *ctx, lua_State *L)
{
  if (!ctx->tr.key || traces_installed(ctx, L)) return;
  /* Replaced by somebody: we missed events, so forget what we knew about
  ** the recorder, and attach again on top of the newcomer. */
  ljp_hook_recording(&ctx->hook, ctx->vm_g, 0);
  traces_install(ctx, L);
}

void ljp_traces_detach(ljp_ctx *ctx, lua_State *L)
{
  int top = lua_gettop(L);
  if (!ctx->tr.watching) ljp_hook_forget_recorder(&ctx->hook);
  if (ctx->tr.watching && traces_installed(ctx, L)) return; /* keeps watching */
  if (traces_installed(ctx, L))
    ljp_chain_remove(L, ctx->tr.attach_ref, ctx->tr.handler_ref, "trace");
  unref(L, &ctx->tr.handler_ref);
  unref(L, &ctx->tr.attach_ref);
  unref(L, &ctx->tr.tracemc_ref);
  unref(L, &ctx->tr.funcinfo_ref);
  ctx->tr.key = 0;
  ljp_hook_forget_recorder(&ctx->hook);
  lua_settop(L, top);
}
