/* run.c — the step runner: applies a sample's plan to its decoded image.
 *
 * Images move between two ping-pong buffers (a crop inside the image is a
 * view, not a copy); colour ops work in place. A run of consecutive table
 * ops (brightness, posterize, solarize, invert, autocontrast, equalize) goes
 * to ff__aug_lut_run as one pass; ops that change nothing are skipped.
 * AugMix keeps the image it starts from, runs each chain from it (a chain's
 * first colour op reads the kept image and writes a new one, in the same
 * pass), keeps each chain's result (taking over its buffer, no copy) and
 * mixes them all in one pass at the end:
 * trunc(m0*X + sum(w_i * chain_i(X))) in float32 (torchvision's AugMix,
 * spec 4.4). A resize followed by a horizontal flip is one pass (the flip
 * folded into the resize's taps); a plan that ends with them hands them to
 * the output stage (ff__ops_output_tail), which writes the resize's planes
 * straight into the batch. Each step's time is added to the per-op costs,
 * which the scheduler's cost model and `bench --json` read (a folded flip
 * counts as a call of no time of its own). */
#include <string.h>

#include "core/clock.h"
#include "kernels/affine_setup.h"
#include "kernels/mix.h"
#include "kernels/pixel.h"
#include "ops/ops.h"
#include "ops/pil_blur.h"

static const char *const cost_names[FF__COST_COUNT] = {
    "identity",   "shear_x",  "shear_y",   "translate_x", "translate_y", "rotate",
    "brightness", "color",    "contrast",  "sharpness",   "posterize",   "solarize",
    "autocontrast", "equalize", "invert",  "hue",         "fused_lut",   "crop",
    "resize",     "flip",     "gaussian_blur", "random_erasing", "aug_mix_mixing", "output",
    "pil_autocontrast", "pil_equalize", "pil_invert", "pil_posterize", "pil_solarize", "pil_solarize_add",
    "pil_color", "pil_contrast", "pil_brightness", "pil_sharpness", "pil_shear_x", "pil_shear_y",
    "pil_translate_x", "pil_translate_y", "pil_rotate", "pil_hue", "pil_gaussian_blur"};

const char *ff__cost_name(int kind) { return kind >= 0 && kind < FF__COST_COUNT ? cost_names[kind] : "?"; }

void ff__op_scratch_free(ff__op_scratch *s) {
  ff__buf *bufs[] = {&s->image[0], &s->image[1], &s->floats, &s->weights, &s->kept, &s->copy, &s->planes};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) ff__buf_free(bufs[i]);
  for (int i = 0; i < FF__AUG_MIX_MAX_WIDTH; i++) ff__buf_free(&s->chain[i]);
}

static int is_geometric(ff__aug_op op) { return op >= FF__AUG_SHEAR_X && op <= FF__AUG_ROTATE; }

int ff__aug_is_noop(const ff__aug *a, int w, int h) {
  switch (a->op) {
  case FF__AUG_IDENTITY: return 1;
  case FF__AUG_BRIGHTNESS:
  case FF__AUG_COLOR:
  case FF__AUG_CONTRAST:
  case FF__AUG_SHARPNESS: return a->arg == 1.0;
  default: {
    int tx, ty;
    return is_geometric(a->op) && ff__affine_as_shift(a, w, h, &tx, &ty) && !tx && !ty;
  }
  }
}

/* A new packed image of img's size in buf (its pixels not yet written). */
static ff_status new_image(const ff__image *img, ff__buf *buf, ff__image *out) {
  size_t row = (size_t)img->width * img->channels;
  uint8_t *p = ff__buf_reserve(buf, row * img->height + 1);
  if (!p) return FF_ENOMEM;
  *out = (ff__image){p, img->width, img->height, img->channels, row};
  return FF_OK;
}

