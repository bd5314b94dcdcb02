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
**
** Normal context only (called at the safe point or from Lua).
*/
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>

#include "ljp.h"

/* -- Buffer ---------------------------------------------------------------- */

int ljp_buf_reserve(ljp_buf *sb, size_t extra)
{
  if (sb->n + extra + 1 > sb->cap) {
    size_t cap = sb->cap ? sb->cap : 256;
    char *b;
    while (cap < sb->n + extra + 1) cap *= 2;
    if (!(b = realloc(sb->b, cap))) return -1;
    sb->b = b;
    sb->cap = cap;
  }
  return 0;
}

void ljp_buf_free(ljp_buf *sb)
{
  free(sb->b);
  sb->b = NULL;
  sb->n = sb->cap = 0;
}

static void put_mem(ljp_buf *sb, const char *s, size_t len)
{
  if (ljp_buf_reserve(sb, len) == 0) {
    memcpy(sb->b + sb->n, s, len);
    sb->n += len;
  }
}

static void put_char(ljp_buf *sb, char c) { put_mem(sb, &c, 1); }

static void put_int(ljp_buf *sb, long v)
{
  char tmp[24], *p = tmp + sizeof(tmp);
  unsigned long u = v < 0 ? 0ul - (unsigned long)v : (unsigned long)v;
  do { *--p = (char)('0' + u % 10); u /= 10; } while (u);
  if (v < 0) *--p = '-';
  put_mem(sb, p, (size_t)(tmp + sizeof(tmp) - p));
}

/* Pointers as LuaJIT prints them: 0x + 8 hex digits, plus 2 digits per
** significant byte above the low 32 bits; NULL for 0. */
static void put_ptr(ljp_buf *sb, const void *v)
{
  uintptr_t x = (uintptr_t)v;
  char tmp[2 + 2 * sizeof(void *)];
  int n = 10, i;
  if (!x) { put_mem(sb, "NULL", 4); return; }
#if UINTPTR_MAX > 0xffffffffu
  if (x >> 32) {
    uint32_t hi = (uint32_t)(x >> 32);
    int fls = 31 - __builtin_clz(hi);
    n += 2 + 2 * (fls >> 3);
  }
#endif
  tmp[0] = '0';
  tmp[1] = 'x';
  for (i = n - 1; i >= 2; i--, x >>= 4) tmp[i] = "0123456789abcdef"[x & 15];
  put_mem(sb, tmp, (size_t)n);
}

/* Chunk name of a Lua frame; returns 0 for bytecode builtins (no line). */
static int put_chunkname(ljp_buf *sb, const lua_Debug *ar, int pathstrip)
{
  const char *p = ar->source;
  size_t len;
  if (ar->linedefined == -1) {  /* bytecode builtin: [builtin:name] */
    put_mem(sb, "[builtin:", 9);
    put_mem(sb, p, strlen(p));
    put_char(sb, ']');
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
    put_mem(sb, p, len);
  } else {
    put_mem(sb, "[string]", 8);
  }
  return 1;
}

/* -- Fast-function ids ------------------------------------------------------ */

/* Fast functions print as [builtin#ffid]; the id is only visible through
** jit.util.funcinfo. Cached per OS thread by (object, C entry): fast
** function objects are never re-created with a different id at the same
** address and entry point. */
#define FFCACHE 512
typedef struct ffentry {
  const void *fn;
  lua_CFunction cf;
  int ffid;  /* 0: plain C function */
} ffentry;
static __thread ffentry ljp_ffcache[FFCACHE];

static const char funcinfo_key = 'f'; /* registry key: jit.util.funcinfo */

/* ffid of the C function at the top of L (left in place); uses helper to
** call jit.util.funcinfo on a cache miss. */
static int c_ffid(lua_State *L, lua_State *helper)
{
  const void *fn = lua_topointer(L, -1);
  lua_CFunction cf = lua_tocfunction(L, -1);
  ffentry *e = &ljp_ffcache[((uintptr_t)fn >> 4) % FFCACHE];
  int ffid = 0, top, fidx = lua_gettop(L);
  if (e->fn == fn && e->cf == cf) return e->ffid;
  top = lua_gettop(helper);
  lua_pushlightuserdata(helper, (void *)&funcinfo_key);
  lua_rawget(helper, LUA_REGISTRYINDEX);
  if (!lua_isfunction(helper, -1)) {
    lua_pop(helper, 1);
    lua_getglobal(helper, "require");
    lua_pushstring(helper, "jit.util");
    if (lua_pcall(helper, 1, 1, 0) == 0 && lua_istable(helper, -1)) {
      lua_getfield(helper, -1, "funcinfo");
      lua_remove(helper, -2);
      lua_pushlightuserdata(helper, (void *)&funcinfo_key);
      lua_pushvalue(helper, -2);
      lua_rawset(helper, LUA_REGISTRYINDEX);
    }
  }
  if (lua_isfunction(helper, -1)) {
    lua_pushvalue(L, fidx);
    if (L != helper) lua_xmove(L, helper, 1);
    if (lua_pcall(helper, 1, 1, 0) == 0 && lua_istable(helper, -1)) {
      lua_getfield(helper, -1, "ffid");
      ffid = (int)lua_tointeger(helper, -1);
    }
  }
  lua_settop(helper, top);
  e->fn = fn;
  e->cf = cf;
  e->ffid = ffid;
  return ffid;
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

int ljp_dumpstack(lua_State *L, lua_State *helper, ljp_buf *sb,
                  const char *fmt, int depth)
{
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
    if (lua_getstack(L, level, &ar)) {
      const char *p = fmt;
      int have_sl = 0, have_n = 0, c;
      while ((c = (unsigned char)*p++)) {
        switch (c) {
        case 'p':
          pathstrip = 0;
          break;
        case 'F': case 'f':
          if (!have_n) { lua_getinfo(L, "n", &ar); have_n = 1; }
          if (!have_sl) { lua_getinfo(L, "Sl", &ar); have_sl = 1; }
          if (ar.name) {
            if (c == 'F' && ar.what[0] != 'C' && ar.linedefined != -1) {
              put_chunkname(sb, &ar, pathstrip);
              put_char(sb, ':');
            }
            put_mem(sb, ar.name, strlen(ar.name));
            break;
          }
          /* No name: dump chunk:firstline. */
          __attribute__((fallthrough));
        case 'l':
          if (!have_sl) { lua_getinfo(L, "Sl", &ar); have_sl = 1; }
          if (ar.what[0] != 'C') {  /* "Lua" or "main" */
            if (put_chunkname(sb, &ar, pathstrip)) {
              int line = c == 'l' ? ar.currentline : ar.linedefined;
              put_char(sb, ':');
              put_int(sb, line >= 0 ? line : ar.linedefined);
            }
          } else {
            int ffid;
            lua_getinfo(L, "f", &ar);  /* pushes the function */
            ffid = c_ffid(L, helper);
            if (ffid) {
              put_mem(sb, "[builtin#", 9);
              put_int(sb, ffid);
              put_char(sb, ']');
            } else {
              put_char(sb, '@');
              put_ptr(sb, (const void *)lua_tocfunction(L, -1));
            }
            lua_pop(L, 1);
          }
          break;
        case 'Z':
          lastlen = sb->n;
          break;
        default:
          put_char(sb, (char)c);
          break;
        }
      }
    } else if (dir == 1) {
      break;
    } else {
      level = count_levels(L, level);  /* continue at the outermost level */
    }
    level += dir;
  }
  if (lastlen) sb->n = lastlen;
  sb->b[sb->n] = '\0';
  return 0;
}
