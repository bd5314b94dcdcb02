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
** The package paths (what a writer's own Lua state loads with) are the
** program's, relative templates made absolute with Windows' rules.
** Normal context.
*/
#ifdef _WIN32  /* the rock compiles every src file: nothing elsewhere */
#include <direct.h>
#include <stdlib.h>
#include <string.h>

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

static char *dup_n(const char *s, size_t n)
{
  char *d = malloc(n + 1);
  if (d) {
    memcpy(d, s, n);
    d[n] = '\0';
  }
  return d;
}

/* Absolute on Windows: "C:...", "\..." or "/..." (a drive's root, a UNC
** path), or LuaJIT's "!" (the exe's directory). */
static int is_abs(const char *t, size_t k)
{
  return (k >= 2 && t[1] == ':') || t[0] == '\\' || t[0] == '/' ||
         t[0] == '!' || (k == 1 && t[0] == '?');
}

static char *abs_package_path(const char *v, size_t n)
{
  char cwd[4096];
  ljp_buf b = {0};
  size_t i = 0;
  if (!_getcwd(cwd, sizeof(cwd))) return dup_n(v, n);
  while (i <= n) {
    size_t j = i;
    while (j < n && v[j] != ';') j++;
    if (j > i && !is_abs(v + i, j - i)) {
      const char *t = v + i;
      size_t k = j - i;
      if (k >= 2 && t[0] == '.' && (t[1] == '/' || t[1] == '\\')) {
        t += 2;
        k -= 2;
      }
      ljp_buf_put(&b, cwd, strlen(cwd));
      ljp_buf_putc(&b, '\\');
      ljp_buf_put(&b, t, k);
    } else {
      ljp_buf_put(&b, v + i, j - i);
    }
    if (j < n) ljp_buf_putc(&b, ';');
    i = j + 1;
  }
  if (!b.b) return dup_n("", 0);
  b.b[b.n] = '\0';
  return b.b;
}

void ljp_package_paths(lua_State *L, char **path, char **cpath)
{
  size_t n;
  const char *v;
  *path = *cpath = NULL;
  lua_getglobal(L, "package");
  if (lua_istable(L, -1)) {
    lua_getfield(L, -1, "path");
    if ((v = lua_tolstring(L, -1, &n))) *path = abs_package_path(v, n);
    lua_getfield(L, -2, "cpath");
    if ((v = lua_tolstring(L, -1, &n))) *cpath = abs_package_path(v, n);
    lua_pop(L, 2);
  }
  lua_pop(L, 1);
}

#endif /* _WIN32 */