/* A packed copy of img in buf (as a new image). */
static ff_status copy_image(const ff__image *img, ff__buf *buf, ff__image *out) {
  ff_status status = new_image(img, buf, out);
  for (int y = 0; !status && y < img->height; y++)
    memcpy(out->data + y * out->stride, img->data + y * img->stride, out->stride);
  return status;
}

/* The index of the ping-pong buffer holding img as a packed image, or -1. */
static int owner(const ff__op_scratch *s, const ff__image *img) {
  if (img->stride != (size_t)img->width * img->channels) return -1;
  for (int k = 0; k < 2; k++)
    if (img->data == s->image[k].data) return k;
  return -1;
}

/* Keeps img in *keep, packed: takes over its ping-pong buffer when it owns
 * one (no copy), else copies it. */
static ff_status keep_image(ff__op_scratch *s, const ff__image *img, ff__buf *keep, const uint8_t **kept) {
  int k = owner(s, img);
  if (k >= 0) {
    ff__buf t = *keep;
    *keep = s->image[k], s->image[k] = t;
    *kept = keep->data;
    return FF_OK;
  }
  ff__image copy;
  ff_status status = copy_image(img, keep, &copy);
  *kept = status ? NULL : copy.data;
  return status;
}

/* On x86-64 CPUs with AVX-512 the mixture keeps its float32 sums in
 * registers, 64 values at a time (chosen at run time). */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__CUDACC__)
#include <immintrin.h>
#define HAVE_AVX512_MIX 1
#define AVX512_TARGET __attribute__((target("avx512f")))

/* (float)x of 16 values, exact. */
AVX512_TARGET static inline __m512 u8x16_ps(const uint8_t *p) {
  return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)p)));
}

/* trunc_u8 of 16 sums as ff__mix_trunc_u8: the same comparison (vminps
 * gives its second operand, 255, unless sum < 255, NaN included), the
 * truncation toward zero, and vpmovdb keeps the low byte as the cast does. */
AVX512_TARGET static inline void store_trunc_u8x16(uint8_t *p, __m512 sum) {
  __m512i v = _mm512_cvttps_epi32(_mm512_min_ps(sum, _mm512_set1_ps(255.0f)));
  _mm_storeu_si128((__m128i *)p, _mm512_cvtepi32_epi8(v));
}

/* mix_images over the first n - n % 64 values: each value sees the
 * operations of kernels/mix.h in the same order (vmulps and vaddps, each
 * rounded: nothing is fused). Returns how many values it did. */
AVX512_TARGET static size_t mix_images_avx512(const uint8_t *x, float m0, const uint8_t *const *chain,
                                              const float *w, int width, size_t n, uint8_t *out) {
  enum { LANES = 16, STEP = 4 * LANES };
  const __m512 s0 = _mm512_set1_ps(m0);
  size_t i = 0;
  for (; i + STEP <= n; i += STEP) {
    __m512 sum[4];
    for (int k = 0; k < 4; k++) sum[k] = _mm512_mul_ps(s0, u8x16_ps(x + i + k * LANES));
    for (int c = 0; c < width; c++) {
      const __m512 wc = _mm512_set1_ps(w[c]);
      for (int k = 0; k < 4; k++)
        sum[k] = _mm512_add_ps(sum[k], _mm512_mul_ps(wc, u8x16_ps(chain[c] + i + k * LANES)));
    }
    for (int k = 0; k < 4; k++) store_trunc_u8x16(out + i + k * LANES, sum[k]);
  }
  return i;
}
#endif

/* acc[i] += w * src[i] over a block of AugMix's mixture. (A function of its
 * own: inlined, gcc jams two chains into one loop it no longer vectorises.) */
FF_FMA_CLONES_NOINLINE static void mix_add(float *restrict acc, const uint8_t *restrict src, float w,
                                           size_t m) {
  for (size_t i = 0; i < m; i++) acc[i] = ff__mix_add(acc[i], w, src[i]);
}

