/*
** Windows: the object registry (objects.h) with two objects: LuaJIT's
** (the image holding lua_atpanic: lua51.dll, or the exe that links LuaJIT
** in) and ljprof's own (ljprof.dll), each one span over its whole image,
** found once in normal context (ljp_objects_refresh: the loader's lock)
** and never freed (static): the sampler (the timer thread, the profiled
** thread stopped) reads them without a lock. Everything else is "other"
** code; native frames are not captured on Windows (unwind_win.c), so no
** other module is listed and lookups for naming find nothing (an address
** is named as LuaJIT names it). The interpreter's own extent is not known
** (codemap.c then takes LuaJIT's whole image for it). The reclamation
** epoch is epoch.c's, as on Linux.
*/
#ifdef _WIN32  /* the rock compiles every src file: nothing elsewhere */
#include <stdatomic.h>
#include <string.h>

#include <lua.h>

#include "os.h"
#include "objects.h"

static _Alignas(16) unsigned char snap_mem[sizeof(ljp_objsnap) +
                                          2 * sizeof(ljp_span)];
#define SNAP ((ljp_objsnap *)snap_mem)
static _Atomic(const ljp_objsnap *) cur;
static ljp_os_lock build_lock = LJP_OS_LOCK_INIT;

const ljp_objsnap *ljp_objects_snap(void) { return atomic_load(&cur); }

const ljp_span *ljp_objects_find(const ljp_objsnap *s, uintptr_t pc)
{
  return s ? ljp_span_find(s->span, s->nspan, sizeof(ljp_span), pc) : NULL;
}

int ljp_objects_interp_known(void) { return 0; }

/* No loader generation is kept here (no module but the two is listed):
** the C names' walk (ffid.c: ljp_cname_sig) goes by package.loaded's and
** _G's entries alone. */
unsigned long long ljp_dl_generation(void) { return 0; }

int ljp_objects_is_self(uintptr_t pc)
{
  const ljp_span *e = ljp_objects_find(ljp_objects_snap(), pc);
  return e && e->kind == LJP_SPAN_SELF;
}

/* Once: the two images, sorted by address. */
void ljp_objects_refresh(void)
{
  uintptr_t lo[2], hi[2];
  int kind[2] = {LJP_SPAN_VM, LJP_SPAN_SELF}, i, n = 0;
  if (atomic_load(&cur)) return;
  ljp_os_lock_take(&build_lock);
  if (!atomic_load(&cur)) {
    if (ljp_os_module_of((uintptr_t)ljp_os_lua_symbol("lua_atpanic"),
                         &lo[0], &hi[0]) == 0 &&
        ljp_os_module_of((uintptr_t)&ljp_objects_refresh, &lo[1],
                         &hi[1]) == 0) {
      int order[2] = {0, 1};
      if (lo[1] < lo[0]) { order[0] = 1; order[1] = 0; }
      for (i = 0; i < 2; i++) {
        int k = order[i];
        if (n && lo[k] == SNAP->span[n - 1].lo) continue;  /* one image */
        SNAP->span[n].lo = lo[k];
        SNAP->span[n].hi = hi[k];
        SNAP->span[n].kind = (uint16_t)kind[k];
        SNAP->span[n].unwind = 0;
        SNAP->span[n].obj = 0;
        n++;
      }
      SNAP->nspan = (uint32_t)n;
      atomic_store(&cur, SNAP);
    }
  }
  ljp_os_lock_drop(&build_lock);
}

void ljp_objects_release(void) { ljp_epoch_release(); }

int ljp_objects_have_vm(void)
{
  ljp_objects_refresh();
  return atomic_load(&cur) != NULL;
}

int ljp_objects_proc(uintptr_t pc, uintptr_t *lo, uintptr_t *hi)
{
  (void)pc; (void)lo; (void)hi;
  return 0;
}

int ljp_objects_is_sigreturn(uintptr_t pc) { (void)pc; return 0; }

int ljp_objects_lookup(uintptr_t a, ljp_objinfo *out)
{
  (void)a; (void)out;
  return 0;
}

#endif /* _WIN32 */
