/*
** Writing an output file: the one routine behind every face (-jprof, the
** ljprof command, and the C API's output option and
** ljprof.record{output=}, whose Lua writer writer.c runs: all through
** ljprof.write_file). Normal context only.
**
** Rules, by what the path names when the write starts:
**   /dev/stdout, /dev/stderr, /dev/fd/N, /proc/self/fd/N
**            that descriptor itself, never reopened (a reopened redirect
**            with O_TRUNC would destroy what the program printed)
**   nothing, or a regular file
**            a temporary file next to it, renamed over it (readers never
**            see half a profile); a new file is 0644 whatever the umask
**            (nginx runs its workers with umask 0: a profile came out
**            -rw-rw-rw-), 0600 when private output is asked for
**            (ljp_outfile_private); a replaced file keeps its
**            permissions, less the group's and others' when private
**   a character or block device, a FIFO
**            written in place, never replaced (as root, a rename would
**            turn /dev/null into a regular file); a FIFO without a
**            reader is an error, not a hang
**   a directory, a socket
**            an error
**   a symbolic link
**            followed only when it cannot surprise: owned by us, or by
**            the owner of its directory (the kernel's protected_symlinks
**            rule for sticky, world-writable directories such as /tmp).
**            A followed link to a regular file or to nothing is written
**            through: the temporary file is renamed over the target, so
**            the link stays a link.
** The temporary file is "<path>.tmp.<pid>.<n>" ("<path>.tmp.<pid>.check"
** for the probe of a check). One left behind by a process that died
** during a write (kill -9) is removed by the next write to the same path,
** or by ljp_outfile_remove (the ljprof command's private raw file, which
** its child may have been killed writing): only names of that exact form
** whose pid no longer runs.
** Errors are one line: "ljprof: cannot write <path>: <why>".
*/
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "outfile.h"

static int fail(char *err, size_t n, const char *path, const char *why)
{
  if (err && n) snprintf(err, n, "ljprof: cannot write %s: %s", path, why);
  return -1;
}

