/*
** The record map (irmap.h): per trace, the inlined frames each IR
** instruction was recorded in, from the recorder's "record" events.
**
** The handler (ljp_irmap_event, one per recorded bytecode) reads three
** fields of the jit_State that follows the global_State (J->cur.traceno,
** J->cur.nins, J->baseslot) and appends one entry; an entry that emitted
** no IR and is followed by one at the same depth is overwritten (but not
** a Lua function's by a fast function's: it may be the tail call that
** entered it). A new recording is told by its trace number or by an IR
** count lower than the last one read (an abort and a retry reuse the
** number); its first event drops the map kept for its number. No lookup,
** no name, no copy.
**
** At the first sample in a trace (safe point, trace alive): the owner
** event of each IR reference (the last event at or below it), each
** event's parent (the last event one level out before it; a fast
** function's IR is its parent's, or its tail caller's when a Lua
** function's CALLT/CALLMT entered it, as LuaJIT's profiling mode charges
** it), the loop's copied body aligned to its source (lj_opt_loop.c,
** loop_unroll: copies are emitted in source order, invariant and folded
** ones not; a copy is aligned to the next source instruction with its
** opcode, type and substituted operands, an operand whose source was not
** copied accepted as any), then the proof: at every snapshot the frames
** (function and slot, outermost first; a fast function's IR taken as its
** parent's, whose frames a snapshot holds) must be the snapshot's
** (tracesnap.c decodes them). A trace that fails is refused (counted)
** and keeps the snapshot rule. A side trace's frames below its first
** event's depth are those of its snapshot 0 (replayed from its parent's
** exit). A sample's place among the IR instructions: the machine code's
** decoding (mcmap.c) from the trace's 4th sample, its runs copied once
** into the trace's map (this context's: looked up without mcmap.c's
** lock), before it or without it an estimate (ljp_mc_refs: its share of
** its snapshot's code).
**
** Learning (ljp_irmap_probe, once per process, in ljprof's own state: the
** layouts' one, vmlearn.c, at the first start; jit.vmdef's opcode names
** by vmnames.c, which reads them from the module's text): a
** probe handler copies the bytes between g and J->trace at each event of
** a few loops with inlined calls (and a vararg one, and a side trace);
** GCtrace's trace number and IR count are the one offset agreeing with
** every saved trace (jit.util.traceinfo); J->cur the one offset where
** every event's trace number is read and its IR count is plausible and
** never above the saved trace's; J->baseslot the one uint32 that reads 2
** at depth 0 of a root trace and grows by a CALL's A + 2 at each call of
** a fixed-argument function.
*/
#define _GNU_SOURCE
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>

#include "ljp.h"
#include "ffid.h"
#include "irmap.h"
#include "luastack.h"
#include "tracemem.h"
#include "tracesnap.h"
#include "vmnames.h"
#include "vmprobe.h"

ljp_irlayout ljp_irl;

#define REF_BIAS 0x8000u
#define REF_FIRST (REF_BIAS + 1)
#define SNAPSZ 12
#define MAXDEPTH 64        /* deeper events: their references unknown */
#define MAXEV (1u << 16)   /* events kept per recording */
#define TAIL 24            /* tracesnap.c: a linking trace's last bytes */

static inline uint32_t ld32(uintptr_t p) { uint32_t v; memcpy(&v, (const void *)p, 4); return v; }
static inline uint64_t ld64(uintptr_t p) { uint64_t v; memcpy(&v, (const void *)p, 8); return v; }
static inline uint16_t ld16(uintptr_t p) { uint16_t v; memcpy(&v, (const void *)p, 2); return v; }

/* One recorded bytecode: its function, its PC (frame-link meaning: the
** instruction after it), the IR count before it (less REF_BIAS), its
** depth and its frame's base slot relative to the trace's base frame. */
typedef struct irev {
  uintptr_t fn, pc;
  uint16_t ref;
  uint8_t depth, slot;
} irev;

/* A finished recording and, once derived, its map. */
typedef struct irtrace {
  uint32_t n;
  irev *ev;
  int state;               /* 0 not derived, 1 proven, -1 refused */
  uintptr_t T, mcode;      /* the object it was derived for */
  uintptr_t startpc;
  uint32_t size, nins;
  uint32_t loopref;        /* 0: no loop */
  int32_t *own;            /* per reference from REF_FIRST: event, -1 */
  int32_t *parent;         /* per event */
  uint8_t *dead;           /* per event: its function may be gone (below) */
  uint8_t *uni;            /* per snapshot: 0 not known yet, 1 its code's
                              references have one set of frames, 2 not */
  int nsnap;
  int nside;               /* a side trace: snapshot 0's frames */
  int samples;             /* its samples, up to LJP_IRMAP_DECODE_AFTER */
  int runs_got;            /* the decoder's runs asked for (mcmap.c) */
  int nrun;                /* ... copied here: looked up without the */
  ljp_mcrun *runs;         /* decoder cache's process-wide lock */
  uintptr_t sidepc;
  ljp_tsframe side[LJP_TS_MAX];   /* (last: not zeroed, see finish) */
} irtrace;

typedef struct ljp_irmap ljp_irmap;
struct ljp_irmap {
  ptrdiff_t key;           /* our slot in _VMEVENTS (0: not installed) */
  int handler_ref, attach_ref;
  uint32_t gen;
  int on;                  /* events are mapped */
  int spent, off;          /* the budget ran out this run; turned off (why) */
  int paused;              /* detached for its budget: attached again at an
                              idle safe point once it has refilled */
  uint64_t allow;          /* events allowed so far (the budget) */
  uint64_t cap;            /* LJPROF_IRMAP_BUDGET: a fixed cap (0: none) */
  uintptr_t g;
  int32_t cur;             /* the recording's trace number, 0: none */
  uint32_t last;           /* its last IR count */
  uint32_t cn, ccap;
  irev *cev;
  int cbad;                /* too many events: not kept */
  irtrace **tr;            /* by trace number */
  uint32_t ntr;
  uint64_t events, proven, refused, copies, copies_unknown;
  const char *why;
};

int ljp_irmap_derive(ljp_irmap *m, irtrace *t, uintptr_t T);

/* -- Finished recordings ----------------------------------------------------- */

static void tr_free(irtrace *t)
{
  if (!t) return;
  free(t->own);
  free(t->parent);
  free(t->dead);
  free(t->uni);
  free(t->runs);
  free(t);
}

static void drop(ljp_irmap *m, int32_t tr)
{
  if (tr > 0 && (uint32_t)tr < m->ntr && m->tr[tr]) {
    tr_free(m->tr[tr]);
    m->tr[tr] = NULL;
  }
}

