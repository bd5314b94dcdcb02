/*
** Lua frames live at the signal (luastack.c): a bounded walk of LuaJIT's
** frame chain, in the signal handler where the stack is known to be
** stable, so that a sample taken in compiled code, in a C function called
** from a trace, or in the GC under a trace shows the frames that were
** running then, not those of the next safe point.
**
** Layout facts are learnt once per process and proven against
** lua_getstack (ljp_luastack_probe); anything unproven leaves capture off
** and the safe point's stack is used, as before.
*/
#ifndef LJP_LUASTACK_H
#define LJP_LUASTACK_H

#include <stddef.h>
#include <stdint.h>

#include <lua.h>

#include "ring.h"
#include "vm.h"

typedef struct ljp_lslayout {
  int ok;               /* the walk is proven: frames, stack bound */
  int jit_ok;           /* g->jit_base located: captures under traces */
  ptrdiff_t l_stack;    /* lua_State: lowest slot of its stack */
  ptrdiff_t l_maxstack; /* lua_State: its last usable slot (-1: unknown) */
  ptrdiff_t g_jit_base; /* global_State: base of the running trace, or 0 */
  int lines_ok;         /* a Lua frame's PC can be turned into a line */
  ptrdiff_t fn_pc;      /* Lua function object: its first instruction */
  ptrdiff_t bc_first;   /* first instruction - this: int32 first line,
                           then int32 number of lines */
  ptrdiff_t bc_lineinfo; /* first instruction - this: the line table */
  char why[96];         /* why something is off */
} ljp_lslayout;

extern ljp_lslayout ljp_lsl;

/* Normal context: learn and prove the layout (once per process; the JIT
** part again at later starts until it succeeds). Needs ljp_vmprobe's
** frame layout. Returns ljp_lsl.ok. */
int ljp_luastack_probe(lua_State *L);

/* Signal context. The frames of the running thread when its stack is
** stable: in a trace (from g->jit_base), in the GC under a trace, in the
** trace compiler (from L->base, with the block check of c_mode 2), and in
** a C function: c_mode 1 when the native walk showed no frame of
** LuaJIT's code above it (it cannot be resizing the stack), 2 when that
** is not known: then the stack's whole block, L->stack to L->maxstack,
** must hold the base and be mapped right now (one fault-safe read of its
** two ends), 0 for no C capture; LJP_CAPTURE_RECORDING also captures the
** interpreter while the trace recorder records (state I, or C after a VM
** event handler returned to C; from L->base, a Lua function's frame, with
** the block check), whose tick cannot arm the hook; LJP_CAPTURE_HELPER (state
** C outside the interpreter) also a Lua function at the base: LuaJIT's
** own code running for it (the recorder after a VM event left the state
** C), with the block check. Fills rec->lua, nlua,
** lflags and lstack; 0 frames when it does not apply (the interpreter and
** a trace exit: the safe point follows at once there) or a check fails.
** ljp_luastack_capture and ljp_luastack_capture_blocked (normal context,
** on another thread, timer_thread.c: the frames of the state's thread
** while it is blocked in a system call inside a C or FFI call, every read
** of the thread's objects fault-safe, ljp_peek) are declared in vm.h. */

/* Normal context, in a hook of thread L (L->base is stored there): the
** live frames, innermost first, up to max; *bottom when all were read. */
int ljp_luastack_live(lua_State *L, ljp_lframe *out, int max, int *bottom,
                      uintptr_t *stack);

/* Normal context: the first instruction of Lua function fn (alive), which
** names its prototype; 0 when the layout was not proven. */
static inline uintptr_t ljp_fn_bc(uintptr_t fn)
{
  return ljp_lsl.lines_ok && fn
             ? *(const uintptr_t *)(fn + (uintptr_t)ljp_lsl.fn_pc) : 0;
}

/* Normal context: what distinguishes the prototype whose first
** instruction is bc (alive) from another allocated at the same address
** later: its first line, line count and first instruction. */
static inline uint64_t ljp_proto_sig(uintptr_t bc)
{
  int32_t fl[2];
  uint32_t ins;
  __builtin_memcpy(fl, (const void *)(bc - (uintptr_t)ljp_lsl.bc_first), 8);
  __builtin_memcpy(&ins, (const void *)bc, 4);
  return (((uint64_t)(uint32_t)fl[0] << 32) ^
          ((uint64_t)(uint32_t)fl[1] << 12)) ^ ins;
}

/* Normal context: the first line of that prototype. */
static inline int ljp_proto_firstline(uintptr_t bc)
{
  return *(const int32_t *)(bc - (uintptr_t)ljp_lsl.bc_first);
}

/* Normal context: the line of Lua function fn (alive) at bytecode PC pc
** (an instruction after a call, as a frame's link holds), or -1. */
int ljp_luastack_line(uintptr_t fn, uintptr_t pc);
/* The same for the prototype whose first instruction is bc (alive): at
** bytecode index pc, or at bytecode PC pc (as a frame's link holds). */
int ljp_luastack_line_bc(uintptr_t bc, int32_t pc);
int ljp_luastack_line_pc(uintptr_t bc, uintptr_t pc);
/* ljp_luastack_line_bc with fault-safe reads (any thread, the prototype
** possibly gone). */
int ljp_luastack_line_bc_safe(uintptr_t bc, int32_t pc);
/* The line of bytecode index pc of Lua function fn, as
** jit.util.funcinfo(fn, pc).currentline gives it (0: the first line), or
** -1 when the layout was not proven. */
int ljp_luastack_line_at(uintptr_t fn, int32_t pc);

/* Self-check (LJPROF_STACKS=check, used by the tests): at a safe point,
** the raw walk of thread L against lua_getstack, function by function.
** 1 when they agree, 0 when they differ, -1 when not checked (whether
** the mode is on: ljp_luastack_checking, vm.h). */
int ljp_luastack_check(lua_State *L);
/* A check's mismatch, one line on stderr (the first 5 of a process).
** Normal context. */
void ljp_check_say(const char *what);

#endif
