/*
** Zones: a per-state stack of named subsystems ("AI", "physics"). The
** signal handler reads the current zone id lock-free (ctx->zone_cur, one
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

#include <lauxlib.h>

#include "ljp.h"

/* Id of name (interned); 0 when the table is full or out of memory. */
uint16_t ljp_zone_id(ljp_ctx *ctx, const char *name, size_t len)
{
  uint32_t i;
  char *s;
  for (i = 1; i < ctx->nzones; i++)
    if (strlen(ctx->zone_names[i]) == len &&
        memcmp(ctx->zone_names[i], name, len) == 0)
      return (uint16_t)i;
  if (ctx->nzones == 0) ctx->nzones = 1;   /* id 0: none */
  if (ctx->nzones > 65535) return 0;
  if (ctx->nzones >= ctx->zone_cap) {
    uint32_t cap = ctx->zone_cap ? ctx->zone_cap * 2 : 16;
    char **t = realloc(ctx->zone_names, cap * sizeof(char *));
    if (!t) return 0;
    t[0] = NULL;
    ctx->zone_names = t;
    ctx->zone_cap = cap;
  }
  if (!(s = malloc(len + 1))) return 0;
  memcpy(s, name, len);
  s[len] = '\0';
  ctx->zone_names[ctx->nzones] = s;
  return (uint16_t)ctx->nzones++;
}

const char *ljp_zone_name(const ljp_ctx *ctx, uint16_t id)
{
  return id && id < ctx->nzones ? ctx->zone_names[id] : "";
}

int ljp_zone_push_id(ljp_ctx *ctx, uint16_t id)
{
  if (!id || id >= ctx->nzones || ctx->zone_depth >= LJP_ZONE_DEPTH) return -1;
  ctx->zone_stack[ctx->zone_depth++] = id;
  ctx->zone_cur = id;
  return 0;
}

/* Pop: the id popped, or 0 when the stack is empty. */
uint16_t ljp_zone_pop(ljp_ctx *ctx)
{
  uint16_t id;
  if (ctx->zone_depth == 0) return 0;
  id = ctx->zone_stack[--ctx->zone_depth];
  ctx->zone_cur = ctx->zone_depth ? ctx->zone_stack[ctx->zone_depth - 1] : 0;
  return id;
}

void ljp_zone_flush(ljp_ctx *ctx)
{
  ctx->zone_depth = 0;
  ctx->zone_cur = 0;
}

void ljp_zones_free(ljp_ctx *ctx)
{
  uint32_t i;
  for (i = 1; i < ctx->nzones; i++) free(ctx->zone_names[i]);
  free(ctx->zone_names);
  ctx->zone_names = NULL;
  ctx->nzones = ctx->zone_cap = 0;
  ljp_zone_flush(ctx);
}