/* AugMix's mixture of n packed values (torchvision's AugMix, spec 4.4):
 * out = trunc(m0*X + w[0]*chain[0] + ...), each product and sum rounded in
 * torchvision's order (kernels/mix.h). One pass over all the images: with
 * AVX-512 the sums stay in registers; otherwise (and for the last values)
 * in blocks whose float32 partial sums stay in L1. */
FF_FMA_CLONES static void mix_images(const uint8_t *x, float m0, const uint8_t *const *chain, const float *w,
                                     int width, size_t n, uint8_t *out) {
  enum { BLOCK = 1024 };
  float acc[BLOCK];
  size_t done = 0;
#ifdef HAVE_AVX512_MIX
  if (ff__cpu_avx512()) done = mix_images_avx512(x, m0, chain, w, width, n, out);
#endif
  for (size_t b = done; b < n; b += BLOCK) {
    size_t m = n - b < BLOCK ? n - b : BLOCK;
    for (size_t i = 0; i < m; i++) acc[i] = ff__mix_scale(m0, x[b + i]);
    for (int c = 0; c < width; c++) mix_add(acc, chain[c] + b, w[c], m);
    for (size_t i = 0; i < m; i++) out[b + i] = ff__mix_trunc_u8(acc[i]);
  }
}

int ff__plan_lut_run(const ff__plan *plan, int i, ff__aug *run) {
  int n = 0;
  while (i + n < plan->num_steps && plan->steps[i + n].kind == FF__STEP_AUG &&
         ff__aug_is_lut(plan->steps[i + n].aug.op)) {
    run[n] = plan->steps[i + n].aug;
    n++;
  }
  return n;
}

/* Whether step i is a resize that a horizontal flip follows (and folds into). */
static int flip_follows(const ff__plan *plan, int i, int end) {
  return i + 1 < end && plan->steps[i].kind == FF__STEP_RESIZE && plan->steps[i + 1].kind == FF__STEP_HFLIP;
}

static void count(ff__op_scratch *s, int kind, uint64_t pixels, uint64_t ns) {
  s->costs.calls[kind]++;
  s->costs.pixels[kind] += pixels;
  s->costs.ns[kind] += ns;
}

int ff__ops_output_tail(const ff__plan *plan, const ff__pipeline *pipe) {
  int end = plan->num_steps;
  while (end > 0 && plan->steps[end - 1].kind == FF__STEP_ERASE) end--;
  int i = end - 1;
  if (i >= 1 && plan->steps[i].kind == FF__STEP_HFLIP) i--;
  if (i < 0 || plan->steps[i].kind != FF__STEP_RESIZE) return -1;
  int planar = pipe->out_custom ? pipe->out_planar : pipe->output == FF__OUTPUT_NCHW_F32;
  return planar ? i : -1;
}

ff_status ff__ops_resize_to_output(const ff__pipeline *pipe, const ff__plan *plan, int i, ff__op_scratch *s,
                                   ff__image *img, void *batch_data, int slot, uint64_t *output_ns) {
  const ff__step *st = &plan->steps[i];
  int hflip = i + 1 < plan->num_steps && plan->steps[i + 1].kind == FF__STEP_HFLIP;
  const double *box = ff__plan_step_box(plan, i, img->width, img->height);
  uint64_t t0 = ff__now_ns(), pixels = (uint64_t)img->width * img->height;
  if (!box && st->w == img->width && st->h == img->height) { /* nothing to resize */
    if (hflip) ff__op_hflip(img);
    uint64_t t1 = ff__now_ns();
    ff__op_write_output(pipe, img, batch_data, slot);
    *output_ns = ff__now_ns() - t1;
    if (hflip) count(s, FF__COST_FLIP, pixels, t1 - t0);
    return FF_OK;
  }
  uint8_t *planes = ff__buf_reserve(&s->planes, (size_t)st->w * st->h * 3);
  if (!planes) return FF_ENOMEM;
  ff_status status = ff__op_resize_planar(img, box, st->w, st->h, st->antialias, hflip, s, planes);
  if (status) return status;
  uint64_t t1 = ff__now_ns();
  count(s, FF__COST_RESIZE, pixels, t1 - t0);
  if (hflip) count(s, FF__COST_FLIP, (uint64_t)st->w * st->h, 0);
  ff__op_write_output_planar(pipe, planes, batch_data, slot);
  *output_ns = ff__now_ns() - t1;
  img->width = st->w, img->height = st->h;
  return FF_OK;
}

