/* nearest.c — the nearest known name to a mistyped one (core/nearest.h):
 * Levenshtein distance over short names, then a whole-substring fallback
 * for names typed without their prefix ("resized_crop"). */
#include "core/nearest.h"

#include <string.h>

int ff__edit_distance(const char *a, size_t na, const char *b) {
  size_t nb = strlen(b);
  if (na > 63 || nb > 63) return 64;
  int row[64];
  for (size_t j = 0; j <= nb; j++) row[j] = (int)j;
  for (size_t i = 1; i <= na; i++) {
    int diag = row[0];
    row[0] = (int)i;
    for (size_t j = 1; j <= nb; j++) {
      int up = row[j], best = diag + (a[i - 1] != b[j - 1]);
      if (up + 1 < best) best = up + 1;
      if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
      diag = up, row[j] = best;
    }
  }
  return row[nb];
}

static const char *name_at(const void *base, size_t i, size_t stride) {
  const char *const *p = (const char *const *)(const void *)((const char *)base + i * stride);
  return *p;
}

/* Whether b holds a[0..n) whole. */
static int holds(const char *b, const char *a, size_t n) {
  for (const char *p = b; (p = strchr(p, a[0])); p++)
    if (!strncmp(p, a, n)) return 1;
  return 0;
}

const char *ff__nearest_name(const char *name, size_t n, const void *base, size_t count, size_t stride,
                             const char *skip_prefix) {
  if (!n || n > 63) return NULL;
  const char *best = NULL;
  int limit = n <= 2 ? 1 : n / 3 > 2 ? (int)(n / 3) : 2, best_d = limit + 1; /* "gird" -> "grid": 2 edits */
  for (size_t i = 0; i < count && name_at(base, i, stride); i++) {
    int d = ff__edit_distance(name, n, name_at(base, i, stride));
    if (d < best_d) best = name_at(base, i, stride), best_d = d;
  }
  if (best || n < 4) return best;
  const char *only = NULL, *only_preferred = NULL;
  int holders = 0, preferred = 0;
  size_t skip = skip_prefix ? strlen(skip_prefix) : 0;
  for (size_t i = 0; i < count && name_at(base, i, stride); i++) {
    const char *c = name_at(base, i, stride);
    if (!holds(c, name, n)) continue;
    holders++, only = c;
    if (!skip || strncmp(c, skip_prefix, skip)) preferred++, only_preferred = c;
  }
  return holders == 1 ? only : preferred == 1 ? only_preferred : NULL;
}
