/* plan.c — the planner: per-sample random parameters and concrete steps.
 *
 * Every random draw of a sample comes, in op order, from its own Philox
 * stream keyed by (seed, epoch, index); a flip always consumes its draw, so
 * one op's outcome never shifts another's (the Random* ops and groups
 * likewise draw their coin always; the ops of a group that does not run draw
 * nothing). The geometric ops are lowered to
 * crop/resize/flip steps on the size known from the header; a leading crop
 * that lies inside the image becomes the decoder's region of interest, and a
 * downscaling resize after it lets the JPEG decoder reduce in the DCT domain
 * (with decode(dct_scale=true); the default, false, decodes at full scale). The augmentation policies
 * draw their choices in policy.c. */
#include <limits.h>
#include <math.h>
#include <string.h>

#include "core/philox.h"
#include "kernels/resize.h"
#include "pipeline/pipeline.h"
#include "ops/ops.h"
#include "pipeline/policy.h"

/* Python's round(): half to even (the default rounding mode of rint). */
static double round_half_even(double x) { return nearbyint(x); }

/* torchvision.transforms.RandomResizedCrop.get_params (spec section 5.2). */
static void random_resized_crop_box(const ff__op *op, ff__philox *rng, int height, int width,
                                    int box[4]) {
  double area = (double)height * width;
  float log_lo = (float)log(op->ratio[0]), log_hi = (float)log(op->ratio[1]);
  for (int attempt = 0; attempt < 10; attempt++) {
    double target_area = area * ff__philox_uniform(rng, (float)op->scale[0], (float)op->scale[1]);
    double aspect = expf(ff__philox_uniform(rng, log_lo, log_hi));
    double w = round_half_even(sqrt(target_area * aspect));
    double h = round_half_even(sqrt(target_area / aspect));
    if (w > 0 && w <= width && h > 0 && h <= height) {
      box[1] = (int)ff__philox_randint(rng, 0, height - (int)h);
      box[0] = (int)ff__philox_randint(rng, 0, width - (int)w);
      box[2] = (int)w, box[3] = (int)h;
      return;
    }
  }
  /* Fallback: the central crop of the closest allowed aspect ratio. */
  double in_ratio = (double)width / height;
  int w = width, h = height;
  if (in_ratio < op->ratio[0]) h = (int)round_half_even(w / op->ratio[0]);
  else if (in_ratio > op->ratio[1]) w = (int)round_half_even(h * op->ratio[1]);
  /* never an empty box (crop_width 0 would mean the whole image to the decoder) */
  if (w < 1) w = 1;
  if (h < 1) h = 1;
  box[0] = (width - w) / 2, box[1] = (height - h) / 2, box[2] = w, box[3] = h;
}

/* torchvision center_crop offset along one axis, padding included (negative). */
static int center_offset(int in, int out) {
  if (out > in) return -((out - in) / 2);
  return (int)round_half_even((in - out) / 2.0);
}

/* w * h, saturating at UINT64_MAX (a planned side may reach 2^47). */
static uint64_t pixels_of(int64_t w, int64_t h) {
  if (w <= 0 || h <= 0) return 0;
  return (uint64_t)w > UINT64_MAX / (uint64_t)h ? UINT64_MAX : (uint64_t)w * (uint64_t)h;
}

/* Adds a step making a w x h image. Sizes are planned in 64 bits and the
 * largest kept (peak_width/height); a step's int fields hold them only when
 * they fit, which ff__plan_check makes sure of before anything runs. */
static void add_step(ff__plan *plan, ff__step_kind kind, int x, int y, int64_t w, int64_t h, int antialias) {
  ff__step *s = &plan->steps[plan->num_steps++];
  memset(s, 0, sizeof *s);
  if (pixels_of(w, h) > pixels_of(plan->peak_width, plan->peak_height)) plan->peak_width = w, plan->peak_height = h;
  s->kind = kind, s->x = x, s->y = y, s->antialias = antialias;
  s->w = w > INT_MAX ? INT_MAX : (int)w, s->h = h > INT_MAX ? INT_MAX : (int)h;
}

