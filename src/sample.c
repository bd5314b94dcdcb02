/*
** The sampler: one tick of a profiled thread into the ring. What the
** thread runs now (PC, VM state, trace, C function), the zone and label
** set, the native frames from its registers, the Lua frames it runs in
** (exact stacks), the weight; then the safe point armed. A tick with no
** Lua call active on the running thread nor on the main thread (vm.h:
** ljp_vm_no_call) is the host's own: its native frames only, no Lua
** capture, flagged LJP_LUA_HOST so that the safe point adds none.
**
** It is apart from the signal that brings the tick: ljp_sample takes the
** thread's PC and registers, not a ucontext. On Linux signal.c calls it
** from the handler, on the profiled thread; a backend whose timer thread
** stops the profiled thread and reads its registers (Windows: suspend,
** GetThreadContext) calls it there, with the thread stopped. Either way:
** sampling context. Only async-signal-safe calls, no allocation, no
** locks, no stdio, bounded work; the VM read through vm.h's [sig]
** functions only (plain reads of what the stopped thread cannot free
** under us, fault-safe ones elsewhere). The caller owns the ring
** (ctx->ring_owner) while it runs.
**
** A blocked thread's tick (ljp_blocked_capture/push) is the same record
** without a signal, taken by the timer thread (normal context) while the
** thread sleeps in a system call.
*/
#define _GNU_SOURCE
#include <stddef.h>
#include <string.h>

#include "ljp.h"
#include "vm.h"
#include "unwind.h"

/* Is the trace compiler idle? A learnt state field that never reads idle
** (1000 signals in a row, far longer than any trace takes to compile)
** was learnt wrong: it is dropped, so samples are not held forever. */
static inline int jit_idle(ljp_ctx *ctx)
{
  if (ljp_vm_jit_idle(ctx->vm_g)) {
    ctx->jit_busy_run = 0;
    return 1;
  }
  if (++ctx->jit_busy_run >= 1000) ljp_vm_jstate_forget();
  return 0;
}

/* Is a tick in state vm at pc the host's own code, with no Lua call
** active on the running thread (L->cframe NULL: the host's Lua call
** returned, its coroutine yielded or ended) nor on the main thread (an
** error unwinding out of a coroutine clears its L->cframe before cur_L
** moves back to its resumer)? Not in a trace or the
** compiler. In the interpreter's own code (its unwind entry) cur_L may
** lag a coroutine switch by a few instructions (a resume from Lua that
** just came back): never there. The GC with no call active is a step
** the host's lua_* call took. peek: fault-safe reads (another thread).
** Sampling context. */
static inline int host_tick(uintptr_t g, int vm, uintptr_t pc, int peek)
{
  if (vm != 'C' && vm != 'I' && vm != 'G') return 0;
  if (ljp_vm_no_call(g, peek) != 1) return 0;
  return vm == 'G' || !ljp_codemap_in_interp(pc);
}

/* A tick that a full ring merges (rec: the scratch record, filled): in a
** trace whose inlined frames (or with inline=off, its base frame's line)
** the safe point decodes (luaframes.c), the code whose samples get the
** same frames as its own (vm.h:
** ljp_vm_trace_span: its snapshot's; its PC alone in inline=exact, where
** the checks inside a snapshot's code also count), so that it joins only
** a record whose PC lies there (ring.h); sp->span[1] 0: no rule.
** Sampling context, the full ring's path only. */
#define INL_PARTS 8
static inline void inline_span(ljp_ctx *ctx, const ljp_record *rec,
                               ljp_tickspan *sp)
{
  uintptr_t k;
  sp->span[1] = 0;
  if (rec->vmstate != 'N' || !rec->tobj || !rec->nlua) return;
  if (ljp_vm_trace_span(rec->tobj, rec->pc, sp->code, sp->span) < 0 &&
      (!rec->tret || ljp_vm_trace_span(rec->tobj, rec->tret - 1, sp->code,
                                       sp->span) < 0)) {
    sp->span[0] = 0;             /* in none of the trace's code: only a */
    sp->span[1] = 1;             /* record in none joins */
    return;
  }
  if (ctx->jitmode_on) {
    k = ljp_record_inl_pc(rec, sp->code);
    sp->span[0] = k;
    sp->span[1] = k + 1;
  } else if (ctx->opt.inline_frames == LJPROF_INLINE_RECORDED &&
             sp->span[1] - sp->span[0] > INL_PARTS) {
    /* inline=recorded: the frames change inside a snapshot's code (the
    ** record map's place of a PC is its share of that code): the tick
    ** joins only a record in the same eighth of it. */
    uintptr_t s0 = sp->span[0], len = sp->span[1] - s0, i;
    k = rec->pc - s0 < len ? rec->pc : rec->tret - 1;
    i = (k - s0) * INL_PARTS / len;
    sp->span[0] = s0 + i * len / INL_PARTS;
    sp->span[1] = s0 + (i + 1) * len / INL_PARTS;
  }
}

