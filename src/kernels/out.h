/* out.h — storing a finished sample's pixel in the batch's output format:
 * one element per channel from a per-channel table of the element's bits
 * (pipeline/output.c fills it: float32, bfloat16 or float16 bits of
 * normalize's value for each uint8 input, or the uint8 itself), at its
 * place in NCHW planes or NHWC. Shared by the CPU's output writer
 * (ops/geometry.c) and the device's output stage (kernels/stage.h), so
 * both store the same bits. */
#ifndef FF_KERNELS_OUT_H
#define FF_KERNELS_OUT_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/hd.h"

/* Pixel e (row-major, of plane = H x W) with channels px into the sample
 * at dst: table[c * 256 + v] holds the element's bits in its low
 * elem_bytes bytes (1, 2 or 4); planar: NCHW, else NHWC. */
FF_HD static inline void ff__out_store(const uint32_t *table, int elem_bytes, int planar, size_t plane, size_t e,
                                       const uint8_t px[3], void *dst) {
  for (int c = 0; c < 3; c++) {
    uint32_t v = table[c * 256 + px[c]];
    size_t i = planar ? (size_t)c * plane + e : e * 3 + (size_t)c;
    if (elem_bytes == 4)
      ((uint32_t *)dst)[i] = v;
    else if (elem_bytes == 2)
      ((uint16_t *)dst)[i] = (uint16_t)v;
    else
      ((uint8_t *)dst)[i] = (uint8_t)v;
  }
}

#endif