/* The recording in the buffer is over: kept by its number (a new
** recording of the same number drops it). */
static void finish(ljp_irmap *m)
{
  irtrace *t;
  if (!m->cur) return;
  if (m->cbad || !m->cn) goto out;
  if ((uint32_t)m->cur >= m->ntr) {
    uint32_t n = m->ntr ? m->ntr : 256;
    irtrace **a;
    while (n <= (uint32_t)m->cur) n *= 2;
    if (!(a = realloc(m->tr, n * sizeof(*a)))) goto out;
    memset(a + m->ntr, 0, (n - m->ntr) * sizeof(*a));
    m->tr = a;
    m->ntr = n;
  }
  drop(m, m->cur);
  /* One block: the trace and its events after it (the buffer stays for
  ** the next recording). A recording of a few events each, as in a
  ** program whose traces are flushed, made a buffer of 256 events, a
  ** zeroed trace and two frees each: 0.4 M of many2000's 1.3 M
  ** instructions in trace events (callgrind, bench/cost). */
  if (!(t = malloc(sizeof(*t) + (size_t)m->cn * sizeof(irev)))) goto out;
  memset(t, 0, offsetof(irtrace, side));   /* (side: written when read) */
  t->n = m->cn;
  t->ev = (irev *)(t + 1);
  memcpy(t->ev, m->cev, (size_t)m->cn * sizeof(irev));
  m->tr[m->cur] = t;
  if (m->ccap > 4096) {        /* a long one's buffer is not kept */
    free(m->cev);
    m->cev = NULL;
    m->ccap = 0;
  }
out:
  m->cur = 0;
  m->cn = 0;
  m->cbad = 0;
}

/* -- The handler ------------------------------------------------------------- */

#define UP_GEN lua_upvalueindex(1)

static void turn_off(ljp_irmap *m, const char *why)
{
  m->on = 0;
  m->off = 1;
  if (!m->why) m->why = why;
}

static void uninstall(ljp_irmap *m, lua_State *L);

/* The budget is spent: the handler out of its slot (the one it replaced
** put back: from inside an event handler too, as jit.attach only writes
** the event table), the recording in progress dropped (a map of part of
** it is not kept). ljp_irmap_check attaches it again. */
static void budget_out(ljp_irmap *m, lua_State *L)
{
  m->spent = 1;
  m->paused = 1;
  m->on = 0;
  m->cur = 0;
  m->cn = 0;
  m->cbad = 0;
  uninstall(m, L);
}

int ljp_irmap_event(ljp_ctx *ctx, lua_State *L)
{
  int nargs = lua_gettop(L);
  ljp_irmap *m = ctx ? ctx->irmap : NULL;
  uintptr_t jc, fn, pc;
  uint32_t nins, bs, depth;
  int32_t tr, pos;
  irev *e;
  if (!m || !m->on || m->gen != (uint32_t)lua_tointeger(L, UP_GEN))
    return nargs;
  tr = (int32_t)lua_tointeger(L, 1);
  fn = (uintptr_t)lua_topointer(L, 2);
  pos = (int32_t)lua_tointeger(L, 3);
  depth = (uint32_t)lua_tointeger(L, 4);
  jc = m->g + (uintptr_t)ljp_irl.g_jcur;
  if (ld16(jc + (uintptr_t)ljp_irl.t_traceno) != (uint32_t)tr) {
    turn_off(m, "an event's trace number is not the one recorded");
    return nargs;
  }
  nins = ld32(jc + (uintptr_t)ljp_irl.t_nins);
  bs = ld32(m->g + (uintptr_t)ljp_irl.g_baseslot);
  if (nins < REF_FIRST || nins >= REF_BIAS + 0x10000u || bs < 2 || bs > 257) {
    turn_off(m, "an event's IR count or base slot out of range");
    return nargs;
  }
  if (m->events >= m->allow) {   /* out of budget: detached now, not at the
                                  next safe point (LuaJIT's dispatch of an
                                  event is most of its cost) */
    budget_out(m, L);
    return nargs;
  }
  m->events++;
  if (tr != m->cur || nins < m->last) {   /* a new recording */
    if (tr == m->cur) {        /* the last one aborted */
      m->cn = 0;
      m->cbad = 0;
    } else {
      finish(m);
    }
    drop(m, tr);
    m->cur = tr;
  }
  m->last = nins;
  if (m->cbad) return nargs;
  if (depth >= MAXDEPTH || !fn) depth = MAXDEPTH;  /* unknown */
  /* pc 0: a fast or C function (no prototype): its IR is its caller's */
  pc = depth < MAXDEPTH && pos >= 0 ? ljp_fn_bc(fn) + 4u * ((uint32_t)pos + 1)
                                    : 0;
  if (m->cn && m->cev[m->cn - 1].ref == (uint16_t)(nins - REF_BIAS) &&
      m->cev[m->cn - 1].depth == depth && (pc || !m->cev[m->cn - 1].pc)) {
    /* it emitted nothing: replaced (but a Lua function's event stays
    ** before a fast function's: it may be the tail call that entered it) */
    e = &m->cev[m->cn - 1];
  } else {
    if (m->cn == m->ccap) {
      uint32_t n = m->ccap ? m->ccap * 2 : 256;
      irev *a;
      if (n > MAXEV || !(a = realloc(m->cev, n * sizeof(*a)))) {
        m->cbad = 1;
        return nargs;
      }
      m->cev = a;
      m->ccap = n;
    }
    e = &m->cev[m->cn++];
  }
  e->fn = fn;
  e->pc = pc;
  e->ref = (uint16_t)(nins - REF_BIAS);
  e->depth = (uint8_t)depth;
  e->slot = (uint8_t)(bs - 2);
  return nargs;
}


/* -- Attaching (chained: jit.attach keeps one handler per event) ------------ */

static void unref(lua_State *L, int *ref)
{
  if (*ref != LUA_NOREF && *ref != 0) luaL_unref(L, LUA_REGISTRYINDEX, *ref);
  *ref = LUA_NOREF;
}

/* Attach ours on top of whatever is in the "record" slot, as traces.c
** does for "trace" (vm.h: ljp_chain_*): the slot's old value is the
** handler chained. */
static int install(ljp_ctx *ctx, ljp_irmap *m, lua_State *L)
{
  return ljp_chain_install(L, m->attach_ref, ctx->entries->record_event,
                           ++m->gen, NULL, "record", "[ljprof record events]",
                           &m->key, &m->handler_ref);
}

static int installed(ljp_irmap *m, lua_State *L)
{
  return ljp_chain_installed(L, m->key, m->handler_ref);
}

/* Ours out of the slot, the one it replaced put back. A handler of ours
** left in somebody's chain (they attached over us) only chains: its
** generation is no longer the current one. */
static void uninstall(ljp_irmap *m, lua_State *L)
{
  if (installed(m, L))
    ljp_chain_remove(L, m->attach_ref, m->handler_ref, "record");
  m->gen++;
  m->key = 0;
  unref(L, &m->handler_ref);
}

