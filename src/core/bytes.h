/* bytes.h — sizes in bytes as users write them: "65536", "512K", "256M",
 * "2G" (binary multiples, either case). One parser for every option and
 * device query that takes a size. */
#ifndef FF_CORE_BYTES_H
#define FF_CORE_BYTES_H

#include <stddef.h>

/* Parses the whole of s into *out. Returns 1, or 0 (and leaves *out alone)
 * when s is empty, negative, has anything after the suffix, or does not fit
 * in size_t. */
int ff__parse_bytes(const char *s, size_t *out);

#endif
