/*
** The VM interface: everything the sampler side (the tick, the safe point,
** run control, the C and Lua API, exports) asks of the VM it profiles,
** and nothing else. The sampler side includes this header for VM
** matters, never a VM implementation's own headers (tests/structure.py,
** SAMPLER_FILES). Implemented by the LuaJIT files: vmprobe.c (VM state),
** luastack.c (Lua frames at a tick), tracemem.c (traces at a tick),
** vmlearn.c (learning the layouts), traces.c (trace tracking), ffid.c and
** names.c (names), luaframes.c (the frames of a completed record),
** mcmap.c (trace machine code mapped back to IR instructions); the
** types shared for size are vm_luajit.h's. A second VM provides these
** functions and its own types header; nothing here is
** called through a pointer. Completion is split along this line:
** complete.c (the record loop) asks luaframes.c (ljp_frames_*) for the
** stack of each record.
**
** Where each may run is said with it:
**   [sig]   sampling context (the signal handler, or a timer thread with
**           the profiled thread stopped): async-signal-safe, bounded,
**           no allocation, no locks, no Lua;
**   [safe]  normal context on the profiled thread (a safe point, a hook,
**           start/stop), no Lua code run unless said;
**   [any]   normal context, any thread.
**
** The VM's state at a tick, one letter (the ring record's vmstate): 'N' a
** compiled trace runs, 'I' the interpreter, 'C' a C function, 'G' the
** garbage collector, 'J' the trace compiler; 0 from ljp_vm_read: not
** known, the PC tells (the code map).
*/
#ifndef LJP_VM_H
#define LJP_VM_H

#include <stddef.h>
#include <stdint.h>

#include "vm_luajit.h"

/* (No lua.h: the ring, which stores the VM's record types, is built
** without it.) */
typedef struct lua_State lua_State;
struct ljp_record;
struct ljp_buf;
typedef struct ljp_ctx ljp_ctx;

/* -- Learning (once per process) ------------------------------------------ */

/* [safe] Learn and prove the VM's layouts and its fast-function ids, in a
** Lua state of ljprof's own (a few tries per process while something is
** not proven). Anything unproven stays off; the sampler then uses the PC
** and the safe point's stack. */
void ljp_vm_learn_layouts(void);
/* [safe] The same, and (irmap) the record map's layout in the same state
** when it was not tried yet (the start of an inline=recorded run), and
** (names) jit.vmdef's opcode names (the start of an inline=exact run). */
void ljp_vm_learn_start(int irmap, int names);
/* [safe] The layouts of the trace snapshots (inlined frames), learnt when
** the first record in compiled code is completed (costly: once). */
void ljp_vm_learn_snapshots(void);
/* [safe] The record map's jit_State layout (inline=recorded, irmap.c),
** with the snapshot layouts it needs: at start, once per process. */
void ljp_vm_learn_irmap(void);
/* [safe] Learn PROF's IR opcode (LuaJIT's profiling mode's function-change
** check, inline=exact) by its name in jit.vmdef, learnt in a state of
** ljprof's own (in L only when it cannot be learnt there), once per
** process; unknown: exact mode's merged checks are not looked for. */
void ljp_vm_learn_prof_op(lua_State *L);
/* [safe] The global state of L (validated), or 0 when the VM's state is
** not known (then ticks are classified by their PC). A context keeps it
** (ctx->vm_g) and hands it to the readers below. */
uintptr_t ljp_vm_global(lua_State *L);

/* What was learnt, for the run's stats and its start ([any]). */
typedef struct ljp_vmcaps {
  int cfunc;             /* the running C function can be read */
  int jstate;            /* the trace compiler's state is located */
  int host;              /* "no Lua call is active" can be told */
  int host_main;         /* ... on the main thread too (g->mainthref) */
  int capture;           /* Lua frames can be captured at a tick */
  int lines;             /* a captured frame's line can be read */
  const char *snap_off;  /* the snapshot layouts were tried and are off:
                            why ("off" when no reason); NULL otherwise */
} ljp_vmcaps;
void ljp_vm_caps(ljp_vmcaps *c);

/* -- The VM's state at a tick ---------------------------------------------- */