ff_status ff__plan_check(const ff__plan *plan, const ff__image_info *info, uint64_t max_pixels, const char *name,
                         ff__error *err) {
  int64_t w = plan->peak_width, h = plan->peak_height;
  int over_int = w > INT_MAX || h > INT_MAX;
  if (over_int || (max_pixels && pixels_of(w, h) > max_pixels))
    return ff__error_set(err, FF_ETOOBIG,
                         "%s: the pipeline would make a %lldx%lld image (%.4g pixels) from this %dx%d image, "
                         "over the limit of %llu (max_image_pixels)%s",
                         name, (long long)w, (long long)h, (double)w * (double)h, info->width, info->height,
                         (unsigned long long)max_pixels, over_int ? " and past 2^31-1 pixels on a side" : "");
  return FF_OK;
}

/* A resize step's filter (kernels/resize.h): timm's `random` draws
 * bilinear or bicubic with probability 1/2 each (the draw is always made).
 * Under semantics v2 the uint8 arithmetic: transforms.v2 resizes a uint8
 * tensor as uint8 (torch's fixed-point kernels) where v1 resizes a float
 * copy. */
static int resize_filter(const ff__op *op, ff__philox *rng) {
  int bicubic = op->interp == FF__INTERP_BICUBIC;
  if (op->interp == FF__INTERP_RANDOM) bicubic = ff__philox_uniform(rng, 0.0f, 1.0f) >= 0.5f;
  int filter = op->antialias ? FF__RESIZE_ANTIALIAS | (bicubic ? FF__RESIZE_BICUBIC : 0) : 0;
  return filter | (op->aug.v2 ? FF__RESIZE_UINT8 : 0);
}

static void add_aug(ff__plan *plan, const ff__aug *a, int64_t w, int64_t h) {
  add_step(plan, FF__STEP_AUG, 0, 0, w, h, 0);
  plan->steps[plan->num_steps - 1].aug = *a;
}

static void add_pil(ff__plan *plan, const ff__pil *p, int64_t w, int64_t h) {
  add_step(plan, FF__STEP_PIL, 0, 0, w, h, 0);
  plan->steps[plan->num_steps - 1].pil = *p;
}

/* torchvision ColorJitter (v1): fn_idx = randperm(4), then a factor for
 * each of brightness, contrast, saturation and hue that is set, uniform in
 * its range (float32), applied in fn_idx's order as adjust_brightness
 * (blend with black), adjust_contrast, adjust_saturation (blend with the
 * gray image) and adjust_hue. The permutation is torch's randperm for small
 * n, a forward Fisher-Yates shuffle, drawn from the sample's stream. With
 * semantics=pil the same draws make Pillow steps: ColorJitter on a PIL
 * image (ImageEnhance Brightness, Contrast, Color and the HSV hue shift). */
static void color_jitter(const ff__op *op, ff__philox *rng, int64_t w, int64_t h, ff__plan *plan) {
  static const ff__aug_op ops[4] = {FF__AUG_BRIGHTNESS, FF__AUG_CONTRAST, FF__AUG_COLOR, FF__AUG_HUE};
  static const ff__pil_op pil_ops[4] = {FF__PIL_BRIGHTNESS, FF__PIL_CONTRAST, FF__PIL_COLOR, FF__PIL_HUE};
  int order[4] = {0, 1, 2, 3};
  for (int i = 0; i < 3; i++) {
    int j = i + (int)ff__philox_randint(rng, 0, 3 - i);
    int t = order[i];
    order[i] = order[j], order[j] = t;
  }
  double factor[4];
  for (int k = 0; k < 4; k++)
    if (op->jitter_on[k]) factor[k] = ff__philox_uniform(rng, (float)op->jitter[k][0], (float)op->jitter[k][1]);
  for (int i = 0; i < 4; i++) {
    int k = order[i];
    if (!op->jitter_on[k]) continue;
    ff__aug a = {ops[k], factor[k], 0, 0, {0, 0, 0}, op->aug.v2};
    ff__pil p = {pil_ops[k], factor[k], 0, {0, 0, 0}};
    if (op->semantics == FF__OP_SEMANTICS_PIL) add_pil(plan, &p, w, h);
    else add_aug(plan, &a, w, h);
  }
}

