/*
** Windows: exit signals (exit_signals.h). There are no SIGTERM/SIGHUP/
** SIGINT to trap here; console control events are not handled by
** ljprof yet, so on_signal fails with one line (jit.prof prints it once).
** Ctrl-C reaches luajit.exe's own SIGINT handler (the C runtime runs it
** on the console control handler's thread; it sets a hook), whose
** "interrupted!" error ends the program through the error path, which
** writes the profile (tests/windows/ctrlc.py); a console's close, or
** Ctrl-C in a host without such a handler, ends the process unwritten.
** Otherwise the profile is written by stop, lua_close and os.exit
** (jit/prof.lua) only. With no helper thread nothing ever closes
** or borrows a context: the gate's functions find nothing to wait for.
** Normal context.
*/
#ifdef _WIN32  /* the rock compiles every src file: nothing elsewhere */
#include <stdlib.h>

#include <lauxlib.h>

#include "ljp.h"
#include "exit_signals.h"

int ljp_exit_signals_on(ljp_ctx *ctx, lua_State *L, int names,
                        const char *module, const char *func,
                        const char *arg, size_t arglen)
{
  (void)ctx; (void)names; (void)module; (void)func; (void)arg; (void)arglen;
  return luaL_error(L, "ljprof: exit signals are not trapped on Windows "
                    "(closing the console loses the profile; Ctrl-C keeps "
                    "it where luajit's interrupted! error ends the "
                    "program)");
}

void ljp_exit_signals_off(ljp_ctx *ctx) { (void)ctx; }
void ljp_exit_signals_hold(ljp_ctx *ctx) { (void)ctx; }
void ljp_exit_signals_release(ljp_ctx *ctx) { (void)ctx; }
void ljp_exit_int_watch(void) {}
int ljp_exit_write_now(void) { return 0; }

/* Never: no exit signal comes (ctx->exit.signal stays 0). */
void ljp_exit_handover(ljp_ctx *ctx)
{
  (void)ctx;
  abort();
}

void ljp_exit_close(ljp_exitst *x) { x->closed = 1; }

/* Never: only a helper closes a context, and there is none. */
void ljp_exit_park(void) { abort(); }
int ljp_exit_is_helper(void) { return 0; }
void ljp_lend_wait(ljp_exitst *x) { (void)x; }

#endif /* _WIN32 */
