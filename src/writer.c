/*
** The C API's output option (ljprof_options.output, ljprof.record's
** output): written at stop by ljprof's one folded writer, the one -jprof
** and the ljprof command use (jit/prof/folded.lua through
** jit/prof/output.lua, the file itself through outfile.c), in a Lua state
** of ljprof's own (ownstate.c; the program's heap is not touched): the
** function jit.prof.output.write_output, which makes the run description
** jit.prof makes of `luajit -jprof=<letters>/format=folded,<output>` and
** writes it by write_run, as -jprof's stop does. So the file is the one
** -jprof writes for the same run, byte for byte: sorted by count, a name
** two functions share qualified, frames outermost first.
**
** The letters come from the run's stack_fmt: its f, F, l (-jp's reading:
** l before f before F; none: f) and p; other characters of the format
** (separators, Z) do not change the file. The frames are the run's: the
** innermost |stack_depth| of each sample.
**
** The package paths are the program's at start, made absolute (the
** program may change them, or its directory, before stop), and
** jit.prof.output must be on that package.path then: a start without it
** fails with one line. Gone by stop, no file is written and stop says so
** in one line.
** Normal context.
*/
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "exit_signals.h"
#include "os.h"
#include "ownstate.h"
#include "writer.h"

#define MODULE "jit.prof.output"
#define MODULE_FILE "jit/prof/output" /* MODULE as package.path's ? takes it */

/* Is MODULE_FILE found by one of path's templates (package.searchpath's
** rule: each ';'-separated template, every '?' replaced)? */
static int on_path(const char *path)
{
  const char *p = path;
  while (p && *p) {
    const char *end = strchr(p, ';');
    size_t len = end ? (size_t)(end - p) : strlen(p), i, k = 0;
    char file[4096];
    int fits = 1;
    for (i = 0; i < len && fits; i++) {
      const char *put = p[i] == '?' ? MODULE_FILE : NULL;
      size_t m = put ? strlen(put) : 1;
      if (k + m >= sizeof(file)) fits = 0;
      else if (put) { memcpy(file + k, put, m); k += m; }
      else file[k++] = p[i];
    }
    file[k] = '\0';
    if (fits && k && access(file, R_OK) == 0) return 1;
    p = end ? end + 1 : NULL;
  }
  return 0;
}

int ljp_writer_prepare(lua_State *L, const char *output, char **path,
                       char **cpath, char *err, size_t n)
{
  ljp_package_paths(L, path, cpath);
  if (*path && on_path(*path)) return 0;
  snprintf(err, n, "ljprof: cannot write %s: its writer, the Lua module "
           MODULE " (ljprof's " MODULE_FILE ".lua), is not on package.path "
           "(accepted: a package.path that finds " MODULE_FILE ".lua)",
           output);
  free(*path);
  free(*cpath);
  *path = *cpath = NULL;
  return -1;
}

/* The -jp letters of a dumpstack format. */
static void letters_of(const char *fmt, char *out)
{
  int k = 0;
  out[k++] = strchr(fmt, 'l') ? 'l' : strchr(fmt, 'f') ? 'f'
             : strchr(fmt, 'F') ? 'F' : 'f';
  if (strchr(fmt, 'p')) out[k++] = 'p';
  out[k] = '\0';
}

int ljp_writer_write(void *ctx, const char *output, const char *stack_fmt,
                     const char *path, const char *cpath, char *err,
                     size_t n)
{
  const char *prog = ljp_os_prog_name();
  char letters[4], why[512];
  size_t lp = strlen(prog), ll, lo = strlen(output), len;
  char *spec;
  int rc;
  letters_of(stack_fmt ? stack_fmt : "", letters);
  ll = strlen(letters);
  /* program \0 letters \0 output */
  len = lp + 1 + ll + 1 + lo;
  if (!(spec = malloc(len))) {
    snprintf(err, n, "ljprof: no profile written to %s: out of memory",
             output);
    return -1;
  }
  memcpy(spec, prog, lp);
  spec[lp] = '\0';
  memcpy(spec + lp + 1, letters, ll);
  spec[lp + 1 + ll] = '\0';
  memcpy(spec + len - lo, output, lo);
  rc = ljp_own_write(path, cpath, MODULE, "write_output", ctx, spec, len,
                     why, sizeof(why));
  free(spec);
  if (rc == 0) return 0;
  len = strlen(why);           /* (Lua's "not found:" ends its first line) */
  if (len && why[len - 1] == ':') why[len - 1] = '\0';
  if (!strncmp(why, "ljprof: ", 8)) snprintf(err, n, "%s", why);
  else snprintf(err, n, "ljprof: no profile written to %s: %s", output, why);
  return -1;
}
