/*
** Growable byte buffer: the one owner of ljp_buf and of the small writers
** (bytes, a char, a decimal, a pointer as LuaJIT prints it).
**
** Normal context only (malloc): the safe point, the call hook, Lua. A
** failed allocation drops the bytes being added; b stays valid.
*/
#ifndef LJP_BUF_H
#define LJP_BUF_H

#include <stddef.h>
#include <string.h>

typedef struct ljp_buf {
  char *b;
  size_t n, cap;
} ljp_buf;

/* Room for extra more bytes plus a terminating NUL: 0, or -1. */
int ljp_buf_reserve(ljp_buf *sb, size_t extra);
void ljp_buf_free(ljp_buf *sb);

static inline void ljp_buf_put(ljp_buf *sb, const char *s, size_t len)
{
  if (ljp_buf_reserve(sb, len) == 0) {
    memcpy(sb->b + sb->n, s, len);
    sb->n += len;
  }
}

static inline void ljp_buf_putc(ljp_buf *sb, char c) { ljp_buf_put(sb, &c, 1); }

void ljp_buf_int(ljp_buf *sb, long v);         /* decimal */
void ljp_buf_hex(ljp_buf *sb, unsigned long v); /* lower-case hex digits */
/* 0x + 8 hex digits, plus 2 per significant byte above the low 32 bits;
** NULL for 0 (LuaJIT's %p). */
void ljp_buf_ptr(ljp_buf *sb, const void *v);

#endif
