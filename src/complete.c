/*
** Completing samples at the safe point: each pending ring record gets the
** stack key and function of where its time was spent (normal context, on
** the profiled thread, inside the hook's busy fence; no Lua calls).
*/
#include <string.h>

#include "ljp.h"
#include "luastack.h"

/* -- Completing samples ------------------------------------------------------ */

static uint32_t intern(ljp_ctx *ctx, const ljp_buf *b)
{
  return ljp_store_intern(&ctx->store, b->b, b->n);
}

/* Where the time of record r was spent, beyond what the stack at the safe
** point shows:
**   'C' with a known C function: that function, as a frame on top;
**   'N' in a trace whose start is known: the trace's start function and
**       line. The stack is cut at the innermost activation of that
**       function, which then shows the trace's start line. When the
**       function is no longer on the stack (the trace, or a side trace
**       linked to it, returned from it before the exit), the sample takes
**       the key of the trace's last sample that did find it; failing
**       that, the function is put on top of the stack. A side trace that
**       left its start function keeps the safe-point stack. */
static void leaf_for(ljp_ctx *ctx, lua_State *L, const ljp_record *r,
                     ljp_leaf *lf)
{
  const ljp_trinfo *ti;
  memset(lf, 0, sizeof(*lf));
  if (r->vmstate == 'C' && r->cfunc) {
    /* A C function with no name yet: package.loaded is looked through
    ** once for it (a module loaded after the start). */
    ljp_name_cfunc(&ctx->cnames, L, (lua_CFunction)r->cfunc, &ctx->scratch);
    lf->nsyn = 1;
    lf->syn[0].kind = LJP_LEAF_C;
    lf->syn[0].cfunc = (lua_CFunction)r->cfunc;
  } else if (r->vmstate == 'N' && (ti = ljp_trace_info(ctx, r->trace))) {
    lua_Debug ar;
    int level;
    lf->line = ti->line;
    /* A trace runs in the top few frames: look at most 32 levels deep
    ** (each lua_getstack walks from the top). */
    for (level = 0; level < 32 && lua_getstack(L, level, &ar); level++) {
      lua_getinfo(L, "S", &ar);
      if (ar.linedefined == ti->linedefined && ar.source &&
          !strcmp(ar.source, ti->source)) {
        lf->skip = level;
        return;
      }
    }
    /* A side trace that left the function it started in has usually run
    ** on into its caller and beyond (returns, the next calls): where it
    ** stopped, the safe point, is the better guess. A root trace's
    ** function is where its loop or body is. */
    if (ti->side) {
      lf->line = 0;
      return;
    }
    lf->nsyn = 1;
    lf->syn[0].kind = LJP_LEAF_LUA;
    lf->syn[0].source = ti->source;
    lf->syn[0].name = ti->name;
    lf->syn[0].linedefined = ti->linedefined;
    lf->syn[0].line = lf->line;
    lf->line = 0;
  }
}

/* -- Frames captured at the signal ------------------------------------------ */

#define LIVE_MAX 512   /* live frames compared with a capture */
#define LEARN_TOP 8    /* live frames whose names are remembered */

static int same_frame(const ljp_lframe *a, const ljp_lframe *b)
{
  return a->fn == b->fn && a->slot == b->slot;
}

/* Remember the names of the innermost live Lua frames, for samples that
** will capture them after they have returned. */
static void learn_live(ljp_ctx *ctx, lua_State *L, const ljp_lframe *live,
                       int m)
{
  int j;
  for (j = 0; j < m && j < LEARN_TOP; j++) {
    lua_Debug ar;
    if (live[j].kind != 0 || ljp_fnames_has(&ctx->fnames, live[j].fn))
      continue;
    if (!lua_getstack(L, j, &ar) || !lua_getinfo(L, "Snf", &ar)) break;
    if ((uintptr_t)lua_topointer(L, -1) == live[j].fn)
      ljp_fnames_learn(&ctx->fnames, L, -1, ar.source, ar.name,
                       ar.linedefined);
    lua_pop(L, 1);
  }
}

/* The leaf of a record whose Lua frames were captured at the signal: the
** frames still live at this safe point (same function at the same slot of
** the same stack, from the outermost captured one up) are shown as real
** levels, the captured frames above them as synthetic frames named from
** what live frames showed before. A captured frame that cannot be named
** ends the stack there (an honest shorter stack, never another path).
** Returns -1 when the safe point cannot compare (use the old way). */
typedef struct livestack {   /* the live frames of one safe point */
  int walked, m, bottom;
  uintptr_t stack;
  ljp_lframe f[LIVE_MAX];
} livestack;

