/* strlist.c — the list of owned strings of strlist.h: the sources (folder
 * walks, shard lists, tar scans) append names to it and hand its array over
 * to the index, which frees it the same way. */
#include "source/strlist.h"

#include <stdlib.h>
#include <string.h>

int ff__strlist_push(ff__strlist *l, const char *s) {
  if (l->n == l->cap) {
    size_t cap = l->cap ? l->cap * 2 : 16;
    char **v = realloc(l->v, cap * sizeof *v);
    if (!v) return -1;
    l->v = v, l->cap = cap;
  }
  if (!(l->v[l->n] = strdup(s))) return -1;
  l->n++;
  return 0;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

void ff__strlist_sort(ff__strlist *l) {
  if (l->n) qsort(l->v, l->n, sizeof *l->v, cmp_str);
}

void ff__strlist_free(ff__strlist *l) {
  for (size_t i = 0; l->v && i < l->n; i++)
    free(l->v[i]);
  free(l->v);
  *l = (ff__strlist){0};
}
