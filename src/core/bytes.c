/* bytes.c — see bytes.h. */
#include "core/bytes.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

int ff__parse_bytes(const char *s, size_t *out) {
  if (*s < '0' || *s > '9') return 0; /* strtoull would take spaces and a sign */
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  int shift = *end == 'K' || *end == 'k'   ? 10
              : *end == 'M' || *end == 'm' ? 20
              : *end == 'G' || *end == 'g' ? 30
                                           : 0;
  if (shift) end++;
  if (*end || errno || v > (SIZE_MAX >> shift)) return 0;
  *out = (size_t)v << shift;
  return 1;
}
