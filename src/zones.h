/*
** Zones (zones.c): a per-state stack of named subsystems ("AI",
** "physics"). Normal context, except cur, which the signal handler reads
** (one 16-bit load): a sample belongs to the zone active at its tick.
*/
#ifndef LJP_ZONES_H
#define LJP_ZONES_H

#include <stddef.h>
#include <stdint.h>

#define LJP_ZONE_DEPTH 64

typedef struct ljp_zones {
  volatile uint16_t cur;    /* innermost zone id, 0: none */
  int depth;
  uint16_t stack[LJP_ZONE_DEPTH];
  char **names;             /* id -> name; [0] unused */
  uint32_t n, cap;
} ljp_zones;

/* Id of name (interned, never reused); 0 when full or out of memory. */
uint16_t ljp_zone_id(ljp_zones *z, const char *name, size_t len);
const char *ljp_zone_name(const ljp_zones *z, uint16_t id); /* "" for 0 */
int ljp_zone_push_id(ljp_zones *z, uint16_t id);
uint16_t ljp_zone_pop(ljp_zones *z);     /* 0: the stack was empty */
void ljp_zone_flush(ljp_zones *z);
void ljp_zones_free(ljp_zones *z);

#endif
