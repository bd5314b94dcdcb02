/*
** Growable byte buffer (see buf.h). Normal context only; no Lua.
*/
#include <stdint.h>
#include <stdlib.h>

#include "buf.h"

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

void ljp_buf_int(ljp_buf *sb, long v)
{
  char tmp[24], *p = tmp + sizeof(tmp);
  unsigned long u = v < 0 ? 0ul - (unsigned long)v : (unsigned long)v;
  do { *--p = (char)('0' + u % 10); u /= 10; } while (u);
  if (v < 0) *--p = '-';
  ljp_buf_put(sb, p, (size_t)(tmp + sizeof(tmp) - p));
}

void ljp_buf_hex(ljp_buf *sb, unsigned long v)
{
  char tmp[2 * sizeof(v)], *p = tmp + sizeof(tmp);
  do { *--p = "0123456789abcdef"[v & 15]; v >>= 4; } while (v);
  ljp_buf_put(sb, p, (size_t)(tmp + sizeof(tmp) - p));
}

void ljp_buf_ptr(ljp_buf *sb, const void *v)
{
  uintptr_t x = (uintptr_t)v;
  char tmp[2 + 2 * sizeof(void *)];
  int n = 10, i;
  if (!x) { ljp_buf_put(sb, "NULL", 4); return; }
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
  ljp_buf_put(sb, tmp, (size_t)n);
}