ff_status ff__ops_run(const ff__plan *plan, ff__op_scratch *s, ff__image *img, ff__error *err) {
  return ff__ops_run_until(plan, plan->num_steps, s, img, err);
}

ff_status ff__ops_run_until(const ff__plan *plan, int end, ff__op_scratch *s, ff__image *img, ff__error *err) {
  int next = 0;   /* which ping-pong buffer the next new image goes to */
  int shared = 0; /* *img is AugMix's kept image: copy it before changing it in place */
  const uint8_t *kept = NULL, *chain[FF__AUG_MIX_MAX_WIDTH]; /* AugMix's images */
  float m0 = 0.0f, chain_w[FF__AUG_MIX_MAX_WIDTH];
  int chains = 0;
  for (int i = 0; i < end; i++) {
    const ff__step *st = &plan->steps[i];
    if (st->kind == FF__STEP_ERASE) break; /* the last steps, on the float output (ff__op_erase) */
    if (st->kind == FF__STEP_AUG && ff__aug_is_noop(&st->aug, img->width, img->height))
      continue; /* nothing to do (nor to count): *img, and whether it is shared, stays */
    uint64_t t0 = ff__now_ns();
    uint64_t pixels = (uint64_t)img->width * img->height;
    const double *box;
    int kind;
    ff_status status = FF_OK;
    int flip = st->kind == FF__STEP_HFLIP || st->kind == FF__STEP_VFLIP;
    ff__image out = *img; /* where an in-place op writes: over *img, ... */
    if (shared && (flip || (st->kind == FF__STEP_AUG && !is_geometric(st->aug.op)))) {
      /* ... unless *img is AugMix's kept image: a colour op then reads it
       * and writes a new image in one pass; a flip works on a copy */
      status = flip ? copy_image(img, &s->image[next], &out) : new_image(img, &s->image[next], &out);
      if (status) return ff__error_set(err, status, "out of memory running the ops");
      next ^= 1;
    }
    shared = 0;
    switch (st->kind) {
    case FF__STEP_CROP:
      kind = FF__COST_CROP;
      status = ff__op_crop(img, st->x, st->y, st->w, st->h, &s->image[next], &out);
      if (!status && out.data == s->image[next].data) next ^= 1; /* a padded copy */
      break;
    case FF__STEP_RESIZE:
      kind = FF__COST_RESIZE;
      box = ff__plan_step_box(plan, i, img->width, img->height);
      if (!box && st->w == img->width && st->h == img->height) break;
      out = (ff__image){ff__buf_reserve(&s->image[next], (size_t)st->w * st->h * img->channels), st->w, st->h,
                        img->channels, (size_t)st->w * img->channels};
      if (flip_follows(plan, i, end)) { /* the flip's columns are the resize's, reversed */
        count(s, FF__COST_FLIP, (uint64_t)st->w * st->h, 0);
        i++;
      }
      status = out.data ? ff__op_resize_box(img, box, st->w, st->h, st->antialias, plan->steps[i].kind == FF__STEP_HFLIP,
                                            s, &out)
                        : FF_ENOMEM;
      next ^= 1;
      break;
    case FF__STEP_BLUR:
      kind = FF__COST_BLUR;
      out = (ff__image){ff__buf_reserve(&s->image[next], (size_t)img->width * img->height * img->channels + 1),
                        img->width, img->height, img->channels, (size_t)img->width * img->channels};
      status = out.data ? ff__op_gaussian_blur(img, st->x, st->y, st->weight, s, &out) : FF_ENOMEM;
      next ^= 1;
      break;
    case FF__STEP_HFLIP:
    case FF__STEP_VFLIP:
      kind = FF__COST_FLIP;
      if (st->kind == FF__STEP_HFLIP) ff__op_hflip(&out);
      else ff__op_vflip(&out);
      break;
    case FF__STEP_AUG:
      kind = st->aug.op;
      if (ff__aug_is_lut(st->aug.op)) { /* the whole run of table ops as one pass */
        ff__aug run[FF__PLAN_MAX_STEPS];
        int n = ff__plan_lut_run(plan, i, run);
        ff__aug_lut_run(run, n, img, &out);
        if (n > 1) kind = FF__COST_LUT;
        i += n - 1;
      } else if (is_geometric(st->aug.op)) {
        out = (ff__image){ff__buf_reserve(&s->image[next], (size_t)img->width * img->height * img->channels),
                          img->width, img->height, img->channels, (size_t)img->width * img->channels};
        if (out.data) ff__aug_affine(&st->aug, img, &out);
        else status = FF_ENOMEM;
        next ^= 1;
      } else {
        status = ff__aug_color(&st->aug, img, &out, &s->copy);
      }
      break;
    case FF__STEP_MIX_BEGIN: /* keep the image; the mixing waits for the chains */
      kind = FF__COST_MIX;
      status = keep_image(s, img, &s->kept, &kept);
      m0 = st->weight, chains = 0;
      break;
    case FF__STEP_CHAIN_BEGIN: /* the chain starts from the kept image, copied only if changed in place */
      kind = FF__COST_MIX;
      out = (ff__image){s->kept.data, img->width, img->height, img->channels, (size_t)img->width * img->channels};
      shared = 1;
      break;
    case FF__STEP_CHAIN_END: /* keep the chain's result for the mixing */
      kind = FF__COST_MIX;
      if (chains == FF__AUG_MIX_MAX_WIDTH) return ff__error_set(err, FF_EINTERNAL, "AugMix plan with too many chains");
      if (img->data == kept) chain[chains] = kept; /* a chain without ops */
      else status = keep_image(s, img, &s->chain[chains], &chain[chains]);
      chain_w[chains++] = st->weight;
      break;
    case FF__STEP_MIX_END:
    case FF__STEP_PIL_MIX_END: {
      kind = FF__COST_MIX;
      out = (ff__image){ff__buf_reserve(&s->image[next], (size_t)img->width * img->height * img->channels),
                        img->width, img->height, img->channels, (size_t)img->width * img->channels};
      size_t n = (size_t)out.width * out.height * out.channels;
      if (out.data) mix_images(kept, m0, chain, chain_w, chains, n, out.data);
      else status = FF_ENOMEM;
      if (out.data && st->kind == FF__STEP_PIL_MIX_END) /* timm: Image.blend(image, mixture, m) */
        for (size_t k = 0; k < n; k++) out.data[k] = ff__pil_blend(kept[k], out.data[k], st->weight);
      next ^= 1;
      break;
    }
    case FF__STEP_PIL:
      kind = FF__COST_PIL + (int)st->pil.op;
      out = (ff__image){ff__buf_reserve(&s->image[next], (size_t)img->width * img->height * img->channels),
                        img->width, img->height, img->channels, (size_t)img->width * img->channels};
      if (!out.data) status = FF_ENOMEM;
      else if (st->pil.op == FF__PIL_GAUSSIAN_BLUR) status = ff__pil_blur_run(st->pil.arg, img, &out, &s->copy);
      else status = ff__pil_run(&st->pil, img, &out);
      next ^= 1;
      break;
    default: return ff__error_set(err, FF_EINTERNAL, "unknown plan step %d", (int)st->kind);
    }
    if (status) return ff__error_set(err, status, "out of memory running the ops");
    *img = out;
    count(s, kind, pixels, ff__now_ns() - t0);
  }
  return FF_OK;
}
