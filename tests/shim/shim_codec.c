/* shim_codec.c — exposes the decoder to the golden tests through ctypes:
 * read a file, decode a region (optionally DCT-scaled), copy the pixels out
 * packed (HWC RGB). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec/codec.h"

#define SHIM_API __attribute__((visibility("default")))

/* The whole of a regular file in malloc'd memory, or NULL. */
static uint8_t *read_file(const char *path, size_t *size) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  long n = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
  uint8_t *data = n >= 0 ? malloc((size_t)n + 1) : NULL;
  if (data && (fseek(f, 0, SEEK_SET) != 0 || fread(data, 1, (size_t)n, f) != (size_t)n)) {
    free(data);
    data = NULL;
  }
  fclose(f);
  *size = (size_t)n;
  return data;
}

SHIM_API int ff_shim_decode(const char *path, int crop_x, int crop_y, int crop_w, int crop_h,
                            int min_w, int min_h, uint8_t *out, int out_cap, int *out_w, int *out_h,
                            char *errmsg, int errmsg_cap) {
  ff__error err = {0};
  size_t size = 0;
  uint8_t *data = read_file(path, &size);
  ff_status st;
  if (!data) {
    st = ff__error_set(&err, FF_EIO, "%s: cannot read", path);
  } else {
    ff__decode_req req = {.crop_x = crop_x, .crop_y = crop_y, .crop_width = crop_w, .crop_height = crop_h,
                          .min_width = min_w, .min_height = min_h};
    ff__buf pixels = {0};
    ff__image img;
    st = ff__codec_decode(data, size, path, &req, &pixels, &img, &err);
    if (!st && (size_t)img.width * 3 * (size_t)img.height > (size_t)out_cap)
      st = ff__error_set(&err, FF_EINVAL, "%s: %dx%d image does not fit in %d bytes", path,
                         img.width, img.height, out_cap);
    if (!st) {
      for (int y = 0; y < img.height; y++)
        memcpy(out + (size_t)y * img.width * 3, img.data + (size_t)y * img.stride,
               (size_t)img.width * 3);
      *out_w = img.width;
      *out_h = img.height;
    }
    ff__buf_free(&pixels);
    free(data);
  }
  if (errmsg && errmsg_cap > 0) snprintf(errmsg, (size_t)errmsg_cap, "%s", st ? err.msg : "");
  return st;
}