/* LJPROF_IRMAP_BUDGET=N: a fixed cap of N events a run, no refill (tests,
** measurements); 0 when unset. */
static uint64_t fixed_cap(void)
{
  const char *s = getenv("LJPROF_IRMAP_BUDGET");
  long long v = s ? atoll(s) : 0;
  return v > 0 ? (uint64_t)v : 0;
}

/* The events a run may have mapped by now: its first allowance and a
** share for each tick of its clock (irmap.h). */
static uint64_t allowance(ljp_ctx *ctx, const ljp_irmap *m)
{
  uint64_t ticks = atomic_load_explicit(&ctx->n_ticks, memory_order_relaxed);
  return m->cap ? m->cap : LJP_IRMAP_FIRST + ticks * LJP_IRMAP_PER_TICK;
}

/* Is there a compiled trace? (The first run's flush is skipped without
** one: a flush is an event the program's own handlers see.) */
static int any_trace(uintptr_t g)
{
  uint32_t n = *(const uint32_t *)(g + (uintptr_t)ljp_tml.g_sizetrace), tr;
  for (tr = 1; tr < n; tr++)
    if (ljp_vm_trace(g, (int32_t)tr)) return 1;
  return 0;
}

void ljp_irmap_start(ljp_ctx *ctx, lua_State *L)
{
  ljp_irmap *m;
  int top = lua_gettop(L);
  if (ctx->opt.inline_frames != LJPROF_INLINE_RECORDED || !ctx->tr.mem ||
      !ctx->vm_g)
    return;
  if (!ljp_irl.ok) return;           /* (run.c learnt it first) */
  int first = !ctx->irmap;
  if (!(m = ctx->irmap)) {
    if (!(m = ctx->irmap = calloc(1, sizeof(*m)))) return;
    m->handler_ref = m->attach_ref = LUA_NOREF;
  }
  /* Maps kept from an earlier run stay (each is checked at use against
  ** its trace object, and dropped by a new recording of its number). */
  m->g = ctx->vm_g;
  m->cap = fixed_cap();
  m->allow = allowance(ctx, m);
  m->spent = m->off = m->paused = 0;
  m->why = NULL;
  m->events = m->proven = m->refused = m->copies = m->copies_unknown = 0;
  m->cur = 0;
  m->cn = 0;
  unref(L, &m->attach_ref);
  ljp_push_jitfn(L, "jit", "attach");
  m->attach_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  m->on = install(ctx, m, L);
  if (!m->on && !m->why) m->why = "jit.attach(\"record\") unavailable";
  /* The state's first mapped run: the traces compiled before it have no
  ** map; they are flushed once (as LuaJIT's profiler start does) and
  ** recorded again with the handler in place. Later runs keep theirs. */
  if (m->on && first && any_trace(m->g)) {
    lua_getglobal(L, "require");
    lua_pushstring(L, "jit");
    if (lua_pcall(L, 1, 1, 0) == 0 && lua_istable(L, -1)) {
      lua_getfield(L, -1, "flush");
      if (lua_isfunction(L, -1)) lua_pcall(L, 0, 0, 0);
    }
    lua_settop(L, top);
  }
}

void ljp_irmap_stop(ljp_ctx *ctx, lua_State *L)
{
  ljp_irmap *m = ctx->irmap;
  if (!m) return;
  m->on = 0;
  m->paused = 0;
  uninstall(m, L);
  unref(L, &m->attach_ref);
  m->cur = 0;            /* a recording in progress is not kept */
  m->cn = 0;
}

void ljp_irmap_check(ljp_ctx *ctx, lua_State *L, int full)
{
  ljp_irmap *m = ctx->irmap;
  if (!m) return;
  m->allow = allowance(ctx, m);
  if (!m->key) {
    /* Paused for its budget: back once it has refilled by a margin (an
    ** attach costs a few thousand instructions), and only between two
    ** recordings, so that its first event is a recording's first. */
    if (m->paused && !m->off && m->allow >= m->events + LJP_IRMAP_RESUME &&
        ljp_vm_jit_idle(ctx->vm_g)) {
      m->paused = 0;
      m->cur = 0;
      m->cn = 0;
      m->on = install(ctx, m, L);
    }
    return;
  }
  if (m->off) {
    uninstall(m, L);
    return;
  }
  if (full && !installed(m, L)) {   /* replaced: on top of the newcomer */
    m->cur = 0;             /* events were missed */
    m->cn = 0;
    install(ctx, m, L);
  }
}

void ljp_irmap_free(ljp_ctx *ctx)
{
  ljp_irmap *m = ctx->irmap;
  uint32_t i;
  if (!m) return;
  for (i = 0; i < m->ntr; i++) tr_free(m->tr[i]);
  free(m->tr);
  free(m->cev);
  free(m);
  ctx->irmap = NULL;
}

int ljp_irmap_ok(void) { return ljp_irl.ok; }

void ljp_irmap_stats(ljp_ctx *ctx, uint64_t *events, uint64_t *proven,
                     uint64_t *refused, int *spent, const char **why)
{
  ljp_irmap *m = ctx->irmap;
  *events = m ? m->events : 0;
  *proven = m ? m->proven : 0;
  *refused = m ? m->refused : 0;
  *spent = m ? m->spent : 0;
  *why = !ljp_irl.ok ? (ljp_irl.why[0] ? ljp_irl.why : NULL)
         : m ? m->why : NULL;
}

/* -- Deriving a map (safe point, the trace alive) ------------------------------ */

static int ir_op(uintptr_t ir, uint32_t ref) { return ld16(ir + 8u * ref + 4) >> 8; }
static int ir_t(uintptr_t ir, uint32_t ref) { return ld16(ir + 8u * ref + 4) & 0x1f; }
static uint32_t ir_op1(uintptr_t ir, uint32_t ref) { return ld16(ir + 8u * ref); }
static uint32_t ir_op2(uintptr_t ir, uint32_t ref) { return ld16(ir + 8u * ref + 2); }

/* Was fast-function event e entered by a tail call (the event before it
** at its depth a Lua function's CALLT or CALLMT)? */
static int tail_called(const irtrace *t, int32_t e)
{
  const irev *p = e > 0 ? &t->ev[e - 1] : NULL;
  uint32_t op;
  if (!p || !p->pc || p->depth != t->ev[e].depth || ljp_irl.op_callt < 0)
    return 0;
  op = ld32(p->pc - 4) & 0xff;
  return op == (uint32_t)ljp_irl.op_callt || op == (uint32_t)ljp_irl.op_callmt;
}

static int frames_of(const irtrace *t, uint32_t ref, ljp_tsframe *out, int max,
                     uintptr_t *basepc, int tail);

