/* color_rows.h — what the two files of the photometric ops share: an
 * image's rows as the flat loops see them, the copy an op that changes
 * nothing leaves, the AVX-512 VBMI dispatch, and the one-table lookup
 * (color_table.c) that contrast also uses once its mean is known
 * (color.c). Internal to src/ops. */
#ifndef FF_OPS_COLOR_ROWS_H
#define FF_OPS_COLOR_ROWS_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kernels/pixel.h"
#include "ops/augment.h"

/* Rows of src and dst (the same size) as (first rows, row count, bytes per
 * row): dense images are one long row, so the flat loops below see as much
 * work at once as possible. */
typedef struct rows {
  const uint8_t *src;
  uint8_t *dst;
  size_t count, bytes, src_stride, dst_stride;
} rows;

static inline rows rows_of(const ff__image *src, const ff__image *dst) {
  size_t bytes = (size_t)src->width * (size_t)src->channels;
  rows r = {src->data, dst->data, (size_t)src->height, bytes, src->stride, dst->stride};
  if (src->stride == bytes && dst->stride == bytes) r.bytes *= r.count, r.count = r.count ? 1 : 0;
  return r;
}

/* dst = src: what an op that changes nothing leaves, unless in place. */
static inline void copy_rows(const ff__image *src, const ff__image *dst) {
  if (src->data == dst->data) return;
  rows r = rows_of(src, dst);
  for (size_t y = 0; y < r.count; y++)
    memcpy(r.dst + y * r.dst_stride, r.src + y * r.src_stride, r.bytes);
}

/* On x86-64 CPUs with AVX-512 VBMI whole 256-entry tables fit in zmm
 * registers and vpermb moves bytes across a vector (chosen at run time;
 * the results are the same). */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__CUDACC__)
#include <immintrin.h>
#define HAVE_VBMI_PATH 1
#define VBMI_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi")))
static inline int have_vbmi(void) { return ff__cpu_avx512() && __builtin_cpu_supports("avx512vbmi"); }

static inline __mmask64 tail_mask(size_t n) { return n >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << n) - 1); }
#endif

/* One table t for every byte of src, into dst (in place when they are the same memory). */
void ff__color_apply_table(const ff__image *src, const ff__image *dst, const uint8_t t[256]);

#endif
