/* output.c — the finished sample into its batch slot: for each channel and
 * uint8 value, the element the pipeline's table holds (float32 of
 * normalize or to_dtype, bfloat16, float16, or the uint8 itself:
 * kernels/out.h), in NCHW planes or NHWC rows, from an interleaved image
 * or from three planes (ff__op_resize_planar's).
 *
 * The scalar loops are the reference. With AVX-512 VBMI a plane is written
 * 64 values a step (output_avx512.c): an interleaved image's channels
 * taken apart with permutes, the table looked up byte by byte (vpermi2b on
 * 256-entry byte tables) and the bytes put back together into elements;
 * with AVX2 the lookups stay scalar, into a block in the first-level cache.
 * Either way a sample of at least STREAM_BYTES goes out with streaming
 * stores, past the caches: a batch is written once and read after the
 * whole batch is done, more than the caches hold, so a store that first
 * reads its line into the cache only doubles the memory traffic. Every path
 * gives the scalar loops' bytes (tests/unit/test_output_paths.c). */
#include <string.h>

#include "kernels/out.h"
#include "kernels/pixel.h"
#include "ops/ops.h"
#include "ops/output_simd.h"

/* Samples from this size on are stored past the caches. */
#define STREAM_BYTES (64 * 1024)

/* Where the pixels come from: interleaved rows, or three planes. */
typedef struct source {
  const ff__image *img;
  const uint8_t *planes;
} source;

static uint8_t value_at(const source *s, int w, int h, size_t e, int c) {
  if (s->planes) return s->planes[(size_t)c * w * h + e];
  return s->img->data[(e / (size_t)w) * s->img->stride + (e % (size_t)w) * 3 + (size_t)c];
}

/* The sample's elements: table[c][v] in its low elem bytes. */
static void format_of(const ff__pipeline *pipe, uint32_t table[3][256], int *elem, int *planar) {
  if (pipe->out_custom) {
    memcpy(table, pipe->out_table, sizeof pipe->out_table);
    *elem = pipe->out_elem_bytes, *planar = pipe->out_planar;
  } else if (pipe->output == FF__OUTPUT_NCHW_F32) {
    memcpy(table, pipe->lut, sizeof pipe->lut);
    *elem = 4, *planar = 1;
  } else {
    for (int c = 0; c < 3; c++)
      for (int v = 0; v < 256; v++) table[c][v] = (uint32_t)v;
    *elem = 1, *planar = 0;
  }
}

/* The reference: element by element (kernels/out.h). */
static void write_scalar(const uint32_t table[3][256], int elem, int planar, const source *s, int w, int h, void *dst) {
  size_t plane = (size_t)w * h;
  for (size_t e = 0; e < plane; e++) {
    uint8_t px[3] = {value_at(s, w, h, e, 0), value_at(s, w, h, e, 1), value_at(s, w, h, e, 2)};
    ff__out_store(&table[0][0], elem, planar, plane, e, px, dst);
  }
}

static void write_output(const ff__pipeline *pipe, const source *s, void *batch_data, int slot) {
  int h = pipe->out_height, w = pipe->out_width, elem, planar;
  uint32_t table[3][256];
  format_of(pipe, table, &elem, &planar);
  size_t plane = (size_t)h * w, bytes = plane * 3 * (size_t)elem;
  char *dst = (char *)batch_data + (size_t)slot * bytes;
  int stream = bytes >= STREAM_BYTES;
#ifdef FF__OUTPUT_SIMD
  int vbmi = ff__cpu_avx512() && __builtin_cpu_supports("avx512vbmi");
  if (planar && (vbmi || ff__cpu_avx2())) {
    ff__output_src src = {s->img ? s->img->data : NULL, s->img ? s->img->stride : 0, s->planes, w, h};
    if (vbmi) ff__output_planes_avx512(table, elem, &src, dst, stream);
    else ff__output_planes_avx2(table, elem, &src, dst, stream);
    return;
  }
  if (!planar && !pipe->out_custom && s->img && (vbmi || ff__cpu_avx2())) { /* NHWC uint8: the rows as they are */
    for (int y = 0; y < h; y++)
      ff__output_copy(dst + (size_t)y * w * 3, s->img->data + (size_t)y * s->img->stride, (size_t)w * 3, stream);
    ff__output_fence();
    return;
  }
#else
  (void)stream;
#endif
  if (!planar && !pipe->out_custom && s->img) {
    for (int y = 0; y < h; y++)
      memcpy(dst + (size_t)y * w * 3, s->img->data + (size_t)y * s->img->stride, (size_t)w * 3);
    return;
  }
  write_scalar(table, elem, planar, s, w, h, dst);
}

void ff__op_write_output(const ff__pipeline *pipe, const ff__image *img, void *batch_data, int slot) {
  source s = {img, NULL};
  write_output(pipe, &s, batch_data, slot);
}

void ff__op_write_output_planar(const ff__pipeline *pipe, const uint8_t *planes, void *batch_data, int slot) {
  source s = {NULL, planes};
  write_output(pipe, &s, batch_data, slot);
}
