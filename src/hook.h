/*
** The hook owner: every lua_sethook/lua_gethook of ljprof goes through
** here (the VM probe's own short-lived hooks excepted).
**
** A Lua state has one hook. ljprof shares it with the program: between
** samples the program's hook is installed ("rest"), or, while calls are
** counted, ljprof's hook with the program's mask plus LUA_MASKCALL. A
** sample arms ljprof's hook with the count bit and count 1, so that it
** fires at the next interpreted bytecode (the safe point), and with the
** call bit, so that it also fires when the interpreter enters a function
** with no bytecode dispatched first: LuaJIT's count hook sits only in the
** dispatch of instructions, and a compiled loop calling C through
** stitched traces (trace end -> lj_vm_exit_interp -> the C function's
** header -> lj_cont_stitch -> the next trace) dispatches none (not while
** the program has a line hook, nor for a tick in the interpreter:
** ljp_hook_arm_for).
**
** Signal context may call ljp_hook_arm(_for), ljp_hook_armed, ljp_hook_arm_safe
** and ljp_hook_rest (lua_gethook*, lua_sethook only: LuaJIT's luajit.c sets
** a hook from its SIGINT handler). Everything else is normal context on the
** profiled thread, inside ljp_hook_enter/ljp_hook_leave when it changes the
** hook, so that the handler keeps away meanwhile.
*/
#ifndef LJP_HOOK_H
#define LJP_HOOK_H

#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>

#include <lua.h>

#include "ring.h"

typedef struct ljp_hookst {
  lua_State *L;             /* hooks are per state: any thread of it */
  lua_Hook fn;              /* ljprof's hook (the safe point) */
  ljp_ring *ring;           /* its pending records want a safe point */
  volatile sig_atomic_t live; /* a run is live: samples may arm (set by
                                 run control: ljp_hook_live) */
  /* The program's own hook, saved while ours is installed. */
  lua_Hook user;
  int user_mask, user_count;
  /* The program's count hook countdown when we armed (-1: none or not
  ** known), carried over the sample so that its events keep their
  ** spacing; user_due: that countdown ran out at the safe point. */
  int32_t user_left;
  int user_left_saved, user_due;
  uintptr_t g;              /* global_State when learnt (vmprobe), or 0 */
  volatile sig_atomic_t busy;      /* profiler code is changing the hook */
  volatile sig_atomic_t recording; /* the trace recorder is active */
  volatile sig_atomic_t counting;  /* calls are counted: call mask kept */
  int held;                 /* our armed hook held back while recording */
  /* Return address of the hook call inside LuaJIT's callhook, learnt at
  ** each safe point (ljp_hook_arm_safe), one per kind of event: [0] a
  ** count event (lj_dispatch_ins), [1] a call event (lj_dispatch_call);
  ** the compiler may inline callhook into each. */
  _Atomic uintptr_t callhook_ret[2];
} ljp_hookst;

/* Set up for state L, whose samples wait in ring (normal context). The
** hook function is given at each start (ljp_hook_bind): the safe point is
** an entry point above this module. */
void ljp_hook_init(ljp_hookst *h, lua_State *L, ljp_ring *ring);
void ljp_hook_bind(ljp_hookst *h, lua_Hook fn);
/* Run control: a run is live (samples may arm) or not; a new run (no
** program hook saved from an earlier one). */
void ljp_hook_live(ljp_hookst *h, int live);
void ljp_hook_new_run(ljp_hookst *h);
/* The state's global_State as learnt by the VM probe (0: unknown). */
void ljp_hook_set_global(ljp_hookst *h, uintptr_t g);

/* The busy fence around normal-context hook changes. */
static inline void ljp_hook_enter(ljp_hookst *h)
{
  h->busy = 1;
  atomic_signal_fence(memory_order_seq_cst);
}
static inline void ljp_hook_leave(ljp_hookst *h)
{
  atomic_signal_fence(memory_order_seq_cst);
  h->busy = 0;
}

/* -- Signal context -------------------------------------------------------- */

/* Is our count hook armed (a sample waits for the next bytecode)? */
int ljp_hook_armed(const ljp_hookst *h);
/* Arm the safe point from the hook state as it is now (never a remembered
** flag); saves the program's hook when the installed one is not ours. */
void ljp_hook_arm(ljp_hookst *h);
/* The same, with the call bit only if call (a tick in the interpreter
** needs none: its next bytecode comes first); an armed hook without the
** call bit gets it when call asks. */
void ljp_hook_arm_for(ljp_hookst *h, int call);
/* May a signal that interrupted pc arm? Not inside LuaJIT's callhook
** window, where a lua_sethook is half undone (docs/design.md, "Signal
** handler"). */
int ljp_hook_arm_safe(const ljp_hookst *h, uintptr_t pc);
/* The state between samples: the program's hook, or ours with the
** program's mask plus LUA_MASKCALL while counting. */
void ljp_hook_rest(ljp_hookst *h);

/* -- Normal context -------------------------------------------------------- */

/* The safe point starts, inside ljp_hook_enter: remember where LuaJIT
** called us from (ret), put the rest state back. */
void ljp_hook_safepoint(ljp_hookst *h, uintptr_t ret, int ev);
/* Did the program's count hook come due at this safe point? (once) */
int ljp_hook_take_due(ljp_hookst *h);
/* Is the installed hook ljprof's? */
int ljp_hook_is_ours(const ljp_hookst *h);
/* The program's hook: the installed one, or the one saved while ours is
** armed (any thread, a plain read: exit_win.c watches luajit's
** interrupt hook being taken). */
lua_Hook ljp_hook_program(const ljp_hookst *h);
/* Take the rest state back (after a sample, at stop). */
void ljp_hook_disarm(ljp_hookst *h);
/* Make sure pending samples reach a safe point: arm while the run is live
** and records are pending, unless the recorder runs (a hook change would
** abort its trace). A signal that arrives after this arms by itself. */
void ljp_hook_settle(ljp_hookst *h);
/* Forward a program event (LUA_HOOK*) that reached our hook to the
** program's hook, if its mask asks for it. 1: the program's hook was
** called; 0: the event was ljprof's alone (a call event of the arming). */
int ljp_hook_forward(ljp_hookst *h, lua_State *L, lua_Debug *ar, int ev);
/* Counting calls: save the program's hook and install the counting rest
** state (start), or put the program's hook back (stop). */
void ljp_hook_count_calls(ljp_hookst *h, int on);
/* debug.sethook while counting: the program just set its hook; it becomes
** the saved one and ours goes back on top. */
void ljp_hook_program_set(ljp_hookst *h);
/* debug.gethook while counting: install the program's hook (its call bit
** cleared) for the original to read, then put ours back (restore). */
void ljp_hook_expose_program(ljp_hookst *h);
void ljp_hook_restore(ljp_hookst *h);
/* The trace recorder starts (on) or ends (off). g: the global_State for
** the hook countdown, or 0. While it records, an armed hook is held back
** by its countdown (no lua_sethook: that would abort the trace). */
void ljp_hook_recording(ljp_hookst *h, uintptr_t g, int on);
/* Trace events were missed or are no longer watched: nothing records. */
void ljp_hook_forget_recorder(ljp_hookst *h);
/* Our hook found no profiler context: remove it (cannot happen). */
void ljp_hook_clear(lua_State *L);

#endif
