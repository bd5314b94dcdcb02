/*
** The slot table (slots.c): maps a signal's token, or a Lua state's
** registry, to its profiling context. Only entry points look up.
*/
#ifndef LJP_SLOTS_H
#define LJP_SLOTS_H

#include <stdint.h>

typedef struct ljp_ctx ljp_ctx;

#define LJP_MAX_SLOTS 256  /* contexts (profiled states) alive at once */

/* Slot table (slots.c). A slot names a context for its whole life; the
** token in it is valid only while a run is live. */
void ljp_slots_lock(void);
void ljp_slots_unlock(void);
ljp_ctx *ljp_slot_enter(uint32_t token);      /* signal context */
void ljp_slot_leave(uint32_t token);          /* signal context */
int ljp_slot_alloc(ljp_ctx *ctx, const void *registry);
void ljp_slot_free(int slot);
ljp_ctx *ljp_slot_find(const void *registry); /* by lua registry pointer */
uint32_t ljp_slot_open(int slot);    /* new run: returns its token */
void ljp_slot_close(int slot);       /* invalidate token, wait for handlers */
void ljp_itimer_bind(uint32_t token);         /* 0 unbinds */
uint32_t ljp_itimer_bound(void);

#endif