static uint64_t draw_key(ff__philox *rng) {
  uint64_t hi = ff__philox_u32(rng);
  return hi << 32 | ff__philox_u32(rng);
}

/* One erasing box of about `area` pixels on the h x w output, or none
 * (10 attempts, as both torchvision and timm make), with its fill. */
static void erase_box(const ff__op *op, ff__philox *rng, double area, int64_t h, int64_t w, ff__plan *plan) {
  float log_lo = logf((float)op->ratio[0]), log_hi = logf((float)op->ratio[1]);
  for (int attempt = 0; attempt < 10; attempt++) {
    double target = area * ff__philox_uniform(rng, (float)op->scale[0], (float)op->scale[1]);
    double aspect = expf(ff__philox_uniform(rng, log_lo, log_hi));
    int64_t eh = (int64_t)round_half_even(sqrt(target * aspect)), ew = (int64_t)round_half_even(sqrt(target / aspect));
    if (!(eh < h && ew < w)) continue;
    int top = (int)ff__philox_randint(rng, 0, h - eh), left = (int)ff__philox_randint(rng, 0, w - ew);
    if (!eh || !ew) return; /* an empty box: nothing to erase */
    add_step(plan, FF__STEP_ERASE, left, top, ew, eh, 0);
    ff__step *st = &plan->steps[plan->num_steps - 1];
    if (op->erase_mode == FF__ERASE_PIXEL || (op->erase_mode == FF__ERASE_TORCHVISION && op->erase_random))
      st->antialias = 1, st->noise_key = draw_key(rng);
    else if (op->erase_mode == FF__ERASE_RAND)
      ff__erase_normals(draw_key(rng), 3, st->aug.fill);
    else if (op->erase_mode == FF__ERASE_TORCHVISION)
      memcpy(st->aug.fill, op->erase_value, sizeof st->aug.fill);
    return;
  }
}

/* torchvision RandomErasing.get_params (one box of scale * area, erased
 * when torch.rand(1) < p), or timm's RandomErasing._erase (when
 * random.random() <= p: count boxes drawn in [min_count, max_count], each
 * of scale / count * area). The output size (h x w) is known here. */
static void random_erasing(const ff__op *op, ff__philox *rng, int64_t h, int64_t w, ff__plan *plan) {
  float u = ff__philox_uniform(rng, 0.0f, 1.0f);
  double area = (double)h * (double)w;
  if (op->erase_mode == FF__ERASE_TORCHVISION) {
    if (u < op->p) erase_box(op, rng, area, h, w, plan);
    return;
  }
  if (u > op->p) return;
  int count = op->min_count == op->max_count ? op->min_count : (int)ff__philox_randint(rng, op->min_count, op->max_count);
  for (int k = 0; k < count; k++) erase_box(op, rng, area / count, h, w, plan);
}

/* Plans op i of the pipeline on an h x w image; returns the index of the
 * next op (past a group's ops). */
