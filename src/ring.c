/*
** Lock-free single-producer ring of sample records (see ring.h).
** Only the inline functions of ring.h run in signal context; this file
** holds the normal-context side: allocation and claiming.
*/
#include <stdlib.h>
#include <string.h>

#include "ring.h"

int ljp_ring_init(ljp_ring *r, uint32_t cap)
{
  uint32_t n = 16;
  if (cap > (1u << 24)) cap = 1u << 24;
  while (n < cap) n <<= 1;
  memset(r, 0, sizeof(*r));
  r->rec = calloc(n, sizeof(ljp_record));
  if (!r->rec) return -1;
  r->cap = n;
  r->mask = n - 1;
  return 0;
}

void ljp_ring_free(ljp_ring *r)
{
  free(r->rec);
  r->rec = NULL;
  r->cap = r->mask = 0;
}

void ljp_ring_claim(ljp_ring *r, uint64_t *from, uint64_t *to)
{
  uint64_t d = atomic_load_explicit(&r->done, memory_order_relaxed);
  uint64_t h = atomic_load_explicit(&r->head, memory_order_acquire);
  atomic_store_explicit(&r->done, h, memory_order_seq_cst);
  *from = d;
  *to = h;
}
