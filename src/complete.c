/*
** Completing samples at the safe point: each pending ring record gets the
** stack and function of where its time was spent (normal context, on the
** profiled thread, inside the hook's busy fence; no Lua calls), its
** ticks counted by VM state. This file is the record loop (the ring's
** consumer) and the state the handler left unresolved; the VM names the
** frames (vm.h's ljp_frames_*, luaframes.c for LuaJIT).
*/
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "ljp.h"
#include "objects.h"
#include "symbols.h"
#include "unwind.h"

/* The C function a record in C ran, when the handler left it unnamed: a
** fast function captured at the signal by its entry (a fast function's
** native code, where the walk starts, is its C fallback, not the entry
** Lua knows: ffi.meta.__call showed as luajit+0x533e0), else the start of
** the outermost native frame (the lua_CFunction itself). Not a frame
** captured as a Lua function's, and in LuaJIT's own object only a C
** function Lua can reach (a library's, learnt by name or as a fast
** function): the interpreter also calls LuaJIT's internal helpers (the
** trace recorder through lj_vm_cpcall, the dispatch hook, the GC), which
** run in state C when a VM event or an error before them returned to C
** (trace_state showed as luajit+0x588f0 above a Lua comparator). Those
** are no function of Lua's: none is named (0). */
static uintptr_t running_cfunc(ljp_ctx *ctx, const ljp_record *r)
{
  uintptr_t cf;
  ljp_objinfo ob;
  int ffid = 0;
  if (r->nlua && r->lua[0].kind > 1 && r->lua[0].cf) return r->lua[0].cf;
  if (r->nlua && r->lua[0].kind == 0) return 0;
  cf = ljp_native_start(ctx, r, r->nnative - 1);
  if (cf && ljp_objects_lookup(cf, &ob) &&
      (ob.kind == LJP_SPAN_VM || ob.kind == LJP_SPAN_INTERP)) {
    ctx->scratch.n = 0;
    if (!ljp_cfunc_learnt(&ctx->scratch, (lua_CFunction)cf, &ffid) && !ffid)
      return 0;
  }
  return cf;
}

/* What the handler left to the safe point: the VM state of a PC it
** could not place, the C function running when it could not name it
** (none when the handler found LuaJIT's own code running for a Lua
** function: LJP_NATIVE_HELPER). */
static void resolve_record(ljp_ctx *ctx, ljp_record *r)
{
  if (r->vmstate == 'U')
    r->vmstate = (uint8_t)ljp_codemap_resolve(&ctx->map, r->pc, &r->trace);
  if (r->vmstate == 'C' && !r->cfunc &&
      (r->nflags & (LJP_NATIVE_FROM_INTERP | LJP_NATIVE_HELPER)) ==
          LJP_NATIVE_FROM_INTERP)
    r->cfunc = running_cfunc(ctx, r);
}

/* Complete all pending records with L's current stack. */
void ljp_complete(ljp_ctx *ctx, lua_State *L)
{
  uint64_t from, to, pos, ticks = 0;
  ljp_frames_pass pass;
  int first_vm = 0;
  ljp_ring_claim(&ctx->ring, &from, &to);
  if (from == to) return;
  ljp_frames_begin(ctx, L, &pass);
  if (ctx->native_on) ljp_native_refresh();  /* libraries (un)loaded? */
  for (pos = from; pos < to; pos++) {
    ljp_record *r = ljp_ring_at(&ctx->ring, pos);
    uint32_t w = atomic_load_explicit(&r->weight, memory_order_relaxed);
    r->stack = r->func = r->tloc = 0;
    /* Taken whole by an export while it waited (ljp_complete_pending):
    ** counted there; nothing left to count (the store skips it). */
    if (!w) continue;
    resolve_record(ctx, r);
    if (!ctx->opt.cb)  /* aggregating: key by the stack */
      ljp_frames_record(ctx, L, r, &pass);
    ctx->vm[ljp_vm_index(r->vmstate)] += w;
    ctx->completed += w;
    /* A callback gets host ticks in a call of their own (safepoint.c):
    ** the live Lua stack at this safe point is not where they were. */
    if (ctx->opt.cb && (r->lflags & LJP_LUA_HOST)) {
      ctx->cb_host += w;
      continue;
    }
    if (!first_vm) first_vm = r->vmstate;
    ticks += w;
  }
  if (!ctx->opt.cb) ljp_frames_end(ctx, &pass);
  if (ctx->opt.cb && ticks) {
    if (!ctx->cb_ticks) ctx->cb_vmstate = first_vm;
    ctx->cb_ticks += ticks;
  }
}

