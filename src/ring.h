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
** When the ring is full the handler adds the tick to a pending record of
** the same VM state, trace, C function, zone, label set and captured Lua
** frames whose stack is the tick's own: one with the same native frames
** (the functions they lie in, ljp_record_like), else a cut record of the
** same outermost native function (ljp_record_cut_like): a record pushed
** into the ring's last free slots (ljp_ring_low) keeps only that frame,
** and the frames above it are shown as one "[merged]" frame, so the
** ticks that join it keep the part of their stack it shows. A tick like
** no pending record is dropped (counted), never given another tick's
** frames.
** A tick in a trace whose inlined frames are decoded (vm.h:
** ljp_vm_trace_span) joins only a record whose PC (or, in a C function
** called from the trace, return address) lies in the same snapshot's
** code: the inlined frames decoded from the record's PC are the tick's.
*/
#ifndef LJP_RING_H
#define LJP_RING_H

#include <stdatomic.h>
#include <stdint.h>

#include "vm.h"  /* the VM's part of a record: its Lua frames */

#define LJP_NATIVE_MAX 32 /* native frames per record (filled by unwinder) */
#define LJP_NATIVE_TRUNCATED 1 /* the walk stopped before LuaJIT's code */
#define LJP_NATIVE_SKIPPED 2   /* no walk: it was not safe at that moment */
#define LJP_NATIVE_FROM_INTERP 4 /* the outermost frame was called by the
                                   interpreter (the running lua_CFunction) */
#define LJP_NATIVE_VM 8        /* a frame lies in LuaJIT's own code (a lua_*
                                   call: the Lua stack may be changing) */
#define LJP_NATIVE_CUT 16      /* cut to its outermost frame (ljp_record_cut):
                                   the frames above it are shown as one
                                   "[merged]" frame */
#define LJP_NATIVE_HELPER 32   /* in state C, the outermost frame is LuaJIT's
                                   own code that the interpreter called for
                                   the Lua function at the base (no
                                   lua_CFunction runs: none is named) */


typedef struct ljp_record {
  uint64_t seq;          /* handler sequence number */
  uint64_t time_ns;      /* CLOCK_MONOTONIC at signal time */
  uintptr_t pc;          /* interrupted program counter */
  _Atomic uint32_t weight; /* timer ticks (1 + overruns + merged) */
  uintptr_t cfunc;       /* C function running when vmstate == 'C', or 0 */
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
  uintptr_t tret;        /* where the native walk reached generated code
                            (a trace's return address), or 0 */
  uint64_t nfuncs;       /* a hash of the functions native[] lie in
                            (their unwind entries' starts; an address
                            where none is known), 0: none */
  uintptr_t nleaf[2];    /* the functions native[0] and the outermost
                            frame lie in (or their addresses), 0: none */
  uint8_t nlua;          /* Lua frames captured at signal time (0: none,
                            the safe point's stack is used) */
  uint8_t lflags;        /* LJP_LUA_* */
  uintptr_t lstack;      /* the captured thread's stack (L->stack) */
  ljp_lframe lua[LJP_LUA_MAX]; /* innermost first */
  uintptr_t lthread;     /* the captured thread (its lua_State) */
  uint8_t nspine;        /* entries in spine[] (a capture of LJP_LUA_MAX
                            frames that did not reach the bottom) */
  ljp_spine spine[LJP_SPINE_MAX];
} ljp_record;

/* A tick merged on a full ring only (sample.c fills it, beside the tick
** it fills in on its stack; a record carries none): its trace's machine
** code [code[0], code[1]), and the code whose samples get the inlined
** frames its own would (the snapshot holding its PC, or the return
** address of the C function it is in), [span[0], span[1]); {0, 1}: none
** of the trace's code (no inlined frames); span[1] 0 (or no ljp_tickspan):
** no rule (no inlined frames decoded). */
typedef struct ljp_tickspan {
  uintptr_t code[2];
  uintptr_t span[2];
} ljp_tickspan;

typedef struct ljp_ring {
  ljp_record *rec;
  uint32_t cap, mask;
  _Atomic uint64_t head;  /* next slot the producer writes */
  _Atomic uint64_t done;  /* first pending record */
  _Atomic uint64_t tail;  /* first record not yet aggregated */
} ljp_ring;

