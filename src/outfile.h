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

/* Write data to path by the rules in outfile.c. 0, or -1 and one line in
** err. */
int ljp_outfile_write(const char *path, const char *data, size_t len,
                      char *err, size_t errlen);
/* The same, of the parts v[0..nv-1] one after another (a large profile
** written without joining them first). */
int ljp_outfile_write_parts(const char *path, const ljp_outpart *v,
                            size_t nv, char *err, size_t errlen);
/* Could path be written now? Leaves nothing behind. 0, or -1 and one
** line in err. */
int ljp_outfile_check(const char *path, char *err, size_t errlen);
/* New files 0600 instead of 0644 (on), and replaced ones without the
** group's and others' permissions; process-wide, for every later write. */
void ljp_outfile_private(int on);
int ljp_outfile_is_private(void);
/* Remove path and the temporaries of writers of it that no longer run
** (a kill -9 during a write). The result of unlink(path). */
int ljp_outfile_remove(const char *path);

#endif
