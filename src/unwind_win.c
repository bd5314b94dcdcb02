/*
** Windows: native frames are not captured (unwind.h). RtlVirtualUnwind
** over .pdata would need RtlLookupFunctionEntry, which may take the
** loader's lock, and the profiled thread is suspended at any
** instruction, possibly holding it: not shown safe, so Lua frames only
** (docs/usage.md, "Windows"). Normal context (setup), sampling context
** (capture: never called, native_on stays 0).
*/
#ifdef _WIN32  /* the rock compiles every src file: nothing elsewhere */
#include "ljp.h"
#include "unwind.h"

int ljp_native_setup(ljp_ctx *ctx, lua_State *L, const char **why)
{
  (void)ctx; (void)L;
  *why = "not captured on Windows (Lua frames only)";
  return -1;
}

void ljp_native_refresh(void) {}

int ljp_native_capture(ljp_ctx *ctx, const struct ljp_regs *regs, uintptr_t pc,
                       int vmstate, uintptr_t *out, uint8_t *flags,
                       uintptr_t *tret, uint64_t *nfuncs, uintptr_t *nleaf)
{
  (void)ctx; (void)regs; (void)pc; (void)vmstate; (void)out; (void)flags;
  (void)tret; (void)nfuncs; (void)nleaf;
  return 0;
}

#endif /* _WIN32 */
