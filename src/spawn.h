/*
** The ljprof command's child process and its side channels (spawn.c):
** run a program and wait for it, passing exit signals on to it; unnamed
** temporary files; the progress writer of a profiled child.
*/
#ifndef LJP_SPAWN_H
#define LJP_SPAWN_H

#include <lauxlib.h>

/* spawn, tmpfd, fd_read, fd_close, isatty, progress (see spawn.c). */
extern const luaL_Reg ljp_spawn_funcs[];

#endif
