/*
** ljprof's own Lua states (ownstate.c): the writers' states (the exit
** helper's, the export helper's, ljprof.write_apart's, the C API output's
** of writer.c) and the states that
** learn LuaJIT's layouts. Their standard libraries are opened while this
** thread is marked, so that the LD_PRELOAD interposer of luaL_openlibs
** (preload.c) never starts profiling in them. A writer's state reads the
** context of the state it writes for through a view: its registry mapped
** to that context while it runs. Normal context.
*/
#ifndef LJP_OWNSTATE_H
#define LJP_OWNSTATE_H

#include <stddef.h>

#include <lua.h>

/* A new state with the standard libraries opened and, when not NULL, the
** given package.path and package.cpath (a helper that loads ljprof's
** Lua modules as the program found them); NULL when out of memory. */
lua_State *ljp_own_newstate(const char *path, const char *cpath);

/* A new state with the base, package and jit libraries only (the layout
** probes'), else as ljp_own_newstate(NULL, NULL); NULL: out of memory. */
lua_State *ljp_own_newstate_jit(void);
/* Non-zero while this thread opens the libraries of one of ljprof's own
** states (read by the interposer). */
int ljp_own_opening(void);

/* The Lua module's opener (luaopen_ljprof, which gives it at each open):
** a writer's state loads `ljprof` from this library, not another copy
** that package.cpath may find. */
void ljp_own_set_opener(lua_CFunction open);

/* A writer's state: a new state (as ljp_own_newstate) whose `ljprof` is
** this library (package.preload, once the opener is given), that has
** required module and holds
** module[func] on the top of its stack. NULL, and one line in err naming
** module.func and the reason, when out of memory or when the module does
** not load or has no such function. */
lua_State *ljp_own_writer(const char *path, const char *cpath,
                          const char *module, const char *func,
                          char *err, size_t errlen);

/* Write with ljp_own_writer's module[func](arg), reading ctx (a view set
** for the call), in a state closed after it: 0, or -1 and one line in
** err. */
int ljp_own_write(const char *path, const char *cpath, const char *module,
                  const char *func, void *ctx, const char *arg, size_t arglen,
                  char *err, size_t errlen);

/* Views: while set, ljprof's functions called in the state whose registry
** is registry read ctx (api.c ljp_ctx_get), not a context of their own.
** set: 0, or -1 when LJP_OWN_VIEWS views are set already. ljp_own_view is
** NULL for a registry without a view: one atomic load when none is set. */
#define LJP_OWN_VIEWS 16
int ljp_own_view_set(const void *registry, void *ctx);
void ljp_own_view_clear(const void *registry);
void *ljp_own_view(const void *registry);

#endif
