/*
** Exact call counts, opt-in (calls.c).
*/
#ifndef LJP_CALLS_H
#define LJP_CALLS_H

#include <stddef.h>

#include <lua.h>

typedef struct ljp_ctx ljp_ctx;

/* Exact call counts (calls.c). Normal context. */
/* Start counting (JIT off and flushed, debug.sethook/gethook wrapped, our
** hook installed with LUA_MASKCALL); 0, or -1 with a message in err. */
int ljp_calls_start(ljp_ctx *ctx, lua_State *L, char *err, size_t errlen);
/* Stop counting: the program's hook, JIT state and debug functions back;
** the counts stay readable until the next start. */
void ljp_calls_stop(ljp_ctx *ctx, lua_State *L);
void ljp_calls_free(ljp_ctx *ctx);
/* In the hook, on a call event: count the function being called. Returns
** 1 for ljprof's own call of an original debug function (the wrappers'),
** which is neither counted nor forwarded to the program's hook. */
int ljp_calls_count(ljp_ctx *ctx, lua_State *L, lua_Debug *ar);
/* Push the counts as a list of {func=, name=, what=, source=,
** linedefined=, lastlinedefined=, calls=} (ljprof.calls()). */
void ljp_calls_push(ljp_ctx *ctx, lua_State *L);

#endif
