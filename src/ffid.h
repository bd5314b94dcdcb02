/*
** Fast-function ids and C-function names learnt by walking what Lua can
** reach (ffid.c): the one owner of those tables; names.c formats them.
**
**   fast-function ids   learnt in normal context with Lua calls
**                       (jit.util.funcinfo), looked up anywhere after;
**   C-function names    "string.rep", "cjson.encode", "print": learnt
**                       on the same walk, or from package.loaded by raw
**                       table reads only, so a refresh may run at the
**                       safe point.
**
** Normal context only (mutex, malloc). Functions taking a helper call Lua
** on it only when it is non-NULL; everything else calls no Lua.
*/
#ifndef LJP_FFID_H
#define LJP_FFID_H

#include <stddef.h>

#include <lua.h>

#include "buf.h"
#include "vm.h"

/* Learn fast-function ids (and C-function names) from package.loaded, the
** string and file methods, the FFI metamethods and a coroutine.wrap
** closure. Calls Lua: normal context, L running. */
void ljp_ffid_learn(lua_State *L);
int ljp_ffid_known(void);         /* has anything been learnt? */
/* The same in a Lua state of ljprof's own, S, with ffi loaded first (its
** metatables are learnt too): the ids and entries of LuaJIT's libraries
** are the same in every state, and learning calls Lua and allocates, which
** would shift the program's objects (and LuaJIT's choice of traces with
** them). Once the state is closed, ljp_ffid_own_closed forgets the objects
** learnt by address (entry points stay). A run's start learns them in the
** state it learns LuaJIT's layouts in (vmlearn.c); ljp_ffid_learn_own
** (vm.h) makes and closes a state for it (a dump before any run). Not at
** require: a run pays for one state, not two. The program's own modules
** are named by ljp_cname_refresh (raw reads). */
void ljp_ffid_learn_in(lua_State *S);
void ljp_ffid_own_closed(void);

/* Once per process in a state of ljprof's own (ljp_ffid_learn_own), the
** Lua name of a fast function (ljp_ffid_name), forgetting every name
** (ljp_names_release), and naming C functions in package.loaded with raw
** access only, so at the safe point (ljp_cname_refresh): vm.h. */
void ljp_cname_add(lua_CFunction cf, const char *name);

/* ljp_cfunc_learnt: vm.h (the safe point's completion asks it too). */

/* The fast-function id of the C function object on top of L (left in
** place): > 0, 0 for a plain C function, LJP_FFID_AMBIGUOUS when it
** cannot be told without calling Lua. With a helper (a running thread,
** normal context) an unknown function is asked from jit.util.funcinfo;
** without one no Lua is called. */
#define LJP_FFID_AMBIGUOUS (-1)
int ljp_ffid_of(lua_State *L, lua_State *helper);
/* The same without a helper: > 0, 0 for a plain C function, -1 when it
** cannot be told without calling Lua. No Lua. */
int ljp_ffid_top(lua_State *L);

#endif
