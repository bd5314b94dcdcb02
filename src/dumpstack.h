/*
** Stack dumps byte-identical to jit.profile.dumpstack (dumpstack.c): the
** formatter (fmt letters p f F l Z, levels, chunk names, pointers). Names
** of C and fast functions come from names.h.
**
** Normal context only (the safe point, hooks, Lua). Lua is called only on
** a non-NULL helper (the running thread), for jit.util.funcinfo of a fast
** function not seen before; NULL at the safe point and in hooks.
*/
#ifndef LJP_DUMPSTACK_H
#define LJP_DUMPSTACK_H

#include <stdint.h>

#include <lua.h>

#include "buf.h"
#include "ring.h"  /* LJP_NATIVE_MAX */
#include "store.h"

int ljp_dumpstack(lua_State *L, lua_State *helper, ljp_buf *sb,
                  const char *fmt, int depth);

/* A one-frame dump of a frame that is no Lua level (the callback's host
** marker, "[host]"): formatted as a native frame, its name once at the
** frame's first f, F or l; depth 0 prints nothing, any other depth the
** frame; Z as for any frame. Into sb (sb->n = length), NUL-terminated. */
void ljp_dumpstack_marker(ljp_buf *sb, const char *fmt, int depth,
                          const char *name);

/* What ljprof's own reports show at the leaf end of a stack, where the
** time was really spent: the real levels above 'skip' are cut, the first
** real level shown may get another current line, and synthetic frames
** may sit on top (frames captured at the signal that have returned since,
** the C function running, or the function a compiled trace started in),
** and native frames above everything. */
typedef enum { LJP_LEAF_NONE, LJP_LEAF_C, LJP_LEAF_LUA } ljp_leaf_kind;
typedef struct ljp_synframe {
  ljp_leaf_kind kind;        /* LJP_LEAF_C or LJP_LEAF_LUA */
  lua_CFunction cfunc;       /* C */
  int ffid;                  /* C: a fast function's id (0: a C function) */
  const char *source;        /* Lua: chunk name as in lua_Debug */
  const char *name;          /* Lua: its name, or NULL */
  int linedefined;           /* Lua */
  int line;                  /* Lua: current line (0: linedefined) */
  uint32_t fgen;             /* Lua: the learning (ljp_fname's gen) its
                                texts came from, 0: none (the safe point
                                keeps their text ids by it) */
} ljp_synframe;
#define LJP_SYN_MAX 24
typedef struct ljp_leaf {
  int nsyn;                  /* synthetic frames, innermost first */
  ljp_synframe syn[LJP_SYN_MAX];
  int skip;                  /* real levels hidden */
  int truncated;             /* frames lost between the synthetic frames
                                and the real levels: "[truncated]" */
  int line;                  /* > 0: current line of the first real level
                                shown */
  int nnative;               /* native frames above everything, */
  const char *native[LJP_NATIVE_MAX]; /* innermost first (their names) */
} ljp_leaf;
int ljp_dumpstack_leaf(lua_State *L, lua_State *helper, ljp_buf *sb,
                       const char *fmt, int depth, const ljp_leaf *lf);

/* Stack id of store s as a dump in fmt would have printed it when the
** sample was taken (its frames are the levels, innermost first; depth as
** in ljp_dumpstack), appended to sb, except that a C function without a
** Lua name prints its stable name (ljp_put_code_name: "luajit+0x92c0",
** not an ASLR address), when stable is set. Fast functions print
** [builtin#N], as jit.profile does (the views name them by jit.vmdef).
** Views call this; aggregation never builds text. */
void ljp_dumpstack_frames(const ljp_store *s, uint32_t stack, const char *fmt,
                          int depth, int stable, ljp_buf *sb);

/* One stored frame in fmt (as in a stack dump of it), appended to sb. */
void ljp_dumpstack_frame(const ljp_store *s, uint32_t frame, const char *fmt,
                         int stable, ljp_buf *sb);
/* A chunk name as dumpstack prints it (the path kept unless pathstrip),
** appended to sb; 0 for a bytecode builtin (linedefined -1: printed as
** [builtin:name], it has no lines). */
int ljp_put_chunk(ljp_buf *sb, const char *source, int linedefined,
                  int pathstrip);

/* chunk:line, path stripped, as dumpstack's 'l' prints it. */
void ljp_put_location(ljp_buf *sb, const char *source, int linedefined,
                      int line);

#endif
