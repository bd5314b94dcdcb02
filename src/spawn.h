/*
** The ljprof command's child process (spawn.c): run a program and wait
** for it, passing SIGTERM and SIGHUP on to it.
*/
#ifndef LJP_SPAWN_H
#define LJP_SPAWN_H

#include <lua.h>

/* ljprof.spawn(argv) -> "exit", code | "signal", signo; nil, message. */
int ljp_spawn(lua_State *L);

#endif
