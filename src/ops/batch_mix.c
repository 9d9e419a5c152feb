/* batch_mix.c — the Mixup/CutMix batch stage on the host: the per-batch
 * plan (every random draw, from the batch's Philox stream) and its CPU
 * application to an assembled float32 NCHW batch and its labels.
 *
 * The draws follow the reference's code path and number formats, so that
 * the same draws give the same bits: timm's Mixup keeps per-image λ in a
 * float32 array (elem and pair modes: the box ratio and 1 - λ are float32
 * there) and the batch λ as a Python float (batch mode: float64), and torch
 * multiplies a float32 tensor by a scalar in float32. The distributions are
 * the reference's: λ ~ Beta(α, α) (Jöhnk's algorithm for α <= 1, a ratio of
 * Marsaglia-Tsang gammas above, as numpy draws it), uniform integers for
 * the box, uniform floats against prob and switch_prob. */
#include "ops/batch_mix.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/philox.h"
#include "kernels/batch_mix.h"

ff_status ff__mix_check(const ff__mix_params *p, int h, int w, int batch_size, int last_size, int column,
                        ff__error *err) {
  const char *pre = "pipeline column %d: mixup_cutmix: ";
  char fmt[256];
  int minmax = p->cutmix_minmax[1] > 0;
  if (!(p->mixup_alpha > 0) && !(p->cutmix_alpha > 0) && !minmax)
    return snprintf(fmt, sizeof fmt, "%s%s", pre,
                    "one of mixup_alpha > 0, cutmix_alpha > 0 or cutmix_minmax is needed"),
           ff__error_set(err, FF_EPIPELINE, fmt, column);
  if (p->convention == FF__MIX_TORCHVISION) {
    if (p->mode != FF__MIX_BATCH)
      return snprintf(fmt, sizeof fmt, "%s%s", pre,
                      "convention=torchvision mixes whole batches (mode=batch)"),
             ff__error_set(err, FF_EPIPELINE, fmt, column);
    if (minmax)
      return snprintf(fmt, sizeof fmt, "%s%s", pre, "cutmix_minmax is timm's (convention=timm)"),
             ff__error_set(err, FF_EPIPELINE, fmt, column);
    if (p->label_smoothing > 0)
      return snprintf(fmt, sizeof fmt, "%s%s", pre,
                      "convention=torchvision leaves label smoothing to the loss "
                      "(CrossEntropyLoss(label_smoothing=...)); drop label_smoothing"),
             ff__error_set(err, FF_EPIPELINE, fmt, column);
    if (!p->correct_lam)
      return snprintf(fmt, sizeof fmt, "%s%s", pre,
                      "torchvision's CutMix always corrects λ (correct_lam=true)"),
             ff__error_set(err, FF_EPIPELINE, fmt, column);
  } else {
    /* timm: assert len(x) % 2 == 0, on every batch */
    if (batch_size % 2 || last_size % 2)
      return ff__error_set(
          err, FF_EPIPELINE,
          "pipeline column %d: mixup_cutmix: timm's Mixup needs an even batch size (got %s %d%s)", column,
          batch_size % 2 ? "batch_size" : "a last batch of", batch_size % 2 ? batch_size : last_size,
          batch_size % 2 ? "" : " samples: set drop_last or another batch_size");
    if (minmax) { /* numpy's randint(low, high) needs low < high */
      for (int d = 0; d < 2; d++) {
        int side = d ? w : h;
        if ((int)(side * p->cutmix_minmax[0]) >= (int)(side * p->cutmix_minmax[1]))
          return ff__error_set(
              err, FF_EPIPELINE,
              "pipeline column %d: mixup_cutmix: cutmix_minmax (%g, %g) gives no box size on a "
              "side of %d pixels (int(%d * min) must be below int(%d * max))",
              column, p->cutmix_minmax[0], p->cutmix_minmax[1], side, side, side);
      }
    }
  }
  return FF_OK;
}

ff_status ff__mix_plan_alloc(ff__mix_plan *plan, int cap, ff__error *err) {
  memset(plan, 0, sizeof *plan);
  plan->elems = calloc((size_t)cap, sizeof *plan->elems);
  plan->draws = calloc((size_t)cap, sizeof *plan->draws);
  if (!plan->elems || !plan->draws) {
    ff__mix_plan_free(plan);
    return ff__error_set(err, FF_ENOMEM, "out of memory for the mixup_cutmix plan of %d images", cap);
  }
  return FF_OK;
}

void ff__mix_plan_free(ff__mix_plan *plan) {
  free(plan->elems), free(plan->draws);
  plan->elems = NULL, plan->draws = NULL;
}

/* ---- the draws ---- */

