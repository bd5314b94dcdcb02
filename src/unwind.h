/*
** Native stacks, capture side (unwind.c): set-up and the walk in the
** signal handler (stepping with cfi.c). The objects it walks through, and their
** unwind info, are the object registry's (objects.h).
**
** Rules: ljp_native_capture is signal context (no malloc, no locks,
** bounded work, every skipped walk counted); the rest is normal context.
*/
#ifndef LJP_UNWIND_H
#define LJP_UNWIND_H

#include <stdint.h>

#include <lua.h>

typedef struct ljp_ctx ljp_ctx;
struct ljp_regs;

/* Normal context, on the thread to be profiled, before its timer starts:
** 0 when native stacks can be captured; otherwise -1 and why in *why. */
int ljp_native_setup(ljp_ctx *ctx, lua_State *L, const char **why);
/* Normal context: pick up libraries (un)loaded (once set up). */
void ljp_native_refresh(void);
/* Sampling context (sample.c): the native frames at pc, the walk started
** from regs (the thread's registers then), innermost first, into out
** (at most LJP_NATIVE_MAX); LJP_NATIVE_* flags into *flags; *tret: the
** return address into generated code (a trace) where the walk ended, or
** 0 (a helper of LuaJIT's called from a trace, vmstate 'N', shows no
** native frames but is walked to find it: the trace's snapshot there
** names the frames that called it); a hash of the functions the frames
** lie in (the start of each one's unwind entry, its address where none is
** found) into *funcs, 0 for no frame; the innermost and the outermost
** frame's functions (so found) into leaf[0] and leaf[1]. */
int ljp_native_capture(ljp_ctx *ctx, const struct ljp_regs *regs, uintptr_t pc,
                       int vmstate,
                       uintptr_t *out, uint8_t *flags, uintptr_t *tret,
                       uint64_t *funcs, uintptr_t *leaf);

#endif
