/* buf.c — growable per-thread scratch buffers: a worker's memory grows to the
 * largest image it has seen and is then reused, so the steady state allocates
 * nothing. */
#include "core/image.h"

#include <stdint.h>
#include <stdlib.h>

void *ff__buf_reserve(ff__buf *buf, size_t size_bytes) {
  if (size_bytes <= buf->cap_bytes) return buf->data;
  size_t cap = buf->cap_bytes ? buf->cap_bytes : 4096;
  while (cap < size_bytes) cap = cap > SIZE_MAX / 2 ? size_bytes : cap * 2; /* doubling must not wrap to 0 */
  void *p = malloc(cap);
  if (!p) return NULL;
  free(buf->data);
  buf->data = p;
  buf->cap_bytes = cap;
  return p;
}

void ff__buf_adopt(ff__buf *buf, void *data, size_t size_bytes) {
  free(buf->data);
  buf->data = data;
  buf->cap_bytes = size_bytes;
}

void ff__buf_free(ff__buf *buf) {
  free(buf->data);
  buf->data = NULL;
  buf->cap_bytes = 0;
}