typedef enum {
  LJP_PUSHED,
  LJP_MERGED,       /* into a record with the tick's stack */
  LJP_MERGED_CUT,   /* into a cut record of its outermost native function
                       and Lua stack: the tick's stack, cut the same way */
  LJP_DROPPED
} ljp_push_result;

int ljp_ring_init(ljp_ring *r, uint32_t cap); /* cap rounded up to 2^n */
void ljp_ring_free(ljp_ring *r);

#define LJP_MERGE_SCAN 64  /* pending records examined for a like one */

/* Where in trace code (code: [code[0], code[1])) record c's inlined
** frames are decoded from (luaframes.c): its PC, or in a C function the
** trace called, the return address into it; 0: none. */
static inline uintptr_t ljp_record_inl_pc(const ljp_record *c,
                                          const uintptr_t code[2])
{
  if (c->pc - code[0] < code[1] - code[0]) return c->pc;
  if (c->tret && c->tret - 1 - code[0] < code[1] - code[0])
    return c->tret - 1;
  return 0;
}

/* Signal context (and the unit test): would pending record c and the tick
** t get the same stack and the same totals? Same VM state, trace (and
** trace object), C function, zone, label set, native frames (by the
** functions they lie in, as a stack shows them: their number and the hash
** of their functions) and Lua frames captured at the signal. A record
** whose trace or VM state is resolved later by its PC ('U', or 'N' with
** no trace number) needs the same PC; a tick with a rule for its inlined
** frames (sp->span[1]), a record whose trace code lies in its span. */
static inline int ljp_record_like_lua(const ljp_record *c,
                                      const ljp_record *t,
                                      const ljp_tickspan *sp)
{
  int i;
  if (c->vmstate != t->vmstate || c->trace != t->trace ||
      c->tobj != t->tobj || c->cfunc != t->cfunc || c->zone != t->zone ||
      c->labels != t->labels || c->nlua != t->nlua ||
      c->lflags != t->lflags)
    return 0;
  if ((t->vmstate == 'U' || (t->vmstate == 'N' && !t->trace)) &&
      c->pc != t->pc)
    return 0;
  if (sp && sp->span[1] &&
      ljp_record_inl_pc(c, sp->code) - sp->span[0] >=
          sp->span[1] - sp->span[0])
    return 0;
  for (i = 0; i < t->nlua; i++) {
    const ljp_lframe *a = &c->lua[i], *b = &t->lua[i];
    if (a->fn != b->fn || a->cf != b->cf || a->pc != b->pc ||
        a->kind != b->kind)
      return 0;
  }
  return 1;
}

/* The native part of ljp_record_like: the same native frames (by the
** functions they lie in: their number, the hash of their functions and
** the innermost and outermost of them). */
static inline int ljp_record_same_native(const ljp_record *c,
                                         const ljp_record *t)
{
  return c->nnative == t->nnative && c->nflags == t->nflags &&
         (!t->nnative || (c->nfuncs == t->nfuncs &&
                          c->nleaf[0] == t->nleaf[0] &&
                          c->nleaf[1] == t->nleaf[1]));
}

static inline int ljp_record_like(const ljp_record *c, const ljp_record *t,
                                  const ljp_tickspan *sp)
{
  return ljp_record_same_native(c, t) && ljp_record_like_lua(c, t, sp);
}

/* Signal context: a record pushed now keeps only its outermost native
** frame (ljp_record_cut) when the ring's free slots are down to the last
** eighth (at least one, at most LJP_CUT_MAX): those records are what
** later ticks of other native stacks under the same function can join
** when the ring is full. At most a quarter of the records a merge scans,
** so that the whole records before them stay in its reach (a 1024-record
** ring cut its last 128: every merge then missed the whole ones, and a
** compiled loop's C ticks showed "[merged]" for 45% of its samples instead
** of their own frames, test_native). A ring that safe points drain never
** gets there. */
#define LJP_CUT_MAX (LJP_MERGE_SCAN / 4)
static inline int ljp_ring_low(const ljp_ring *r)
{
  uint64_t h = atomic_load_explicit(&r->head, memory_order_relaxed);
  uint64_t t = atomic_load_explicit(&r->tail, memory_order_acquire);
  uint32_t cut = r->cap / 8 ? r->cap / 8 : 1;
  if (cut > LJP_CUT_MAX) cut = LJP_CUT_MAX;
  return r->cap - (h - t) <= cut;
}

