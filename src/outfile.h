/*
** Writing an output file (outfile.c): the one routine behind every face.
** Normal context only.
*/
#ifndef LJP_OUTFILE_H
#define LJP_OUTFILE_H

#include <stddef.h>

/* A part of a file's content (ljp_outfile_write_parts). */
typedef struct ljp_outpart {
  const char *data;
  size_t len;
} ljp_outpart;

/* The one routine, one per OS (outfile.c, outfile_win.c): write the
** parts v[0..nv-1] one after another to path by that file's rules, or
** (check) only see whether path could be written now, leaving nothing
** behind. 0, or -1 and one line in err. */
int ljp_outfile_output(const char *path, const ljp_outpart *v, size_t nv,
                       int check, char *err, size_t n);

/* Write data to path. */
static inline int ljp_outfile_write(const char *path, const char *data,
                                    size_t len, char *err, size_t errlen)
{
  ljp_outpart one;
  one.data = data;
  one.len = len;
  return ljp_outfile_output(path, &one, 1, 0, err, errlen);
}

/* The same, of parts (a large profile written without joining them). */
static inline int ljp_outfile_write_parts(const char *path,
                                          const ljp_outpart *v, size_t nv,
                                          char *err, size_t errlen)
{
  return ljp_outfile_output(path, v, nv, 0, err, errlen);
}

/* Could path be written now? */
static inline int ljp_outfile_check(const char *path, char *err,
                                    size_t errlen)
{
  return ljp_outfile_output(path, NULL, 0, 1, err, errlen);
}
/* New files 0600 instead of 0644 (on), and replaced ones without the
** group's and others' permissions; process-wide, for every later write. */
void ljp_outfile_private(int on);
int ljp_outfile_is_private(void);
/* Remove path and the temporaries of writers of it that no longer run
** (a kill -9 during a write). The result of unlink(path). */
int ljp_outfile_remove(const char *path);

#endif
