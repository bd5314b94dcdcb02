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

static int armed(ljp_ctx *ctx)
{
  return lua_gethook(ctx->L) == ljp_hook &&
         (lua_gethookmask(ctx->L) & LUA_MASKCOUNT);
}

/* Signal context (also called from normal context with busy set). Decides
** from the hook state as it is now: our hook without the count bit (a
** mask written back by LuaJIT over ours, or by the program) is re-armed. */
void ljp_arm(ljp_ctx *ctx)
{
  lua_State *L = ctx->L;
  if (armed(ctx)) return;
  if (lua_gethook(L) != ljp_hook) {
    ctx->user_hook = lua_gethook(L);
    ctx->user_mask = ctx->user_hook ? lua_gethookmask(L) : 0;
    ctx->user_count = lua_gethookcount(L);
  }
  lua_sethook(L, ljp_hook, ctx->user_mask | LUA_MASKCOUNT, 1);
}

void ljp_disarm(ljp_ctx *ctx)
{
  ctx->busy = 1;
  atomic_signal_fence(memory_order_seq_cst);
  if (lua_gethook(ctx->L) == ljp_hook)
    lua_sethook(ctx->L, ctx->user_hook, ctx->user_mask, ctx->user_count);
  atomic_signal_fence(memory_order_seq_cst);
  ctx->busy = 0;
}

/* Normal context: make sure pending records will reach a safe point. A
** signal that arrives after busy is cleared arms by itself. */
void ljp_settle(ljp_ctx *ctx)
{
  while (ctx->state == LJP_RUNNING && !ctx->recording &&
         ljp_ring_pending(&ctx->ring) && !armed(ctx)) {
    ctx->busy = 1;
    atomic_signal_fence(memory_order_seq_cst);
    ljp_arm(ctx);
    atomic_signal_fence(memory_order_seq_cst);
    ctx->busy = 0;
  }
}

/* Complete all pending records with L's current stack. */
void ljp_complete(ljp_ctx *ctx, lua_State *L)
{
  uint64_t from, to, pos, ticks = 0;
  uint32_t stack = 0;
  int first_vm = 0;
  ljp_ring_claim(&ctx->ring, &from, &to);
  if (from == to) return;
  if (!ctx->opt.cb) {  /* aggregating: key by the stack dump */
    const ljp_str *last = ljp_strtab_get(&ctx->strs, ctx->last_stack);
    if (ljp_dumpstack(L, NULL, &ctx->dump, ctx->stack_fmt,
                      ctx->opt.stack_depth) == 0) {
      if (ctx->dump.n == last->len &&
          memcmp(ctx->dump.b, last->s, last->len) == 0) {
        stack = ctx->last_stack;  /* same stack as last time */
      } else {
        stack = ljp_strtab_intern(&ctx->strs, ctx->dump.b, ctx->dump.n);
        if (stack == UINT32_MAX) stack = 0;
        ctx->last_stack = stack;
      }
    }
  }
  for (pos = from; pos < to; pos++) {
    ljp_record *r = ljp_ring_at(&ctx->ring, pos);
    uint32_t w = atomic_load_explicit(&r->weight, memory_order_relaxed);
    if (r->vmstate == 'U')
      r->vmstate = (uint8_t)ljp_codemap_resolve(&ctx->map, r->pc, &r->trace);
    r->stack = stack;
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
  int ev;
  if (!ctx) {  /* cannot happen: stop restores the hook before freeing */
    lua_sethook(L, NULL, 0, 0);
    return;
  }
  /* We were called by LuaJIT's callhook: remember where (ljp_arm_safe). */
  atomic_store_explicit(&ctx->callhook_ret,
                        (uintptr_t)__builtin_return_address(0),
                        memory_order_relaxed);
  t0 = ljp_now_ns();
  ctx->busy = 1;
  atomic_signal_fence(memory_order_seq_cst);
  lua_sethook(L, ctx->user_hook, ctx->user_mask, ctx->user_count);
  atomic_signal_fence(memory_order_seq_cst);
  ctx->in_safepoint = 1;
  ctx->safepoints++;
  ljp_complete(ctx, L);
  ctx->busy = 0;
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
  /* A program event that arrived while we were armed. A signal may have
  ** armed us again since we restored the program's hook (busy is clear
  ** from the aggregation on): then the program's hook is the one that
  ** ljp_arm saved, and the event must still reach it. */
  ev = ar->event == LUA_HOOKTAILRET ? LUA_HOOKRET : ar->event;
  if (ev != LUA_HOOKCOUNT) {
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
