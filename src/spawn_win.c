/*
** Windows: the ljprof command's process functions (spawn.h) do not exist
** here (the command is a shell script that runs luajit under a child
** process's side channels): the module has none of them.
*/
#ifdef _WIN32
#include "spawn.h"

const luaL_Reg ljp_spawn_funcs[] = {{NULL, NULL}};

#endif /* _WIN32 */
