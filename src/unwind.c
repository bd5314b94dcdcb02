/*
** Native stacks: the capture in the signal handler, and libunwind's
** set-up for it. The loaded objects, their unwind info and the
** interpreter's extent are the object registry's (objects.c).
**
** ljp_native_capture runs in signal context: no malloc, no locks, no
** stdio, bounded work (at most LJP_NATIVE_MAX frames), and every skipped
** walk is counted. It walks the C frames above the Lua code with
** libunwind's local unwinder, from the signal's ucontext, and stops at the
** first frame of LuaJIT's interpreter or of compiled trace code (machine
** code that belongs to no loaded object): the Lua side of the stack is
** read at the safe point.
**
** The hazard of unwinding in a signal handler is libunwind's lookup of
** unwind info, which iterates the loader's list of objects and so takes
** the dynamic loader's lock (deadlocks with dlopen/dlsym/dladdr, see
** docs/design.md). The installed libunwind (1.6) has no
** unw_set_iterate_phdr_function, so ljprof never lets that lookup run:
** once set up here, the registry registers every loaded object's
** .eh_frame_hdr search table with libunwind as dynamic unwind info, which
** libunwind consults first, and the handler only steps from a frame whose
** PC lies in a registered span of the registry's snapshot. A frame
** anywhere else ends the walk (counted as truncated). The handler skips
** the walk (counted) while the loader is changing its list of objects,
** and whenever that list no longer matches the fingerprint taken with the
** snapshot. The whole walk is one epoch section: the snapshot and the
** unwind info it reaches (even if cancelled meanwhile) are not freed
** under it. Normal-context libunwind calls block signals on their
** thread, and a per-context flag guards the handler's walk.
*/
#define _GNU_SOURCE
#define UNW_LOCAL_ONLY
#include <dlfcn.h>
#include <lauxlib.h>
#include <libunwind.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ljp.h"
#include "codemap.h"
#include "objects.h"
#include "unwind.h"

static pthread_mutex_t uw_mu = PTHREAD_MUTEX_INITIALIZER;
static int uw_status;       /* 0 not set up, 1 ready, -1 unavailable */
static char uw_why[160];

/* -- Finding the interpreter ------------------------------------------- */

/* A lua_CFunction called from Lua: the frame above it is LuaJIT's
** interpreter, whose code is one unwind entry (FDE); every call of a C
** function from interpreted code returns into it. */
static int interp_probe(lua_State *L)
{
  unw_context_t uc;
  unw_cursor_t cur;
  unw_proc_info_t pi;
  unw_word_t ip = 0;
  sigset_t old;
  ljp_signals_block(&old);
  if (unw_getcontext(&uc) == 0 && unw_init_local(&cur, &uc) == 0 &&
      unw_step(&cur) > 0 && unw_get_reg(&cur, UNW_REG_IP, &ip) == 0 &&
      unw_get_proc_info(&cur, &pi) == 0) {
    lua_pushnumber(L, (lua_Number)ip);
    lua_pushnumber(L, (lua_Number)pi.start_ip);
    lua_pushnumber(L, (lua_Number)pi.end_ip);
  } else {
    lua_pushnil(L);
    lua_pushnil(L);
    lua_pushnil(L);
  }
  ljp_signals_restore(&old);
  return 3;
}

static int find_interp(lua_State *L)
{
  uintptr_t ip, lo, hi;
  int top = lua_gettop(L), ok = 0;
  /* Called twice, from two call sites: both must return into the same
  ** entry, which must lie in LuaJIT's object (the registry checks). */
  if (luaL_loadstring(L, "local f = ... local a, b, c = f() "
                         "local d, e, g = (function() return f() end)() "
                         "return a, b, c, d, e, g") == 0) {
    lua_pushcfunction(L, interp_probe);
    if (lua_pcall(L, 1, 6, 0) == 0 && lua_isnumber(L, -6) &&
        lua_isnumber(L, -3)) {
      ip = (uintptr_t)lua_tonumber(L, -6);
      lo = (uintptr_t)lua_tonumber(L, -5);
      hi = (uintptr_t)lua_tonumber(L, -4);
      if (lo == (uintptr_t)lua_tonumber(L, -2) &&
          hi == (uintptr_t)lua_tonumber(L, -1) && ip >= lo && ip < hi &&
          hi - lo >= 1024 && hi - lo <= (4u << 20) &&
          ljp_objects_set_interp(lo, hi) == 0)
        ok = 1;
    }
  }
  lua_settop(L, top);
  return ok;
}

/* A throw-away unwind in normal context: libunwind initialises itself
** (address space, memory validation, per-thread cache) here rather than
** in the first signal handler. */
static void warm_up(void)
{
  unw_context_t uc;
  unw_cursor_t cur;
  sigset_t old;
  int i;
  ljp_signals_block(&old);
  if (unw_getcontext(&uc) == 0 && unw_init_local(&cur, &uc) == 0)
    for (i = 0; i < 4 && unw_step(&cur) > 0; i++) {}
  ljp_signals_restore(&old);
}

