/*
** The one reclamation scheme of ljprof (objects.h, "Reclamation"): what
** a reader in sampling context may still hold (object snapshots, retired
** objects, the code map's replaced trace arrays) is freed only once no
** reader can hold it. Readers (signal context, or the Windows timer
** thread with the profiled thread stopped) only enter and leave: atomics,
** no lock, no allocation. Retire and collect are normal context.
**
** Reclamation (epoch). A global epoch E and two reader counters, one per
** parity of E. A reader loads e = E, increments count[e & 1], and re-reads
** E: if it changed it backs out (retrying a few times, then giving up:
** the caller skips and counts). Writers (normal context) unpublish first,
** then retire the pointer tagged with the current E. Collect advances E
** from k to k+1 only when count[(k-1) & 1] is zero, and frees what was
** retired with a tag <= E-2. Why that is safe (all atomics seq_cst):
**  1. A reader that can still hold p loaded it before p was unpublished,
**     so it validated an epoch <= tag(p).
**  2. When E goes k -> k+1 no reader of epoch k-1 is inside (its counter
**     read zero; one that increments later re-reads E != k-1 and backs
**     out), and by induction none of an epoch < k-1 either (the step
**     k-1 -> k checked them, and nobody validates an old epoch again).
**  3. So at E >= tag+2 no reader of an epoch <= tag is left: p is free.
** The same scheme frees replaced snapshots, retired objects, and the code
** map's replaced trace arrays.
*/
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include "objects.h"

typedef struct retired {
  void *p;
  void (*fn)(void *);
  unsigned long tag;
} retired;

static _Atomic unsigned long ep_epoch = 2;
static _Atomic unsigned long ep_readers[2];
static pthread_mutex_t ep_mu = PTHREAD_MUTEX_INITIALIZER;
static retired *ep_list;
static uint32_t ep_n, ep_cap;

int ljp_epoch_enter(void)
{
  int tries;
  for (tries = 0; tries < 4; tries++) {
    unsigned long e = atomic_load(&ep_epoch);
    atomic_fetch_add(&ep_readers[e & 1], 1);
    if (atomic_load(&ep_epoch) == e) return (int)(e & 1);
    atomic_fetch_sub(&ep_readers[e & 1], 1);
  }
  return -1;
}

void ljp_epoch_leave(int token)
{
  if (token >= 0) atomic_fetch_sub(&ep_readers[token], 1);
}

void ljp_epoch_retire(void *p, void (*fn)(void *))
{
  if (!p) return;
  pthread_mutex_lock(&ep_mu);
  if (ep_n == ep_cap) {
    uint32_t c = ep_cap ? ep_cap * 2 : 64;
    retired *l = realloc(ep_list, c * sizeof(*l));
    if (!l) {  /* leak rather than free under a reader */
      pthread_mutex_unlock(&ep_mu);
      return;
    }
    ep_list = l;
    ep_cap = c;
  }
  ep_list[ep_n].p = p;
  ep_list[ep_n].fn = fn;
  ep_list[ep_n].tag = atomic_load(&ep_epoch);  /* after the unpublish */
  ep_n++;
  pthread_mutex_unlock(&ep_mu);
}

void ljp_epoch_collect(void)
{
  uint32_t i, j = 0;
  int round;
  unsigned long e;
  pthread_mutex_lock(&ep_mu);
  if (!ep_n) {
    pthread_mutex_unlock(&ep_mu);
    return;
  }
  for (round = 0; round < 2; round++) {
    unsigned long k = atomic_load(&ep_epoch);
    if (atomic_load(&ep_readers[(k - 1) & 1]) != 0) break;
    atomic_store(&ep_epoch, k + 1);
  }
  e = atomic_load(&ep_epoch);
  for (i = 0; i < ep_n; i++) {
    if (ep_list[i].tag + 2 <= e) {
      if (ep_list[i].fn) ep_list[i].fn(ep_list[i].p);
      else free(ep_list[i].p);
    } else {
      ep_list[j++] = ep_list[i];
    }
  }
  ep_n = j;
  pthread_mutex_unlock(&ep_mu);
}

void ljp_epoch_release(void)
{
  uint32_t i;
  pthread_mutex_lock(&ep_mu);
  for (i = 0; i < ep_n; i++) {
    if (ep_list[i].fn) ep_list[i].fn(ep_list[i].p);
    else free(ep_list[i].p);
  }
  free(ep_list);
  ep_list = NULL;
  ep_n = ep_cap = 0;
  pthread_mutex_unlock(&ep_mu);
}
