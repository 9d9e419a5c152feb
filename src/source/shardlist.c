/* shardlist.c — turning a tar: source's pattern into shard names.
 *
 * WebDataset names shards with the brace notation of the braceexpand
 * package ("train-{000000..001023}.tar"), several patterns joined by "::".
 * This module expands those the same way, and reads files of shard names
 * ("@FILE", one pattern per line), so that a shard list can be kept beside
 * the data (the manifest `fusionflow shards make` writes is one). */
#include "source/shardlist.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The position of the '}' closing the '{' at s[open], or 0 when none does. */
static size_t matching_brace(const char *s, size_t open) {
  int depth = 0;
  for (size_t i = open; s[i]; i++) {
    if (s[i] == '{') depth++;
    else if (s[i] == '}' && --depth == 0) return i;
  }
  return 0;
}

/* Parses an optionally signed decimal integer of s[0..n); its digit count
 * and whether it has a leading zero go to *width and *zero. */
static int parse_end(const char *s, size_t n, long long *v, int *width, int *zero) {
  size_t k = s[0] == '-' ? 1 : 0;
  if (k == n || n - k > 18) return 0;
  for (size_t i = k; i < n; i++)
    if (s[i] < '0' || s[i] > '9') return 0;
  *v = strtoll(s, NULL, 10);
  *width = (int)n, *zero = s[k] == '0' && n - k > 1;
  return 1;
}

/* A numeric range "A..B" or "A..B..STEP" in s[0..n). */
static int parse_range(const char *s, size_t n, long long *a, long long *b, long long *step, int *width) {
  const char *dots = strstr(s, "..");
  if (!dots || (size_t)(dots - s) >= n) return 0;
  size_t na = (size_t)(dots - s);
  const char *rest = dots + 2;
  size_t nrest = n - na - 2;
  const char *dots2 = memchr(rest, '.', nrest);
  size_t nb = dots2 ? (size_t)(dots2 - rest) : nrest;
  int wa, wb, za, zb, ws, zs;
  if (!parse_end(s, na, a, &wa, &za) || !parse_end(rest, nb, b, &wb, &zb)) return 0;
  *step = 1;
  if (dots2) {
    if (nrest - nb < 3 || dots2[1] != '.' || !parse_end(dots2 + 2, nrest - nb - 2, step, &ws, &zs)) return 0;
    if (*step < 0) *step = -*step;
    if (!*step) *step = 1;
  }
  *width = za || zb ? (wa > wb ? wa : wb) : 0;
  return 1;
}

typedef struct expansion {
  ff__strlist *out;
  const char *pattern; /* the whole pattern, for messages */
  ff__error *err;
} expansion;

static ff_status push(expansion *x, const char *s) {
  if (x->out->n >= FF__SHARDS_MAX)
    return ff__error_set(x->err, FF_EINVAL, "shard pattern '%s' expands to more than %d names", x->pattern,
                         FF__SHARDS_MAX);
  if (ff__strlist_push(x->out, s)) return ff__error_set(x->err, FF_ENOMEM, "out of memory expanding '%s'", x->pattern);
  return FF_OK;
}

/* s with s[open..close] replaced by rep[0..nrep); NULL when out of memory. */
static char *splice(const char *s, size_t open, size_t close, const char *rep, size_t nrep) {
  size_t tail = strlen(s + close + 1);
  char *r = malloc(open + nrep + tail + 1);
  if (!r) return NULL;
  memcpy(r, s, open);
  memcpy(r + open, rep, nrep);
  memcpy(r + open + nrep, s + close + 1, tail + 1);
  return r;
}

