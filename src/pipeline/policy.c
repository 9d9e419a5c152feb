/* policy.c — the automatic augmentation policies as plan steps:
 * RandAugment, TrivialAugmentWide, AutoAugment (ImageNet, CIFAR10, SVHN) and
 * AugMix, with torchvision's (0.14 to 0.29, transforms v1) op lists,
 * magnitude bins, signs, probabilities and order of random draws (shared
 * spec sections 3 and 4); under semantics v2 (ff__aug.v2 of the policy op)
 * the bins of transforms.v2, which differ in solarize's.
 *
 * Magnitudes are torch.linspace tables in float32, recomputed here with the
 * arithmetic of torch 2.x's CPU kernel so that every bin is the float
 * torchvision uses (a blend factor 1 + m depends on its last bits; torch
 * 1.13 differs in the last bit of some bins, and torchvision follows the
 * torch it runs on). Each draw comes from the sample's Philox stream, so a
 * policy's choices for (seed, epoch, index) are the same on any thread or
 * device. */
#include <float.h>
#include <math.h>
#include <string.h>

#include "pipeline/policy.h"

float ff__linspace_f32(float lo, float hi, int n, int k) {
  if (n == 1) return lo;
  /* torch 2.x (aten/src/ATen/native/cpu/RangeFactoriesKernel.cpp): each
   * element on its own, from the start below the middle and from the end
   * above it, the multiply-add fused (checked against torch 2.15's
   * torch.linspace for n up to 300). torch 1.13's vectorised kernel gave
   * other last bits for n >= 16. */
  float step = (hi - lo) / (float)(n - 1);
  return k < n / 2 ? fmaf(step, (float)k, lo) : fmaf(-step, (float)(n - 1 - k), hi);
}

typedef enum family { RA, TA, AA, AM } family;

static int is_signed(ff__aug_op op) {
  return op >= FF__AUG_SHEAR_X && op <= FF__AUG_SHARPNESS;
}

static int has_magnitude(ff__aug_op op) {
  return op != FF__AUG_IDENTITY && op != FF__AUG_AUTOCONTRAST && op != FF__AUG_EQUALIZE &&
         op != FF__AUG_INVERT;
}

/* The magnitude of op at bin k of n for family f on an h x w image, before
 * the sign (torchvision's _augmentation_space; v2: transforms.v2's
 * _AUGMENTATION_SPACE, which differs in solarize's threshold). */
static double bin_magnitude(family f, ff__aug_op op, int k, int n, int h, int w, int v2) {
  int wide = f == TA;
  switch (op) {
  case FF__AUG_SHEAR_X:
  case FF__AUG_SHEAR_Y: return ff__linspace_f32(0.0f, wide ? 0.99f : 0.3f, n, k);
  case FF__AUG_TRANSLATE_X:
  case FF__AUG_TRANSLATE_Y: {
    /* int() of torch's float32 bin, whose end is the Python float below
     * rounded to float32: linspace(0, 32, 31)[15] is 15.999999, so 15 px. */
    double size = op == FF__AUG_TRANSLATE_X ? w : h;
    double hi = f == TA ? 32.0 : f == AM ? size / 3.0 : 150.0 / 331.0 * size;
    return (double)(long)ff__linspace_f32(0.0f, (float)hi, n, k);
  }
  case FF__AUG_ROTATE: return ff__linspace_f32(0.0f, wide ? 135.0f : 30.0f, n, k);
  case FF__AUG_BRIGHTNESS:
  case FF__AUG_COLOR:
  case FF__AUG_CONTRAST:
  case FF__AUG_SHARPNESS: return ff__linspace_f32(0.0f, wide ? 0.99f : 0.9f, n, k);
  case FF__AUG_POSTERIZE: {
    /* v2 rounds the float32 difference 8 - q where v1 rounds q: the same
     * bins for every n up to 300 (checked against torchvision 0.29) */
    float q = (float)k / (float)((n - 1) / (wide ? 6.0 : 4.0));
    return (f == AM ? 4 : 8) - (int)rintf(q);
  }
  case FF__AUG_SOLARIZE:
    /* v1: linspace(255, 0, n); v2: 255 * linspace(1, 0, n) in double,
     * compared in float32 by the op: 119.00001 where v1 has 119 (bins 16,
     * 18, 24 of 31 leave 119, 102, 51 alone in v2; 109 bins of n <= 300) */
    return v2 ? 255.0 * (double)ff__linspace_f32(1.0f, 0.0f, n, k) : ff__linspace_f32(255.0f, 0.0f, n, k);
  default: return 0.0;
  }
}