static int leaf_exact(ljp_ctx *ctx, lua_State *L, const ljp_record *r,
                      livestack *ls, ljp_leaf *lf)
{
  const ljp_lframe *live = ls->f;
  int m, lbottom, n = r->nlua, i, j = -1, top, k;
  uintptr_t lstack;
  const ljp_trinfo *ti = r->vmstate == 'N' ? ljp_trace_info(ctx, r->trace)
                                           : NULL;
  memset(lf, 0, sizeof(*lf));
  if (!ls->walked) {  /* once per safe point, for every record */
    ls->walked = 1;
    ls->m = ljp_luastack_live(L, ls->f, LIVE_MAX, &ls->bottom, &ls->stack);
    if (ls->m >= 0) learn_live(ctx, L, ls->f, ls->m);
  }
  m = ls->m;
  lbottom = ls->bottom;
  lstack = ls->stack;
  if (m < 0) return -1;
  /* The outermost captured frame among the live ones. */
  if (lstack == r->lstack) {
    for (j = m - 1; j >= 0; j--)
      if (same_frame(&r->lua[n - 1], &live[j])) break;
    if (j >= 0 && (r->lflags & LJP_LUA_BOTTOM) && lbottom && j != m - 1)
      j = -1;                       /* both whole stacks: bottoms align */
  }
  i = n - 1;
  if (j >= 0) {                     /* walk up while the frames agree */
    while (i > 0 && j > 0 && same_frame(&r->lua[i - 1], &live[j - 1])) {
      i--;
      j--;
    }
    lf->skip = j;                   /* live levels above are hidden */
    top = i;                        /* captured frames above: synthetic */
  } else {
    if (!lbottom) return -1;        /* cannot hide what was not counted */
    lf->skip = m;                   /* nothing in common */
    top = n;
  }
  /* Synthetic frames, outermost first into syn[top-1 .. 0]; stop at the
  ** first one that cannot be named (drop it and everything above). */
  for (k = top - 1; k >= 0; k--) {
    const ljp_lframe *f = &r->lua[k];
    ljp_synframe *s = &lf->syn[k];
    if (f->kind != 0) {
      if (!f->cf) break;
      s->kind = LJP_LEAF_C;
      s->cfunc = (lua_CFunction)f->cf;
      ljp_name_cfunc(&ctx->cnames, L, s->cfunc, &ctx->scratch);
    } else {
      const ljp_fname *e = ljp_fnames_get(&ctx->fnames, L, f->fn);
      if (!e) break;
      s->kind = LJP_LEAF_LUA;
      s->source = e->source;
      s->name = e->name;
      s->linedefined = e->linedefined;
      /* Its line from its PC at the signal; in a trace, the innermost
      ** frame runs the trace's own code: the trace's start line. */
      s->line = f->pc ? ljp_luastack_line(f->fn, f->pc) : -1;
      if (s->line <= 0)
        s->line = k == 0 && ti && ti->fn == f->fn ? ti->line : 0;
    }
  }
  if (k >= 0) {                     /* syn[k] unnamed: keep those below it */
    int keep = top - 1 - k;
    memmove(&lf->syn[0], &lf->syn[k + 1], (size_t)keep * sizeof(lf->syn[0]));
    lf->nsyn = keep;
  } else {
    lf->nsyn = top;
  }
  if (lf->nsyn == 0 && top == 0 && ti && ti->fn == r->lua[0].fn) {
    lf->line = ti->line;            /* the trace's start line */
  } else if (top < n && r->lua[top].kind == 0 && r->lua[top].pc) {
    /* The innermost live frame shown: where it was at the signal (it
    ** may have moved on since its callee returned). */
    int line = ljp_luastack_line(r->lua[top].fn, r->lua[top].pc);
    if (line > 0) lf->line = line;
  }
  return 0;
}

/* The leaf function of a dump with leaf lf: "chunk:firstline" for Lua,
** the name for C. */
static uint32_t leaf_func(ljp_ctx *ctx, lua_State *L, const ljp_leaf *lf)
{
  ljp_buf *b = &ctx->scratch;
  lua_Debug ar;
  b->n = 0;
  if (lf->nsyn && lf->syn[0].kind == LJP_LEAF_C) {
    ljp_put_cfunc(b, lf->syn[0].cfunc);
  } else if (lf->nsyn) {
    ljp_put_location(b, lf->syn[0].source, lf->syn[0].linedefined,
                     lf->syn[0].linedefined);
  } else if (lua_getstack(L, lf->skip, &ar)) {
    lua_getinfo(L, "Sf", &ar);  /* pushes the function */
    if (ar.what[0] != 'C')
      ljp_put_location(b, ar.source, ar.linedefined,
                       ar.linedefined > 0 ? ar.linedefined : 0);
    else
      ljp_put_cfunc(b, lua_tocfunction(L, -1));
    lua_pop(L, 1);
  }
  return intern(ctx, b);
}