static int plan_op(const ff__pipeline *pipe, int i, ff__philox *rng, int64_t *hp, int64_t *wp, ff__plan *out) {
  const ff__op *op = &pipe->ops[i];
  int64_t h = *hp, w = *wp;
  int box[4];
  switch (op->kind) {
  case FF__OP_CROP:
    add_step(out, FF__STEP_CROP, op->left, op->top, op->width, op->height, 0);
    h = op->height, w = op->width;
    break;
  case FF__OP_CENTER_CROP:
    add_step(out, FF__STEP_CROP, center_offset((int)w, op->size[1]), center_offset((int)h, op->size[0]),
             op->size[1], op->size[0], 0);
    h = op->size[0], w = op->size[1];
    break;
  case FF__OP_RESIZE: {
    int64_t nh = op->size[0], nw = op->size[1];
    if (!nw) { /* size sets the shorter side */
      nh = h, nw = w;
      ff__resize_shorter_side(op->size[0], &nh, &nw);
    }
    add_step(out, FF__STEP_RESIZE, 0, 0, nw, nh, resize_filter(op, rng));
    h = nh, w = nw;
    break;
  }
  case FF__OP_RANDOM_RESIZED_CROP:
    random_resized_crop_box(op, rng, (int)h, (int)w, box);
    add_step(out, FF__STEP_CROP, box[0], box[1], box[2], box[3], 0);
    add_step(out, FF__STEP_RESIZE, 0, 0, op->size[1], op->size[0], resize_filter(op, rng));
    h = op->size[0], w = op->size[1];
    break;
  case FF__OP_RANDOM_HORIZONTAL_FLIP:
  case FF__OP_RANDOM_VERTICAL_FLIP:
    if (ff__philox_uniform(rng, 0.0f, 1.0f) < op->p)
      add_step(out, op->kind == FF__OP_RANDOM_HORIZONTAL_FLIP ? FF__STEP_HFLIP : FF__STEP_VFLIP, 0, 0, w, h, 0);
    else if (out->num_unflipped < FF__PLAN_MAX_UNFLIPPED)
      out->unflipped[out->num_unflipped++] =
          (ff__unflipped){op->kind == FF__OP_RANDOM_VERTICAL_FLIP, (uint8_t)out->num_steps};
    break;
  case FF__OP_AUG:
    if (op->aug.op != FF__AUG_IDENTITY) add_aug(out, &op->aug, w, h);
    break;
  case FF__OP_RANDOM_AUG: /* torchvision's Random* transforms: applied when torch.rand(1) < p */
    if (!(ff__philox_uniform(rng, 0.0f, 1.0f) < op->p)) break;
    if (op->semantics == FF__OP_SEMANTICS_PIL) /* on a PIL image: ImageOps.solarize; grayscale is mode "L",
                                                 the luma, which is ImageEnhance.Color(0) exactly */
      add_pil(out, &(ff__pil){op->aug.op == FF__AUG_SOLARIZE ? FF__PIL_SOLARIZE : FF__PIL_COLOR, op->aug.arg, 0, {0, 0, 0}},
              w, h);
    else
      add_aug(out, &op->aug, w, h);
    break;
  case FF__OP_COLOR_JITTER: color_jitter(op, rng, w, h, out); break;
  case FF__OP_RANDOM_ERASING: random_erasing(op, rng, h, w, out); break;
  case FF__OP_GAUSSIAN_BLUR: { /* GaussianBlur.get_params: sigma uniform in (min, max), float32 */
    float sigma = ff__philox_uniform(rng, (float)op->sigma[0], (float)op->sigma[1]);
    if (op->semantics == FF__OP_SEMANTICS_PIL) {
      /* ImageFilter.GaussianBlur(radius=sigma) on a PIL image, as DINO's and DeiT III's GaussianBlur
       * apply it with random.uniform(min, max): the same uniform law, drawn here in float32, which is
       * what Pillow keeps of the radius (it parses it as a C float) */
      add_pil(out, &(ff__pil){FF__PIL_GAUSSIAN_BLUR, sigma, 0, {0, 0, 0}}, w, h);
      break;
    }
    add_step(out, FF__STEP_BLUR, op->size[0], op->size[1], w, h, 0);
    ff__step *st = &out->steps[out->num_steps - 1];
    st->x = op->size[0], st->y = op->size[1], st->weight = sigma;
    break;
  }
  case FF__OP_RANDOM_APPLY: { /* RandomApply: all of the group unless p < torch.rand(1) */
    int apply = !(op->p < ff__philox_uniform(rng, 0.0f, 1.0f));
    for (int k = i + 1; apply && k <= i + op->group_len;) k = plan_op(pipe, k, rng, &h, &w, out);
    return i + 1 + op->group_len;
  }
  case FF__OP_RANDOM_CHOICE: { /* RandomChoice: op k with probability choice_p[k] */
    float u = ff__philox_uniform(rng, 0.0f, 1.0f);
    double below = 0;
    int k = 0;
    while (k < op->group_len - 1 && !(u < (below += op->choice_p[k]))) k++;
    plan_op(pipe, i + 1 + k, rng, &h, &w, out);
    return i + 1 + op->group_len;
  }
  case FF__OP_POLICY_FILE:
    out->num_steps += ff__policy_file_plan(&pipe->policy, op, rng, (int)h, (int)w, out->steps + out->num_steps);
    break;
  case FF__OP_RAND_AUGMENT:
  case FF__OP_TRIVIAL_AUGMENT_WIDE:
  case FF__OP_AUTO_AUGMENT:
  case FF__OP_AUG_MIX: out->num_steps += ff__policy_plan(op, rng, (int)h, (int)w, out->steps + out->num_steps); break;
  case FF__OP_PIL: add_pil(out, &op->pil, w, h); break;
  case FF__OP_TIMM_RAND_AUGMENT:
  case FF__OP_TIMM_AUTO_AUGMENT:
  case FF__OP_TIMM_AUG_MIX:
    out->num_steps += ff__timm_plan(&op->timm, rng, (int)h, (int)w, out->steps + out->num_steps);
    break;
  case FF__OP_DECODE:
  case FF__OP_TO_DTYPE:
  case FF__OP_NORMALIZE:
  case FF__OP_MIXUP_CUTMIX: break; /* a batch stage: drawn per batch (ops/batch_mix.h) */
  }
  *hp = h, *wp = w;
  return i + 1;
}