/* Appends op with its argument arg (push_arg), or with signed magnitude m
 * as torchvision's _apply_op calls it (push): the factor ops get 1 + m (in
 * double), the others m itself. */
static void push_arg(ff__step *out, int *n, const ff__op *policy, ff__aug_op op, double arg) {
  if (op == FF__AUG_IDENTITY) return;
  ff__step *s = &out[(*n)++];
  memset(s, 0, sizeof *s);
  s->kind = FF__STEP_AUG;
  s->aug = policy->aug; /* interpolation and fill */
  s->aug.op = op;
  s->aug.arg = arg;
}

static void push(ff__step *out, int *n, const ff__op *policy, ff__aug_op op, double m) {
  push_arg(out, n, policy, op, op >= FF__AUG_BRIGHTNESS && op <= FF__AUG_SHARPNESS ? 1.0 + m : m);
}

static const ff__aug_op wide_ops[14] = {
    FF__AUG_IDENTITY,   FF__AUG_SHEAR_X,    FF__AUG_SHEAR_Y, FF__AUG_TRANSLATE_X, FF__AUG_TRANSLATE_Y,
    FF__AUG_ROTATE,     FF__AUG_BRIGHTNESS, FF__AUG_COLOR,   FF__AUG_CONTRAST,    FF__AUG_SHARPNESS,
    FF__AUG_POSTERIZE,  FF__AUG_SOLARIZE,   FF__AUG_AUTOCONTRAST, FF__AUG_EQUALIZE};

static const ff__aug_op augmix_ops[13] = {
    FF__AUG_SHEAR_X,   FF__AUG_SHEAR_Y,  FF__AUG_TRANSLATE_X,  FF__AUG_TRANSLATE_Y, FF__AUG_ROTATE,
    FF__AUG_POSTERIZE, FF__AUG_SOLARIZE, FF__AUG_AUTOCONTRAST, FF__AUG_EQUALIZE,    FF__AUG_BRIGHTNESS,
    FF__AUG_COLOR,     FF__AUG_CONTRAST, FF__AUG_SHARPNESS};

/* AutoAugment sub-policies: two (op, probability, bin) each; bin -1 = none. */
typedef struct sub_op {
  ff__aug_op op;
  float p;
  int bin;
} sub_op;

#define SX FF__AUG_SHEAR_X
#define SY FF__AUG_SHEAR_Y
#define TX FF__AUG_TRANSLATE_X
#define TY FF__AUG_TRANSLATE_Y
#define RO FF__AUG_ROTATE
#define BR FF__AUG_BRIGHTNESS
#define CO FF__AUG_COLOR
#define CT FF__AUG_CONTRAST
#define SH FF__AUG_SHARPNESS
#define PO FF__AUG_POSTERIZE
#define SO FF__AUG_SOLARIZE
#define AC FF__AUG_AUTOCONTRAST
#define EQ FF__AUG_EQUALIZE
#define IN FF__AUG_INVERT

