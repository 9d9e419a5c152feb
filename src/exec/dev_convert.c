/* dev_convert.c — see dev_convert.h. One stage record per sample
 * (FF__DS_OUT_F32 for the default float32 NCHW, else FF__DS_OUT_FMT) and
 * the output table after them, uploaded together; one launch of stage
 * index 0 covers every sample. */
#include "exec/dev_convert.h"

#include <string.h>

#include "kernels/stage.h"

#define TABLE_OFF(n) (((size_t)(n) * sizeof(ff__dstage) + 255) / 256 * 256)

size_t ff__dev_convert_bytes(int n) { return TABLE_OFF(n) + 3 * 256 * sizeof(uint32_t); }

ff_status ff__dev_convert(ff__device *dev, ff__dstream *s, const ff__pipeline *pipe, void *h_table, void *d_table,
                          const void *d_src, const int *positions, int n, void *d_out, ff__error *err) {
  if (n <= 0) return FF_OK; /* no empty launch */
  int w = pipe->out_width, h = pipe->out_height;
  size_t in_bytes = (size_t)w * h * 3, out_bytes = ff__pipeline_sample_bytes(pipe);
  uint64_t table = (uint64_t)(uintptr_t)d_table + TABLE_OFF(n);
  ff__dstage *st = h_table;
  int custom = pipe->out_custom;
  for (int i = 0; i < n; i++) {
    uint64_t src = (uint64_t)(uintptr_t)d_src + (uint64_t)positions[i] * in_bytes;
    st[i] = (ff__dstage){.kind = custom ? FF__DS_OUT_FMT : FF__DS_OUT_F32,
                         .count = (uint32_t)(w * h),
                         .src = {src, w, h, (uint64_t)w * 3},
                         .dst = {(uint64_t)(uintptr_t)d_out + (uint64_t)positions[i] * out_bytes, w, h, 0},
                         .a = table};
    if (custom) st[i].p.out.elem_bytes = pipe->out_elem_bytes, st[i].p.out.planar = pipe->out_planar;
  }
  _Static_assert(sizeof pipe->lut == sizeof pipe->out_table, "one output table region");
  memcpy((char *)h_table + TABLE_OFF(n), custom ? (const void *)pipe->out_table : pipe->lut, sizeof pipe->lut);
  ff_status r = ff__device_upload(dev, s, d_table, h_table, ff__dev_convert_bytes(n), err);
  if (!r) r = ff__device_launch_stages(dev, s, d_table, n, custom ? FF__DS_OUT_FMT : FF__DS_OUT_F32, (uint32_t)(w * h), err);
  return r;
}