static int write_all(int fd, const char *data, size_t len)
{
  while (len > 0) {
    ssize_t w = write(fd, data, len);
    if (w < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    data += w;
    len -= (size_t)w;
  }
  return 0;
}

static int write_parts(int fd, const ljp_outpart *v, size_t nv)
{
  size_t i;
  for (i = 0; i < nv; i++)
    if (write_all(fd, v[i].data, v[i].len) != 0) return -1;
  return 0;
}

/* The descriptor a path names by itself, or -1. */
static int named_fd(const char *path)
{
  const char *num = NULL;
  char *end;
  long fd;
  if (!strcmp(path, "-") || !strcmp(path, "/dev/stdout")) return 1;
  if (!strcmp(path, "/dev/stderr")) return 2;
  if (!strncmp(path, "/dev/fd/", 8)) num = path + 8;
  else if (!strncmp(path, "/proc/self/fd/", 14)) num = path + 14;
  if (!num || !*num) return -1;
  fd = strtol(num, &end, 10);
  if (*end || fd < 0 || fd > INT_MAX) return -1;
  return (int)fd;
}

/* dir part of path into buf ("." when none). */
static void dir_of(const char *path, char *buf, size_t n)
{
  const char *slash = strrchr(path, '/');
  if (!slash) snprintf(buf, n, ".");
  else if (slash == path) snprintf(buf, n, "/");
  else snprintf(buf, n, "%.*s", (int)(slash - path), path);
}

/* Remove "<base>.tmp.<pid>[.<n>]" files in dir whose pid is gone. */
static void clean_stale(const char *path)
{
  char dir[PATH_MAX];
  const char *base = strrchr(path, '/');
  size_t blen;
  DIR *d;
  struct dirent *e;
  base = base ? base + 1 : path;
  blen = strlen(base);
  dir_of(path, dir, sizeof(dir));
  if (!(d = opendir(dir))) return;
  while ((e = readdir(d)) != NULL) {
    const char *p = e->d_name;
    char *end;
    long pid;
    char full[PATH_MAX];
    if (strncmp(p, base, blen) || strncmp(p + blen, ".tmp.", 5)) continue;
    p += blen + 5;
    pid = strtol(p, &end, 10);
    if (end == p || pid <= 0) continue;
    if (*end == '.' && !strcmp(end + 1, "check")) {
      end += 6;
    } else if (*end == '.') {
      const char *q = end + 1;
      strtol(q, &end, 10);
      if (end == q) continue;
    }
    if (*end) continue;
    if (pid == (long)getpid() || kill((pid_t)pid, 0) == 0 || errno != ESRCH)
      continue;  /* ours, or still running (or not ours to judge) */
    if (snprintf(full, sizeof(full), "%s/%s", dir, e->d_name) <
        (int)sizeof(full))
      unlink(full);
  }
  closedir(d);
}

static _Atomic int out_private;

void ljp_outfile_private(int on)
{
  atomic_store(&out_private, on != 0);
}

int ljp_outfile_is_private(void)
{
  return atomic_load(&out_private);
}

/* The mode of a file written at path: old its stat when it is replaced. */
static mode_t file_mode(const struct stat *old)
{
  int priv = atomic_load(&out_private);
  if (old) return old->st_mode & (priv ? 07700 : 07777);
  return priv ? 0600 : 0644;
}

/* Atomic replace of a regular file (or a new one) at path. */
static int write_atomic(const char *shown, const char *path,
                        const ljp_outpart *v, size_t nv,
                        const struct stat *old, char *err, size_t n)
{
  static _Atomic unsigned seq;
  char tmp[PATH_MAX];
  int fd, saved;
  clean_stale(path);
  if (snprintf(tmp, sizeof(tmp), "%s.tmp.%d.%u", path, (int)getpid(),
               atomic_fetch_add(&seq, 1)) >= (int)sizeof(tmp))
    return fail(err, n, shown, "path too long");
  /* Created private (nobody else can open it meanwhile), then given its
  ** mode, which the umask does not narrow or widen. */
  fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return fail(err, n, shown, strerror(errno));
  if (fchmod(fd, file_mode(old)) != 0) {
    saved = errno;
    close(fd);
    unlink(tmp);
    return fail(err, n, shown, strerror(saved));
  }
  if (write_parts(fd, v, nv) != 0) {
    saved = errno;
    close(fd);
    unlink(tmp);
    return fail(err, n, shown, strerror(saved));
  }
  if (close(fd) != 0 || rename(tmp, path) != 0) {
    saved = errno;
    unlink(tmp);
    return fail(err, n, shown, strerror(saved));
  }
  return 0;
}

/* Write in place to a device or FIFO (never created, never replaced). */
static int write_in_place(const char *shown, const char *path,
                          const ljp_outpart *v, size_t nv, int check,
                          char *err, size_t n)
{
  struct stat st;
  int fd, saved;
  if (check) {
    /* Never opened to check: opening and closing a FIFO ends its
    ** reader's input before the profile is written. */
    if (access(path, W_OK) != 0) return fail(err, n, shown, strerror(errno));
    return 0;
  }
  fd = open(path, O_WRONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENXIO) return fail(err, n, shown, "a FIFO with no reader");
    return fail(err, n, shown, strerror(errno));
  }
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
    close(fd);  /* replaced by a regular file meanwhile: not in place */
    return fail(err, n, shown, "changed while being opened");
  }
  /* Blocking writes from here: a FIFO reader that is slow is waited for. */
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  if (write_parts(fd, v, nv) != 0) {
    saved = errno;
    close(fd);
    return fail(err, n, shown, strerror(saved));
  }
  if (close(fd) != 0 && errno != EINTR)
    return fail(err, n, shown, strerror(errno));
  return 0;
}