static const sub_op aa_policies[3][25][2] = {
    { /* IMAGENET */
     {{PO, .4f, 8}, {RO, .6f, 9}}, {{SO, .6f, 5}, {AC, .6f, -1}}, {{EQ, .8f, -1}, {EQ, .6f, -1}},
     {{PO, .6f, 7}, {PO, .6f, 6}}, {{EQ, .4f, -1}, {SO, .2f, 4}}, {{EQ, .4f, -1}, {RO, .8f, 8}},
     {{SO, .6f, 3}, {EQ, .6f, -1}}, {{PO, .8f, 5}, {EQ, 1.f, -1}}, {{RO, .2f, 3}, {SO, .6f, 8}},
     {{EQ, .6f, -1}, {PO, .4f, 6}}, {{RO, .8f, 8}, {CO, .4f, 0}}, {{RO, .4f, 9}, {EQ, .6f, -1}},
     {{EQ, .0f, -1}, {EQ, .8f, -1}}, {{IN, .6f, -1}, {EQ, 1.f, -1}}, {{CO, .6f, 4}, {CT, 1.f, 8}},
     {{RO, .8f, 8}, {CO, 1.f, 2}}, {{CO, .8f, 8}, {SO, .8f, 7}}, {{SH, .4f, 7}, {IN, .6f, -1}},
     {{SX, .6f, 5}, {EQ, 1.f, -1}}, {{CO, .4f, 0}, {EQ, .6f, -1}}, {{EQ, .4f, -1}, {SO, .2f, 4}},
     {{SO, .6f, 5}, {AC, .6f, -1}}, {{IN, .6f, -1}, {EQ, 1.f, -1}}, {{CO, .6f, 4}, {CT, 1.f, 8}},
     {{EQ, .8f, -1}, {EQ, .6f, -1}}},
    { /* CIFAR10 */
     {{IN, .1f, -1}, {CT, .2f, 6}}, {{RO, .7f, 2}, {TX, .3f, 9}}, {{SH, .8f, 1}, {SH, .9f, 3}},
     {{SY, .5f, 8}, {TY, .7f, 9}}, {{AC, .5f, -1}, {EQ, .9f, -1}}, {{SY, .2f, 7}, {PO, .3f, 7}},
     {{CO, .4f, 3}, {BR, .6f, 7}}, {{SH, .3f, 9}, {BR, .7f, 9}}, {{EQ, .6f, -1}, {EQ, .5f, -1}},
     {{CT, .6f, 7}, {SH, .6f, 5}}, {{CO, .7f, 7}, {TX, .5f, 8}}, {{EQ, .3f, -1}, {AC, .4f, -1}},
     {{TY, .4f, 3}, {SH, .2f, 6}}, {{BR, .9f, 6}, {CO, .2f, 8}}, {{SO, .5f, 2}, {IN, .0f, -1}},
     {{EQ, .2f, -1}, {AC, .6f, -1}}, {{EQ, .2f, -1}, {EQ, .6f, -1}}, {{CO, .9f, 9}, {EQ, .6f, -1}},
     {{AC, .8f, -1}, {SO, .2f, 8}}, {{BR, .1f, 3}, {CO, .7f, 0}}, {{SO, .4f, 5}, {AC, .9f, -1}},
     {{TY, .9f, 9}, {TY, .7f, 9}}, {{AC, .9f, -1}, {SO, .8f, 3}}, {{EQ, .8f, -1}, {IN, .1f, -1}},
     {{TY, .7f, 9}, {AC, .9f, -1}}},
    { /* SVHN */
     {{SX, .9f, 4}, {IN, .2f, -1}}, {{SY, .9f, 8}, {IN, .7f, -1}}, {{EQ, .6f, -1}, {SO, .6f, 6}},
     {{IN, .9f, -1}, {EQ, .6f, -1}}, {{EQ, .6f, -1}, {RO, .9f, 3}}, {{SX, .9f, 4}, {AC, .8f, -1}},
     {{SY, .9f, 8}, {IN, .4f, -1}}, {{SY, .9f, 5}, {SO, .2f, 6}}, {{IN, .9f, -1}, {AC, .8f, -1}},
     {{EQ, .6f, -1}, {RO, .9f, 3}}, {{SX, .9f, 4}, {SO, .3f, 3}}, {{SY, .8f, 8}, {IN, .7f, -1}},
     {{EQ, .9f, -1}, {TY, .6f, 6}}, {{IN, .9f, -1}, {EQ, .6f, -1}}, {{CT, .3f, 3}, {RO, .8f, 4}},
     {{IN, .8f, -1}, {TY, .0f, 2}}, {{SY, .7f, 6}, {SO, .4f, 8}}, {{IN, .6f, -1}, {RO, .8f, 4}},
     {{SY, .3f, 7}, {TX, .9f, 3}}, {{SX, .1f, 6}, {IN, .6f, -1}}, {{SO, .7f, 2}, {TY, .6f, 7}},
     {{SY, .8f, 4}, {IN, .8f, -1}}, {{SX, .7f, 9}, {TY, .8f, 3}}, {{SY, .8f, 5}, {AC, .7f, -1}},
     {{SX, .7f, 2}, {IN, .1f, -1}}},
};

