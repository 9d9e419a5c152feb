/* run.c — the step runner: applies a sample's plan to its decoded image.
 *
 * Images move between two ping-pong buffers (a crop inside the image is a
 * view, not a copy); colour ops work in place. A run of consecutive table
 * ops (brightness, posterize, solarize, invert, autocontrast, equalize) goes
 * to ff__aug_lut_run as one pass. AugMix keeps the image it starts from,
 * runs each chain from it (copying it only for an op that works in place)
 * and accumulates the float32 mixture
 * mix = m0*X + sum(w_i * chain_i(X)), truncated to uint8 at the end
 * (torchvision's AugMix, spec 4.4). Each step's time is added to the
 * per-op costs, which the scheduler's cost model and `bench --json` read. */
#include <string.h>

#include "core/clock.h"
#include "kernels/mix.h"
#include "kernels/pixel.h"
#include "ops/ops.h"

static const char *const cost_names[FF__COST_COUNT] = {
    "identity",   "shear_x",  "shear_y",   "translate_x", "translate_y", "rotate",
    "brightness", "color",    "contrast",  "sharpness",   "posterize",   "solarize",
    "autocontrast", "equalize", "invert",  "fused_lut",   "crop",        "resize",
    "flip",       "aug_mix_mixing", "output"};

const char *ff__cost_name(int kind) { return kind >= 0 && kind < FF__COST_COUNT ? cost_names[kind] : "?"; }

void ff__op_scratch_free(ff__op_scratch *s) {
  ff__buf *bufs[] = {&s->image[0], &s->image[1], &s->floats, &s->weights, &s->kept, &s->mix, &s->copy};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) ff__buf_free(bufs[i]);
}

static int is_geometric(ff__aug_op op) { return op >= FF__AUG_SHEAR_X && op <= FF__AUG_ROTATE; }

/* A packed copy of img in buf (as a new image). */
static ff_status copy_image(const ff__image *img, ff__buf *buf, ff__image *out) {
  size_t row = (size_t)img->width * img->channels;
  uint8_t *p = ff__buf_reserve(buf, row * img->height + 1);
  if (!p) return FF_ENOMEM;
  for (int y = 0; y < img->height; y++) memcpy(p + y * row, img->data + y * img->stride, row);
  *out = (ff__image){p, img->width, img->height, img->channels, row};
  return FF_OK;
}

/* AugMix's float32 mixture over the packed image values. */
FF_FMA_CLONES static void mix_scale(float *mix, const ff__image *x, float weight) {
  size_t row = (size_t)x->width * x->channels;
  for (int y = 0; y < x->height; y++)
    for (size_t i = 0; i < row; i++) mix[y * row + i] = ff__mix_scale(weight, x->data[y * x->stride + i]);
}

FF_FMA_CLONES static void mix_add(float *mix, const ff__image *x, float weight) {
  size_t row = (size_t)x->width * x->channels;
  for (int y = 0; y < x->height; y++)
    for (size_t i = 0; i < row; i++) mix[y * row + i] = ff__mix_add(mix[y * row + i], weight, x->data[y * x->stride + i]);
}

FF_FMA_CLONES static void mix_truncate(const float *mix, ff__image *out) {
  size_t n = (size_t)out->width * out->channels * out->height;
  for (size_t i = 0; i < n; i++) out->data[i] = ff__mix_trunc_u8(mix[i]);
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

ff_status ff__ops_run(const ff__plan *plan, ff__op_scratch *s, ff__image *img, ff__error *err) {
  int next = 0;   /* which ping-pong buffer the next new image goes to */
  int shared = 0; /* *img is AugMix's kept image: copy it before changing it in place */
  float *mix = NULL;
  for (int i = 0; i < plan->num_steps; i++) {
    const ff__step *st = &plan->steps[i];
    uint64_t t0 = ff__now_ns();
    uint64_t pixels = (uint64_t)img->width * img->height;
    int kind;
    ff_status status = FF_OK;
    int in_place = st->kind == FF__STEP_HFLIP || st->kind == FF__STEP_VFLIP ||
                   (st->kind == FF__STEP_AUG && !is_geometric(st->aug.op));
    if (shared && in_place) { /* a chain's first in-place op works on a copy */
      ff__image copy;
      if (copy_image(img, &s->image[next], &copy)) return ff__error_set(err, FF_ENOMEM, "out of memory running the ops");
      *img = copy;
      next ^= 1;
    }
    shared = 0;
    ff__image out = *img;
    switch (st->kind) {
    case FF__STEP_CROP:
      kind = FF__COST_CROP;
      status = ff__op_crop(img, st->x, st->y, st->w, st->h, &s->image[next], &out);
      if (!status && out.data == s->image[next].data) next ^= 1; /* a padded copy */
      break;
    case FF__STEP_RESIZE:
      kind = FF__COST_RESIZE;
      if (st->w == img->width && st->h == img->height) break;
      out = (ff__image){ff__buf_reserve(&s->image[next], (size_t)st->w * st->h * img->channels), st->w, st->h,
                        img->channels, (size_t)st->w * img->channels};
      status = out.data ? ff__op_resize(img, st->w, st->h, st->antialias, s, &out) : FF_ENOMEM;
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
        ff__aug_lut_run(run, n, &out);
        if (n > 1) kind = FF__COST_LUT;
        i += n - 1;
      } else if (is_geometric(st->aug.op)) {
        out = (ff__image){ff__buf_reserve(&s->image[next], (size_t)img->width * img->height * img->channels),
                          img->width, img->height, img->channels, (size_t)img->width * img->channels};
        if (out.data) ff__aug_affine(&st->aug, img, &out);
        else status = FF_ENOMEM;
        next ^= 1;
      } else {
        status = ff__aug_color(&st->aug, &out, &s->copy);
      }
      break;
    case FF__STEP_MIX_BEGIN: {
      kind = FF__COST_MIX;
      ff__image kept;
      status = copy_image(img, &s->kept, &kept);
      mix = status ? NULL : ff__buf_reserve(&s->mix, (size_t)img->width * img->height * img->channels * sizeof(float));
      if (!status && !mix) status = FF_ENOMEM;
      if (!status) mix_scale(mix, &kept, st->weight);
      break;
    }
    case FF__STEP_CHAIN_BEGIN: /* the chain starts from the kept image, copied only if changed in place */
      kind = FF__COST_MIX;
      out = (ff__image){s->kept.data, img->width, img->height, img->channels, (size_t)img->width * img->channels};
      shared = 1;
      break;
    case FF__STEP_CHAIN_END:
      kind = FF__COST_MIX;
      mix_add(mix, img, st->weight);
      break;
    case FF__STEP_MIX_END:
      kind = FF__COST_MIX;
      out = (ff__image){ff__buf_reserve(&s->image[next], (size_t)img->width * img->height * img->channels),
                        img->width, img->height, img->channels, (size_t)img->width * img->channels};
      if (out.data) mix_truncate(mix, &out);
      else status = FF_ENOMEM;
      next ^= 1;
      break;
    default: return ff__error_set(err, FF_EINTERNAL, "unknown plan step %d", (int)st->kind);
    }
    if (status) return ff__error_set(err, status, "out of memory running the ops");
    *img = out;
    s->costs.calls[kind]++;
    s->costs.pixels[kind] += pixels;
    s->costs.ns[kind] += ff__now_ns() - t0;
  }
  return FF_OK;
}
