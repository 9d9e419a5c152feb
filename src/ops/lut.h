/* lut.h — one 256-entry byte table applied to every byte of an image's
 * rows (ops/lut.c): the lookup pass shared by the tensor table ops
 * (ops/color.c) and Pillow's point tables (ops/pil.c). */
#ifndef FF_OPS_LUT_H
#define FF_OPS_LUT_H

#include <stddef.h>
#include <stdint.h>

/* dst[y*dst_stride + k] = t[src[y*src_stride + k]] for y < rows, k < bytes;
 * src and dst may be the same memory (not otherwise overlapping). */
void ff__lut_rows(const uint8_t *src, size_t src_stride, uint8_t *dst, size_t dst_stride, size_t rows,
                  size_t bytes, const uint8_t t[256]);

/* Whether ff__lut_rows runs vectorised on this CPU (AVX2): faster than a
 * scalar lookup, slower than a table's arithmetic form (a compare, a mask). */
int ff__lut_vectorised(void);

#endif
