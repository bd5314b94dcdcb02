/*
** The exit writer (exit_write.c): what the exit helpers of Linux
** (exit_signals.c, after SIGTERM/SIGHUP/SIGINT, and before an exec) and
** of Windows (exit_win.c, after a console control event) share, the part
** that does not depend on how the event came: what the writer loads (the
** spec, copied when the trap is set), the writer's Lua state of its own
** (ownstate.c) with a view of the context, and the write itself (the
** pending samples completed offline, then module[func](arg, name)).
** Normal context, on the thread that writes; the profiled thread has
** handed the context over (or is the caller, inside a gate region).
*/
#ifndef LJP_EXIT_WRITE_H
#define LJP_EXIT_WRITE_H

#include <stddef.h>

#include <lua.h>

typedef struct ljp_ctx ljp_ctx;

/* What the helper loads: the writer module[func], its argument, the
** program's package paths made absolute (malloc'ed copies). */
typedef struct ljp_exit_spec {
  char *module, *func, *arg, *path, *cpath;
  size_t arglen;
} ljp_exit_spec;

/* Copy them (the old ones freed first): 0, or -1 (out of memory). */
int ljp_exit_spec_copy(ljp_exit_spec *s, lua_State *L, const char *module,
                       const char *func, const char *arg, size_t arglen);
void ljp_exit_spec_free(ljp_exit_spec *s);

/* The writer's state: the writer and its argument at indexes 1 and 2, a
** view of ctx, *empty a thread of it with no frames (kept by a
** reference). NULL, and one line in err, on failure. */
lua_State *ljp_exit_writer(const ljp_exit_spec *s, ljp_ctx *ctx,
                           lua_State **empty, char *err, size_t errlen);
/* The pending samples completed offline (complete.c), then the writer
** called with (arg, name): 0, or -1 and the error in err. */
int ljp_exit_write(lua_State *HL, lua_State *empty, ljp_ctx *ctx,
                   const char *name, char *err, size_t errlen);
/* The view cleared, the state closed (NULL: nothing). */
void ljp_exit_writer_close(lua_State *HL);

#endif