/* A Gamma(alpha, 1) variate (Marsaglia and Tsang, 2000), for the Dirichlet
 * weights of AugMix; planning is host-only, so double and libm are fine. */
double ff__uniform_open(ff__philox *rng) {
  uint64_t x = ((uint64_t)ff__philox_u32(rng) << 32) | ff__philox_u32(rng);
  return ((double)(x >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

double ff__gamma_variate(ff__philox *rng, double alpha) {
  if (alpha < 1.0) return ff__gamma_variate(rng, alpha + 1.0) * pow(ff__uniform_open(rng), 1.0 / alpha);
  double d = alpha - 1.0 / 3.0, c = 1.0 / sqrt(9.0 * d);
  for (;;) {
    double u1 = ff__uniform_open(rng), u2 = ff__uniform_open(rng);
    double x = sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
    double v = 1.0 + c * x;
    if (v <= 0) continue;
    v = v * v * v;
    double u = ff__uniform_open(rng);
    if (u < 1.0 - 0.0331 * x * x * x * x || log(u) < 0.5 * x * x + d * (1.0 - v + log(v))) return d * v;
  }
}

/* Dirichlet(alpha, ..., alpha) of k components, as float32. Each gamma
 * draw is kept at least the smallest normal float, as torch's Dirichlet
 * sampler clamps its gamma draws: for a tiny alpha the draws underflow to 0,
 * which would otherwise make the weights 0/0. */
void ff__dirichlet_f32(ff__philox *rng, double alpha, int k, float *out) {
  double g[16], sum = 0;
  for (int i = 0; i < k; i++) sum += g[i] = fmax(ff__gamma_variate(rng, alpha), FLT_MIN);
  for (int i = 0; i < k; i++) out[i] = (float)(g[i] / sum);
}

/* An entry's argument before its sign (v2: transforms.v2's bins). */
static double entry_arg(const ff__policy_table *t, const ff__policy_entry *e, int h, int w, int v2) {
  if (e->has_arg) return e->of_size ? e->arg * (e->op == FF__AUG_TRANSLATE_X ? w : h) : e->arg;
  return e->bin >= 0 ? bin_magnitude(AA, e->op, e->bin, t->num_magnitude_bins, h, w, v2) : 0.0;
}

/* Appends entry e, negated when `negative` and the entry is signed: an
 * explicit arg is the op's argument (a factor as it is), a bin's magnitude
 * goes through push as AutoAugment's does. */
static void push_entry(const ff__policy_table *t, const ff__policy_entry *e, int negative, const ff__op *op, int h,
                       int w, ff__step *out, int *n) {
  double arg = entry_arg(t, e, h, w, op->aug.v2);
  if ((e->has_arg ? e->random_sign : is_signed(e->op)) && negative) arg = -arg;
  if (e->has_arg) push_arg(out, n, op, e->op, arg);
  else push(out, n, op, e->op, arg);
}

int ff__policy_file_plan(const ff__policy_table *t, const ff__op *op, ff__philox *rng, int h, int w, ff__step *out) {
  int n = 0;
  if (!t->layered) {
    int g = (int)ff__philox_randint(rng, 0, t->num_groups - 1), len = t->start[g + 1] - t->start[g];
    const ff__policy_entry *sub = &t->entries[t->start[g]];
    float p[FF__POLICY_MAX_GROUP_OPS];
    int sign[FF__POLICY_MAX_GROUP_OPS];
    for (int i = 0; i < len; i++) p[i] = ff__philox_uniform(rng, 0.0f, 1.0f);
    for (int i = 0; i < len; i++) sign[i] = (int)ff__philox_randint(rng, 0, 1);
    for (int i = 0; i < len; i++) {
      if (!(p[i] <= sub[i].p)) continue;
      push_entry(t, &sub[i], sign[i] == 0, op, h, w, out, &n);
    }
    return n;
  }
  for (int g = 0; g < t->num_groups; g++) {
    float u = ff__philox_uniform(rng, 0.0f, 1.0f);
    int k = t->start[g], end = t->start[g + 1] - 1;
    double below = 0;
    while (k < end && !(u < (below += t->entries[k].p))) k++;
    push_entry(t, &t->entries[k], ff__philox_randint(rng, 0, 1) == 0, op, h, w, out, &n);
  }
  return n;
}

int ff__policy_plan(const ff__op *op, ff__philox *rng, int h, int w, ff__step *out) {
  int n = 0;
  switch (op->kind) {
  case FF__OP_RAND_AUGMENT:
    for (int i = 0; i < op->num_ops; i++) {
      ff__aug_op a = wide_ops[ff__philox_randint(rng, 0, 13)];
      double arg = bin_magnitude(RA, a, op->magnitude, op->num_magnitude_bins, h, w, op->aug.v2);
      if (is_signed(a) && ff__philox_randint(rng, 0, 1)) arg = -arg;
      push(out, &n, op, a, arg);
    }
    break;
  case FF__OP_TRIVIAL_AUGMENT_WIDE: {
    ff__aug_op a = wide_ops[ff__philox_randint(rng, 0, 13)];
    double arg = 0;
    if (has_magnitude(a)) {
      int k = (int)ff__philox_randint(rng, 0, op->num_magnitude_bins - 1);
      arg = bin_magnitude(TA, a, k, op->num_magnitude_bins, h, w, op->aug.v2);
    }
    if (is_signed(a) && ff__philox_randint(rng, 0, 1)) arg = -arg;
    push(out, &n, op, a, arg);
    break;
  }
  case FF__OP_AUTO_AUGMENT: {
    /* All draws up front: sub-policy, two probabilities, two signs. */
    const sub_op *sub = aa_policies[op->policy][ff__philox_randint(rng, 0, 24)];
    float p[2] = {ff__philox_uniform(rng, 0.0f, 1.0f), ff__philox_uniform(rng, 0.0f, 1.0f)};
    int sign[2] = {(int)ff__philox_randint(rng, 0, 1), (int)ff__philox_randint(rng, 0, 1)};
    for (int i = 0; i < 2; i++) {
      if (!(p[i] <= sub[i].p)) continue; /* float32 tensor vs Python float: compared in float32 */
      ff__aug_op a = sub[i].op;
      double arg = sub[i].bin >= 0 ? bin_magnitude(AA, a, sub[i].bin, 10, h, w, op->aug.v2) : 0.0;
      if (is_signed(a) && sign[i] == 0) arg = -arg;
      push(out, &n, op, a, arg);
    }
    break;
  }
  case FF__OP_AUG_MIX: {
    float m[2], weights[8];
    ff__dirichlet_f32(rng, op->alpha, 2, m);
    ff__dirichlet_f32(rng, op->alpha, op->mixture_width, weights);
    int num_ops = op->all_ops ? 13 : 9;
    ff__step *s = &out[n++];
    memset(s, 0, sizeof *s);
    s->kind = FF__STEP_MIX_BEGIN, s->weight = m[0];
    for (int i = 0; i < op->mixture_width; i++) {
      s = &out[n++];
      memset(s, 0, sizeof *s);
      s->kind = FF__STEP_CHAIN_BEGIN;
      int depth = op->chain_depth > 0 ? op->chain_depth : (int)ff__philox_randint(rng, 1, 3);
      for (int d = 0; d < depth; d++) {
        ff__aug_op a = augmix_ops[ff__philox_randint(rng, 0, num_ops - 1)];
        double arg = 0;
        if (has_magnitude(a)) arg = bin_magnitude(AM, a, (int)ff__philox_randint(rng, 0, op->severity - 1), 10, h, w,
                                                    op->aug.v2);
        if (is_signed(a) && ff__philox_randint(rng, 0, 1)) arg = -arg;
        push(out, &n, op, a, arg);
      }
      s = &out[n++];
      memset(s, 0, sizeof *s);
      s->kind = FF__STEP_CHAIN_END, s->weight = weights[i] * m[1];
    }
    s = &out[n++];
    memset(s, 0, sizeof *s);
    s->kind = FF__STEP_MIX_END;
    break;
  }
  default: break;
  }
  return n;
}
