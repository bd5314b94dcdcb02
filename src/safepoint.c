/*
** The safe point: a count hook armed by the signal handler fires at the
** next interpreted bytecode, where the Lua stack is consistent. There we
** restore the program's own hook, read the stack once, and complete every
** pending ring record with it.
**
** ljp_arm runs in signal context (lua_gethook, lua_gethookmask and
** lua_sethook only; LuaJIT's own luajit.c sets a hook from its SIGINT
** handler). It decides from the actual hook state every time and never
** trusts a remembered "armed" flag: LuaJIT
** restores hook masks after __gc finalizers, hooks do not run inside hooks
** (LuaJIT issue 512), and the program may set its own hook at any time.
** ctx->busy keeps the handler away while normal-context code changes hooks.
**
** The program's hook keeps working: it is saved when we arm, our hook is
** armed with the program's mask plus LUA_MASKCOUNT, any program event that
** reaches our hook is forwarded, and the hook is restored before we return.
** (A count hook's countdown restarts after each sample.)
*/
#include <string.h>

#include "ljp.h"

/* Is our count hook armed (a sample waits for the next bytecode)? While
** counting calls our hook is always installed, and a program count hook
** may be forwarded through it: armed is the count bit with count 1. */
int ljp_armed(ljp_ctx *ctx)
{
  return lua_gethook(ctx->L) == ljp_hook &&
         (lua_gethookmask(ctx->L) & LUA_MASKCOUNT) &&
         (!ctx->counting || lua_gethookcount(ctx->L) == 1);
}

/* Signal context (also called from normal context with busy set). Decides
** from the hook state as it is now: our hook without the count bit (a
** mask written back by LuaJIT over ours, or by the program) is re-armed. */
void ljp_arm(ljp_ctx *ctx)
{
  lua_State *L = ctx->L;
  if (ljp_armed(ctx)) return;
  if (lua_gethook(L) != ljp_hook) {
    ctx->user_hook = lua_gethook(L);
    ctx->user_mask = ctx->user_hook ? lua_gethookmask(L) : 0;
    ctx->user_count = lua_gethookcount(L);
  }
  lua_sethook(L, ljp_hook, ctx->user_mask | LUA_MASKCOUNT |
              (ctx->counting ? LUA_MASKCALL : 0), 1);
}

void ljp_disarm(ljp_ctx *ctx)
{
  ctx->busy = 1;
  atomic_signal_fence(memory_order_seq_cst);
  if (lua_gethook(ctx->L) == ljp_hook)
    ljp_rest(ctx);  /* the program's hook, or counting without the sample */
  atomic_signal_fence(memory_order_seq_cst);
  ctx->busy = 0;
}

/* Normal context: make sure pending records will reach a safe point. A
** signal that arrives after busy is cleared arms by itself. */
void ljp_settle(ljp_ctx *ctx)
{
  while (ctx->state == LJP_RUNNING && !ctx->recording &&
         ljp_ring_pending(&ctx->ring) && !ljp_armed(ctx)) {
    ctx->busy = 1;
    atomic_signal_fence(memory_order_seq_cst);
    ljp_arm(ctx);
    atomic_signal_fence(memory_order_seq_cst);
    ctx->busy = 0;
  }
}

/* -- Completing samples ------------------------------------------------------ */

static uint32_t intern(ljp_ctx *ctx, const ljp_buf *b)
{
  uint32_t id = ljp_strtab_intern(&ctx->strs, b->b ? b->b : "", b->n);
  return id == UINT32_MAX ? 0 : id;
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
    lf->kind = LJP_LEAF_C;
    lf->cfunc = (lua_CFunction)r->cfunc;
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
    lf->kind = LJP_LEAF_LUA;
    lf->source = ti->source;
    lf->name = ti->name;
    lf->linedefined = ti->linedefined;
  }
}

