/*
** Stack dumps that are byte-identical to LuaJIT's lj_debug_dumpstack
** (jit.profile.dumpstack / luaJIT_profile_dumpstack), rebuilt on the
** public debug API: lua_getstack numbers levels exactly like the built-in
** (dummy and vararg frames skipped) and lua_getinfo's name is the same
** lj_debug_funcname result.
**
** Per frame, fmt is interpreted char by char:
**   p  keep full paths (sticky for the rest of the dump)
**   f  function name, or chunk:firstline when none can be derived
**   F  like f, with "chunk:" before names of Lua functions
**   l  chunk:currentline
**   Z  remember the length; at the end, cut the dump back to the length
**      remembered at the last frame's Z (zaps a trailing separator)
**   any other byte is copied.
** Non-Lua frames print [builtin#<ffid>] (fast functions) or @<C pointer>;
** bytecode builtins [builtin:<name>]; loadstring chunks [string].
** Native frames (ljp_dumpstack_leaf's lf->native, never in a callback's
** dump but the host marker's, ljp_dumpstack_marker) print their name once, at the frame's first f, F or l; the
** frame's later f/F/l print nothing (native code has one name, no Lua
** line). So "fZ;" and "lZ;" show the name, and in jit/prof/model.lua's
** "f\31l" an empty l is how a native frame is told from a C function
** Lua called, which prints something for both.
**
** A pure formatter: names of C and fast functions come from the VM
** (vm.h's ljp_put_*). Normal context only (the safe point, hooks, Lua);
** Lua is called only through them, on a non-NULL helper.
*/
#include <stdint.h>
#include <string.h>

#include "dumpstack.h"
#include "vm.h"

/* Chunk name of a Lua frame; returns 0 for bytecode builtins (no line). */
static int put_chunkname(ljp_buf *sb, const lua_Debug *ar, int pathstrip)
{
  const char *p = ar->source;
  size_t len;
  if (ar->linedefined == -1) {  /* bytecode builtin: [builtin:name] */
    ljp_buf_put(sb, "[builtin:", 9);
    ljp_buf_put(sb, p, strlen(p));
    ljp_buf_putc(sb, ']');
    return 0;
  }
  if (*p == '=' || *p == '@') {
    len = strlen(++p);
    if (pathstrip) {
      size_t i;
      for (i = len; i > 0; i--) {
        if (p[i - 1] == '/' || p[i - 1] == '\\') {
          p += i;
          len -= i;
          break;
        }
      }
    }
    ljp_buf_put(sb, p, len);
  } else {
    ljp_buf_put(sb, "[string]", 8);
  }
  return 1;
}

void ljp_put_location(ljp_buf *sb, const char *source, int linedefined,
                      int line)
{
  lua_Debug ar;
  ar.source = source;
  ar.linedefined = linedefined;
  if (put_chunkname(sb, &ar, 1)) {
    ljp_buf_putc(sb, ':');
    ljp_buf_int(sb, line);
  }
}

/* -- The dump --------------------------------------------------------------- */

