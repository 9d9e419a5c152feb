/* output.c — the batch's output format: element type and memory order
 * (ff_config.output_dtype, memory_format) turned into what the writers
 * need — element size, planar or interleaved, and per channel a table from
 * each uint8 value to the element's bits (kernels/out.h), so that the CPU
 * writer and the device's output stage store the same bits. The float
 * types take the pipeline's float32 value (normalize's table) rounded to
 * nearest, ties to even, as torch's Tensor.to(bfloat16 / float16) does. */
#include <math.h>
#include <string.h>

#include "pipeline/pipeline.h"

/* float32 → bfloat16 bits, round to nearest even; NaN stays a quiet NaN. */
static uint16_t to_bf16(float f) {
  uint32_t x;
  memcpy(&x, &f, sizeof x);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40);
  return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

/* float32 → IEEE binary16 bits, round to nearest even. */
static uint16_t to_f16(float f) {
  uint32_t x;
  memcpy(&x, &f, sizeof x);
  uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
  uint32_t ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return sign | 0x7e00u;  /* NaN */
  if (ax >= 0x477ff000u) return sign | 0x7c00u; /* 65520 and over round to infinity */
  if (ax < 0x38800000u)                         /* under 2^-14: a subnormal, in units of 2^-24 (exact scaling) */
    return sign | (uint16_t)rintf(fabsf(f) * 16777216.0f);
  uint32_t r = ax - 0x38000000u; /* exponent rebiased from 127 to 15 */
  uint32_t h = r >> 13, rem = r & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++;
  return sign | (uint16_t)h;
}

ff_status ff__pipeline_set_output(ff__pipeline *p, int output_dtype, int memory_format, ff__error *err) {
  int fl = p->output == FF__OUTPUT_NCHW_F32;
  if (output_dtype < FF_OUTPUT_DTYPE_AUTO || output_dtype > FF_OUTPUT_UINT8)
    return ff__error_set(err, FF_EINVAL, "output_dtype must be auto, float32, bfloat16, float16 or uint8 (got %d)",
                         output_dtype);
  if (memory_format < FF_MEMORY_FORMAT_AUTO || memory_format > FF_MEMORY_FORMAT_CHANNELS_LAST)
    return ff__error_set(err, FF_EINVAL, "memory_format must be auto, contiguous or channels_last (got %d)",
                         memory_format);
  if (output_dtype == FF_OUTPUT_UINT8 && fl)
    return ff__error_set(err, FF_EINVAL,
                         "output_dtype uint8: the pipeline ends in normalize or to_dtype (drop it for uint8 batches)");
  if (output_dtype != FF_OUTPUT_UINT8 && output_dtype != FF_OUTPUT_DTYPE_AUTO && !fl)
    return ff__error_set(err, FF_EINVAL,
                         "output_dtype %s needs a pipeline that ends in normalize or to_dtype",
                         output_dtype == FF_OUTPUT_FLOAT32 ? "float32" : output_dtype == FF_OUTPUT_BFLOAT16 ? "bfloat16" : "float16");
  int dtype = !fl ? FF_UINT8 : output_dtype == FF_OUTPUT_BFLOAT16 ? FF_BFLOAT16 : output_dtype == FF_OUTPUT_FLOAT16 ? FF_FLOAT16 : FF_FLOAT32;
  int planar = memory_format == FF_MEMORY_FORMAT_CONTIGUOUS || (memory_format == FF_MEMORY_FORMAT_AUTO && fl);
  p->out_dtype = dtype, p->out_planar = planar;
  p->out_channels_last = memory_format == FF_MEMORY_FORMAT_CHANNELS_LAST;
  p->out_elem_bytes = dtype == FF_FLOAT32 ? 4 : dtype == FF_UINT8 ? 1 : 2;
  p->out_custom = fl ? dtype != FF_FLOAT32 || !planar : planar;
  for (int c = 0; c < 3; c++)
    for (int v = 0; v < 256; v++) {
      uint32_t bits = (uint32_t)v;
      if (fl && dtype == FF_FLOAT32) memcpy(&bits, &p->lut[c][v], sizeof bits);
      if (dtype == FF_BFLOAT16) bits = to_bf16(p->lut[c][v]);
      if (dtype == FF_FLOAT16) bits = to_f16(p->lut[c][v]);
      p->out_table[c][v] = bits;
    }
  return FF_OK;
}

ff_status ff__pipeline_check_erasing(const ff__pipeline *p, ff__error *err) {
  for (int i = 0; p->out_custom && i < p->num_ops; i++)
    if (p->ops[i].kind == FF__OP_RANDOM_ERASING)
      return ff__error_set(err, FF_EINVAL, "random_erasing (pipeline column %d) writes the float32 NCHW output: "
                           "output_dtype and memory_format must be auto (or float32, contiguous)", p->ops[i].column);
  return FF_OK;
}

int ff__pipeline_uint8_transport(const ff__pipeline *p, ff__pipeline *out) {
  for (int i = 0; i < p->num_ops; i++)
    if (p->ops[i].kind == FF__OP_RANDOM_ERASING) return 0;
  *out = *p;
  out->output = FF__OUTPUT_NHWC_U8;
  ff__pipeline_set_output(out, FF_OUTPUT_DTYPE_AUTO, FF_MEMORY_FORMAT_AUTO, NULL);
  return 1;
}

size_t ff__pipeline_sample_bytes(const ff__pipeline *p) {
  size_t elem = p->out_elem_bytes ? (size_t)p->out_elem_bytes : p->output == FF__OUTPUT_NCHW_F32 ? 4 : 1;
  return (size_t)p->out_height * (size_t)p->out_width * 3 * elem;
}
