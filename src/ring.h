/*
** Lock-free single-producer ring of sample records.
**
** Producer: the signal handler (ljp_ring_push), or, for the ticks of a
** thread blocked in a system call, the thread clock's timer thread
** (timer_thread.c), never both at once (ljp_ctx.ring_owner, a flag each
** takes before it writes). Consumers, on the profiled
** thread in normal context: the safe point completes pending records
** (ljp_ring_claim) and the aggregator retires completed ones
** (ljp_ring_retire). The export helper (auto.c, complete.c:
** ljp_complete_pending), while the context is lent, only reads pending
** records and exchanges their weight atomically: no claim, no retire.
** Three monotonically increasing 64-bit positions:
**
**     tail <= done <= head,  head - tail <= cap
**     [tail, done)  completed (stack assigned), waiting for aggregation
**     [done, head)  pending (written by the handler, no stack yet)
**
** When the ring is full the handler adds the tick to a pending record
** instead of dropping it: the newest one with the same VM state, trace, C
** function, zone and label set, else the newest (its own time, PC and
** stack are lost, the tick is not); only when no record is pending is the
** tick dropped.
*/
#ifndef LJP_RING_H
#define LJP_RING_H

#include <stdatomic.h>
#include <stdint.h>

#define LJP_NATIVE_MAX 32 /* native frames per record (filled by unwinder) */
#define LJP_NATIVE_TRUNCATED 1 /* the walk stopped before LuaJIT's code */
#define LJP_NATIVE_SKIPPED 2   /* no walk: it was not safe at that moment */
#define LJP_NATIVE_FROM_INTERP 4 /* the outermost frame was called by the
                                   interpreter (the running lua_CFunction) */
#define LJP_NATIVE_VM 8        /* a frame lies in LuaJIT's own code (a lua_*
                                   call: the Lua stack may be changing) */

#define LJP_LUA_MAX 20   /* Lua frames captured at signal time per record */
#define LJP_LUA_BOTTOM 1 /* the capture reached the bottom of the stack */

/* A Lua frame live at the signal (luastack.c): its function object, the C
** entry of a C function or a Lua function's first instruction (which names
** its prototype: read while the function was alive, it tells at a later
** safe point which prototype a returned frame ran; 0 when unknown), the
** bytecode PC it is at when its callee's link tells (0: unknown, and for
** the innermost frame), its base as a slot index in its stack, and the
** function kind (0 Lua, 1 C, > 1 fast function id). */
typedef struct ljp_lframe {
  uintptr_t fn;
  union {
    uintptr_t cf;  /* kind != 0 */
    uintptr_t bc;  /* kind == 0 */
  };
  uintptr_t pc;
  uint32_t slot;
  uint8_t kind;
} ljp_lframe;

typedef struct ljp_record {
  uint64_t seq;          /* handler sequence number */
  uint64_t time_ns;      /* CLOCK_MONOTONIC at signal time */
  uintptr_t pc;          /* interrupted program counter */
  _Atomic uint32_t weight; /* timer ticks (1 + overruns + merged) */
  uintptr_t cfunc;       /* C function running when vmstate == 'C', or 0 */
  uintptr_t like_cfunc;  /* cfunc as it was at reserve time (merging) */
  int32_t trace;         /* trace number when vmstate == 'N', else 0 */
  uintptr_t tobj;        /* 'N', traces read from memory: the trace
                            object running at the signal (0: unknown),
                            which tells a helper thread that the trace of
                            that number is still this one */
  uint32_t stack;        /* interned stack id, set at completion */
  uint32_t func;         /* interned leaf function ("chunk:firstline" or a
                            C function's name), set at completion */
  uint32_t tloc;         /* 'N': interned "chunk:line" the trace started
                            at (0: unknown), set at completion */
  uint16_t zone;         /* zone id at signal time (0: none) */
  uint16_t labels;       /* label set id at signal time (0: none) */
  uint8_t vmstate;       /* 'N' 'I' 'C' 'G' 'J', or 'U' = resolve later */
  uint8_t nnative;       /* valid entries in native[] */
  uint8_t nflags;        /* LJP_NATIVE_* */
  uintptr_t native[LJP_NATIVE_MAX]; /* native return addresses, leaf first */
  uint8_t nlua;          /* Lua frames captured at signal time (0: none,
                            the safe point's stack is used) */
  uint8_t lflags;        /* LJP_LUA_* */
  uintptr_t lstack;      /* the captured thread's stack (L->stack) */
  ljp_lframe lua[LJP_LUA_MAX]; /* innermost first */
} ljp_record;

