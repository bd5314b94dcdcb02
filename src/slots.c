/*
** The process-wide slot table that maps a signal's token, or a state's
** registry, to its profiling context (one per profiled Lua state). A slot
** names its context for the context's whole life; the token in it is valid
** only while a run is live. Closing a run clears the token, then waits
** until no handler is inside the slot, so a late signal never reaches freed
** memory.
**
** ljp_slot_enter/ljp_slot_leave and ljp_itimer_bound run in signal context
** (atomics only). The rest is normal context. Only the entry points
** (signal.c, safepoint.c, api.c, lua_ljprof.c) look a context up.
*/
#define _GNU_SOURCE
#include <sched.h>
#include <stdlib.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "slots.h"

typedef struct ljp_slot {
  _Atomic(const void *) registry; /* owner state (NULL: free) */
  _Atomic(ljp_ctx *) ctx;
  _Atomic uint32_t token;        /* live run token, 0 when none */
  _Atomic int inside;            /* handlers currently using the slot */
} ljp_slot;

static ljp_slot ljp_slots[LJP_MAX_SLOTS];
static _Atomic uint32_t ljp_run_gen;
static _Atomic uint32_t ljp_itimer_token;
static pthread_mutex_t ljp_slot_mu = PTHREAD_MUTEX_INITIALIZER;

void ljp_slots_lock(void) { pthread_mutex_lock(&ljp_slot_mu); }
void ljp_slots_unlock(void) { pthread_mutex_unlock(&ljp_slot_mu); }

/* -- Slot table (normal context) ----------------------------------------- */

int ljp_slot_alloc(ljp_ctx *ctx, const void *registry)
{
  int i, slot = -1;
  pthread_mutex_lock(&ljp_slot_mu);
  for (i = 0; i < LJP_MAX_SLOTS; i++) {
    if (!atomic_load(&ljp_slots[i].registry)) {
      atomic_store(&ljp_slots[i].ctx, ctx);
      atomic_store(&ljp_slots[i].token, 0);
      atomic_store(&ljp_slots[i].registry, registry);
      slot = i;
      break;
    }
  }
  pthread_mutex_unlock(&ljp_slot_mu);
  return slot;
}

void ljp_slot_free(int slot)
{
  pthread_mutex_lock(&ljp_slot_mu);
  ljp_slot_close(slot);
  atomic_store(&ljp_slots[slot].ctx, NULL);
  atomic_store(&ljp_slots[slot].registry, NULL);
  pthread_mutex_unlock(&ljp_slot_mu);
}

ljp_ctx *ljp_slot_find(const void *registry)
{
  static __thread int last;  /* most lookups repeat the previous one */
  int i;
  if (atomic_load_explicit(&ljp_slots[last].registry, memory_order_acquire) ==
      registry)
    return atomic_load(&ljp_slots[last].ctx);
  for (i = 0; i < LJP_MAX_SLOTS; i++) {
    if (atomic_load_explicit(&ljp_slots[i].registry, memory_order_acquire) ==
        registry) {
      last = i;
      return atomic_load(&ljp_slots[i].ctx);
    }
  }
  return NULL;
}

uint32_t ljp_slot_open(int slot)
{
  uint32_t gen = atomic_fetch_add(&ljp_run_gen, 1) + 1;
  uint32_t token = ((gen & 0xffffff) << 8) | (uint32_t)slot;
  if ((token >> 8) == 0) token |= 1u << 8; /* never 0 */
  atomic_store(&ljp_slots[slot].token, token);
  return token;
}

void ljp_slot_close(int slot)
{
  atomic_store(&ljp_slots[slot].token, 0);
  while (atomic_load(&ljp_slots[slot].inside) > 0) sched_yield();
}

void ljp_itimer_bind(uint32_t token) { atomic_store(&ljp_itimer_token, token); }
uint32_t ljp_itimer_bound(void) { return atomic_load(&ljp_itimer_token); }


/* Signal context: the context of a live run's token, counted inside its
** slot until ljp_slot_leave; NULL when the token is not live (still call
** ljp_slot_leave). */
ljp_ctx *ljp_slot_enter(uint32_t token)
{
  ljp_slot *s = &ljp_slots[token & 0xff];
  atomic_fetch_add(&s->inside, 1);
  if (!token || atomic_load(&s->token) != token) return NULL;
  return atomic_load_explicit(&s->ctx, memory_order_acquire);
}

void ljp_slot_leave(uint32_t token)
{
  atomic_fetch_sub(&ljp_slots[token & 0xff].inside, 1);
}