/* The frames at reference ref (innermost first; tracesnap.h's meaning);
** -1 when unknown. */
static int frames_at(const irtrace *t, uint32_t ref, ljp_tsframe *out, int max,
                     uintptr_t *basepc)
{
  return frames_of(t, ref, out, max, basepc, 1);
}

static int frames_of(const irtrace *t, uint32_t ref, ljp_tsframe *out, int max,
                     uintptr_t *basepc, int tail)
{
  int32_t e;
  int n = 0, d;
  if (ref < REF_FIRST || ref >= t->nins) return -1;
  e = t->own[ref - REF_FIRST];
  if (e < 0 || t->ev[e].depth >= MAXDEPTH) return -1;
  /* A fast or C function's IR is its caller's: the frame below it, or,
  ** when a Lua function called it by a tail call (its frame replaced,
  ** so the one below is the tail caller's caller), the tail caller at
  ** its call, as LuaJIT's profiling mode charges it (the work a source
  ** line asked for stays with its function). */
  if (!t->ev[e].pc)
    e = tail && tail_called(t, e) ? e - 1 : t->parent[e];
  if (e < 0) return -1;
  d = t->ev[e].depth;
  while (e >= 0 && t->ev[e].depth > 0) {
    const irev *v = &t->ev[e];
    if (v->depth != d || n == max || (t->dead && t->dead[e])) return -1;
    out[n].fn = v->fn;
    out[n].pc = v->pc;
    out[n].slot = v->slot;
    n++;
    d--;
    e = t->parent[e];
  }
  if (e >= 0) {
    if (t->ev[e].depth != 0 || d != 0) return -1;
    *basepc = t->ev[e].pc;
    return n;
  }
  /* A side trace: the frames below, from its snapshot 0. */
  if (d > t->nside || n + d > max) return -1;
  memcpy(out + n, t->side + (t->nside - d), (size_t)d * sizeof(out[0]));
  *basepc = t->sidepc;
  return n + d;
}

static int same_frames(const ljp_tsframe *a, int na, const ljp_tsframe *b,
                       int nb)
{
  int i;
  if (na != nb) return 0;
  for (i = 0; i < na; i++)
    if (a[i].fn != b[i].fn || a[i].slot != b[i].slot) return 0;
  return 1;
}

/* A snapshot's decoded frames, PCs included (a copied snapshot keeps its
** source's PC and frame links: lj_opt_loop.c, loop_subst_snap). */
typedef struct snapfr {
  uint32_t ref;
  int n;
  uintptr_t basepc;
  ljp_tsframe f[LJP_TS_MAX];
} snapfr;

static int same_snap(const snapfr *a, const snapfr *b)
{
  int i;
  if (a->n < 0 || a->n != b->n || a->basepc != b->basepc) return 0;
  for (i = 0; i < a->n; i++)
    if (a->f[i].fn != b->f[i].fn || a->f[i].slot != b->f[i].slot ||
        a->f[i].pc != b->f[i].pc)
      return 0;
  return 1;
}

/* A source operand o and its copy's x: a constant or literal as is; a
** source instruction copied: its copy; one not copied: any (it was CSE'd
** or folded into another). */
static int operand_ok(const uint16_t *subst, uint32_t loop, uint32_t o,
                      uint32_t x)
{
  if (o >= REF_FIRST && o < loop)
    return !subst[o - REF_FIRST] || subst[o - REF_FIRST] == x;
  return o == x;
}

/* The loop's copied body: each copy aligned to its source, own[] from its
** source's; then checked against the snapshots. Copied snapshots are
** their sources' in order (a source snapshot with no guard since the last
** one is merged into the next): each is matched to the next source
** snapshot with the same frames and PCs, and a copy in copied snapshot
** q's code must come from source code between q's source and the next
** copied snapshot's source; one that does not (or lies where no match
** was found) has no frames. */
static void align_copies(ljp_irmap *m, irtrace *t, uintptr_t T, uintptr_t ir)
{
  uint32_t loop = t->loopref, c, s = REF_FIRST, nsrc = loop - REF_FIRST;
  uint16_t *subst = calloc(nsrc ? nsrc : 1, sizeof(uint16_t));  /* 0: none */
  uint16_t *srcof = calloc(t->nins - loop, sizeof(uint16_t));
  uintptr_t snap = ld64(T + (uintptr_t)ljp_tsl.t_snap);
  int nsnap = ld16(T + (uintptr_t)ljp_tsl.t_nsnap), k, nso = 0, nco = 0, q, j;
  snapfr *so = calloc((size_t)nsnap + 1, sizeof(snapfr));
  snapfr *co = calloc((size_t)nsnap + 1, sizeof(snapfr));
  int32_t *match = calloc((size_t)nsnap + 1, sizeof(int32_t));
  t->own[loop - REF_FIRST] = -1;
  if (!subst || !srcof || !so || !co || !match) {
    for (c = loop + 1; c < t->nins; c++) t->own[c - REF_FIRST] = -1;
    goto out;
  }
  for (c = loop + 1; c < t->nins; c++) {
    int op = ir_op(ir, c), ty = ir_t(ir, c);
    uint32_t a = ir_op1(ir, c), b = ir_op2(ir, c), kk, found = 0;
    for (kk = s; kk < loop && kk < s + 64; kk++) {
      uint32_t o1 = ir_op1(ir, kk), o2 = ir_op2(ir, kk);
      if (ir_op(ir, kk) != op || ir_t(ir, kk) != ty) continue;
      /* operands as substituted (FOLD may swap a commutative pair) */
      if ((operand_ok(subst, loop, o1, a) && operand_ok(subst, loop, o2, b)) ||
          (operand_ok(subst, loop, o1, b) && operand_ok(subst, loop, o2, a))) {
        found = kk;
        break;
      }
    }
    t->own[c - REF_FIRST] = -1;
    if (found) {
      subst[found - REF_FIRST] = (uint16_t)c;
      srcof[c - loop] = (uint16_t)found;
      s = found + 1;
    }
  }
  /* The snapshots: the source ones (from #1: #0 is copied to none) and the
  ** copies, decoded. */
  for (k = 0; k < nsnap; k++) {
    uint32_t ref = ld16(snap + (uintptr_t)k * SNAPSZ + 4);
    snapfr *f = ref <= loop ? (k ? &so[nso++] : NULL) : &co[nco++];
    if (!f) continue;
    f->ref = ref;
    f->n = ljp_ts_frames(T, k, f->f, LJP_TS_MAX, &f->basepc);
  }
  for (q = 0, j = 0; q < nco; q++) {
    int jj;
    match[q] = -1;
    for (jj = j; jj < nso; jj++)
      if (same_snap(&co[q], &so[jj])) break;
    if (jj < nso) {
      match[q] = jj;
      j = jj + 1;
    }
  }
  for (c = loop + 1, q = -1; c < t->nins; c++) {
    uint32_t sr = srcof[c - loop], lo, hi;
    while (q + 1 < nco && co[q + 1].ref <= c) q++;
    /* the source range of copied snapshot q's code */
    if (q < 0) lo = REF_FIRST;
    else lo = match[q] >= 0 ? so[match[q]].ref : 0xffffffffu;
    hi = q + 1 < nco && match[q + 1] >= 0 ? so[match[q + 1]].ref : loop;
    if (sr && sr >= lo && sr < hi) {
      t->own[c - REF_FIRST] = t->own[sr - REF_FIRST];
      m->copies++;
    } else {
      m->copies_unknown++;
    }
  }
out:
  free(subst);
  free(srcof);
  free(so);
  free(co);
  free(match);
}