/* [sig] The state letter from g's own state (the trace number for 'N',
** the running C function for 'C' when want_cf and known), or 0: use the
** PC. */
int ljp_vm_read(uintptr_t g, int32_t *trace, uintptr_t *cfunc, int want_cf);
/* [sig] The running C function (fault-safe reads); 0: unknown. */
uintptr_t ljp_vm_cfunc(uintptr_t g);
/* [sig] 1 when no Lua call is active on the running thread nor (when it
** is known) on the main thread (the host's own code), 0 when one is, -1
** when that is not known. peek: every read
** fault-safe (from another thread, the profiled one stopped). */
int ljp_vm_no_call(uintptr_t g, int peek);
/* [sig] Is the trace compiler idle (or its state unknown)? Changing the
** hook while it is busy aborts its trace: the tick does not arm then. */
int ljp_vm_jit_idle(uintptr_t g);
/* [sig] The compiler's state field read busy too long: forget it (it was
** learnt wrong; ticks are not held back forever). [safe] Is it known? */
void ljp_vm_jstate_forget(void);
int ljp_vm_jstate_known(void);
/* [safe] Learn the compiler's state field from what it must read at a
** trace "start" event, a "stop" event, and a safe point while nothing
** records. */
enum { LJP_JS_START, LJP_JS_STOP, LJP_JS_IDLE };
void ljp_vm_learn_jstate(uintptr_t g, int event);
/* [safe] The compiler's state as it is (0 when idle or unknown), and put
** back: the safe point undoes the abort its own hook call asked for. */
int32_t ljp_vm_jstate(uintptr_t g);
void ljp_vm_jstate_set(uintptr_t g, int32_t v);
#define LJP_JS_ACTIVE 0x10   /* set in every busy state of the recorder */

/* The count hook's countdown (hook.c holds an armed hook back with it
** while a trace records): [sig] read (-1 when unknown), [sig] set (no-op
** when unknown), [any] is it located? */
int32_t ljp_vm_hookcount_get(uintptr_t g);
void ljp_vm_hookcount(uintptr_t g, int32_t count);
int ljp_vm_hookcount_known(void);

/* [sig] ljp_vm_trace(g, tr): the object of trace number tr of g, or 0 (no
** such trace, a trace being recorded, or traces not readable from
** memory); ljp_vm_trace_holds(T, pc): does its machine code hold pc? The
** running trace cannot be freed while it runs. Inline (every tick in
** compiled code): defined by the implementation's types header,
** vm_luajit.h. */

/* [sig] Trace T's machine code [code[0], code[1]) (T: the trace running,
** or whose code holds the return address of the C function running) and,
** for a PC pc in it, the code around pc whose samples get the same
** inlined frames as pc (luaframes.c: pc's snapshot's, or none in the first
** snapshot's prologue and a linking trace's tail), [span[0], span[1]).
** Returns 1; 0 when the snapshots are not known (span: pc alone), -1 when
** pc is not in T (span 0). Plain reads bounded by T's own counts: T
** cannot be freed while it runs, and its snapshots lie in its own block
** (checked). The full ring's path only (sample.c). */
int ljp_vm_trace_span(uintptr_t T, uintptr_t pc, uintptr_t code[2],
                      uintptr_t span[2]);

/* The counter of a state letter (ctx->vm[5]). */
static inline int ljp_vm_index(int vmstate)
{
  switch (vmstate) {
  case 'N': return 0;
  case 'I': return 1;
  case 'C': return 2;
  case 'G': return 3;
  default: return 4;
  }
}

/* -- Lua frames at a tick ---------------------------------------------------- */

/* [sig] The Lua frames of the running thread into rec (lua, nlua, lflags,
** lstack, spine) when its stack is stable; 0 frames when that does not
** apply or a check fails. c_mode, in a C function or the GC: 1 the native
** walk showed no frame of the VM's own code above it, 2 not known (the
** stack's block is checked first), 0 no capture there;
** LJP_CAPTURE_RECORDING: the interpreter while a trace is recorded (state
** I, or C after a VM event returned to C), a Lua function's frame at the
** base;
** LJP_CAPTURE_HELPER: state C with the native walk through LuaJIT's own
** code to the interpreter, as 2, but the frame at the base may also be a
** Lua function's (then LuaJIT's own code runs for that function, no
** lua_CFunction: sample.c). */
#define LJP_CAPTURE_RECORDING 3
#define LJP_CAPTURE_HELPER 4
int ljp_luastack_capture(uintptr_t g, int c_mode, struct ljp_record *rec);
/* [any] The same for a thread blocked in a system call inside a C call,
** every read fault-safe (timer_thread.c, the thread may wake: the caller
** drops the frames when it did). */
int ljp_luastack_capture_blocked(uintptr_t g, struct ljp_record *rec);
/* [any] LJPROF_STACKS=check: captures are checked against the VM's own
** stack walk (a test mode). */
int ljp_luastack_checking(void);

