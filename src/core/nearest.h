/* nearest.h — "did you mean": the known name closest to a mistyped one, for
 * the pipeline parser's op and argument names and the CLI's commands and
 * options. One suggestion, or none when nothing is close enough. */
#ifndef FF_CORE_NEAREST_H
#define FF_CORE_NEAREST_H

#include <stddef.h>

/* Insertions, deletions and substitutions from a[0..na) to b; names of up to
 * 63 characters (longer ones count as 64 edits away). */
int ff__edit_distance(const char *a, size_t na, const char *b);

/* The candidate nearest to name[0..n): the one fewest edits away when that
 * is at most 1 edit for n <= 2, else max(2, n / 3) ("gird" -> "grid", "normalise" ->
 * "normalize"); else the only candidate holding name whole when n >= 4
 * ("blur" -> "gaussian_blur"), preferring candidates not starting with
 * `skip_prefix` (may be NULL) when more than one holds it; else NULL.
 * The candidates are count records of stride bytes from base, each starting
 * with its `const char *` name (struct option, the parser's op tables); a
 * NULL name ends them early. */
const char *ff__nearest_name(const char *name, size_t n, const void *base, size_t count, size_t stride,
                             const char *skip_prefix);

#endif