/* The function constants of trace T (IR ir), sorted, into *out
** (allocated); their count, -1 when out of memory. */
static int kfuncs(uintptr_t T, uintptr_t ir, uintptr_t **out)
{
  uint32_t nk = ld32(T + (uintptr_t)ljp_tsl.t_nk), r;
  int n = 0, i, j;
  uintptr_t *a;
  if (nk >= REF_BIAS || !(a = malloc((REF_BIAS - nk) * sizeof(*a)))) return -1;
  for (r = nk; r + 1 < REF_BIAS; r++) {
    uint16_t ot = ld16(ir + 8u * r + 4);
    if ((ot >> 8) == ljp_tsl.op_kgc && (ot & 0x1f) == ljp_tsl.t_func)
      a[n++] = (uintptr_t)ld64(ir + 8u * (r + 1));
  }
  for (i = 1; i < n; i++) {                 /* insertion sort: few */
    uintptr_t v = a[i];
    for (j = i; j > 0 && a[j - 1] > v; j--) a[j] = a[j - 1];
    a[j] = v;
  }
  *out = a;
  return n;
}

static int has_fn(const uintptr_t *a, int n, uintptr_t fn)
{
  int lo = 0, hi = n - 1;
  while (lo <= hi) {
    int mid = (lo + hi) / 2;
    if (a[mid] == fn) return 1;
    if (a[mid] < fn) lo = mid + 1; else hi = mid - 1;
  }
  return 0;
}

/* (not static: the cost gate counts it per trace, bench/cost/gate.lua) */
__attribute__((noinline)) int ljp_irmap_derive(ljp_irmap *m, irtrace *t,
                                                uintptr_t T)
{
  uintptr_t ir = ld64(T + (uintptr_t)ljp_tsl.t_ir);
  uintptr_t snap = ld64(T + (uintptr_t)ljp_tsl.t_snap);
  uint32_t nins = ld32(T + (uintptr_t)ljp_irl.t_nins), r, lim;
  int32_t stack[MAXDEPTH], e, cut = -1;
  int nsnap = ld16(T + (uintptr_t)ljp_tsl.t_nsnap), k, d;
  uint32_t i;
  t->T = T;
  t->startpc = ld64(T + (uintptr_t)ljp_tml.t_startpc);
  t->mcode = ld64(T + (uintptr_t)ljp_tml.t_mcode);
  t->size = ld32(T + (uintptr_t)ljp_tml.t_szmcode);
  t->nins = nins;
  t->state = -1;
  if (nins <= REF_FIRST || nins >= REF_BIAS + 0x10000u || !ir ||
      REF_BIAS + t->ev[t->n - 1].ref > nins)
    return -1;
  t->loopref = 0;
  for (r = REF_FIRST; r < nins; r++)
    if (ir_op(ir, r) == ljp_irl.op_loop) { t->loopref = r; break; }
  lim = t->loopref ? t->loopref : nins;
  t->nsnap = nsnap;
  if (!(t->own = malloc((nins - REF_FIRST) * sizeof(int32_t))) ||
      !(t->parent = malloc(t->n * sizeof(int32_t))) ||
      !(t->uni = calloc((size_t)nsnap + 1, 1)))
    return -1;
  /* Parents; a root trace that returned below its base frame: unknown
  ** from the return on (the base moved). */
  for (d = 0; d < MAXDEPTH; d++) stack[d] = -1;
  for (i = 0; i < t->n; i++) {
    const irev *v = &t->ev[i];
    t->parent[i] = -1;
    if (v->depth >= MAXDEPTH) continue;
    if (v->depth > 0) t->parent[i] = stack[v->depth - 1];
    if (!v->pc) continue;       /* not a parent: no Lua frame */
    stack[v->depth] = (int32_t)i;
    if (cut < 0 && v->depth == 0 && v->pc) {
      uint32_t op = ld32(v->pc - 4) & 0xff;
      if (op == ljp_tsl.op_ret[0] || op == ljp_tsl.op_ret[1] ||
          op == ljp_tsl.op_ret[2] || op == ljp_tsl.op_ret[3])
        cut = (int32_t)i + 1;
    }
  }
  /* An inlined frame's function object must be one the trace keeps
  ** alive (a function constant of its IR): a closure the recorder saw
  ** may be collected since when the trace checks only its prototype
  ** (lj_record.c specialises on the prototype of a function that made
  ** many closures), and a frame is named through its object. */
  if (!(t->dead = calloc(t->n ? t->n : 1, 1))) return -1;
  {
    uintptr_t *kf = NULL;
    int nkf = kfuncs(T, ir, &kf);
    for (i = 0; i < t->n; i++)
      if (t->ev[i].depth > 0 && t->ev[i].depth < MAXDEPTH && t->ev[i].pc &&
          (nkf < 0 || !has_fn(kf, nkf, t->ev[i].fn)))
        t->dead[i] = 1;
    free(kf);
  }
  for (e = -1, i = 0, r = REF_FIRST; r < lim; r++) {
    while (i < t->n && REF_BIAS + t->ev[i].ref <= r) e = (int32_t)i++;
    t->own[r - REF_FIRST] =
        e < 0 || t->ev[e].depth >= MAXDEPTH || (cut >= 0 && e >= cut) ? -1
        : e;                    /* a fast function's: frames_of */
  }
  /* A side trace's frames below its first event: snapshot 0's. */
  t->nside = 0;
  t->sidepc = 0;
  if (ld16(T + (uintptr_t)ljp_tml.t_root)) {
    int n = ljp_ts_frames(T, 0, t->side, LJP_TS_MAX, &t->sidepc);
    t->nside = n > 0 ? n : 0;
    if (n < 0) t->sidepc = 0;
  }
  /* The proof: each source snapshot's frames. */
  for (k = 0; k < nsnap; k++) {
    ljp_tsframe a[LJP_TS_MAX], b[LJP_TS_MAX];
    uintptr_t apc, bpc;
    uint32_t ref = ld16(snap + (uintptr_t)k * SNAPSZ + 4);
    int na = ljp_ts_frames(T, k, a, LJP_TS_MAX, &apc), nb, ok = 0;
    if (na < 0 || ref < REF_FIRST || ref >= lim) continue;
    nb = frames_of(t, ref, b, LJP_TS_MAX, &bpc, 0);
    if (nb < 0) continue;
    ok = same_frames(a, na, b, nb);
    /* the snapshot may be taken while the bytecode before it owns the
    ** reference (it emitted nothing): any event at that count */
    for (i = 0; !ok && i < t->n && REF_BIAS + t->ev[i].ref <= ref; i++) {
      int32_t save;
      if (REF_BIAS + t->ev[i].ref != ref || ref >= lim) continue;
      save = t->own[ref - REF_FIRST];
      t->own[ref - REF_FIRST] = (int32_t)i;
      nb = frames_of(t, ref, b, LJP_TS_MAX, &bpc, 0);
      t->own[ref - REF_FIRST] = save;
      ok = nb >= 0 && same_frames(a, na, b, nb);
    }
    if (!ok) return -1;
  }
  if (t->loopref) align_copies(m, t, T, ir);
  t->state = 1;
  return 0;
}

