/*
** Windows: writing an output file (outfile.h; outfile.c's rules where
** Windows has them). Normal context only.
**   "-", "/dev/stdout", "/dev/stderr"
**            the C runtime's stdout/stderr, after what the program printed
**   nothing, or a regular file
**            a temporary file next to it ("<path>.tmp.<pid>.<n>"), renamed
**            over it (MoveFileEx, replacing): readers never see half a
**            profile
**   a directory
**            an error
** Private output (ljp_outfile_private) has no Windows meaning here (files
** get their directory's ACL). No symbolic-link rules (creating one needs
** a privilege on Windows). Errors are one line: "ljprof: cannot write
** <path>: <why>".
*/
#ifdef _WIN32  /* the rock compiles every src file: nothing elsewhere */
#include <errno.h>
#include <fcntl.h>
#include <io.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "os.h"
#include "outfile.h"

static _Atomic int out_private;
static _Atomic unsigned out_seq;

static int fail(char *err, size_t n, const char *path, const char *why)
{
  if (err && n) snprintf(err, n, "ljprof: cannot write %s: %s", path, why);
  return -1;
}

static int write_parts(FILE *f, const ljp_outpart *v, size_t nv)
{
  size_t i;
  for (i = 0; i < nv; i++)
    if (v[i].len && fwrite(v[i].data, 1, v[i].len, f) != v[i].len) return -1;
  return fflush(f) == 0 ? 0 : -1;
}

int ljp_outfile_output(const char *path, const ljp_outpart *v, size_t nv,
                       int check, char *err, size_t n)
{
  struct _stat64 st;
  char tmp[1024];
  FILE *f;
  int e;
  if (!path || !*path) return fail(err, n, "\"\"", "empty path");
  if (!strcmp(path, "-") || !strcmp(path, "/dev/stdout") ||
      !strcmp(path, "/dev/stderr")) {
    FILE *s = !strcmp(path, "/dev/stderr") ? stderr : stdout;
    if (!check && write_parts(s, v, nv) != 0)
      return fail(err, n, path, strerror(errno));
    return 0;
  }
  if (_stat64(path, &st) == 0 && (st.st_mode & _S_IFDIR))
    return fail(err, n, path, "a directory");
  if (snprintf(tmp, sizeof(tmp), "%s.tmp.%lu.%u", path,
               (unsigned long)ljp_self_pid(),
               check ? 0u : atomic_fetch_add(&out_seq, 1) + 1) >=
      (int)sizeof(tmp))
    return fail(err, n, path, "path too long");
  if (!(f = fopen(tmp, "wbx")))  /* x: a new file (C11), never another's */
    return fail(err, n, path, strerror(errno));
  if (check) {  /* leave nothing behind: the probe removed at once */
    fclose(f);
    remove(tmp);
    return 0;
  }
  if (write_parts(f, v, nv) != 0) {
    e = errno;
    fclose(f);
    remove(tmp);
    return fail(err, n, path, strerror(e));
  }
  if (fclose(f) != 0) {
    remove(tmp);
    return fail(err, n, path, strerror(errno));
  }
  if ((e = ljp_os_replace(tmp, path)) != 0) {
    char why[64];
    snprintf(why, sizeof(why), "rename failed (Windows error %d)", e);
    remove(tmp);
    return fail(err, n, path, why);
  }
  return 0;
}

void ljp_outfile_private(int on) { atomic_store(&out_private, on != 0); }
int ljp_outfile_is_private(void) { return atomic_load(&out_private); }

int ljp_outfile_remove(const char *path) { return remove(path); }

#endif /* _WIN32 */