static uint32_t trace_loc(ljp_ctx *ctx, int32_t trace)
{
  const ljp_trinfo *ti = ljp_trace_info(ctx, trace);
  if (!ti) return 0;
  ctx->scratch.n = 0;
  ljp_put_location(&ctx->scratch, ti->source, ti->linedefined, ti->line);
  return intern(ctx, &ctx->scratch);
}

/* Records completed by one safe point usually share one leaf; a few
** distinct leaves are dumped once each. */
#define NVARIANT 4
typedef struct variant {
  uintptr_t cfunc;
  int32_t trace;
  uint32_t stack, func, tloc;
  int nn;                          /* native frames on top, by name */
  uint32_t nat[LJP_NATIVE_MAX];
  int nlua;                        /* Lua frames captured at the signal */
  uintptr_t lstack;
  ljp_lframe lua[LJP_LUA_MAX];
} variant;

static const variant *variant_for(ljp_ctx *ctx, lua_State *L,
                                  const ljp_record *r, livestack *ls,
                                  variant *v, int *nv)
{
  uintptr_t cf = r->vmstate == 'C' ? r->cfunc : 0;
  int32_t tr = r->vmstate == 'N' ? r->trace : 0;
  ljp_trinfo *ti = tr ? ljp_trace_info(ctx, tr) : NULL;
  uint32_t nat[LJP_NATIVE_MAX];
  int nn = ljp_native_names(ctx, r, nat);
  ljp_leaf lf;
  variant *e;
  int i, exact = -1;
  for (i = 0; i < *nv; i++)
    if (v[i].cfunc == cf && v[i].trace == tr && v[i].nn == nn &&
        !memcmp(v[i].nat, nat, (size_t)nn * sizeof(uint32_t)) &&
        v[i].nlua == r->nlua && v[i].lstack == r->lstack &&
        !memcmp(v[i].lua, r->lua, (size_t)r->nlua * sizeof(r->lua[0])))
      return &v[i];
  e = &v[*nv < NVARIANT ? (*nv)++ : NVARIANT - 1];
  e->cfunc = cf;
  e->trace = tr;
  e->stack = 0;
  e->nn = nn;
  memcpy(e->nat, nat, (size_t)nn * sizeof(uint32_t));
  e->tloc = tr ? trace_loc(ctx, tr) : 0;
  e->nlua = r->nlua;
  e->lstack = r->lstack;
  memcpy(e->lua, r->lua, (size_t)r->nlua * sizeof(r->lua[0]));
  if (!r->nlua || (exact = leaf_exact(ctx, L, r, ls, &lf)) != 0)
    leaf_for(ctx, L, r, &lf);
  for (i = 0; i < nn; i++) lf.native[i] = ljp_strtab_get(&ctx->store.strs, nat[i])->s;
  lf.nnative = nn;
  if (exact != 0 && ti && lf.nsyn && lf.syn[0].kind == LJP_LEAF_LUA &&
      ti->have_key && !nn) {
    e->stack = ti->stack;  /* start function not on the stack */
    e->func = ti->func;
    return e;
  }
  if (ljp_dumpstack_leaf(L, NULL, &ctx->dump, ctx->stack_fmt,
                         ctx->opt.stack_depth, &lf) == 0) {
    const ljp_str *last = ljp_strtab_get(&ctx->store.strs, ctx->last_stack);
    if (ctx->dump.n == last->len &&
        memcmp(ctx->dump.b, last->s, last->len) == 0) {
      e->stack = ctx->last_stack;  /* same stack as last time */
    } else {
      e->stack = intern(ctx, &ctx->dump);
      ctx->last_stack = e->stack;
    }
  }
  e->func = leaf_func(ctx, L, &lf);
  if (exact != 0 && ti && !lf.nsyn && !nn) {
    ti->have_key = 1;
    ti->stack = e->stack;
    ti->func = e->func;
  }
  return e;
}