/* Normal context, on the thread that will be profiled, before its timer
** starts. Returns 0 when native stacks can be captured; otherwise -1 and
** why in *why (said once per process by the caller). */
int ljp_native_setup(lua_State *L, const char **why)
{
  int rc;
  pthread_mutex_lock(&uw_mu);
  if (uw_status == 0) {
    /* The per-thread cache needs no lock in the handler. Set once, before
    ** any unwind (not signal-safe). */
    unw_set_caching_policy(unw_local_addr_space, UNW_CACHE_PER_THREAD);
    if (!find_interp(L)) {
      uw_status = -1;
      snprintf(uw_why, sizeof(uw_why), "LuaJIT's interpreter code was not "
               "found by unwinding from a C function");
    } else {
      if (ljp_objects_unwind_enable() != 0) {
        uw_status = -1;
        snprintf(uw_why, sizeof(uw_why), "out of memory");
      } else {
        uw_status = 1;
      }
    }
  }
  rc = uw_status == 1 ? 0 : -1;
  pthread_mutex_unlock(&uw_mu);
  if (rc == 0) warm_up();  /* this thread's cache and TLS, every start */
  else if (why) *why = uw_why;
  return rc;
}

/* Normal context: re-register when a library was loaded or unloaded. */
void ljp_native_refresh(void)
{
  if (uw_status == 1) ljp_objects_refresh();
}

/* -- Capture (signal context) --------------------------------------------- */

static int is_vm(const ljp_span *e)
{
  return e->kind == LJP_SPAN_VM || e->kind == LJP_SPAN_INTERP;
}

static int capture(ljp_ctx *ctx, const ljp_objsnap *m, void *ucv, uintptr_t pc,
                   int vmstate, uintptr_t *out, uint8_t *flags)
{
  const ljp_span *e;
  unw_cursor_t cur;
  unw_word_t ip;
  int n = 0, vm;
  if (!m) return 0;
  if (!(e = ljp_objects_find(m, pc))) {
    if (ljp_codemap_classify(&ctx->map, pc, &(int32_t){0}) == 'C') {
      /* an object loaded since the last refresh (at the next safe point) */
      *flags = LJP_NATIVE_TRUNCATED;
      atomic_fetch_add_explicit(&ctx->n_native_truncated, 1,
                                memory_order_relaxed);
    }
    return 0;  /* otherwise trace code: nothing native on top */
  }
  if (e->kind == LJP_SPAN_INTERP) return 0;  /* the interpreter */
  /* Elsewhere in LuaJIT's own code, the interpreter's and the compiler's
  ** helpers have only LuaJIT frames above the Lua code, which are not
  ** shown: no walk. In C (a C module calling lua_* functions) and in the
  ** GC (which such a call may start), the walk reaches the caller. */
  if (is_vm(e) && vmstate != 'C' && vmstate != 'G') return 0;
  if (ctx->native_inside || _r_debug.r_state != RT_CONSISTENT ||
      ljp_objects_print() != m->print) {
    /* a walk already under way on this thread, the loader changing the
    ** list of objects, or a list that changed since the snapshot was
    ** built (a library unloaded, perhaps another mapped in its place): no
    ** walk until the next safe point has registered the change. */
    atomic_fetch_add_explicit(&ctx->n_native_skipped, 1,
                              memory_order_relaxed);
    *flags = LJP_NATIVE_SKIPPED;
    return 0;
  }
  ctx->native_inside = 1;
  atomic_signal_fence(memory_order_seq_cst);
  atomic_fetch_add_explicit(&ctx->n_native_unwinds, 1, memory_order_relaxed);
  vm = is_vm(e);
  out[n++] = pc;
  if (unw_init_local2(&cur, (unw_context_t *)ucv, UNW_INIT_SIGNAL_FRAME) < 0) {
    *flags = LJP_NATIVE_TRUNCATED;
  } else {
    for (;;) {
      if (!e->unwind || n == LJP_NATIVE_MAX ||
          unw_step(&cur) <= 0 || unw_get_reg(&cur, UNW_REG_IP, &ip) < 0) {
        *flags = LJP_NATIVE_TRUNCATED;
        break;
      }
      /* A return address: the call is the instruction before it. */
      e = ljp_objects_find(m, (uintptr_t)ip - 1);
      if (!e) {
        /* Code of no loaded object: a trace's machine code (or other
        ** generated code) called this C code. */
        if (ljp_codemap_classify(&ctx->map, (uintptr_t)ip, &(int32_t){0}) ==
            'C')
          *flags = LJP_NATIVE_TRUNCATED;  /* an object we have not seen */
        break;
      }
      if (e->kind == LJP_SPAN_INTERP) {  /* called from the interpreter */
        *flags = LJP_NATIVE_FROM_INTERP;
        break;
      }
      vm |= is_vm(e);
      out[n++] = (uintptr_t)ip;
    }
  }
  if (vm) *flags |= LJP_NATIVE_VM;
  if (*flags & LJP_NATIVE_TRUNCATED)
    atomic_fetch_add_explicit(&ctx->n_native_truncated, 1,
                              memory_order_relaxed);
  atomic_fetch_add_explicit(&ctx->n_native_frames, (uint64_t)n,
                            memory_order_relaxed);
  atomic_signal_fence(memory_order_seq_cst);
  ctx->native_inside = 0;
  return n;
}

int ljp_native_capture(ljp_ctx *ctx, void *ucv, uintptr_t pc, int vmstate,
                       uintptr_t *out, uint8_t *flags)
{
  int n, t;
  *flags = 0;
  /* One epoch section for the whole walk: the snapshot, and the unwind
  ** info libunwind reads from it, stay allocated until it ends. */
  if ((t = ljp_epoch_enter()) < 0) {
    atomic_fetch_add_explicit(&ctx->n_native_skipped, 1,
                              memory_order_relaxed);
    *flags = LJP_NATIVE_SKIPPED;
    return 0;
  }
  n = capture(ctx, ljp_objects_snap(), ucv, pc, vmstate, out, flags);
  ljp_epoch_leave(t);
  return n;
}