void ff__plan_make(const ff__pipeline *pipe, uint64_t seed, uint64_t epoch, uint64_t index,
                   const ff__image_info *info, uint64_t max_pixels, ff__plan *out) {
  ff__philox rng;
  ff__philox_init(&rng, seed, FF__RNG_AUGMENT, index, epoch);
  memset(out, 0, sizeof *out);
  out->decode.max_pixels = max_pixels;
  int64_t h = info->height, w = info->width;
  for (int i = 0; i < pipe->num_ops && h <= INT_MAX && w <= INT_MAX;) /* past int: refused by ff__plan_check */
    i = plan_op(pipe, i, &rng, &h, &w, out);

  /* Fold a leading in-bounds crop into the decoder's region of interest. */
  int region_w = info->width, region_h = info->height;
  const ff__step *first = &out->steps[0];
  if (out->num_steps && first->kind == FF__STEP_CROP && first->x >= 0 && first->y >= 0 &&
      first->x + first->w <= info->width && first->y + first->h <= info->height) {
    out->decode.crop_x = first->x, out->decode.crop_y = first->y;
    out->decode.crop_width = region_w = first->w;
    out->decode.crop_height = region_h = first->h;
    memmove(out->steps, out->steps + 1, (size_t)--out->num_steps * sizeof out->steps[0]);
    for (int k = 0; k < out->num_unflipped; k++) out->unflipped[k].at -= out->unflipped[k].at > 0;
  }
  if (pipe->ops[0].dct_scale && out->num_steps && first->kind == FF__STEP_RESIZE &&
      first->w <= region_w && first->h <= region_h) {
    out->decode.min_width = first->w;
    out->decode.min_height = first->h;
    if (info->format == FF__FORMAT_JPEG) {
      int grid[4];
      int n = ff__jpeg_dct_scale(&out->decode, info->width, info->height, grid);
      if (n < 8) {
        const ff__decode_req *r = &out->decode;
        double x = r->crop_width ? r->crop_x : 0, y = r->crop_width ? r->crop_y : 0;
        double f = n / 8.0; /* exact: n is a power of two */
        out->dct = (ff__dct_box){n, grid[2], grid[3], {x * f - grid[0], y * f - grid[1], region_w * f, region_h * f}};
      }
    }
  }
}

ff_status ff__pipeline_check_peak(const ff__pipeline *p, uint64_t max_pixels, ff__error *err) {
  if (!max_pixels || p->peak_pixels <= max_pixels) return FF_OK;
  return ff__error_set(err, FF_EPIPELINE, "pipeline column %d: this op makes images of %llu pixels, over "
                       "max_image_pixels (%llu)", p->peak_column, (unsigned long long)p->peak_pixels,
                       (unsigned long long)max_pixels);
}
