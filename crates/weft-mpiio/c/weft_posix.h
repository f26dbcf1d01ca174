/* Internal interface between c/posix.c (the POSIX interposer) and
 * c/pnetcdf.c (PnetCDF entry points): a per-thread "window" during which
 * the name a PnetCDF call on a `weft:` name strips to (everything after
 * the first ':') means that Weft file in POSIX calls. Not exported. */
#ifndef WEFT_POSIX_H
#define WEFT_POSIX_H

/* If `path` begins with `weft:`, opens a window for it on this thread,
 * stores the enclosing one in *outer and returns 1; otherwise returns 0. */
int weft_posix_window_begin(const char *path, const char **outer);
/* Closes the window begin opened (no-op when it returned 0). */
void weft_posix_window_end(int opened, const char *outer);

#endif