/* -- The stack of a record (luaframes.c) --------------------------------------- */

/* [safe] At a safe point, before its first record: p (the record loop's,
** for this safe point only) starts empty; LJPROF_STACKS=check compares
** the live stack's walk with the VM's own. */
void ljp_frames_begin(ljp_ctx *ctx, lua_State *L, ljp_frames_pass *p);
/* [safe] Record r (its state resolved) gets the stack, function and
** trace location (store ids) of where its time was spent, from what the
** signal captured and L's live stack; the trace it names is checked, the
** frames a trace had inlined are added to its Lua frames. */
void ljp_frames_record(ljp_ctx *ctx, lua_State *L, struct ljp_record *r,
                       ljp_frames_pass *p);
/* [safe] After the safe point's last record: what the next safe point
** may take from this one (its live stack's named levels). */
void ljp_frames_end(ljp_ctx *ctx, ljp_frames_pass *p);
/* [any] The same without a Lua stack (after an exit signal, or the export
** helper's copy of a pending record): what is known without one; E names
** C functions (NULL: not looked up). 0 when nothing is known. */
int ljp_frames_offline(ljp_ctx *ctx, lua_State *E, struct ljp_record *r);
/* [normal] The run's end, on the profiled thread, before the output is
** written: the trace start functions no safe point could name are
** searched for by value once (names.c), and the store's frames of those
** found get their names. */
void ljp_frames_name_late(ljp_ctx *ctx, lua_State *L);
/* [any] Forget the naming caches (their ids are the store's: with it). */
void ljp_frames_reset(ljp_ctx *ctx);
/* [safe] LJPROF_STACKS=check: a trace exit taken (tr, snapshot ex) to
** compare at the next safe point (1: armed for it); the comparison. */
int ljp_snapcheck_note(ljp_ctx *ctx, int32_t tr, int32_t ex);
void ljp_snapcheck_run(ljp_ctx *ctx, lua_State *L);

/* -- The record map (irmap.c), inline=recorded ------------------------------ */

/* [safe] The "record" handler, chained with the one in its slot: attached
** at start (none without the layouts: ljp_vm_learn_irmap first), detached
** at stop; at a safe point, detached once its budget is spent or its reads
** disagree (a flag read), and with full, attached again on top of a
** handler that replaced it (a registry lookup: when aggregating). */
void ljp_irmap_start(ljp_ctx *ctx, lua_State *L);
void ljp_irmap_stop(ljp_ctx *ctx, lua_State *L);
void ljp_irmap_check(ljp_ctx *ctx, lua_State *L, int full);
/* [any] The maps freed (the context is). */
void ljp_irmap_free(ljp_ctx *ctx);
/* [safe] A "record" event (safepoint.c's handler): returns the event's
** argument count, for ljp_traces_chain (the same closure layout: the
** generation, then the handler ours replaced), which calls that one. */
int ljp_irmap_event(ljp_ctx *ctx, lua_State *L);
/* [any] For stats(): events mapped, traces proven and refused, the budget
** spent, why the map is off (NULL: it is not). */
void ljp_irmap_stats(ljp_ctx *ctx, uint64_t *events, uint64_t *proven,
                     uint64_t *refused, int *spent, const char **why);
/* [any] The layouts are proven (the report's mode: "recorded"). */
int ljp_irmap_ok(void);

/* -- Trace tracking (traces.c) --------------------------------------------- */