/* Signal context: cut record rec (filled, not published, more than one
** native frame) to its outermost native frame: the function the tick
** was called from Lua or compiled code in (nleaf[1]), kept as an address
** inside its call instruction (the return address less one: the
** completion looks frame 0 up as a PC). Its stack shows that frame, then
** "[merged]" above it (symbols.c). */
static inline void ljp_record_cut(ljp_record *rec)
{
  rec->native[0] = rec->native[rec->nnative - 1] - 1;
  rec->nnative = 1;
  rec->nflags |= LJP_NATIVE_CUT;
  rec->nfuncs = 0;
  rec->nleaf[0] = rec->nleaf[1];
}

/* The native part of the full ring's second choice, a cut record c for
** tick t (not cut, more than one native frame): c's outermost frame lies
** in t's outermost function, reached the same way (from the interpreter
** or not; the walk cut short or not), so the frames c shows are t's. */
static inline int ljp_record_cut_like(const ljp_record *c,
                                      const ljp_record *t)
{
  const uint8_t how = LJP_NATIVE_FROM_INTERP | LJP_NATIVE_TRUNCATED |
                      LJP_NATIVE_HELPER;
  return (c->nflags & LJP_NATIVE_CUT) && !(t->nflags & LJP_NATIVE_CUT) &&
         t->nnative > 1 && t->nleaf[1] && c->nleaf[1] == t->nleaf[1] &&
         (c->nflags & how) == (t->nflags & how);
}

/* Signal context: the slot to fill, or NULL when the ring is full. The
** record is published by ljp_ring_publish. */
static inline ljp_record *ljp_ring_slot(ljp_ring *r)
{
  uint64_t h = atomic_load_explicit(&r->head, memory_order_relaxed);
  uint64_t t = atomic_load_explicit(&r->tail, memory_order_acquire);
  return h - t < r->cap ? &r->rec[h & r->mask] : NULL;
}

/* Signal context, the ring full: add weight to the newest pending record
** (among the last LJP_MERGE_SCAN) like tick (ljp_record_like; NULL: any,
** for the ring's own unit tests), whose inlined frames' rule is sp (NULL:
** none); else to the newest cut record like it (ljp_record_cut_like and
** ljp_record_like_lua). LJP_MERGED, LJP_MERGED_CUT, or LJP_DROPPED when
** none is (the caller counts it). */
static inline ljp_push_result ljp_ring_merge(ljp_ring *r, uint32_t weight,
                                             const ljp_record *tick,
                                             const ljp_tickspan *sp)
{
  uint64_t h = atomic_load_explicit(&r->head, memory_order_relaxed);
  uint64_t d = atomic_load_explicit(&r->done, memory_order_acquire), p;
  ljp_record *cut = NULL;
  for (p = h; p > d && h - p < LJP_MERGE_SCAN; p--) {
    ljp_record *c = &r->rec[(p - 1) & r->mask];
    /* (ljp_record_like and the cut rule, the Lua part once) */
    if (tick && !ljp_record_like_lua(c, tick, sp)) continue;
    if (!tick || ljp_record_same_native(c, tick)) {
      atomic_fetch_add_explicit(&c->weight, weight, memory_order_relaxed);
      return LJP_MERGED;
    }
    if (!cut && ljp_record_cut_like(c, tick)) cut = c;
  }
  if (cut) {
    atomic_fetch_add_explicit(&cut->weight, weight, memory_order_relaxed);
    return LJP_MERGED_CUT;
  }
  return LJP_DROPPED;
}

/* Signal context: the slot to fill, or NULL when the ring is full (then
** *res says whether the weight was merged into a record like tick, whose
** inlined frames' rule is sp (NULL: none), or dropped). */
static inline ljp_record *ljp_ring_reserve(ljp_ring *r, uint32_t weight,
                                           const ljp_record *tick,
                                           const ljp_tickspan *sp,
                                           ljp_push_result *res)
{
  ljp_record *slot = ljp_ring_slot(r);
  if (slot) { *res = LJP_PUSHED; return slot; }
  *res = ljp_ring_merge(r, weight, tick, sp);
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