/* Record one sample of weight w; lite: without the native walk and the
** Lua capture (little stack left). Sampling context (see the top). A full ring with
** records pending gets the tick filled in on the stack, as a record would
** be, and merged into a pending record that would have had the same stack
** (ring.h); like none, it is dropped. */
void ljp_sample(ljp_ctx *ctx, uintptr_t pc, const struct ljp_regs *regs,
                uint32_t w, int lite)
{
  ljp_record *rec, scratch;
  ljp_tickspan span;
  ljp_push_result res;
  uintptr_t tobj = 0, cfunc;
  uint64_t t0 = ljp_now_ns();  /* CLOCK_MONOTONIC, vDSO: signal-safe */
  int32_t trace;
  int vm, host = 0;
  atomic_fetch_add_explicit(&ctx->n_signals, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&ctx->n_ticks, w, memory_order_relaxed);
  /* With native stacks the running C function is usually the outermost
  ** native frame (found at the safe point): no peeks for it here. */
  vm = ljp_vm_read(ctx->vm_g, &trace, &cfunc, !ctx->native_on);
  if (!vm) {
    vm = ljp_codemap_classify(&ctx->map, pc, &trace);
  } else if (vm == 'N') {
    /* g->vmstate names the trace entered last; a trace linked to may run
    ** on without changing it. The PC names the trace whose machine code
    ** is running, when it is known: the trace itself, read from memory
    ** (it cannot be freed while it runs), else the code map, whose range
    ** must still belong to its trace (it may be from before a flush). */
    int32_t tr = 0;
    if (ctx->tr.mem) {
      uintptr_t T2;
      tobj = ljp_vm_trace(ctx->vm_g, trace);
      if (!(tobj && ljp_vm_trace_holds(tobj, pc)) &&
          ljp_codemap_classify(&ctx->map, pc, &tr) == 'N' && tr > 0 &&
          (T2 = ljp_vm_trace(ctx->vm_g, tr)) && ljp_vm_trace_holds(T2, pc)) {
        trace = tr;
        tobj = T2;
      }
    } else if (ljp_codemap_classify(&ctx->map, pc, &tr) == 'N' && tr > 0) {
      trace = tr;
    }
  }
  if (host_tick(ctx->vm_g, vm, pc, 0)) {
    host = 1;                    /* no Lua frame, no Lua C function */
    cfunc = 0;
  }
  if (!(rec = ljp_ring_slot(&ctx->ring))) {
    if (!ljp_ring_pending(&ctx->ring)) {  /* nothing to merge into */
      atomic_fetch_add_explicit(&ctx->n_dropped, w, memory_order_relaxed);
      goto arm;
    }
    rec = &scratch;
  }
  if (rec != &scratch)
    rec->seq = atomic_fetch_add_explicit(&ctx->seq, 1, memory_order_relaxed);
  rec->time_ns = t0;
  rec->pc = pc;
  rec->trace = trace;
  rec->tobj = tobj;
  rec->cfunc = cfunc;
  rec->vmstate = (uint8_t)(host && vm == 'I' ? 'C' : vm);
  rec->zone = ctx->zones.cur;      /* the zone active at the tick */
  rec->labels = ctx->labels.cur;   /* and the label set (labels.c) */
  rec->nflags = 0;
  rec->nnative = 0;
  rec->nfuncs = 0;
  rec->nleaf[0] = rec->nleaf[1] = 0;
  rec->tret = 0;
  if (ctx->native_on && !lite)
    rec->nnative = (uint8_t)ljp_native_capture(ctx, regs, pc, rec->vmstate,
                                                rec->native, &rec->nflags,
                                                &rec->tret, &rec->nfuncs,
                                                rec->nleaf);
  /* A host tick whose native walk still reached Lua code (a C function
  ** that ran a call on another thread: cur_L is that idle thread) is not
  ** one. */
  if (host && (rec->tret || (rec->nflags & LJP_NATIVE_FROM_INTERP))) {
    host = 0;
    rec->vmstate = (uint8_t)vm;
  }
  rec->nlua = 0;
  rec->nspine = 0;
  rec->lflags = host ? LJP_LUA_HOST : 0;
  if (host)
    atomic_fetch_add_explicit(&ctx->n_host, w, memory_order_relaxed);
  if (ctx->exact_on && !lite && !host) {
    /* The Lua frames running now. A C function's stack is stable
    ** unless it is inside LuaJIT's own code (a lua_* call may resize
    ** it): when the native walk does not show that it is outside, the
    ** capture checks the stack's block first. */
    int got, c_mode = vm != 'C' && vm != 'G' ? 0
                 : vm == 'C' && ctx->native_on &&
                   (rec->nflags & LJP_NATIVE_FROM_INTERP) &&
                   !(rec->nflags & LJP_NATIVE_VM) ? 1 : 2;
    /* In state C outside the interpreter, the frame at L->base may be a
    ** Lua function's: LuaJIT's own code running for it (luastack.c).
    ** In the interpreter it is not taken: there it is the window of a
    ** Lua function returning to C, whose results overwrite its frame. */
    if (vm == 'C' && c_mode == 2 && ljp_codemap_outside_interp(pc))
      c_mode = LJP_CAPTURE_HELPER;
    /* The interpreter while a trace is recorded: no arming (below), so
    ** the frames now. In state C too: ljprof's "record" handler (or any
    ** jit.attach handler) returned to C before the recorder ran, and the
    ** interpreter then runs the recorded function on in state C. With a
    ** Lua function at L->base that is the interpreter's time: 'I'. */
    if (vm == 'I' && !ljp_vm_jit_idle(ctx->vm_g))
      c_mode = LJP_CAPTURE_RECORDING;
    else if (vm == 'C' && c_mode == 2 && !ljp_vm_jit_idle(ctx->vm_g) &&
             ljp_codemap_in_interp(pc))
      c_mode = LJP_CAPTURE_RECORDING;
    got = ljp_luastack_capture(ctx->vm_g, c_mode, rec);
    if (vm == 'C' && c_mode == LJP_CAPTURE_RECORDING) {
      if (got > 0) {
        vm = 'I';                  /* a Lua function's frame at the base */
        rec->vmstate = 'I';
      } else {                     /* a C function's (a handler returning) */
        got = ljp_luastack_capture(ctx->vm_g, 2, rec);
      }
    }
    if (got > 0) {
      if (rec != &scratch)
        atomic_fetch_add_explicit(&ctx->n_lua_captures, 1,
                                  memory_order_relaxed);
      /* In state C the frame at L->base is the C function's (the
      ** capture checks it): what ljp_vm_cfunc would read, read. A Lua
      ** function's there (LJP_CAPTURE_HELPER): LuaJIT's own code runs
      ** for it, called by the interpreter; no C function is named. */
      if (vm == 'C' && !rec->cfunc && rec->lua[0].kind >= 1) {
        rec->cfunc = rec->lua[0].cf;
      } else if (vm == 'C' && rec->lua[0].kind == 0 &&
                 !ljp_vm_jit_idle(ctx->vm_g)) {
        /* ... and while a trace is being compiled, that code is the
        ** compiler's (the recorder after ljprof's "record" handler or
        ** any jit.attach handler returned to C, a trace abort after the
        ** recorder's error): LuaJIT's own state for it, 'J'. */
        vm = 'J';
        rec->vmstate = 'J';
      } else if (vm == 'C' && rec->lua[0].kind == 0) {
        rec->nflags |= LJP_NATIVE_HELPER;
      }
    }
  }
  /* The running C function, when neither the native walk (it reached
  ** the interpreter: the function is its outermost frame) nor the Lua
  ** capture has it: two fault-safe reads, system calls. */
  if (ctx->native_on && !lite && vm == 'C' && !rec->cfunc && !host &&
      !(rec->nflags & LJP_NATIVE_FROM_INTERP))
    rec->cfunc = ljp_vm_cfunc(ctx->vm_g);
  rec->stack = 0;
  if (rec != &scratch) {
    /* In the ring's last free slots: only the outermost native frame
    ** kept, so that a full ring's ticks of other native stacks under that
    ** function have a record showing only frames of theirs (ring.h). */
    if (rec->nnative > 1 && ljp_ring_low(&ctx->ring)) ljp_record_cut(rec);
    atomic_store_explicit(&rec->weight, w, memory_order_relaxed);
    ljp_ring_publish(&ctx->ring);
  } else {
    inline_span(ctx, rec, &span);
    if ((res = ljp_ring_merge(&ctx->ring, w, rec, &span)) != LJP_DROPPED)
      atomic_fetch_add_explicit(&ctx->n_merged, 1, memory_order_relaxed);
    else
      atomic_fetch_add_explicit(&ctx->n_dropped, w, memory_order_relaxed);
  }
arm:
  /* Never arm while the trace compiler may be busy: changing the hook
  ** aborts a trace being started or recorded. The recorder's events set
  ** ctx->hook.recording; 'J' and the compiler's own state (once learnt) also
  ** cover the start of a trace, before its "start" event. */
  if (!ctx->hook.busy && !ctx->hook.recording && ctx->state == LJP_RUNNING &&
      vm != 'J' && jit_idle(ctx) && ljp_hook_arm_safe(&ctx->hook, pc))
    ljp_hook_arm_for(&ctx->hook, vm != 'I');  /* (the call bit: hook.c) */
  atomic_fetch_add_explicit(&ctx->handler_ns, ljp_now_ns() - t0,
                            memory_order_relaxed);
}