/* [safe] Follow traces: from memory where the layouts are proven, else
** through the VM's trace events; detach at stop. */
void ljp_traces_attach(ljp_ctx *ctx, lua_State *L);
void ljp_traces_detach(ljp_ctx *ctx, lua_State *L);
/* [any] Can traces be followed without events in this process? */
int ljp_traces_from_memory(void);
/* [safe] LJPROF_STACKS=check: the trace-exit handler on/off, and the
** check of the exits taken, at the safe point. */
void ljp_traces_exitcheck(ljp_ctx *ctx, lua_State *L, int on);
void ljp_traces_check(ljp_ctx *ctx, lua_State *L);
/* [safe] A trace event (safepoint.c's handler): returns the event's
** argument count, for ljp_traces_chain, which calls the handler ours
** replaced. */
int ljp_traces_event(ljp_ctx *ctx, lua_State *L);
int ljp_traces_chain(lua_State *L, int nargs);
/* [safe] A jit.attach slot shared by chaining (traces.c; the "trace" and
** "record" handlers): jit.attach keeps one handler per event, so ours is
** attached on top of the slot's handler, which it calls after itself
** (ljp_traces_chain), and which is put back when ours goes.
** ljp_chain_install: f as a closure (upvalues: gen, the handler it
** replaced, and *extra_ref's value when extra_ref is given) attached to
** event through jit.attach (the function at attach_ref); its slot into
** *key (0: not attached) and a reference to it into *handler_ref; label
** names f in profiles. ljp_chain_installed: is it still the slot's
** handler? ljp_chain_remove: the replaced handler put back (or ours
** detached). */
int ljp_chain_install(lua_State *L, int attach_ref, int (*f)(lua_State *),
                      uint32_t gen, const int *extra_ref, const char *event,
                      const char *label, ptrdiff_t *key, int *handler_ref);
int ljp_chain_installed(lua_State *L, ptrdiff_t key, int handler_ref);
void ljp_chain_remove(lua_State *L, int attach_ref, int handler_ref,
                      const char *event);
/* [safe] Push require(mod).<name> (mod "jit" or "jit.util"); nil if
** absent. */
void ljp_push_jitfn(lua_State *L, const char *mod, const char *name);
/* [safe] Forget the trace infos and aborts, and free the handler's tables
** (the context is freed). */
void ljp_traces_free(ljp_ctx *ctx);
/* [any] Exports (auto.c): the run's aborts into a snapshot's trace part,
** moved or copied, freed with ljp_traces_aborts_free; the stack keys kept
** per trace forgotten (the store they name was taken). */
void ljp_traces_aborts_into(ljp_ctx *ctx, ljp_tracest *dst, int move);
void ljp_traces_aborts_free(ljp_tracest *t);
void ljp_traces_forget_keys(ljp_ctx *ctx);
/* [safe] A new context's trace part (zeroed): no Lua references held
** yet (api.c); ljprof.watch(): the handler stays attached until the
** state closes. The trace event entry point counts its events with
** ljp_traces_counted (vm_luajit.h). */
void ljp_traces_init(ljp_tracest *t);
void ljp_traces_watch(ljp_ctx *ctx);

/* -- Trace machine code to IR (mcmap.c) --------------------------------------- */

/* [safe] For the byte at offset ofs of trace T's machine code (T alive):
** the IR references (biased as LuaJIT's, REF_BIAS 0x8000) whose code can
** hold it, [*ref_lo, *ref_hi]; *exact = 1 when it lies in an instruction
** matched to exactly one IR instruction (ref_lo == ref_hi). The trace's
** head (before the first IR instruction's code) is REF_BIAS, its tail
** (PHI moves, loop branch, link) the trace's nins. Returns 0 when unknown
** (x64 only; layouts not proven; code not decodable at every snapshot
** boundary). Built once per trace (allocates, takes a mutex: never in
** signal context), cached by (T, mcode, szmcode, nsnap, nins). */
int ljp_mcmap_refs(uintptr_t T, uint32_t ofs, uint32_t *ref_lo,
                   uint32_t *ref_hi, int *exact);

/* [safe] The same map's runs, copied for a caller that keeps them with its
** own per-trace state and looks them up without the cache's lock
** (irmap.c: per context, per trace recorded; ljp_mcmap_find). *runs is
** malloc'd (the caller frees it); returns the number of runs, 0 when
** unknown (then *runs is NULL). */
typedef struct ljp_mcrun {
  uint32_t ofs;       /* first byte of the run */
  uint32_t lo, hi;    /* biased refs */
  uint32_t exact;
} ljp_mcrun;
int ljp_mcmap_copy(uintptr_t T, ljp_mcrun **runs);
/* [any] ljp_mcmap_refs's answer from a copy (no lock, no allocation). */
int ljp_mcmap_find(const ljp_mcrun *run, int nrun, uint32_t sz, uint32_t ofs,
                   uint32_t *ref_lo, uint32_t *ref_hi, int *exact);

/* [safe] The map of trace T (built if needed): bytes of code, bytes mapped
** exactly, snapshot spans, spans whose anchors were not trusted, runs,
** anchors. Returns 0 when unknown (then why says why). */
typedef struct ljp_mcmap_stats {
  uint32_t bytes, exact_bytes, spans, untrusted, runs, anchors;
  const char *why;    /* when unknown: why (a static string) */
} ljp_mcmap_stats;
int ljp_mcmap_stats_of(uintptr_t T, ljp_mcmap_stats *st);