/* May the link at path (lstat in lst) be followed? */
static int link_trusted(const char *path, const struct stat *lst)
{
  char dir[PATH_MAX];
  struct stat dst;
  if (lst->st_uid == geteuid()) return 1;
  dir_of(path, dir, sizeof(dir));
  if (stat(dir, &dst) != 0) return 0;
  if (lst->st_uid == dst.st_uid) return 1;
  /* Someone else's link: fine in a directory only its owner can change. */
  return !((dst.st_mode & S_ISVTX) && (dst.st_mode & S_IWOTH));
}

/* The file a link leads to, for writing through it (PATH_MAX buffer). */
static int link_target(const char *path, char *out)
{
  char buf[PATH_MAX], dir[PATH_MAX];
  ssize_t k;
  int hops;
  snprintf(out, PATH_MAX, "%s", path);
  for (hops = 0; hops < 16; hops++) {
    struct stat st;
    if (lstat(out, &st) != 0 || !S_ISLNK(st.st_mode)) return 0;
    if ((k = readlink(out, buf, sizeof(buf) - 1)) < 0) return -1;
    buf[k] = '\0';
    if (buf[0] == '/') {
      snprintf(out, PATH_MAX, "%s", buf);
    } else {
      dir_of(out, dir, sizeof(dir));
      if (snprintf(out, PATH_MAX, "%s/%s", dir, buf) >= PATH_MAX) return -1;
    }
  }
  return -1;
}

int ljp_outfile_output(const char *path, const ljp_outpart *v, size_t nv,
                       int check, char *err, size_t n)
{
  struct stat lst, st;
  char target[PATH_MAX];
  int fd = named_fd(path);
  if (!path || !*path) return fail(err, n, "\"\"", "empty path");
  if (fd >= 0) {
    if (fcntl(fd, F_GETFD) < 0) return fail(err, n, path, strerror(errno));
    /* After what the program has printed so far (stdio buffers). */
    if (!check && fd <= 2) fflush(fd == 2 ? stderr : stdout);
    if (!check && write_parts(fd, v, nv) != 0)
      return fail(err, n, path, strerror(errno));
    return 0;
  }
  if (lstat(path, &lst) != 0) {
    if (errno != ENOENT) return fail(err, n, path, strerror(errno));
    if (check) {
      /* Leave nothing behind: a probe file, removed at once. */
      char tmp[PATH_MAX];
      int pfd;
      if (snprintf(tmp, sizeof(tmp), "%s.tmp.%d.check", path,
                   (int)getpid()) >= (int)sizeof(tmp))
        return fail(err, n, path, "path too long");
      pfd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW,
                 0600);
      if (pfd < 0) return fail(err, n, path, strerror(errno));
      close(pfd);
      unlink(tmp);
      return 0;
    }
    return write_atomic(path, path, v, nv, NULL, err, n);
  }
  if (S_ISLNK(lst.st_mode)) {
    if (!link_trusted(path, &lst))
      return fail(err, n, path, "a symbolic link owned by another user in "
                  "a shared directory (not followed)");
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode))
      return write_in_place(path, path, v, nv, check, err, n);
    if (link_target(path, target) != 0)
      return fail(err, n, path, "a symbolic link that cannot be resolved");
    if (stat(target, &st) == 0) {
      if (S_ISDIR(st.st_mode)) return fail(err, n, path, "a directory");
      if (check) return 0;
      return write_atomic(path, target, v, nv, &st, err, n);
    }
    return check ? 0 : write_atomic(path, target, v, nv, NULL, err, n);
  }
  if (S_ISREG(lst.st_mode)) {
    if (check) return access(path, W_OK) == 0 ? 0
                      : fail(err, n, path, strerror(errno));
    return write_atomic(path, path, v, nv, &lst, err, n);
  }
  if (S_ISDIR(lst.st_mode)) return fail(err, n, path, "a directory");
  if (S_ISSOCK(lst.st_mode)) return fail(err, n, path, "a socket");
  return write_in_place(path, path, v, nv, check, err, n);
}

int ljp_outfile_remove(const char *path)
{
  clean_stale(path);
  return unlink(path);
}