typedef struct ljp_ring {
  ljp_record *rec;
  uint32_t cap, mask;
  _Atomic uint64_t head;  /* next slot the producer writes */
  _Atomic uint64_t done;  /* first pending record */
  _Atomic uint64_t tail;  /* first record not yet aggregated */
} ljp_ring;

typedef enum { LJP_PUSHED, LJP_MERGED, LJP_DROPPED } ljp_push_result;

int ljp_ring_init(ljp_ring *r, uint32_t cap); /* cap rounded up to 2^n */
void ljp_ring_free(ljp_ring *r);

/* What a full ring merges by: a tick joins the newest pending record with
** the same VM state, trace, C function, zone and label set (so per-state,
** per-trace, per-zone and per-label totals stay right while no safe point
** comes, e.g. in a program running entirely in compiled code), else the
** newest with the same VM state, zone and label set, else the newest one.
** The C function compared
** is the one known when the record was reserved (like_cfunc): the
** handler may name it better afterwards. */
typedef struct ljp_like {
  uintptr_t cfunc;
  int32_t trace;
  uint16_t zone;
  uint16_t labels;
  uint8_t vmstate;
} ljp_like;

#define LJP_MERGE_SCAN 64  /* pending records examined for a like one */

/* Signal context. Returns the slot to fill, or NULL when the ring is full
** (then *res says whether the weight was merged or dropped). The record is
** published by ljp_ring_publish. */
static inline ljp_record *ljp_ring_reserve(ljp_ring *r, uint32_t weight,
                                           const ljp_like *like,
                                           ljp_push_result *res)
{
  uint64_t h = atomic_load_explicit(&r->head, memory_order_relaxed);
  uint64_t t = atomic_load_explicit(&r->tail, memory_order_acquire);
  uint64_t d = atomic_load_explicit(&r->done, memory_order_acquire), p;
  if (h - t < r->cap) { *res = LJP_PUSHED; return &r->rec[h & r->mask]; }
  if (h > d) {
    ljp_record *into = &r->rec[(h - 1) & r->mask], *state = NULL;
    for (p = h; p > d && h - p < LJP_MERGE_SCAN; p--) {
      ljp_record *c = &r->rec[(p - 1) & r->mask];
      if (like && c->vmstate == like->vmstate && c->zone == like->zone &&
          c->labels == like->labels) {
        if (c->trace == like->trace && c->like_cfunc == like->cfunc) {
          into = c;
          state = NULL;
          break;
        }
        if (!state) state = c;  /* at least the same state, zone, labels */
      }
    }
    if (state) into = state;
    atomic_fetch_add_explicit(&into->weight, weight, memory_order_relaxed);
    *res = LJP_MERGED;
  } else {
    *res = LJP_DROPPED;
  }
  return NULL;
}

static inline void ljp_ring_publish(ljp_ring *r)
{
  uint64_t h = atomic_load_explicit(&r->head, memory_order_relaxed);
  atomic_store_explicit(&r->head, h + 1, memory_order_release);
}

/* Number of pending (not yet completed) records. */
static inline uint64_t ljp_ring_pending(ljp_ring *r)
{
  return atomic_load_explicit(&r->head, memory_order_acquire) -
         atomic_load_explicit(&r->done, memory_order_acquire);
}

/* Claim all pending records: returns [*from, *to). The claim is published
** before the caller reads any weight, so a concurrent handler never merges
** into a claimed record. */
void ljp_ring_claim(ljp_ring *r, uint64_t *from, uint64_t *to);

/* Completed records waiting for aggregation. */
static inline uint64_t ljp_ring_completed(ljp_ring *r)
{
  return atomic_load_explicit(&r->done, memory_order_acquire) -
         atomic_load_explicit(&r->tail, memory_order_relaxed);
}

static inline ljp_record *ljp_ring_at(ljp_ring *r, uint64_t pos)
{
  return &r->rec[pos & r->mask];
}

/* Hand records [tail, to) back to the producer. */
static inline void ljp_ring_retire(ljp_ring *r, uint64_t to)
{
  atomic_store_explicit(&r->tail, to, memory_order_release);
}

#endif
