/*
** LuaJIT's profiling mode for exact inlined frames (jitmode.c). Normal
** context, on the profiled thread.
*/
#ifndef LJP_JITMODE_H
#define LJP_JITMODE_H

#include <stddef.h>

#include <lua.h>

#include "../include/ljprof.h"

/* Turn the mode on: 0, or -1 with one line in err (a clock whose signal
** is SIGPROF, LuaJIT's profiler's: itimer). */
int ljp_jitmode_start(lua_State *L, ljprof_clock clock, char *err, size_t n);
/* Turn it off: every trace compiled in it is flushed. */
void ljp_jitmode_stop(lua_State *L);

#endif
