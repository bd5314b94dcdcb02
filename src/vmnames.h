/*
** LuaJIT's opcode and IR call names (vmnames.c): jit.vmdef's bcnames,
** irnames and ircall, learnt once per process in a Lua state of
** ljprof's own, and looked up by name; what irmap.c, mcmap.c and
** tracesnap.c number their opcodes and calls with.
**
** Normal context. The learners (ljp_vmnames_learn, ljp_vmnames_learn_calls)
** run under vmlearn.c's learn_mu, as every caller of theirs does; the
** lookups read what a learner published (release) and may run anywhere
** in normal context.
*/
#ifndef LJP_VMNAMES_H
#define LJP_VMNAMES_H

#include <lua.h>

/* Learn bcnames and irnames (each a string of 6-character names, at most
** 256), once per process: from the module S already loaded, else read
** from the module's text (requiring it parses all its tables: 0.70 M
** instructions, callgrind), else required in S (also when it is
** preloaded). Retried while not known. Returns 1 when known. */
int ljp_vmnames_learn(lua_State *S);
/* Are they known (learnt)? */
int ljp_vmnames_known(void);
/* Learn ircall's names (ids 0 up to the first missing one, at most 512),
** the same ways, once per process; 1 when known (a list of none when the
** module has no ircall). */
int ljp_vmnames_learn_calls(lua_State *S);

/* An opcode's number: where its name, padded to 6 characters, first
** stands at a name's start in bcnames (ljp_vmnames_bc) or irnames
** (ljp_vmnames_ir); -1 when absent or not learnt. */
int ljp_vmnames_bc(const char *name);
int ljp_vmnames_ir(const char *name);
/* The name of IR call id (jit.vmdef.ircall[id]), or NULL past the last
** one or when not learnt. */
const char *ljp_vmnames_call(int id);

#endif
