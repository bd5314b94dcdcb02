/*
** Native frame names (symbols.c): the per-context address -> name cache
** and what is spliced above a sample's Lua stack.
**
** Rules: normal context only (the safe point).
*/
#ifndef LJP_SYMBOLS_H
#define LJP_SYMBOLS_H

#include <stdint.h>

#include "ring.h"

typedef struct ljp_ctx ljp_ctx;

/* Start of the function holding native frame i of r (0: unknown). */
uintptr_t ljp_native_start(ljp_ctx *ctx, const ljp_record *r, int i);
/* The frames of record r to put above its Lua stack, innermost first, as
** frame ids (store.h, LJP_FR_NATIVE); returns how many. L (or NULL): the
** state whose package.loaded names a C function a module loaded after
** the start holds (a function with no symbol is named by it). */
int ljp_native_names(ljp_ctx *ctx, struct lua_State *L, const ljp_record *r,
                     uint32_t *ids);
void ljp_native_names_reset(ljp_ctx *ctx);

#endif