/* The leaf function of a dump with leaf lf: "chunk:firstline" for Lua,
** the name for C. */
static uint32_t leaf_func(ljp_ctx *ctx, lua_State *L, const ljp_leaf *lf)
{
  ljp_buf *b = &ctx->scratch;
  lua_Debug ar;
  b->n = 0;
  if (lf->kind == LJP_LEAF_C) {
    ljp_put_cfunc(b, lf->cfunc);
  } else if (lf->kind == LJP_LEAF_LUA) {
    ljp_put_location(b, lf->source, lf->linedefined, lf->linedefined);
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
} variant;

static const variant *variant_for(ljp_ctx *ctx, lua_State *L,
                                  const ljp_record *r, variant *v, int *nv)
{
  uintptr_t cf = r->vmstate == 'C' ? r->cfunc : 0;
  int32_t tr = r->vmstate == 'N' ? r->trace : 0;
  ljp_trinfo *ti = tr ? ljp_trace_info(ctx, tr) : NULL;
  uint32_t nat[LJP_NATIVE_MAX];
  int nn = ljp_native_names(ctx, r, nat);
  ljp_leaf lf;
  variant *e;
  int i;
  for (i = 0; i < *nv; i++)
    if (v[i].cfunc == cf && v[i].trace == tr && v[i].nn == nn &&
        !memcmp(v[i].nat, nat, (size_t)nn * sizeof(uint32_t)))
      return &v[i];
  e = &v[*nv < NVARIANT ? (*nv)++ : NVARIANT - 1];
  e->cfunc = cf;
  e->trace = tr;
  e->stack = 0;
  e->nn = nn;
  memcpy(e->nat, nat, (size_t)nn * sizeof(uint32_t));
  e->tloc = tr ? trace_loc(ctx, tr) : 0;
  leaf_for(ctx, L, r, &lf);
  for (i = 0; i < nn; i++) lf.native[i] = ljp_strtab_get(&ctx->strs, nat[i])->s;
  lf.nnative = nn;
  if (ti && lf.kind == LJP_LEAF_LUA && ti->have_key && !nn) {
    e->stack = ti->stack;  /* start function not on the stack */
    e->func = ti->func;
    return e;
  }
  if (ljp_dumpstack_leaf(L, NULL, &ctx->dump, ctx->stack_fmt,
                         ctx->opt.stack_depth, &lf) == 0) {
    const ljp_str *last = ljp_strtab_get(&ctx->strs, ctx->last_stack);
    if (ctx->dump.n == last->len &&
        memcmp(ctx->dump.b, last->s, last->len) == 0) {
      e->stack = ctx->last_stack;  /* same stack as last time */
    } else {
      e->stack = intern(ctx, &ctx->dump);
      ctx->last_stack = e->stack;
    }
  }
  e->func = leaf_func(ctx, L, &lf);
  if (ti && lf.kind == LJP_LEAF_NONE && !nn) {
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
  int nv = 0, first_vm = 0;
  ljp_ring_claim(&ctx->ring, &from, &to);
  if (from == to) return;
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
      const variant *e = variant_for(ctx, L, r, v, &nv);
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

static void deliver(ljp_ctx *ctx, lua_State *L)
{
  int samples, vm;
  if (!ctx->opt.cb || !ctx->cb_ticks || ctx->state != LJP_RUNNING) return;
  samples = ctx->cb_ticks > INT32_MAX ? INT32_MAX : (int)ctx->cb_ticks;
  vm = ctx->cb_vmstate;
  ctx->cb_ticks = 0;
  ctx->opt.cb(ctx->opt.cb_data, L, samples, vm);
}

void ljp_hook(lua_State *L, lua_Debug *ar)
{
  ljp_ctx *ctx = ljp_slot_find(lua_topointer(L, LUA_REGISTRYINDEX));
  uint64_t t0;
  int ev, user_count_ev = 0;
  if (!ctx) {  /* cannot happen: stop restores the hook before freeing */
    lua_sethook(L, NULL, 0, 0);
    return;
  }
  /* We were called by LuaJIT's callhook: remember where (ljp_arm_safe). */
  atomic_store_explicit(&ctx->callhook_ret,
                        (uintptr_t)__builtin_return_address(0),
                        memory_order_relaxed);
  ev = ar->event == LUA_HOOKTAILRET ? LUA_HOOKRET : ar->event;
  /* Counting calls (calls.c): our hook stays installed between samples.
  ** Count the call; unless a sample or an exit signal waits, hand the
  ** event to the program's hook (a count event too: it is the program's
  ** when we are not armed) and return. A pending sample completes here
  ** even if its arming was lost. */
  if (ctx->counting) {
    int armed = ljp_armed(ctx);
    if (ev == LUA_HOOKCALL && ljp_calls_count(ctx, L, ar)) return;
    if (!armed && !ljp_ring_pending(&ctx->ring) && !ctx->exit_signal) {
      if (ctx->user_hook && (ctx->user_mask & (1 << ev)))
        ctx->user_hook(L, ar);
      return;
    }
    user_count_ev = !armed && ev == LUA_HOOKCOUNT;
  }
  t0 = ljp_now_ns();
  ctx->busy = 1;
  atomic_signal_fence(memory_order_seq_cst);
  ljp_rest(ctx);  /* the program's hook (counting: ours, call mask only) */
  atomic_signal_fence(memory_order_seq_cst);
  ctx->in_safepoint = 1;
  ctx->safepoints++;
  if (!ljp_vml.jstate_ok && !ctx->recording)
    ljp_vm_learn_jstate(ctx->vm_g, LJP_JS_IDLE);
  ljp_complete(ctx, L);
  ctx->busy = 0;
  ctx->complete_ns += ljp_now_ns() - t0;
  if (ljp_ring_completed(&ctx->ring) >= ctx->ring.cap / 2) {
    ljp_aggregate(ctx);
    ljp_traces_check(ctx, L);
  }
  deliver(ctx, L);
  ctx->in_safepoint = 0;
  ctx->hook_ns += ljp_now_ns() - t0;
  if (ctx->stop_requested) {  /* the callback called stop */
    ljp_stop_ctx(ctx, L);
  } else {
    ljp_settle(ctx);
  }
  if (ctx->exit_signal) ljp_exit_signal_run(ctx, L); /* may not return */
  /* A program event that arrived while we were armed. A signal may have
  ** armed us again since we restored the program's hook (busy is clear
  ** from the aggregation on): then the program's hook is the one that
  ** ljp_arm saved, and the event must still reach it. */
  if (ev != LUA_HOOKCOUNT || user_count_ev) {
    lua_Hook h;
    int mask;
    ctx->busy = 1;
    atomic_signal_fence(memory_order_seq_cst);
    h = lua_gethook(L);
    mask = lua_gethookmask(L);
    if (h == ljp_hook) {
      h = ctx->user_hook;
      mask = ctx->user_mask;
    }
    atomic_signal_fence(memory_order_seq_cst);
    ctx->busy = 0;
    if (h && (mask & (1 << ev))) h(L, ar);
  }
}