/* The map of trace tr (object T), derived and proven once; NULL when
** none. */
static irtrace *map_of(ljp_irmap *m, int32_t tr, uintptr_t T)
{
  irtrace *t;
  if (!m || m->off || tr <= 0 || !ljp_tsl.ok) return NULL;
  /* The recording in the buffer has the number of a trace alive: it is
  ** that trace's (a new recording takes a number not in use). */
  if (tr == m->cur) finish(m);
  if ((uint32_t)tr >= m->ntr || !(t = m->tr[tr])) return NULL;
  if (t->state) {
    if (t->T != T || t->mcode != ld64(T + (uintptr_t)ljp_tml.t_mcode) ||
        t->size != ld32(T + (uintptr_t)ljp_tml.t_szmcode) ||
        t->nins != ld32(T + (uintptr_t)ljp_irl.t_nins) ||
        t->startpc != ld64(T + (uintptr_t)ljp_tml.t_startpc)) {
      drop(m, tr);            /* another trace took the number */
      return NULL;
    }
    return t->state > 0 ? t : NULL;
  }
  if (ljp_irmap_derive(m, t, T) < 0) {
    t->state = -1;
    m->refused++;
    free(t->own);
    free(t->parent);
    free(t->dead);
    free(t->uni);
    t->own = t->parent = NULL;
    t->dead = t->uni = NULL;
    return NULL;
  }
  m->proven++;
  return t;
}

/* -- Machine code offset -> IR references ------------------------------------- */

/* The span of references of the snapshot whose code holds ofs (its number
** in *snapno). */
static int snap_refs(uintptr_t T, uint32_t ofs, uint32_t *rlo, uint32_t *rhi,
                     int *snapno)
{
  uintptr_t snap;
  int nsnap, sn = ljp_ts_snapno(T, ld64(T + (uintptr_t)ljp_tml.t_mcode) + ofs);
  *snapno = sn;
  if (sn < 0) return 0;
  nsnap = ld16(T + (uintptr_t)ljp_tsl.t_nsnap);
  snap = ld64(T + (uintptr_t)ljp_tsl.t_snap);
  *rlo = ld16(snap + (uintptr_t)sn * SNAPSZ + 4);
  *rhi = sn + 1 < nsnap ? ld16(snap + (uintptr_t)(sn + 1) * SNAPSZ + 4)
                        : ld32(T + (uintptr_t)ljp_irl.t_nins);
  return *rhi > *rlo;
}

int ljp_mc_refs(uintptr_t T, uint32_t ofs, uint32_t *ref_lo, uint32_t *ref_hi,
                int *exact)
{
  uintptr_t snap;
  uint32_t lo, hi, rlo, rhi;
  int nsnap, sn;
  *exact = 0;
  if (!ljp_tsl.ok || !ljp_irl.ok || !snap_refs(T, ofs, &rlo, &rhi, &sn))
    return 0;
  nsnap = ld16(T + (uintptr_t)ljp_tsl.t_nsnap);
  snap = ld64(T + (uintptr_t)ljp_tsl.t_snap);
  lo = ld16(snap + (uintptr_t)sn * SNAPSZ + 6);
  hi = sn + 1 < nsnap ? ld16(snap + (uintptr_t)(sn + 1) * SNAPSZ + 6)
                      : ld32(T + (uintptr_t)ljp_tml.t_szmcode);
  if (hi <= lo || ofs < lo || ofs >= hi) return 0;
  /* The code is in IR order, so the offset's fraction of its snapshot's
  ** code is taken as the same fraction of its references. */
  *ref_lo = *ref_hi = rlo + (uint32_t)((uint64_t)(ofs - lo) * (rhi - rlo) /
                                       (hi - lo));
  return 1;
}

/* Do references [lo, hi) all have the frames f[0..n) (fn and slot)? */
static int same_over(const irtrace *t, uint32_t lo, uint32_t hi,
                     const ljp_tsframe *f, int n)
{
  ljp_tsframe g[LJP_TS_MAX];
  uintptr_t pc;
  uint32_t r;
  int32_t last = -2;
  for (r = lo; r < hi; r++) {
    int ng;
    if (r < REF_FIRST || r >= t->nins) return 0;
    if (t->own[r - REF_FIRST] == last) continue;
    last = t->own[r - REF_FIRST];
    ng = frames_at(t, r, g, LJP_TS_MAX, &pc);
    if (ng < 0 || !same_frames(f, n, g, ng)) return 0;
  }
  return 1;
}

int ljp_irmap_frames(ljp_ctx *ctx, int32_t tr, uintptr_t T, uintptr_t mpc,
                     ljp_tsframe *out, int max, uintptr_t *basepc,
                     int *estimated)
{
  irtrace *t = map_of(ctx->irmap, tr, T);
  uint32_t lo, hi, ofs, slo, shi, mid;
  int exact, n, sn, how;
  *estimated = 0;
  if (!t) return -1;
  ofs = (uint32_t)(mpc - t->mcode);
  /* a linking trace's last bytes: tracesnap.c's rule (left undecoded) */
  if (ofs + TAIL >= t->size) return -1;
  /* The decoder's map is built for a trace that takes samples, not for
  ** its first ones: a program whose traces come and go (each taking a
  ** sample or two) would pay a build (0.1-1 M instructions) per sample. */
  if (t->samples < LJP_IRMAP_DECODE_AFTER) t->samples++;
  how = 0;
  if (t->samples >= LJP_IRMAP_DECODE_AFTER) {
    /* its runs copied once into the map (built if needed): each sample
    ** after looks them up here, without ljp_mcmap_refs's mutex (about 210
    ** of its 440 instructions on a cached trace) */
    if (!t->runs_got) {
      t->runs_got = 1;
      t->nrun = ljp_mcmap_copy(T, &t->runs);
    }
    if (ljp_mcmap_find(t->runs, t->nrun, t->size, ofs, &lo, &hi, &exact))
      how = 2;
  }
  if (!how) how = ljp_mc_refs(T, ofs, &lo, &hi, &exact);
  if (!how || hi < lo) return -1;
  mid = lo + (hi - lo) / 2;
  n = frames_at(t, mid, out, max, basepc);
  if (n < 0) return -1;
  if (how == 2) {        /* decoded: certain when the range agrees */
    *estimated = !same_over(t, lo, hi + 1, out, n);
  } else {
    /* estimated: certain only when the snapshot's whole span has them
    ** (once per snapshot) */
    if (!snap_refs(T, ofs, &slo, &shi, &sn) || sn >= t->nsnap) {
      *estimated = 1;
    } else {
      if (!t->uni[sn]) t->uni[sn] = same_over(t, slo, shi, out, n) ? 1 : 2;
      *estimated = t->uni[sn] != 1;
    }
  }
  return n;
}

