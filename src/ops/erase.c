/* erase.c — random_erasing on a sample's normalized float32 output, the
 * last thing done to it (after the uint8 ops and the conversion to NCHW
 * float): torchvision's RandomErasing and timm's RandomErasing modes. The
 * planner has drawn the boxes and the constant or per-channel fills
 * (plan.c); the per-value noise of value=random / mode=pixel comes from a
 * Philox stream keyed by the step's noise_key (normals.h), so that any
 * host — the CPU worker, or the host lowering a device sample — makes the
 * same values. */
#include <string.h>

#include "core/clock.h"
#include "kernels/pixel.h"
#include "ops/normals.h"
#include "ops/ops.h"

/* The vector clone gives the scalar build's floats (normals.h). */
FF_FMA_CLONES static void normals(uint64_t key, size_t n, float *out) { ff__normals(key, n, out); }

/* One channel's box rows from noise (h rows of w values) or the constant
 * fill: in the AVX2 clone, stores of eight floats. */
FF_FMA_CLONES static void fill_box(float *row, size_t stride, int w, int h, const float *noise, float fill) {
  for (int y = 0; y < h; y++, row += stride) {
    if (noise)
      memcpy(row, noise + (size_t)y * w, (size_t)w * sizeof *row);
    else
      for (int x = 0; x < w; x++)
        row[x] = fill;
  }
}

/* Multiversioned functions stay static: clang resolves no clone of an
 * external one called from another file. */
void ff__erase_normals(uint64_t key, size_t n, float *out) { normals(key, n, out); }

ff_status ff__op_erase(const ff__pipeline *pipe, const ff__plan *plan, void *batch_data, int slot,
                       ff__op_scratch *s) {
  int oh = pipe->out_height, ow = pipe->out_width;
  size_t plane = (size_t)oh * ow;
  float *dst = (float *)batch_data + (size_t)slot * plane * 3;
  for (int i = 0; i < plan->num_steps; i++) {
    const ff__step *st = &plan->steps[i];
    if (st->kind != FF__STEP_ERASE) continue;
    uint64_t t0 = ff__now_ns();
    size_t n = (size_t)st->w * st->h;
    const float *noise = NULL;
    if (st->antialias) {
      float *mem = ff__buf_reserve(&s->floats, 3 * n * sizeof(float) + 1);
      if (!mem) return FF_ENOMEM;
      ff__erase_normals(st->noise_key, 3 * n, mem);
      noise = mem;
    }
    for (int c = 0; c < 3; c++)
      fill_box(dst + c * plane + (size_t)st->y * ow + st->x, (size_t)ow, st->w, st->h,
               noise ? noise + c * n : NULL, st->aug.fill[c]);
    s->costs.calls[FF__COST_ERASE]++;
    s->costs.pixels[FF__COST_ERASE] += n;
    s->costs.ns[FF__COST_ERASE] += ff__now_ns() - t0;
  }
  return FF_OK;
}
