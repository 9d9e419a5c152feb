/* erase.c — random_erasing on a sample's normalized float32 output, the
 * last thing done to it (after the uint8 ops and the conversion to NCHW
 * float): torchvision's RandomErasing and timm's RandomErasing modes. The
 * planner has drawn the boxes and the constant or per-channel fills
 * (plan.c); the per-value noise of value=random / mode=pixel comes from a
 * Philox stream keyed by the step's noise_key, so that any host — the CPU
 * worker, or the host lowering a device sample — makes the same values. */
#include <math.h>
#include <string.h>

#include "core/clock.h"
#include "core/philox.h"
#include "ops/ops.h"

enum { RNG_ERASE = 0x45524153u };

void ff__erase_normals(uint64_t key, size_t n, float *out) {
  ff__philox rng;
  ff__philox_init(&rng, key, RNG_ERASE, 0, 0);
  for (size_t i = 0; i < n; i += 2) {
    /* u1 in (0, 1]: the log stays finite; float32 throughout (the host's libm, on every placement) */
    float u1 = ((float)(ff__philox_u32(&rng) >> 8) + 1.0f) * (1.0f / 16777216.0f);
    float u2 = (float)(ff__philox_u32(&rng) >> 8) * (1.0f / 16777216.0f);
    float r = sqrtf(-2.0f * logf(u1)), t = 6.2831853f * u2;
    out[i] = r * cosf(t);
    if (i + 1 < n) out[i + 1] = r * sinf(t);
  }
}

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
      for (int y = 0; y < st->h; y++) {
        float *row = dst + c * plane + (size_t)(st->y + y) * ow + st->x;
        for (int x = 0; x < st->w; x++) row[x] = noise ? noise[(c * (size_t)st->h + y) * st->w + x] : st->aug.fill[c];
      }
    s->costs.calls[FF__COST_ERASE]++;
    s->costs.pixels[FF__COST_ERASE] += n;
    s->costs.ns[FF__COST_ERASE] += ff__now_ns() - t0;
  }
  return FF_OK;
}