/* Expands the braces of s from position `from` on. */
static ff_status expand(expansion *x, const char *s, size_t from) {
  const char *brace = strchr(s + from, '{');
  if (!brace) {
    if (strchr(s + from, '}'))
      return ff__error_set(x->err, FF_EINVAL, "shard pattern '%s': '}' without its '{'", x->pattern);
    return push(x, s);
  }
  size_t open = (size_t)(brace - s), close = matching_brace(s, open);
  if (!close) return ff__error_set(x->err, FF_EINVAL, "shard pattern '%s': '{' without its '}'", x->pattern);
  const char *inner = s + open + 1;
  size_t ninner = close - open - 1;
  ff_status st = FF_OK;
  long long a, b, step;
  int width;
  int commas = 0, depth = 0;
  for (size_t i = 0; i < ninner; i++) {
    depth += inner[i] == '{' ? 1 : inner[i] == '}' ? -1 : 0;
    commas += !depth && inner[i] == ',';
  }
  if (commas) {
    size_t start = 0;
    depth = 0;
    for (size_t i = 0; i <= ninner && !st; i++) {
      if (i < ninner) depth += inner[i] == '{' ? 1 : inner[i] == '}' ? -1 : 0;
      if (i < ninner && (depth || inner[i] != ',')) continue;
      char *r = splice(s, open, close, inner + start, i - start);
      st = r ? expand(x, r, open) : ff__error_set(x->err, FF_ENOMEM, "out of memory expanding '%s'", x->pattern);
      free(r);
      start = i + 1;
    }
    return st;
  }
  if (parse_range(inner, ninner, &a, &b, &step, &width)) {
    uint64_t span = (uint64_t)(a < b ? b - a : a - b) / (uint64_t)step;
    if (span >= FF__SHARDS_MAX)
      return ff__error_set(x->err, FF_EINVAL, "shard pattern '%s': the range {%.*s} has more than %d names",
                           x->pattern, (int)ninner, inner, FF__SHARDS_MAX);
    for (uint64_t k = 0; k <= span && !st; k++) {
      long long v = a < b ? a + (long long)k * step : a - (long long)k * step;
      char num[32];
      int n = v < 0 ? snprintf(num, sizeof num, "-%0*lld", width > 1 ? width - 1 : 0, -v)
                    : snprintf(num, sizeof num, "%0*lld", width, v);
      char *r = splice(s, open, close, num, (size_t)n);
      st = r ? expand(x, r, open + (size_t)n)
             : ff__error_set(x->err, FF_ENOMEM, "out of memory expanding '%s'", x->pattern);
      free(r);
    }
    return st;
  }
  return expand(x, s, close + 1); /* "{a}": literal, as braceexpand keeps it */
}

/* The patterns of list file `file`, each expanded, relative to its folder. */
static ff_status expand_file(expansion *x, const char *file) {
  FILE *f = fopen(file, "r");
  if (!f) return ff__error_set(x->err, FF_EIO, "shard list '%s': %s", file, strerror(errno));
  const char *slash = strrchr(file, '/');
  size_t nbase = slash ? (size_t)(slash - file) + 1 : 0;
  char *line = NULL;
  size_t cap = 0;
  ff_status st = FF_OK;
  while (!st && getline(&line, &cap, f) >= 0) {
    line[strcspn(line, "\t\r\n")] = 0;
    if (!line[0] || line[0] == '#') continue;
    char *name = malloc(nbase + strlen(line) + 1);
    if (!name) {
      st = ff__error_set(x->err, FF_ENOMEM, "out of memory reading '%s'", file);
      break;
    }
    int relative = line[0] != '/' && !strstr(line, "://") && strncmp(line, "pipe:", 5);
    snprintf(name, nbase + strlen(line) + 1, "%.*s%s", relative ? (int)nbase : 0, file, line);
    st = expand(x, name, 0);
    free(name);
  }
  free(line);
  fclose(f);
  return st;
}

ff_status ff__shards_expand(const char *pattern, ff__strlist *out, ff__error *err) {
  expansion x = {out, pattern, err};
  size_t before = out->n;
  ff_status st = FF_OK;
  for (const char *p = pattern; !st && *p;) {
    const char *sep = strstr(p, "::");
    size_t n = sep ? (size_t)(sep - p) : strlen(p);
    char *one = strndup(p, n);
    if (!one) return ff__error_set(err, FF_ENOMEM, "out of memory expanding '%s'", pattern);
    if (one[0] == '@') st = expand_file(&x, one + 1);
    else if (one[0]) st = expand(&x, one, 0);
    free(one);
    p += n + (sep ? 2 : 0);
  }
  if (!st && out->n == before)
    st = ff__error_set(err, FF_EEMPTY, "shard pattern '%s' names no shard", pattern);
  return st;
}