/* Uniform double in [0, 1) with 53 random bits (numpy's random_sample). */
static double uniform01(ff__philox *r) {
  uint32_t a = ff__philox_u32(r) >> 5, b = ff__philox_u32(r) >> 6;
  return (a * 67108864.0 + b) / 9007199254740992.0;
}

static double std_normal(ff__philox *r) { /* Box-Muller */
  double u1 = 1.0 - uniform01(r), u2 = uniform01(r);
  return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* Gamma(a, 1), a >= 1: Marsaglia and Tsang, ACM TOMS 26(3), 2000. */
static double gamma_draw(ff__philox *r, double a) {
  double d = a - 1.0 / 3.0, c = 1.0 / sqrt(9.0 * d);
  for (;;) {
    double x = std_normal(r), v = 1.0 + c * x;
    if (v <= 0) continue;
    v = v * v * v;
    double u = uniform01(r);
    if (u < 1.0 - 0.0331 * (x * x) * (x * x)) return d * v;
    if (log(u) < 0.5 * x * x + d * (1.0 - v + log(v))) return d * v;
  }
}

/* Beta(a, a). */
static double beta_draw(ff__philox *r, double a) {
  if (a > 1.0) {
    double x = gamma_draw(r, a), y = gamma_draw(r, a);
    return x / (x + y);
  }
  for (;;) { /* Jöhnk, in logarithms where the powers underflow (as numpy's legacy_beta) */
    double u = uniform01(r), v = uniform01(r);
    double x = pow(u, 1.0 / a), y = pow(v, 1.0 / a), s = x + y;
    if (s > 1.0 || u + v <= 0.0) continue;
    if (s > 0.0) return x / s;
    double lx = log(u) / a, ly = log(v) / a, lm = lx > ly ? lx : ly;
    lx -= lm, ly -= lm;
    return exp(lx - log(exp(lx) + exp(ly)));
  }
}

static int randint(ff__philox *r, int lo, int hi_excl) {
  return (int)ff__philox_randint(r, lo, (int64_t)hi_excl - 1);
}

static int clip(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

/* timm's cutmix_bbox_and_lam for one draw: the box and the targets' λ.
 * f32: the λ is timm's float32 array element (elem and pair modes). */
static void timm_box(const ff__mix_params *p, ff__philox *r, int h, int w, int f32, ff__mix_draw *d) {
  int yl, yh, xl, xh;
  if (p->cutmix_minmax[1] > 0) {
    int ch = randint(r, (int)(h * p->cutmix_minmax[0]), (int)(h * p->cutmix_minmax[1]));
    int cw = randint(r, (int)(w * p->cutmix_minmax[0]), (int)(w * p->cutmix_minmax[1]));
    yl = randint(r, 0, h - ch + 1), xl = randint(r, 0, w - cw + 1);
    yh = yl + ch, xh = xl + cw;
    d->cut[0] = ch, d->cut[1] = cw, d->corner[0] = yl, d->corner[1] = xl;
  } else {
    int ch, cw;
    if (f32) { /* np.sqrt(1 - λ) on a float32 λ, times a Python int: float32 */
      float ratio = sqrtf(1.0f - (float)d->lam_draw);
      ch = (int)((float)h * ratio), cw = (int)((float)w * ratio);
    } else {
      double ratio = sqrt(1.0 - d->lam_draw);
      ch = (int)(h * ratio), cw = (int)(w * ratio);
    }
    int cy = randint(r, 0, h), cx = randint(r, 0, w);
    d->center[0] = cy, d->center[1] = cx;
    yl = clip(cy - ch / 2, 0, h), yh = clip(cy + (ch + 1) / 2, 0, h);
    xl = clip(cx - cw / 2, 0, w), xh = clip(cx + (cw + 1) / 2, 0, w);
  }
  d->box[0] = yl, d->box[1] = yh, d->box[2] = xl, d->box[3] = xh;
  d->lam = d->lam_draw;
  if (p->correct_lam || p->cutmix_minmax[1] > 0)
    d->lam = 1.0 - (double)((yh - yl) * (xh - xl)) / (double)(h * w);
  if (f32) d->lam = (float)d->lam;
}

/* torchvision's CutMix.make_params after the λ draw. */
static void torchvision_box(ff__philox *r, int h, int w, ff__mix_draw *d) {
  int rx = randint(r, 0, w), ry = randint(r, 0, h);
  d->center[0] = ry, d->center[1] = rx;
  double rr = 0.5 * sqrt(1.0 - d->lam_draw);
  int rw = (int)(rr * w), rh = (int)(rr * h);
  int x1 = rx - rw < 0 ? 0 : rx - rw, y1 = ry - rh < 0 ? 0 : ry - rh;
  int x2 = rx + rw > w ? w : rx + rw, y2 = ry + rh > h ? h : ry + rh;
  d->box[0] = y1, d->box[1] = y2, d->box[2] = x1, d->box[3] = x2;
  d->lam = 1.0 - (double)((x2 - x1) * (y2 - y1)) / (double)(w * h);
}

/* Mixup or CutMix, and λ: the reference's choice for one draw. */
static void draw_kind(const ff__mix_params *p, ff__philox *r, ff__mix_draw *d) {
  int mix = p->mixup_alpha > 0, cut = p->cutmix_alpha > 0 || p->cutmix_minmax[1] > 0;
  double cut_alpha = p->cutmix_minmax[1] > 0 ? 1.0 : p->cutmix_alpha; /* timm forces 1 with minmax */
  d->cutmix = mix && cut ? uniform01(r) < p->switch_prob : cut;
  d->lam_draw = beta_draw(r, d->cutmix ? cut_alpha : p->mixup_alpha);
}

static void set_elem(ff__mix_elem *e, int partner, const ff__mix_draw *d, int f32, int torchvision) {
  e->partner = partner;
  float lam = (float)d->lam;
  /* 1 - λ: float32 arithmetic on timm's float32 array, float64 on a Python float */
  float rest = f32 ? 1.0f - lam : (float)(1.0 - d->lam);
  e->ta = lam, e->tb = rest;
  e->kind = FF__MIX_NONE;
  /* timm skips λ == 1; torchvision blends whatever λ it drew */
  if (!d->applied || (!torchvision && d->lam_draw == 1.0)) return;
  if (d->cutmix) {
    e->kind = FF__MIX_CUT;
    e->y0 = d->box[0], e->y1 = d->box[1], e->x0 = d->box[2], e->x1 = d->box[3];
  } else {
    e->kind = FF__MIX_BLEND;
    float draw = (float)d->lam_draw;
    e->a = draw, e->b = f32 ? 1.0f - draw : (float)(1.0 - d->lam_draw);
  }
}

void ff__mix_plan_make(const ff__mix_params *p, uint64_t seed, uint64_t epoch, uint64_t batch, int n, int h,
                       int w, ff__mix_plan *plan) {
  ff__philox r;
  ff__philox_init(&r, seed, FF__RNG_BATCH, batch, epoch);
  plan->n = n;
  double smoothing =
      p->label_smoothing < 0 ? (p->convention == FF__MIX_TIMM ? 0.1 : 0.0) : p->label_smoothing;
  double off = smoothing / p->num_classes;
  plan->off_value = (float)off, plan->on_value = (float)(1.0 - smoothing + off);
  plan->rolled = p->convention == FF__MIX_TORCHVISION;
  if (plan->rolled || p->mode == FF__MIX_BATCH) { /* one draw for the whole batch */
    ff__mix_draw *d = &plan->draws[0];
    memset(d, 0, sizeof *d);
    plan->num_draws = 1;
    d->lam_draw = 1.0, d->lam = 1.0;
    if ((d->applied = uniform01(&r) < p->prob)) {
      draw_kind(p, &r, d);
      if (plan->rolled) d->lam_draw = (float)d->lam_draw; /* torch.distributions.Beta on float32 tensors */
      d->lam = d->lam_draw;
      if (d->cutmix && plan->rolled)
        torchvision_box(&r, h, w, d);
      else if (d->cutmix && d->lam_draw != 1.0)
        timm_box(p, &r, h, w, 0, d);
    }
    for (int i = 0; i < n; i++)
      set_elem(&plan->elems[i], plan->rolled ? (i + n - 1) % n : n - 1 - i, d, 0, plan->rolled);
    return;
  }
  int m = p->mode == FF__MIX_PAIR ? n / 2 : n;
  plan->num_draws = m;
  for (int i = 0; i < m; i++) {
    ff__mix_draw *d = &plan->draws[i];
    memset(d, 0, sizeof *d);
    draw_kind(p, &r, d);
    d->applied = uniform01(&r) < p->prob;
    if (!d->applied) d->lam_draw = 1.0;
    d->lam_draw = (float)d->lam_draw; /* timm: lam_mix.astype(np.float32) */
    d->lam = d->lam_draw;
    if (d->cutmix && d->lam_draw != 1.0) timm_box(p, &r, h, w, 1, d);
  }
  static const ff__mix_draw none = {.lam_draw = 1.0, .lam = 1.0};
  for (int i = 0; i < n; i++) {
    int j = n - 1 - i, k = p->mode == FF__MIX_PAIR ? (i < j ? i : j) : i;
    set_elem(&plan->elems[i], j, k < m ? &plan->draws[k] : &none, 1,
             0); /* none: the middle of an odd batch */
  }
}

/* ---- the CPU application ---- */

static void apply_one(const ff__mix_elem *e, float *dst, const float *src, int h, int w) {
  long plane = (long)h * w;
  if (e->kind == FF__MIX_BLEND) {
    for (long k = 0; k < 3 * plane; k++)
      dst[k] = ff__batch_blend(dst[k], src[k], e->a, e->b);
  } else if (e->kind == FF__MIX_CUT && dst != src) {
    for (int c = 0; c < 3; c++)
      for (int y = e->y0; y < e->y1; y++)
        memcpy(dst + c * plane + (long)y * w + e->x0, src + c * plane + (long)y * w + e->x0,
               (size_t)(e->x1 - e->x0) * sizeof *dst);
  }
}

void ff__mix_apply_images(const ff__mix_plan *plan, float *images, int h, int w, float *scratch) {
  int n = plan->n;
  size_t elems = (size_t)3 * h * w;
  if (n < 1) return;
  if (plan->rolled) {
    /* rolled (torchvision): image i takes image i-1's original; go down from the end */
    memcpy(scratch, images + (size_t)(n - 1) * elems, elems * sizeof *scratch);
    for (int i = n - 1; i >= 1; i--)
      apply_one(&plan->elems[i], images + i * elems, images + (i - 1) * elems, h, w);
    apply_one(&plan->elems[0], images, scratch, h, w);
    return;
  }
  /* flipped (timm): disjoint pairs (i, n-1-i); the middle of an odd batch mixes with itself */
  for (int i = 0; i <= (n - 1) / 2; i++) {
    int j = n - 1 - i;
    float *xi = images + i * elems, *xj = images + j * elems;
    if (i == j) {
      apply_one(&plan->elems[i], xi, xi, h, w);
      continue;
    }
    if (plan->elems[i].kind == FF__MIX_NONE && plan->elems[j].kind == FF__MIX_NONE) continue;
    memcpy(scratch, xi, elems * sizeof *scratch);
    apply_one(&plan->elems[i], xi, xj, h, w);
    apply_one(&plan->elems[j], xj, scratch, h, w);
  }
}

int ff__mix_targets(const ff__mix_plan *plan, int num_classes, const int64_t *labels, float *out) {
  for (int i = 0; i < plan->n; i++)
    if (labels[i] < 0 || labels[i] >= num_classes) return i;
  for (int i = 0; i < plan->n; i++) {
    const ff__mix_elem *e = &plan->elems[i];
    int64_t own = labels[i], other = labels[e->partner];
    float *row = out + (size_t)i * num_classes;
    for (int c = 0; c < num_classes; c++) {
      float y1 = c == own ? plan->on_value : plan->off_value,
            y2 = c == other ? plan->on_value : plan->off_value;
      row[c] = ff__batch_blend(y1, y2, e->ta, e->tb);
    }
  }
  return -1;
}

char *ff__mix_plan_json(const ff__mix_params *p, const ff__mix_plan *plan) {
  static const char *modes[] = {"batch", "pair", "elem"};
  size_t cap = 256 + (size_t)plan->num_draws * 320 + (size_t)plan->n * 160, len = 0;
  char *s = malloc(cap);
  if (!s) return NULL;
#define PUT(...) len += (size_t)snprintf(s + len, cap - len, __VA_ARGS__)
  PUT("{\"convention\": \"%s\", \"mode\": \"%s\", \"batch_size\": %d, \"on_value\": %.9g, \"off_value\": "
      "%.9g, "
      "\"draws\": [",
      p->convention == FF__MIX_TIMM ? "timm" : "torchvision", modes[p->mode], plan->n, plan->on_value,
      plan->off_value);
  for (int i = 0; i < plan->num_draws; i++) {
    const ff__mix_draw *d = &plan->draws[i];
    PUT("%s{\"applied\": %s, \"cutmix\": %s, \"lam_draw\": %.17g, \"lam\": %.17g", i ? ", " : "",
        d->applied ? "true" : "false", d->cutmix ? "true" : "false", d->lam_draw, d->lam);
    if (d->cutmix && d->applied && (p->convention == FF__MIX_TORCHVISION || d->lam_draw != 1.0))
      PUT(", \"center\": [%d, %d], \"cut\": [%d, %d], \"corner\": [%d, %d], \"box\": [%d, %d, %d, %d]",
          d->center[0], d->center[1], d->cut[0], d->cut[1], d->corner[0], d->corner[1], d->box[0], d->box[1],
          d->box[2], d->box[3]);
    PUT("}");
  }
  PUT("], \"partners\": [");
  for (int i = 0; i < plan->n; i++)
    PUT("%s%d", i ? ", " : "", plan->elems[i].partner);
  PUT("]}");
#undef PUT
  return s;
}
