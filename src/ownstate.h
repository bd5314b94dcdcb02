/*
** ljprof's own Lua states (ownstate.c): the exit helper's and the export
** helper's. Their standard libraries are opened while this thread is
** marked, so that the LD_PRELOAD interposer of luaL_openlibs (preload.c)
** never starts profiling in them. Normal context.
*/
#ifndef LJP_OWNSTATE_H
#define LJP_OWNSTATE_H

#include <lua.h>

/* A new state with the standard libraries opened and, when not NULL, the
** given package.path and package.cpath (a helper that loads ljprof's
** Lua modules as the program found them); NULL when out of memory. */
lua_State *ljp_own_newstate(const char *path, const char *cpath);
/* Non-zero while this thread opens the libraries of one of ljprof's own
** states (read by the interposer). */
int ljp_own_opening(void);

#endif
