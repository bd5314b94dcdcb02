/*
** Names of C functions, fast functions and Lua functions (names.c), as
** ljprof's reports print them:
**
**   C and fast functions  "string.rep", [builtin#N], a symbol, or
**                         "<object>+0x<offset>", from what ffid.c learnt
**                         and the object registry's symbols;
**   naming a C function at the safe point or in the call hook, with a
**                         memory of the functions already looked up;
**   Lua functions         by the live frames that showed them, or by the
**                         variable or field holding them.
**
** Normal context only (mutex, malloc). Functions taking a helper call Lua
** on it only when it is non-NULL; everything else calls no Lua.
*/
#ifndef LJP_NAMES_H
#define LJP_NAMES_H

#include <stdint.h>

#include <lua.h>

#include "buf.h"
#include "vm.h"

/* Naming a fast function at a stack slot (ljp_put_ffunc_at), a C
** function whose name may have appeared since the last look
** (ljp_name_cfunc, with its memory ljp_cname_memo: vm_luajit.h) and the
** memory's policy (ljp_cname_memo_limit): vm.h. */

/* -- Lua functions seen live, for frames captured at a signal -------------- */

/* A Lua function's names as a live frame showed them (ljp_fname), kept
** by the function object's address, proven alive by a weak-valued
** registry table at each lookup; by prototype (ljp_pname): vm_luajit.h.
** Made and freed with the context: ljp_fnames_init, ljp_fnames_free
** (vm.h). */

/* Remember the function at stack index fidx of L. */
void ljp_fnames_learn(ljp_fnames *t, lua_State *L, int fidx,
                      const char *source, const char *name, int linedefined);
/* The function at address fn, if it was seen and is still alive. */
const ljp_fname *ljp_fnames_get(const ljp_fnames *t, lua_State *L,
                                uintptr_t fn);
/* Is the live function fn (alive: on the stack, an argument) known, as
** the same function (prototype) that was learnt at its address? */
int ljp_fnames_has(const ljp_fnames *t, uintptr_t fn);
/* The names learnt for the function at address fn whose prototype's first
** instruction was bc, without proving the function alive (no Lua: any
** thread while the profiled one is parked, the helper after an exit
** signal): names of the same prototype, or NULL. */
const ljp_fname *ljp_fnames_peek(const ljp_fnames *t, uintptr_t fn,
                                 uintptr_t bc);
/* The name learnt for a function of the prototype whose first
** instruction is bc and whose signature (ljp_proto_sig, read while it is
** alive) is sig; NULL when none was learnt. */
const char *ljp_fnames_proto_name(const ljp_fnames *t, uintptr_t bc,
                                  uint64_t sig);
/* Remember name for the prototype whose first instruction is bc (alive);
** "" when a search found none (ljp_lname_by_value: not searched again). */
void ljp_fnames_proto_learn(ljp_fnames *t, uintptr_t bc, const char *name);
/* Was a name learnt or searched for that prototype? */
int ljp_fnames_proto_searched(const ljp_fnames *t, uintptr_t bc,
                              uint64_t sig);

/* A name for a Lua function of the prototype whose first instruction is
** bc, found by where one is kept: a local or an upvalue of a live level
** (the name lua_getinfo gives a call through that variable), a global, or
** a field of a loaded module. Looked up in an index (names.c) built by a
** few bounded walks per run, so a call costs the same whatever the size of
** the program. Copied into buf, the function pushed; 0 (nothing pushed)
** when none is found; -1 (nothing pushed) when the search was deferred
** (after many searches that found nothing, names.c): nothing was read, the
** caller may ask again later for that prototype. For a function that runs
** only inside compiled traces, which no safe point sees live. Normal
** context, profiled thread (no Lua code is run). */
int ljp_lname_by_value(lua_State *L, uintptr_t bc, char *buf, size_t n);
/* The same, without the walk of the globals (the live levels only, those
** read lately passed over: names.c byval_live): what a safe point may
** do for a trace's start function (the walk waits for the run's end). */
int ljp_lname_live(lua_State *L, uintptr_t bc, char *buf, size_t n);
/* The index alone, a few raw table reads whatever the program's size: 1
** and the name of prototype bc copied into buf (nothing pushed), or 0. */
int ljp_lname_indexed(lua_State *L, uintptr_t bc, char *buf, size_t n);
/* One search into the index whatever the waits and walks before: the
** live levels, then the globals and loaded modules (bounded as above:
** about 0.6 M instructions). Once per run, at its end (luaframes.c
** ljp_frames_name_late), never at a safe point. */
void ljp_lname_search_all(lua_State *L);
/* (ljp_lname_byval_counts: vm.h) */

#endif
