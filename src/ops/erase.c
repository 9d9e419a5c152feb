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
#include "kernels/pixel.h"
#include "ops/ops.h"

enum { RNG_ERASE = 0x45524153u };

/* The normals in chunks of pairs, each step over the whole chunk: the
 * Philox blocks (four words, two pairs, each; the stream's words in order,
 * as ff__philox_u32 hands them out), the uniforms, logf, the square roots
 * and products (loops that vectorise: IEEE sqrt and products round as the
 * scalar ones), sinf and cosf: the same float32 operations on each value
 * as one pair at a time, in fewer calls. */
FF_FMA_CLONES static void normals(uint64_t key, size_t n, float *out) {
  enum { CHUNK = 64 }; /* pairs, an even number: whole blocks */
  ff__philox rng;
  ff__philox_init(&rng, key, RNG_ERASE, 0, 0);
  uint32_t words[2 * CHUNK];
  float r[CHUNK], t[CHUNK], c[CHUNK], s[CHUNK];
  for (size_t i = 0; i < n; i += 2 * CHUNK) {
    size_t pairs = (n - i + 1) / 2 < CHUNK ? (n - i + 1) / 2 : CHUNK;
    for (size_t b = 0; b < (pairs + 1) / 2; b++, rng.ctr[0]++) ff__philox4x32_10(rng.key, rng.ctr, words + 4 * b);
    for (size_t j = 0; j < pairs; j++) {
      /* u1 in (0, 1]: the log stays finite; float32 throughout (the host's libm, on every placement) */
      r[j] = ((float)(words[2 * j] >> 8) + 1.0f) * (1.0f / 16777216.0f);
      t[j] = 6.2831853f * ((float)(words[2 * j + 1] >> 8) * (1.0f / 16777216.0f));
    }
    for (size_t j = 0; j < pairs; j++) r[j] = -2.0f * logf(r[j]);
    for (size_t j = 0; j < pairs; j++) r[j] = sqrtf(r[j]);
    for (size_t j = 0; j < pairs; j++) c[j] = cosf(t[j]), s[j] = sinf(t[j]);
    size_t whole = i + 2 * pairs <= n ? pairs : pairs - 1; /* n odd: the last pair's sine is not kept */
    for (size_t j = 0; j < whole; j++) out[i + 2 * j] = r[j] * c[j], out[i + 2 * j + 1] = r[j] * s[j];
    if (whole < pairs) out[i + 2 * whole] = r[whole] * c[whole];
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
    for (int c = 0; c < 3; c++) {
      float fill = st->aug.fill[c];
      for (int y = 0; y < st->h; y++) {
        float *row = dst + c * plane + (size_t)(st->y + y) * ow + st->x;
        if (noise)
          memcpy(row, noise + (c * (size_t)st->h + y) * st->w, (size_t)st->w * sizeof *row);
        else
          for (int x = 0; x < st->w; x++) row[x] = fill;
      }
    }
    s->costs.calls[FF__COST_ERASE]++;
    s->costs.pixels[FF__COST_ERASE] += n;
    s->costs.ns[FF__COST_ERASE] += ff__now_ns() - t0;
  }
  return FF_OK;
}
