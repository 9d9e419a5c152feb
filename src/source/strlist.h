/* strlist.h — a growable list of owned strings: the paths, class names,
 * shard names and bad-shard messages the sources collect while they build
 * an index. */
#ifndef FF_SOURCE_STRLIST_H
#define FF_SOURCE_STRLIST_H

#include <stddef.h>

typedef struct ff__strlist {
  char **v;
  size_t n, cap;
} ff__strlist;

/* Appends a copy of s; -1 when out of memory. */
int ff__strlist_push(ff__strlist *l, const char *s);

/* Sorts the strings by strcmp (byte order). */
void ff__strlist_sort(ff__strlist *l);

/* Frees the strings and the list, and empties it; a list whose array is
 * NULL (an allocation failed) frees nothing, whatever n says. */
void ff__strlist_free(ff__strlist *l);

#endif
