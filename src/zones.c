/*
** Zones: a per-state stack of named subsystems ("AI", "physics"). The
** signal handler reads the current zone id lock-free (z->cur, one
** 16-bit store per push or pop), so a sample belongs to the zone that was
** active when the tick happened. All coroutines of a state share its zone
** stack, like LuaJIT's jit.zone (a frame's zones are pushed and popped by
** whatever coroutine runs the code).
**
** Names are interned per context: id 0 is "no zone", ids are never
** reused while the context lives, so ids stored in samples stay valid.
** Normal context only, except zone_cur, which the handler reads.
*/
#include <stdlib.h>
#include <string.h>

#include "zones.h"

/* Id of name (interned); 0 when the table is full or out of memory. */
uint16_t ljp_zone_id(ljp_zones *z, const char *name, size_t len)
{
  uint32_t i;
  char *s;
  for (i = 1; i < z->n; i++)
    if (strlen(z->names[i]) == len &&
        memcmp(z->names[i], name, len) == 0)
      return (uint16_t)i;
  if (z->n == 0) z->n = 1;   /* id 0: none */
  if (z->n > 65535) return 0;
  if (z->n >= z->cap) {
    uint32_t cap = z->cap ? z->cap * 2 : 16;
    char **t = realloc(z->names, cap * sizeof(char *));
    if (!t) return 0;
    t[0] = NULL;
    z->names = t;
    z->cap = cap;
  }
  if (!(s = malloc(len + 1))) return 0;
  memcpy(s, name, len);
  s[len] = '\0';
  z->names[z->n] = s;
  return (uint16_t)z->n++;
}

const char *ljp_zone_name(const ljp_zones *z, uint16_t id)
{
  return id && id < z->n ? z->names[id] : "";
}

int ljp_zone_push_id(ljp_zones *z, uint16_t id)
{
  if (!id || id >= z->n || z->depth >= LJP_ZONE_DEPTH) return -1;
  z->stack[z->depth++] = id;
  z->cur = id;
  return 0;
}

/* Pop: the id popped, or 0 when the stack is empty. */
uint16_t ljp_zone_pop(ljp_zones *z)
{
  uint16_t id;
  if (z->depth == 0) return 0;
  id = z->stack[--z->depth];
  z->cur = z->depth ? z->stack[z->depth - 1] : 0;
  return id;
}

void ljp_zone_flush(ljp_zones *z)
{
  z->depth = 0;
  z->cur = 0;
}

void ljp_zones_free(ljp_zones *z)
{
  uint32_t i;
  for (i = 1; i < z->n; i++) free(z->names[i]);
  free(z->names);
  z->names = NULL;
  z->n = z->cap = 0;
  ljp_zone_flush(z);
}
