/*
** The C API's output option (writer.c): the file written at stop by
** ljprof's one folded writer (jit/prof/folded.lua through
** jit/prof/output.lua, as -jprof writes it), in a Lua state of ljprof's
** own. Normal context.
*/
#ifndef LJP_WRITER_H
#define LJP_WRITER_H

#include <stddef.h>

#include <lua.h>

/* At start: the program's package paths, made absolute (*path, *cpath:
** malloc'ed, NULL when it has none), which the output is written with;
** and whether the writer, module jit.prof.output, is on that
** package.path. 0, or
** -1 and one line in err naming output (then nothing is kept). */
int ljp_writer_prepare(lua_State *L, const char *output, char **path,
                       char **cpath, char *err, size_t n);

/* At stop: write output as `-jprof=<letters>/format=folded,<output>`
** writes the run ctx (read through a view while the writer runs), the
** letters taken from stack_fmt. 0, or -1 and one line in err. */
int ljp_writer_write(void *ctx, const char *output, const char *stack_fmt,
                     const char *path, const char *cpath, char *err,
                     size_t n);

#endif
