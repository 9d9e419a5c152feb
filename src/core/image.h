/* image.h — an interleaved uint8 image view (HWC), the currency between the
 * decoder and the ops. `stride` is in bytes between rows. */
#ifndef FF_CORE_IMAGE_H
#define FF_CORE_IMAGE_H

#include <stddef.h>
#include <stdint.h>

typedef struct ff__image {
  uint8_t *data;
  int width, height, channels; /* channels is 3 (RGB) after decode */
  size_t stride;               /* bytes per row */
} ff__image;

/* A growable scratch buffer owned by one worker thread. */
typedef struct ff__buf {
  void *data;
  size_t cap_bytes;
} ff__buf;

/* Makes buf hold at least size_bytes; returns its data or NULL when out of memory. */
void *ff__buf_reserve(ff__buf *buf, size_t size_bytes);
/* Makes buf own data (malloc'd, size_bytes of it; NULL when 0) instead of its memory. */
void ff__buf_adopt(ff__buf *buf, void *data, size_t size_bytes);
void ff__buf_free(ff__buf *buf);

#endif