/* Complete all pending records with L's current stack. */
void ljp_complete(ljp_ctx *ctx, lua_State *L)
{
  uint64_t from, to, pos, ticks = 0;
  variant v[NVARIANT];
  livestack ls;
  int nv = 0, first_vm = 0;
  ljp_ring_claim(&ctx->ring, &from, &to);
  if (from == to) return;
  ls.walked = 0;
  if (ctx->exact_on && ljp_luastack_checking()) {
    int ok = ljp_luastack_check(L);
    if (ok >= 0) {
      ctx->stack_checks++;
      if (!ok) ctx->stack_mismatches++;
    }
  }
  if (ctx->native_on) ljp_native_refresh();  /* libraries (un)loaded? */
  for (pos = from; pos < to; pos++) {
    ljp_record *r = ljp_ring_at(&ctx->ring, pos);
    uint32_t w = atomic_load_explicit(&r->weight, memory_order_relaxed);
    if (r->vmstate == 'U')
      r->vmstate = (uint8_t)ljp_codemap_resolve(&ctx->map, r->pc, &r->trace);
    if (r->vmstate == 'C' && !r->cfunc && (r->nflags & LJP_NATIVE_FROM_INTERP))
      r->cfunc = ljp_native_start(ctx, r, r->nnative - 1); /* the lua_CFunction */
    r->stack = r->func = r->tloc = 0;
    if (!ctx->opt.cb) {  /* aggregating: key by the stack dump */
      const variant *e = variant_for(ctx, L, r, &ls, v, &nv);
      r->stack = e->stack;
      r->func = e->func;
      r->tloc = e->tloc;
    }
    if (!first_vm) first_vm = r->vmstate;
    ctx->vm[ljp_vm_index(r->vmstate)] += w;
    ticks += w;
  }
  ctx->completed += ticks;
  if (ctx->opt.cb) {
    if (!ctx->cb_ticks) ctx->cb_vmstate = first_vm;
    ctx->cb_ticks += ticks;
  }
}


/* -- After an exit signal, without the Lua stack ------------------------------ */

/* The pending records, completed by the exit helper once the profiled
** thread has handed the context over (exit_signals.c): no live stack can
** be read, so each keeps only what is known without one (an honest
** shorter stack): native frames, then in a trace its start function (or
** the key of the trace's last sample that found it on the stack), in a C
** function that function. The rest are counted dropped. E is a thread
** with no frames, of the helper's state (names of C functions are looked
** up there: the C functions of the standard library are the same). */
void ljp_complete_offline(ljp_ctx *ctx, lua_State *E)
{
  uint64_t from, to, pos;
  ljp_ring_claim(&ctx->ring, &from, &to);
  for (pos = from; pos < to; pos++) {
    ljp_record *r = ljp_ring_at(&ctx->ring, pos);
    uint32_t w = atomic_load_explicit(&r->weight, memory_order_relaxed);
    uint32_t nat[LJP_NATIVE_MAX];
    const ljp_trinfo *ti;
    ljp_leaf lf;
    int nn, i;
    if (r->vmstate == 'U')
      r->vmstate = (uint8_t)ljp_codemap_resolve(&ctx->map, r->pc, &r->trace);
    if (r->vmstate == 'C' && !r->cfunc && (r->nflags & LJP_NATIVE_FROM_INTERP))
      r->cfunc = ljp_native_start(ctx, r, r->nnative - 1);
    ti = r->vmstate == 'N' ? ljp_trace_info(ctx, r->trace) : NULL;
    r->stack = r->func = r->tloc = 0;
    memset(&lf, 0, sizeof(lf));
    nn = ctx->opt.cb ? 0 : ljp_native_names(ctx, r, nat);
    if (r->vmstate == 'C' && r->cfunc) {
      ljp_name_cfunc(&ctx->cnames, E, (lua_CFunction)r->cfunc, &ctx->scratch);
      lf.nsyn = 1;
      lf.syn[0].kind = LJP_LEAF_C;
      lf.syn[0].cfunc = (lua_CFunction)r->cfunc;
    } else if (ti && ti->have_key && !nn) {
      r->stack = ti->stack;
      r->func = ti->func;
    } else if (ti && ti->source) {
      lf.nsyn = 1;
      lf.syn[0].kind = LJP_LEAF_LUA;
      lf.syn[0].source = ti->source;
      lf.syn[0].name = ti->name;
      lf.syn[0].linedefined = ti->linedefined;
      lf.syn[0].line = ti->line;
    } else if (!nn) {
      atomic_fetch_add(&ctx->n_dropped, w);   /* nothing known */
      atomic_store_explicit(&r->weight, 0, memory_order_relaxed);
      continue;
    }
    if (!ctx->opt.cb && !r->stack) {
      for (i = 0; i < nn; i++)
        lf.native[i] = ljp_strtab_get(&ctx->store.strs, nat[i])->s;
      lf.nnative = nn;
      if (ljp_dumpstack_leaf(E, NULL, &ctx->dump, ctx->stack_fmt,
                             ctx->opt.stack_depth, &lf) == 0)
        r->stack = intern(ctx, &ctx->dump);
      r->func = leaf_func(ctx, E, &lf);
    }
    r->tloc = r->vmstate == 'N' ? trace_loc(ctx, r->trace) : 0;
    ctx->vm[ljp_vm_index(r->vmstate)] += w;
    ctx->completed += w;
  }
}