/* -- Learning ------------------------------------------------------------- */

#define PEV 600            /* probe events kept */
#define PWIN 4096          /* bytes after g examined */
#define PTR 32             /* probe traces */
#define TWIN 160

typedef struct pev {
  int32_t tr, pos, depth;
  uintptr_t fn;
} pev;

static struct {
  pev ev[PEV];
  unsigned char **w;       /* [PEV] of win bytes each (pw_free) */
  int per;                 /* windows per block */
  size_t win;
  int n;
  int lost;                /* events not kept (PEV reached, a read failed) */
  uintptr_t g;
} P;

/* The events' windows, in blocks of 64 KB at most: one block of PEV
** windows (0.5 MB and more) would be above glibc's mmap threshold (128 KB
** at first), and its free raises that threshold (glibc's dynamic
** threshold) to its size for the rest of the process: the program's and ljprof's later large blocks then come
** from the heap, calloc zeroing them (the safe point's name caches, 0.4
** MB: 0.30 M instructions at the first sample, callgrind) where a fresh
** mapping needed no zeroing. */
static void pw_free(void)
{
  int i;
  if (!P.w) return;
  for (i = 0; i < PEV; i += P.per) free(P.w[i]);
  free(P.w);
  P.w = NULL;
}

static int probe_event(lua_State *L)
{
  if (P.n >= PEV || !P.w) {
    P.lost++;
  } else {
    pev *e = &P.ev[P.n];
    e->tr = (int32_t)lua_tointeger(L, 1);
    e->fn = (uintptr_t)lua_topointer(L, 2);
    e->pos = (int32_t)lua_tointeger(L, 3);
    e->depth = (int32_t)lua_tointeger(L, 4);
    if (P.n % P.per == 0 && !P.w[P.n] &&
        !(P.w[P.n] = malloc(P.win * (size_t)P.per))) {
      P.lost++;
      return 0;
    }
    if (P.n % P.per) P.w[P.n] = P.w[P.n - 1] + P.win;
    if (!ljp_peek_g(P.w[P.n], P.g, P.win)) P.n++;
    else P.lost++;
  }
  return 0;
}

static int fail(const char *why)
{
  snprintf(ljp_irl.why, sizeof(ljp_irl.why), "%s", why);
  return 0;
}

/* Fixed-argument calls two and three deep, a vararg callee, a side trace
** and an aborted recording (a trace number reused); returns
** {[tr] = nins} of the traces kept, and the opcodes by name. */
static const char probe_chunk[] =
  "local ev = ...\n"
  "local jit = require('jit')\n"
  "if not (jit.status and jit.status()) then return nil end\n"
  "local ok, util = pcall(require, 'jit.util')\n"
  "if not ok then return nil end\n"
  "local function leaf(t, i) t[i] = i + 1; return i end\n"
  "local function mid(t, i, j) local a = j + 1; local v = leaf(t, i); return v + a end\n"
  "local function va(t, ...) local a = ...; t.va = a; return a end\n"
  "local function run(n)\n"
  "  local t, s = {}, 0\n"
  "  for i = 1, n do\n"
  "    local x, y = i, i + 1\n"
  "    s = s + mid(t, i % 7, y) + x\n"
  "    if i > 150 then s = s + va(t, i, 2) end\n"
  "  end\n"
  "  return s\n"
  "end\n"
  "local function run2(n)\n"
  "  local t, s = {}, 0\n"
  "  for i = 1, n do local q = 1; s = s + q + leaf(t, i % 5) end\n"
  "  return s\n"
  "end\n"
  "local function l3(t, i) t.z = i; return i * 2 end\n"
  "local function l2(t, i) local a = l3(t, i); return a + 1 end\n"
  "local function l1(t, i, k) local b = l2(t, k); return b + i end\n"
  "local function run3(n)\n"
  "  local t, s = {}, 0\n"
  "  for i = 1, n do local u = i * 3; s = s + l1(t, i, u) + l2(t, u) end\n"
  "  return s\n"
  "end\n"
  "jit.flush()\n"
  "jit.attach(ev, 'record')\n"
  "run(300) run2(300) run3(300)\n"
  "jit.attach(ev)\n"
  "jit.off()\n"
  "local out = {}\n"
  "for tr = 1, 64 do\n"
  "  local info = util.traceinfo(tr)\n"
  "  if info then out[tr] = info.nins end\n"
  "end\n"
  "jit.on()\n"
  "return out\n";