/* [any] Free every cached map (a flush, the end of a run, a test). */
void ljp_mcmap_clear(void);

/* -- Names ------------------------------------------------------------------- */

/* [safe] Learn the fast-function ids and library C-function names once
** per process, in a state of ljprof's own; name the program's own
** modules' C functions from package.loaded (raw reads, no Lua run). */
void ljp_ffid_learn_own(void);
void ljp_cname_refresh(lua_State *L);
/* [safe] What a walk of package.loaded would see change: the loader's
** generation and the number of entries of package.loaded and of _G
** (raw reads). */
uint64_t ljp_cname_sig(lua_State *L);
/* [any] The Lua name of fast function ffid ("pcall") into buf; 1 if one
** was learnt. */
int ljp_ffid_name(int ffid, char *buf, size_t n);
/* [any] The name learnt for the C entry cf put into sb: 1; else 0, and
** when ffid is not NULL, *ffid set to the fast-function id its entry
** point gives (left as it is when no fast function has that entry point;
** LJP_FFID_AMBIGUOUS when several do). No Lua. */
int ljp_cfunc_learnt(struct ljp_buf *sb, int (*cf)(lua_State *), int *ffid);
/* Names of C functions into a report's text (dumpstack.c, completion):
** by its C entry ("string.rep" / "cjson.encode" / [builtin#N] / @0x...;
** 1 if named; no Lua); a C function's entry as ljprof's reports name it,
** the same in every run (no ASLR address): its Lua name, else its symbol,
** else "<object>+0x<offset>"; "@0x..." only for code in no loaded object
** (may read an object's symbols); the C function object on top of L (left
** in place), as jit.profile prints it: [builtin#N], [builtin#?] (a fast
** function that cannot be told without calling Lua) or @0x.... helper: a
** running thread on which jit.util.funcinfo may be called for a fast
** function not seen before; NULL at the safe point and in hooks. [safe] */
int ljp_put_cfunc(struct ljp_buf *sb, int (*cf)(lua_State *));
void ljp_put_code_name(struct ljp_buf *sb, uintptr_t cf);
void ljp_put_ffunc(struct ljp_buf *sb, lua_State *L, lua_State *helper);
/* Forget every name learnt (the library is being unloaded). */
void ljp_names_release(void);
/* A context's naming memory (forget the look-ups done) and its Lua
** functions seen live. */
void ljp_cname_memo_reset(ljp_cname_memo *m);
/* [safe] At most limit look-ups (0: no limit); each: every function
** looked up, not once each (the memo's owner sets its policy: names.c). */
void ljp_cname_memo_limit(ljp_cname_memo *m, uint32_t limit, int each);
/* [safe] The state's searches by value for a Lua function's name that
** its index could not answer, and of them the ones run (the others
** deferred after many that found nothing: names.c); 0 before the first. */
/* names.c's search by value for the prototype of the Lua function at
** stack index idx (tests: ljprof._name_by_value): as ljp_lname_by_value,
** 1 with the name in buf (nothing pushed), 0 none, -1 deferred. */
int ljp_lname_by_value_at(lua_State *L, int idx, char *buf, size_t n);
void ljp_lname_byval_counts(lua_State *L, uint64_t *searches,
                            uint64_t *scans);
/* [safe] Put cf's name into sb (emptied first), refreshing the names
** from package.loaded when it has none and the memory allows; 1 if
** named. Raw access only: may run at the safe point and in the call
** hook (calls.c). */
int ljp_name_cfunc(ljp_cname_memo *m, lua_State *L, int (*cf)(lua_State *),
                   struct ljp_buf *sb);
/* [safe] Walk package.loaded for C functions' names now (a run's start),
** remembered in m: ljp_name_cfunc walks again only when what the walk
** would see changed (ljp_cname_sig). */
void ljp_cname_walk(ljp_cname_memo *m, lua_State *L);
/* [safe] A fast function without a C entry, at idx of L: [builtin#N]
** from the object's id byte when the probe found it, else as
** ljp_put_ffunc. No Lua. */
void ljp_put_ffunc_at(struct ljp_buf *sb, lua_State *L, int idx);
void ljp_fnames_init(ljp_fnames *t);
void ljp_fnames_free(ljp_fnames *t, lua_State *L);

#endif