/* -- Blocked threads (normal context, the timer thread) -------------------- */

/* The profiled thread is blocked in a system call (timer_thread.c): what
** the handler would record, without a signal, which would end the call
** (EINTR). Only memory reads, as in the handler, of a thread that does not
** run: the caller reads its CPU time and system call before and after and
** keeps the record only if neither changed. pc: the thread's user PC (at
** its system call). Returns the Lua frames captured (0: none, no record),
** or 1 for a host tick (no Lua call active: no Lua frames, its one native
** frame the PC, when native frames are on). */
int ljp_blocked_capture(ljp_ctx *ctx, uintptr_t pc, ljp_record *rec)
{
  int32_t trace = 0;
  uintptr_t cfunc = 0;
  int vm;
  memset(rec, 0, offsetof(ljp_record, native));
  rec->nnative = 0;
  rec->tret = 0;
  rec->nfuncs = 0;
  rec->nleaf[0] = rec->nleaf[1] = 0;
  rec->nlua = 0;
  rec->nspine = 0;
  rec->lflags = 0;
  if (!ctx->exact_on || !ctx->vm_g) return 0;
  vm = ljp_vm_read(ctx->vm_g, &trace, &cfunc, 0);
  if (host_tick(ctx->vm_g, vm, pc, 1)) {
    rec->pc = pc;
    rec->vmstate = (uint8_t)(vm == 'G' ? 'G' : 'C');
    rec->zone = ctx->zones.cur;
    rec->labels = ctx->labels.cur;
    rec->lflags = LJP_LUA_HOST;
    if (ctx->native_on && pc) {
      rec->native[0] = pc;
      rec->nnative = 1;
      rec->nflags = LJP_NATIVE_TRUNCATED;
    }
    return 1;
  }
  if (vm == 'C') cfunc = ljp_vm_cfunc(ctx->vm_g);
  if (vm != 'C' && vm != 'N') return 0;  /* an FFI or C call, from the
                                         ** interpreter or a trace */
  rec->pc = pc;
  rec->trace = trace;
  rec->cfunc = cfunc;
  rec->vmstate = (uint8_t)vm;
  rec->zone = ctx->zones.cur;
  rec->labels = ctx->labels.cur;
  if (ljp_luastack_capture_blocked(ctx->vm_g, rec) <= 0) return 0;
  if (vm == 'C' && !rec->cfunc && rec->lua[0].kind >= 1)
    rec->cfunc = rec->lua[0].cf;
  return rec->nlua;
}