/* Number of stack levels (lua_getstack(L, n) fails, n-1 succeeds), given
** that level 'above' does not exist. */
static int count_levels(lua_State *L, int above)
{
  int lo = 0, hi = above;  /* levels < lo exist; level hi does not */
  lua_Debug ar;
  while (lo < hi) {
    int mid = lo + (hi - lo) / 2;
    if (lua_getstack(L, mid, &ar)) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/* One frame of a dump: a real stack level (ar valid), or the synthetic
** leaf frame of lf. */
static void put_frame(lua_State *L, lua_State *helper, ljp_buf *sb,
                      const char *fmt, lua_Debug *ar, const ljp_synframe *syn,
                      const char *nat, int line, int *pathstrip,
                      size_t *lastlen)
{
  const char *p = fmt;
  int have_sl = 0, have_n = 0, nat_done = 0, c, virt = syn || nat;
  while ((c = (unsigned char)*p++)) {
    if (virt && c != 'p' && c != 'Z' && c != 'f' && c != 'F' && c != 'l') {
      ljp_buf_putc(sb, (char)c);
      continue;
    }
    if (virt && c != 'p' && c != 'Z') {
      if (nat) {  /* a native frame: its name once, at its first f/F/l */
        if (!nat_done) ljp_buf_put(sb, nat, strlen(nat));
        nat_done = 1;
      } else if (syn->kind == LJP_LEAF_C) {
        ljp_put_cfunc(sb, syn->cfunc);
      } else {
        lua_Debug sar;
        sar.source = syn->source;
        sar.linedefined = syn->linedefined;
        if (c != 'l' && syn->name) {   /* named as when the trace began */
          if (c == 'F') {
            put_chunkname(sb, &sar, *pathstrip);
            ljp_buf_putc(sb, ':');
          }
          ljp_buf_put(sb, syn->name, strlen(syn->name));
        } else if (put_chunkname(sb, &sar, *pathstrip)) {
          ljp_buf_putc(sb, ':');
          ljp_buf_int(sb, c == 'l' && syn->line > 0 ? syn->line
                                                   : syn->linedefined);
        }
      }
      continue;
    }
    switch (c) {
    case 'p':
      *pathstrip = 0;
      break;
    case 'F': case 'f':
      if (!have_n) {  /* one call for all that f/F/l need */
        lua_getinfo(L, have_sl ? "n" : "nSl", ar);
        have_n = have_sl = 1;
      }
      if (ar->name) {
        if (c == 'F' && ar->what[0] != 'C' && ar->linedefined != -1) {
          put_chunkname(sb, ar, *pathstrip);
          ljp_buf_putc(sb, ':');
        }
        ljp_buf_put(sb, ar->name, strlen(ar->name));
        break;
      }
      /* No name: dump chunk:firstline. */
      __attribute__((fallthrough));
    case 'l':
      if (!have_sl) { lua_getinfo(L, "Sl", ar); have_sl = 1; }
      if (ar->what[0] != 'C') {  /* "Lua" or "main" */
        if (put_chunkname(sb, ar, *pathstrip)) {
          int cur = line > 0 ? line : ar->currentline;
          ljp_buf_putc(sb, ':');
          ljp_buf_int(sb, c == 'l' ? (cur >= 0 ? cur : ar->linedefined)
                               : ar->linedefined);
        }
      } else {
        lua_getinfo(L, "f", ar);  /* pushes the function */
        ljp_put_ffunc(sb, L, helper);
        lua_pop(L, 1);
      }
      break;
    case 'Z':
      *lastlen = sb->n;
      break;
    default:
      ljp_buf_putc(sb, (char)c);
      break;
    }
  }
}

int ljp_dumpstack_leaf(lua_State *L, lua_State *helper, ljp_buf *sb,
                       const char *fmt, int depth, const ljp_leaf *lf)
{
  /* Virtual levels: first the native frames, then the synthetic frames,
  ** then the real levels from lf->skip on. */
  int nn = lf ? lf->nnative : 0;
  int leaf = lf ? lf->nsyn : 0;
  int syn = nn + leaf;
  int skip = lf ? lf->skip : 0;
  int level = 0, dir = 1, pathstrip = 1;
  size_t lastlen = 0;
  sb->n = 0;
  if (ljp_buf_reserve(sb, 0) != 0) return -1;
  if (depth < 0) {
    level = ~depth;
    depth = dir = -1;
  }
  while (level != depth) {
    lua_Debug ar;
    if (level < nn) {
      put_frame(L, helper, sb, fmt, &ar, NULL, lf->native[level], 0,
                &pathstrip, &lastlen);
    } else if (level < syn) {
      put_frame(L, helper, sb, fmt, &ar, &lf->syn[level - nn], NULL, 0,
                &pathstrip, &lastlen);
    } else if (lua_getstack(L, level - syn + skip, &ar)) {
      int line = lf && level == syn ? lf->line : 0;
      put_frame(L, helper, sb, fmt, &ar, NULL, NULL, line, &pathstrip,
                &lastlen);
    } else if (dir == 1) {
      break;
    } else if (level - syn + skip > 0) {
      /* continue at the outermost level */
      level = count_levels(L, level - syn + skip) + syn - skip;
    }
    level += dir;
  }
  if (lastlen) sb->n = lastlen;
  sb->b[sb->n] = '\0';
  return 0;
}

/* -- Stored stacks ------------------------------------------------------------ */

/* One stored frame, as put_frame prints the level it was taken from. */
static void put_stored(ljp_buf *sb, const ljp_store *s, const char *fmt,
                       const ljp_frame *f, int stable, int *pathstrip,
                       size_t *lastlen)
{
  const char *p = fmt;
  int c, nat_done = 0;
  while ((c = (unsigned char)*p++)) {
    if (c == 'p') {
      *pathstrip = 0;
    } else if (c == 'Z') {
      *lastlen = sb->n;
    } else if (c != 'f' && c != 'F' && c != 'l') {
      ljp_buf_putc(sb, (char)c);
    } else if (f->kind == LJP_FR_NATIVE) {
      if (!nat_done) {
        const ljp_str *t = ljp_strtab_get(&s->strs, f->source);
        ljp_buf_put(sb, t->s, t->len);
      }
      nat_done = 1;
    } else if (f->kind == LJP_FR_CNAMED) {
      size_t at = sb->n;
      if (!ljp_put_cfunc(sb, (lua_CFunction)(uintptr_t)f->ptr) && f->aux) {
        sb->n = at;                 /* no name: the fast function's id */
        ljp_buf_put(sb, "[builtin#", 9);
        ljp_buf_int(sb, (long)f->aux);
        ljp_buf_putc(sb, ']');
      } else if (stable && sb->n > at && sb->b[at] == '@') {
        sb->n = at;                 /* no name at all: a stable one */
        ljp_put_code_name(sb, (uintptr_t)f->ptr);
      }
    } else if (f->kind == LJP_FR_C && stable) {
      ljp_put_code_name(sb, (uintptr_t)f->ptr);
    } else if (f->kind == LJP_FR_C) {
      ljp_buf_putc(sb, '@');
      ljp_buf_ptr(sb, (const void *)(uintptr_t)f->ptr);
    } else if (f->kind == LJP_FR_FFUNC) {
      if (f->aux) {
        ljp_buf_put(sb, "[builtin#", 9);
        ljp_buf_int(sb, (long)f->aux);
        ljp_buf_putc(sb, ']');
      } else {
        ljp_buf_put(sb, "[builtin#?]", 11);
      }
    } else if (f->kind == LJP_FR_LUA) {
      lua_Debug ar;
      ar.source = ljp_strtab_get(&s->strs, f->source)->s;
      ar.linedefined = f->linedefined;
      if (c != 'l' && f->name) {
        const ljp_str *t = ljp_strtab_get(&s->strs, f->name);
        if (c == 'F' && f->linedefined != -1) {
          put_chunkname(sb, &ar, *pathstrip);
          ljp_buf_putc(sb, ':');
        }
        ljp_buf_put(sb, t->s, t->len);
      } else if (put_chunkname(sb, &ar, *pathstrip)) {
        ljp_buf_putc(sb, ':');
        ljp_buf_int(sb, c == 'l' ? f->line : f->linedefined);
      }
    }
  }
}

void ljp_dumpstack_frames(const ljp_store *s, uint32_t stack, const char *fmt,
                          int depth, int stable, ljp_buf *sb)
{
  uint32_t n = ljp_store_stack_len(s, stack);
  int32_t k, last, dir;
  int pathstrip = 1;
  size_t lastlen = 0, start = sb->n;
  if (ljp_buf_reserve(sb, 0) != 0) return;
  if (depth >= 0) {
    last = depth < (int32_t)n ? depth : (int32_t)n;
    k = 0;
    dir = 1;
  } else {
    last = -1;
    k = (depth == INT32_MIN || -depth > (int32_t)n ? (int32_t)n : -depth) - 1;
    dir = -1;
  }
  for (; k != last; k += dir) {
    ljp_frame f;
    ljp_store_frame_get(s, ljp_store_stack_at(s, stack, (uint32_t)k), &f);
    put_stored(sb, s, fmt, &f, stable, &pathstrip, &lastlen);
  }
  if (lastlen > start) sb->n = lastlen;
  sb->b[sb->n] = '\0';
}

void ljp_dumpstack_frame(const ljp_store *s, uint32_t frame, const char *fmt,
                         int stable, ljp_buf *sb)
{
  ljp_frame f;
  int pathstrip = 1;
  size_t lastlen = 0;
  if (ljp_buf_reserve(sb, 0) != 0) return;
  ljp_store_frame_get(s, frame, &f);
  put_stored(sb, s, fmt, &f, stable, &pathstrip, &lastlen);
  sb->b[sb->n] = '\0';
}

int ljp_put_chunk(ljp_buf *sb, const char *source, int linedefined,
                  int pathstrip)
{
  lua_Debug ar;
  ar.source = source;
  ar.linedefined = linedefined;
  return put_chunkname(sb, &ar, pathstrip);
}

void ljp_dumpstack_marker(ljp_buf *sb, const char *fmt, int depth,
                          const char *name)
{
  int pathstrip = 1;
  size_t lastlen = 0;
  sb->n = 0;
  if (ljp_buf_reserve(sb, 0) != 0) return;
  if (depth != 0)  /* one frame: any other depth shows it */
    put_frame(NULL, NULL, sb, fmt, NULL, NULL, name, 0, &pathstrip, &lastlen);
  if (lastlen) sb->n = lastlen;
  sb->b[sb->n] = '\0';
}

int ljp_dumpstack(lua_State *L, lua_State *helper, ljp_buf *sb,
                  const char *fmt, int depth)
{
  return ljp_dumpstack_leaf(L, helper, sb, fmt, depth, NULL);
}
