/*
** The VM probe's interface (vmprobe.c): LuaJIT's private state, learnt at
** run time and proven before use. Signal-context readers are marked.
*/
#ifndef LJP_VMPROBE_H
#define LJP_VMPROBE_H

#include <stddef.h>
#include <stdint.h>

#include <lua.h>

#include "os.h"
#include "vm.h"


typedef struct ljp_vmlayout {
  int vmstate_ok;         /* g->vmstate located and proven */
  int cfunc_ok;           /* running C function readable */
  int frame_ok;           /* L->base, frame function slot, GCfuncC.f */
  int hookcount_ok;       /* g->hookcount located */
  volatile int jstate_ok; /* trace compiler state located (probe, events) */
  ptrdiff_t g_jstate;     /* after G: int32 trace compiler state */
  ptrdiff_t l_glref;      /* lua_State: pointer to global_State */
  ptrdiff_t l_base;       /* lua_State: base of the running frame */
  ptrdiff_t g_vmstate;    /* global_State: int32 VM state / trace number */
  ptrdiff_t g_curl;       /* global_State: running lua_State */
  ptrdiff_t g_hookcount;  /* global_State: int32 count hook countdown */
  ptrdiff_t fn_f;         /* function object: lua_CFunction entry */
  ptrdiff_t fn_ffid;      /* function object: 0 Lua, 1 C, > 1 library */
  int curl_size;          /* bytes of a GC reference: 8 or 4 */
  int gc64;               /* stack slot encoding: 64-bit GC references */
  int cframe_ok;          /* L->cframe located and proven */
  ptrdiff_t l_cframe;     /* lua_State: innermost C frame that entered the
                             VM on this thread, NULL when no call is active */
  int func_slot;          /* frame function: this many slots below base */
  int mainth_ok;          /* g->mainthref located and proven */
  ptrdiff_t g_mainth;     /* global_State: the state's main thread */
  char why[96];           /* why something is not used (must stay last) */
} ljp_vmlayout;

extern ljp_vmlayout ljp_vml;
#define LJP_FNOBJ 64  /* bytes of a function object the probe examines */

/* Normal context: probe once per process; returns vmstate_ok. */
int ljp_vmprobe(lua_State *L);
/* The global state, the VM state at a tick, the trace compiler's state:
** the VM interface (vm.h). LuaJIT asks the recorder to abort by clearing
** its state's "active" bit (lj_trace_abort, from every hook call); the
** safe point sets it again when the hook call was its own and nothing
** ran since (safepoint.c: ljp_vm_jstate, ljp_vm_jstate_set). */
/* The same from a probe loop that calls C on each iteration (luastack.c):
** first call, then each call; compiled: the call comes from the trace.
** Normal context. */
void ljp_vm_jstate_probe(uintptr_t g, int first, int compiled);
void ljp_vm_jstate_probe_done(void);
/* g->hookcount, read and set: vm.h (ljp_vm_hookcount*). */
/* g->vmstate as it is (0 when unknown), and put back: a Lua call made
** from a hook returns with the state "C" (its caller is C code) and the
** interpreter would run on under it until its next call returns. */
int32_t ljp_vm_state_save(uintptr_t g);
void ljp_vm_state_restore(uintptr_t g, int32_t st);
/* Does environment variable var read value? Read once into *cache (-1
** before); states of several threads may ask first at the same time
** (they all compute the same). */
int ljp_env_is(_Atomic int *cache, const char *var, const char *value);
/* ljp_peek (fault-safe read of our own memory): os.h. */
/* The same for the first n bytes after a global_State g (they lie in the
** one block LuaJIT allocates for the state's global and JIT data, so
** once read they stay readable while the state lives): one system call
** for the first read of g, plain copies after. Learning only (under the
** learning mutex). */
int ljp_peek_g(void *dst, uintptr_t g, size_t n);
/* ljp_self_pid, ljp_self_pid_cache: os.h. */

#endif