/* A record of weight w from ljp_blocked_capture into the ring, if no
** handler is writing to it (ring_owner: the handler or this thread, never
** both). Returns 0 when the ring was busy (the caller counts the tick
** otherwise). */
int ljp_blocked_push(ljp_ctx *ctx, const ljp_record *proto, uint32_t w)
{
  ljp_push_result res;
  ljp_record *rec;
  int free_ = 0;
  if (!atomic_compare_exchange_strong_explicit(&ctx->ring_owner, &free_, 2,
          memory_order_acquire, memory_order_relaxed))
    return 0;
  atomic_fetch_add_explicit(&ctx->n_ticks, w, memory_order_relaxed);
  atomic_fetch_add_explicit(&ctx->n_idle, w, memory_order_relaxed);
  if (proto->lflags & LJP_LUA_HOST)
    atomic_fetch_add_explicit(&ctx->n_host, w, memory_order_relaxed);
  rec = ljp_ring_reserve(&ctx->ring, w, proto, NULL, &res);
  if (rec) {
    size_t lua_at = offsetof(ljp_record, nlua);
    memcpy(rec, proto, offsetof(ljp_record, native));
    memcpy(rec->native, proto->native,
           (size_t)proto->nnative * sizeof(proto->native[0]));
    memcpy((char *)rec + lua_at, (const char *)proto + lua_at,
           sizeof(ljp_record) - lua_at);
    rec->seq = atomic_fetch_add_explicit(&ctx->seq, 1, memory_order_relaxed);
    rec->time_ns = ljp_now_ns();
    rec->tret = 0;
    rec->nfuncs = 0;
    rec->nleaf[0] = rec->nleaf[1] = 0;
    rec->stack = 0;
    atomic_store_explicit(&rec->weight, w, memory_order_relaxed);
    ljp_ring_publish(&ctx->ring);
  } else if (res != LJP_DROPPED) {
    atomic_fetch_add_explicit(&ctx->n_merged, 1, memory_order_relaxed);
  } else {
    atomic_fetch_add_explicit(&ctx->n_dropped, w, memory_order_relaxed);
  }
  atomic_store_explicit(&ctx->ring_owner, 0, memory_order_release);
  return 1;
}