int ljp_irmap_probe(lua_State *S)
{
  static int32_t trs[PTR], nins[PTR];
  static unsigned char tw[PTR][TWIN];
  uintptr_t g;
  int top = lua_gettop(S), nt = 0, i, k, op_funcf, op_ifuncf, op_jfuncf;
  int ntn = 0;
  ptrdiff_t o, tnc[8], c, found_c = -1, found_tn = -1, found_bs = -1;
  int nfound = 0;
  if (ljp_irl.tried) return ljp_irl.ok;
  ljp_irl.tried = 1;
  if (!ljp_tml.ok) return fail("trace layout unknown");
  if (!(g = ljp_vm_global(S))) return fail("global state unknown");
  if (ljp_tml.g_trace <= 0 || ljp_tml.g_trace > PWIN)
    return fail("trace array not after the global state");
  P.win = (size_t)ljp_tml.g_trace;
  P.g = g;
  P.n = 0;
  P.lost = 0;
  P.per = P.win < 65536 ? (int)(65536 / P.win) : 1;
  if (!(P.w = calloc(PEV, sizeof(*P.w)))) return fail("out of memory");
  /* ljprof's own state: no collection while the probe runs (its traces
  ** are read after it; the state is closed after the probes) */
  lua_gc(S, LUA_GCSTOP, 0);
  if (!ljp_vmnames_learn(S)) {
    pw_free();
    return fail("no JIT, jit.attach or jit.vmdef");
  }
  ljp_irl.op_loop = ljp_vmnames_ir("LOOP");
  ljp_irl.op_call = ljp_vmnames_bc("CALL");
  op_funcf = ljp_vmnames_bc("FUNCF");
  op_ifuncf = ljp_vmnames_bc("IFUNCF");
  op_jfuncf = ljp_vmnames_bc("JFUNCF");
  ljp_irl.op_callt = ljp_vmnames_bc("CALLT");
  ljp_irl.op_callmt = ljp_vmnames_bc("CALLMT");
  if (luaL_loadbuffer(S, probe_chunk, sizeof(probe_chunk) - 1,
                      "=ljprof-record-probe") != 0) {
    pw_free();
    return fail("probe chunk");
  }
  lua_pushcfunction(S, probe_event);
  if (lua_pcall(S, 1, 1, 0) != 0 || !lua_istable(S, top + 1)) {
    lua_settop(S, top);
    pw_free();
    return fail("no JIT, jit.attach or jit.vmdef");
  }
  for (i = 1; i < 64 && nt < PTR; i++) {
    lua_rawgeti(S, top + 1, i);
    if (lua_isnumber(S, -1)) {
      uintptr_t T = ljp_vm_trace(g, i);
      if (T && !ljp_peek(tw[nt], T, TWIN)) {
        trs[nt] = i;
        nins[nt] = (int32_t)lua_tointeger(S, -1);
        nt++;
      }
    }
    lua_pop(S, 1);
  }
  lua_settop(S, top);
  if (ljp_irl.op_loop < 0 || ljp_irl.op_call < 0 || op_funcf < 0 ||
      op_ifuncf < 0 || op_jfuncf < 0 ||
      nt < 3 || P.n < 50) {
    pw_free();
    return fail("too few probe traces or events");
  }
  /* GCtrace: the IR count (traceinfo's nins + REF_BIAS + 1), the number. */
  {
    int nf = 0;
    ptrdiff_t f = -1;
    for (o = 0; o + 4 <= TWIN; o += 4) {
      uint32_t v;
      for (i = 0; i < nt; i++) {
        memcpy(&v, tw[i] + o, 4);
        if (v != (uint32_t)nins[i] + REF_BIAS + 1) break;
      }
      if (i == nt) { nf++; f = o; }
    }
    if (nf != 1) { pw_free(); return fail("no single IR count"); }
    ljp_irl.t_nins = f;
  }
  for (o = 0; o + 2 <= TWIN && ntn < 8; o += 2) {
    uint16_t v;
    for (i = 0; i < nt; i++) {
      memcpy(&v, tw[i] + o, 2);
      if (v != (uint32_t)trs[i]) break;
    }
    if (i == nt) tnc[ntn++] = o;
  }
  /* J->cur: every event's number and a plausible IR count, never above
  ** the saved trace's (for the events after its last restart). */
  for (c = 0; c + TWIN <= (ptrdiff_t)P.win; c += 8) {
    for (k = 0; k < ntn; k++) {
      for (i = 0; i < P.n; i++) {
        const unsigned char *w = P.w[i] + c;
        uint16_t tn;
        uint32_t ni;
        memcpy(&tn, w + tnc[k], 2);
        memcpy(&ni, w + ljp_irl.t_nins, 4);
        if (tn != (uint32_t)P.ev[i].tr || ni < REF_FIRST ||
            ni >= REF_BIAS + 0x10000u)
          break;
      }
      if (i < P.n) continue;
      /* the final recording of each saved trace stays within its IR;
      ** the last event kept of a number is its final recording's only when
      ** an event of another number follows it, or every event was kept
      ** (else it can be one of the aborted recordings before, longer: a
      ** recording restarted hundreds of times fills the events kept) */
      {
        int j, bad = 0;
        for (j = 0; j < nt && !bad; j++) {
          uint32_t cnt = (uint32_t)nins[j] + REF_BIAS + 1;
          for (i = P.n - 1; i >= 0; i--) {
            uint32_t ni;
            if (P.ev[i].tr != trs[j]) continue;
            if (i == P.n - 1 && P.lost) break;
            memcpy(&ni, P.w[i] + c + ljp_irl.t_nins, 4);
            if (ni > cnt) bad = 1;
            break;   /* its last event */
          }
        }
        if (bad) continue;
      }
      nfound++;
      found_c = c;
      found_tn = tnc[k];
    }
  }
  if (nfound != 1) {
    pw_free();
    return fail(nfound ? "J->cur found more than once" : "J->cur not found");
  }
  /* J->baseslot: 2 at depth 0 of a root trace; a fixed-argument call's
  ** callee at the caller's + A + 2. */
  nfound = 0;
  for (o = found_c + TWIN; o + 4 <= (ptrdiff_t)P.win; o += 4) {
    int calls = 0, roots = 0;
    for (i = 0; i < P.n; i++) {
      const pev *e = &P.ev[i];
      uint32_t v, pv;
      memcpy(&v, P.w[i] + o, 4);
      if (v < 2 || v > 257) break;
      if (e->depth == 0) {
        uintptr_t T = ljp_vm_trace(g, e->tr);
        if (T && !ld16(T + (uintptr_t)ljp_tml.t_root)) {
          if (v != 2) break;
          roots++;
        }
      }
      if (i > 0 && e->depth == P.ev[i - 1].depth + 1 && e->pos == 0 &&
          P.ev[i - 1].tr == e->tr && P.ev[i - 1].pos >= 0) {
        uintptr_t bc = ljp_fn_bc(P.ev[i - 1].fn), cbc = ljp_fn_bc(e->fn);
        uint32_t ins, fins;
        if (!bc || !cbc) continue;
        ins = ld32(bc + 4u * (uint32_t)P.ev[i - 1].pos);
        fins = ld32(cbc);
        /* a fixed-argument callee (its header, or a trace's over it) */
        if ((int)(ins & 0xff) != ljp_irl.op_call ||
            ((int)(fins & 0xff) != op_funcf &&
             (int)(fins & 0xff) != op_ifuncf &&
             (int)(fins & 0xff) != op_jfuncf))
          continue;
        memcpy(&pv, P.w[i - 1] + o, 4);
        if (v != pv + ((ins >> 8) & 0xff) + 2) break;
        calls++;
      }
    }
      if (i == P.n && calls >= 3 && roots >= 10) {
      nfound++;
      found_bs = o;
    }
  }
  ljp_irl.events = (uint32_t)P.n;
  pw_free();
  if (nfound != 1)
    return fail(nfound ? "J->baseslot found more than once"
                       : "J->baseslot not found");
  ljp_irl.g_jcur = found_c;
  ljp_irl.t_traceno = found_tn;
  ljp_irl.g_baseslot = found_bs;
  __atomic_store_n(&ljp_irl.ok, 1, __ATOMIC_RELEASE);
  return 1;
}