/* The pending records, completed by the exit helper once the profiled
** thread has handed the context over (exit_signals.c): no live stack can
** be read, so each keeps only what is known without one (ljp_frames_offline).
** The rest are counted dropped. E is a thread with no frames, of the
** helper's state (names of C functions are looked up there: the C
** functions of the standard library are the same). */
void ljp_complete_offline(ljp_ctx *ctx, lua_State *E)
{
  uint64_t from, to, pos;
  ljp_ring_claim(&ctx->ring, &from, &to);
  for (pos = from; pos < to; pos++) {
    ljp_record *r = ljp_ring_at(&ctx->ring, pos);
    uint32_t w = atomic_load_explicit(&r->weight, memory_order_relaxed);
    if (!w) continue;       /* taken by an export (ljp_complete_pending) */
    resolve_record(ctx, r);
    if (!ljp_frames_offline(ctx, E, r)) {
      atomic_fetch_add(&ctx->n_dropped, w);   /* nothing known */
      atomic_store_explicit(&r->weight, 0, memory_order_relaxed);
      continue;
    }
    ctx->vm[ljp_vm_index(r->vmstate)] += w;
    ctx->completed += w;
  }
}

/* The export helper's view of the pending records (auto.c), while the
** context is lent and the profiled thread runs on outside every ljprof
** region, its sampling handler still pushing records and, with the ring
** full, adding ticks to pending ones. The helper is no consumer of the
** ring: it never claims, never moves done or tail, never writes a
** record. It reads the records published before (head, acquire), each
** but its weight (two copies around it), and takes the weight with an
** atomic exchange (take) or reads it (a copy): the handler's additions
** are atomic too, so a tick added before the exchange is taken, one added
** after stays in the record for the thread's own safe point, which counts
** what weight is left (a record left at 0 counts nothing). */
uint32_t ljp_complete_pending(ljp_ctx *ctx, uint64_t before_ns, int take,
                              ljp_offrec *out, uint32_t max, uint64_t *left)
{
  ljp_ring *ring = &ctx->ring;
  uint64_t h = atomic_load_explicit(&ring->head, memory_order_acquire);
  uint64_t d = atomic_load_explicit(&ring->done, memory_order_acquire), pos;
  const size_t wo = offsetof(ljp_record, weight), wn = sizeof(uint32_t);
  uint32_t n = 0;
  *left = 0;
  if (!ring->rec || ctx->opt.cb) return 0;
  for (pos = d; pos < h; pos++) {
    ljp_record *r = ljp_ring_at(ring, pos), c;
    uint32_t w;
    if (r->time_ns >= before_ns || n == max) {
      *left += atomic_load_explicit(&r->weight, memory_order_relaxed);
      continue;
    }
    w = take ? atomic_exchange_explicit(&r->weight, 0, memory_order_relaxed)
             : atomic_load_explicit(&r->weight, memory_order_relaxed);
    if (!w) continue;                         /* taken before */
    memcpy(&c, r, wo);
    memcpy((char *)&c + wo + wn, (const char *)r + wo + wn,
           sizeof(c) - wo - wn);
    resolve_record(ctx, &c);
    if (!ljp_frames_offline(ctx, NULL, &c)) {
      if (take) atomic_fetch_add(&ctx->n_dropped, w);
      continue;
    }
    out[n].stack = c.stack;
    out[n].func = c.func;
    out[n].tloc = c.tloc;
    out[n].trace = c.trace;
    out[n].w = w;
    out[n].zone = c.zone;
    out[n].labels = c.labels;
    out[n].vmstate = c.vmstate;
    n++;
    if (take) {
      ctx->vm[ljp_vm_index(c.vmstate)] += w;
      ctx->completed += w;
    }
  }
  return n;
}
