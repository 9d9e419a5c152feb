/* timm.c — timm's automatic augmentation policies as plan steps:
 * RandAugment, AutoAugment (v0, v0r, original, originalr) and AugMix, from
 * timm's config strings, with timm 1.0's op lists, level-to-argument
 * functions, probabilities and hparams (timm.data.auto_augment), the ops in
 * Pillow semantics (kernels/pil.h).
 *
 * Every random choice timm makes while it applies a policy — RandAugment's
 * op choice (uniform with replacement, or weighted without), each op's
 * application (u > p skips it), the Gaussian (or uniform) magnitude noise,
 * each sign, the bilinear/bicubic choice of a geometric op, AugMix's
 * Dirichlet and Beta weights, chain depths and chain ops — is drawn here
 * from the sample's Philox stream, with timm's distributions; the
 * arithmetic that turns a magnitude into an op argument is timm's own, in
 * double, so a plan replays bit for bit through timm's op functions. */
#include "pipeline/timm.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/pil.h"
#include "pipeline/pipeline.h"
#include "pipeline/policy.h"

/* How a level (magnitude) becomes an op's argument (timm's LEVEL_TO_ARG). */
typedef enum level_fn {
  L_NONE,
  L_ROTATE,          /* level/10 * 30, random sign */
  L_POSTERIZE,       /* int(level/10 * 4) */
  L_POSTERIZE_INC,   /* 4 - int(level/10 * 4) */
  L_POSTERIZE_ORIG,  /* int(level/10 * 4) + 4 */
  L_SOLARIZE,        /* min(256, int(level/10 * 256)) */
  L_SOLARIZE_INC,    /* 256 - min(256, int(level/10 * 256)) */
  L_SOLARIZE_ADD,    /* min(128, int(level/10 * 110)) */
  L_ENHANCE,         /* level/10 * 1.8 + 0.1 */
  L_ENHANCE_INC,     /* max(0.1, 1 + signed level/10 * 0.9) */
  L_SHEAR,           /* level/10 * 0.3, random sign */
  L_TRANSLATE_ABS,   /* level/10 * translate_const, random sign */
  L_TRANSLATE_REL,   /* level/10 * translate_pct, random sign, times the side */
} level_fn;

typedef struct timm_op {
  const char *name; /* timm's name */
  ff__pil_op op;
  level_fn level;
} timm_op;

enum {
  AUTOCONTRAST, EQUALIZE, INVERT, ROTATE, POSTERIZE, POSTERIZE_INC, POSTERIZE_ORIG, SOLARIZE, SOLARIZE_INC,
  SOLARIZE_ADD, COLOR, COLOR_INC, CONTRAST, CONTRAST_INC, BRIGHTNESS, BRIGHTNESS_INC, SHARPNESS, SHARPNESS_INC,
  SHEAR_X, SHEAR_Y, TRANSLATE_X, TRANSLATE_Y, TRANSLATE_X_REL, TRANSLATE_Y_REL, NUM_TIMM_OPS
};

static const timm_op timm_ops[NUM_TIMM_OPS] = {
    {"AutoContrast", FF__PIL_AUTOCONTRAST, L_NONE},
    {"Equalize", FF__PIL_EQUALIZE, L_NONE},
    {"Invert", FF__PIL_INVERT, L_NONE},
    {"Rotate", FF__PIL_ROTATE, L_ROTATE},
    {"Posterize", FF__PIL_POSTERIZE, L_POSTERIZE},
    {"PosterizeIncreasing", FF__PIL_POSTERIZE, L_POSTERIZE_INC},
    {"PosterizeOriginal", FF__PIL_POSTERIZE, L_POSTERIZE_ORIG},
    {"Solarize", FF__PIL_SOLARIZE, L_SOLARIZE},
    {"SolarizeIncreasing", FF__PIL_SOLARIZE, L_SOLARIZE_INC},
    {"SolarizeAdd", FF__PIL_SOLARIZE_ADD, L_SOLARIZE_ADD},
    {"Color", FF__PIL_COLOR, L_ENHANCE},
    {"ColorIncreasing", FF__PIL_COLOR, L_ENHANCE_INC},
    {"Contrast", FF__PIL_CONTRAST, L_ENHANCE},
    {"ContrastIncreasing", FF__PIL_CONTRAST, L_ENHANCE_INC},
    {"Brightness", FF__PIL_BRIGHTNESS, L_ENHANCE},
    {"BrightnessIncreasing", FF__PIL_BRIGHTNESS, L_ENHANCE_INC},
    {"Sharpness", FF__PIL_SHARPNESS, L_ENHANCE},
    {"SharpnessIncreasing", FF__PIL_SHARPNESS, L_ENHANCE_INC},
    {"ShearX", FF__PIL_SHEAR_X, L_SHEAR},
    {"ShearY", FF__PIL_SHEAR_Y, L_SHEAR},
    {"TranslateX", FF__PIL_TRANSLATE_X, L_TRANSLATE_ABS},
    {"TranslateY", FF__PIL_TRANSLATE_Y, L_TRANSLATE_ABS},
    {"TranslateXRel", FF__PIL_TRANSLATE_X, L_TRANSLATE_REL},
    {"TranslateYRel", FF__PIL_TRANSLATE_Y, L_TRANSLATE_REL},
};

/* RandAugment's lists (_RAND_TRANSFORMS, _RAND_INCREASING_TRANSFORMS),
 * _RAND_WEIGHTED_0 with its weights, and AugMix's list. */
static const int ra_ops[15] = {AUTOCONTRAST, EQUALIZE, INVERT,     ROTATE,   POSTERIZE,
                               SOLARIZE,     SOLARIZE_ADD, COLOR,  CONTRAST, BRIGHTNESS,
                               SHARPNESS,    SHEAR_X,  SHEAR_Y,    TRANSLATE_X_REL, TRANSLATE_Y_REL};
static const int ra_inc_ops[15] = {AUTOCONTRAST,  EQUALIZE,     INVERT,         ROTATE,        POSTERIZE_INC,
                                   SOLARIZE_INC,  SOLARIZE_ADD, COLOR_INC,      CONTRAST_INC,  BRIGHTNESS_INC,
                                   SHARPNESS_INC, SHEAR_X,      SHEAR_Y,        TRANSLATE_X_REL, TRANSLATE_Y_REL};
static const int weighted_ops[15] = {ROTATE,         SHEAR_X,      SHEAR_Y,      TRANSLATE_X_REL, TRANSLATE_Y_REL,
                                     COLOR_INC,      SHARPNESS_INC, AUTOCONTRAST, SOLARIZE_INC,   SOLARIZE_ADD,
                                     CONTRAST_INC,   BRIGHTNESS_INC, EQUALIZE,    POSTERIZE_INC,  INVERT};
static const double weighted_w[15] = {3, 2, 2, 1, 1, .25, .25, .25, .05, .05, .05, .05, .05, .05, .05};
static const int augmix_ops[13] = {AUTOCONTRAST, COLOR_INC,     CONTRAST_INC, BRIGHTNESS_INC, SHARPNESS_INC,
                                   EQUALIZE,     ROTATE,        POSTERIZE_INC, SOLARIZE_INC,  SHEAR_X,
                                   SHEAR_Y,      TRANSLATE_X_REL, TRANSLATE_Y_REL};

/* AutoAugment sub-policies: two (op, probability, magnitude) each. */
typedef struct sub_op {
  int op;
  double p;
  int m;
} sub_op;

#define E(o, p, m) {o, p, m}
static const sub_op aa_v0[25][2] = {
    {E(EQUALIZE, .8, 1), E(SHEAR_Y, .8, 4)},       {E(COLOR, .4, 9), E(EQUALIZE, .6, 3)},
    {E(COLOR, .4, 1), E(ROTATE, .6, 8)},           {E(SOLARIZE, .8, 3), E(EQUALIZE, .4, 7)},
    {E(SOLARIZE, .4, 2), E(SOLARIZE, .6, 2)},      {E(COLOR, .2, 0), E(EQUALIZE, .8, 8)},
    {E(EQUALIZE, .4, 8), E(SOLARIZE_ADD, .8, 3)},  {E(SHEAR_X, .2, 9), E(ROTATE, .6, 8)},
    {E(COLOR, .6, 1), E(EQUALIZE, 1., 2)},         {E(INVERT, .4, 9), E(ROTATE, .6, 0)},
    {E(EQUALIZE, 1., 9), E(SHEAR_Y, .6, 3)},       {E(COLOR, .4, 7), E(EQUALIZE, .6, 0)},
    {E(POSTERIZE, .4, 6), E(AUTOCONTRAST, .4, 7)}, {E(SOLARIZE, .6, 8), E(COLOR, .6, 9)},
    {E(SOLARIZE, .2, 4), E(ROTATE, .8, 9)},        {E(ROTATE, 1., 7), E(TRANSLATE_Y_REL, .8, 9)},
    {E(SHEAR_X, 0., 0), E(SOLARIZE, .8, 4)},       {E(SHEAR_Y, .8, 0), E(COLOR, .6, 4)},
    {E(COLOR, 1., 0), E(ROTATE, .6, 2)},           {E(EQUALIZE, .8, 4), E(EQUALIZE, 0., 8)},
    {E(EQUALIZE, 1., 4), E(AUTOCONTRAST, .6, 2)},  {E(SHEAR_Y, .4, 7), E(SOLARIZE_ADD, .6, 7)},
    {E(POSTERIZE, .8, 2), E(SOLARIZE, .6, 10)},    {E(SOLARIZE, .6, 8), E(EQUALIZE, .6, 1)},
    {E(COLOR, .8, 6), E(ROTATE, .4, 5)}};
/* v0r: v0 with PosterizeIncreasing (timm's auto_augment_policy_v0r). */
static const sub_op aa_original[25][2] = {
    {E(POSTERIZE_ORIG, .4, 8), E(ROTATE, .6, 9)},  {E(SOLARIZE, .6, 5), E(AUTOCONTRAST, .6, 5)},
    {E(EQUALIZE, .8, 8), E(EQUALIZE, .6, 3)},      {E(POSTERIZE_ORIG, .6, 7), E(POSTERIZE_ORIG, .6, 6)},
    {E(EQUALIZE, .4, 7), E(SOLARIZE, .2, 4)},      {E(EQUALIZE, .4, 4), E(ROTATE, .8, 8)},
    {E(SOLARIZE, .6, 3), E(EQUALIZE, .6, 7)},      {E(POSTERIZE_ORIG, .8, 5), E(EQUALIZE, 1., 2)},
    {E(ROTATE, .2, 3), E(SOLARIZE, .6, 8)},        {E(EQUALIZE, .6, 8), E(POSTERIZE_ORIG, .4, 6)},
    {E(ROTATE, .8, 8), E(COLOR, .4, 0)},           {E(ROTATE, .4, 9), E(EQUALIZE, .6, 2)},
    {E(EQUALIZE, 0., 7), E(EQUALIZE, .8, 8)},      {E(INVERT, .6, 4), E(EQUALIZE, 1., 8)},
    {E(COLOR, .6, 4), E(CONTRAST, 1., 8)},         {E(ROTATE, .8, 8), E(COLOR, 1., 2)},
    {E(COLOR, .8, 8), E(SOLARIZE, .8, 7)},         {E(SHARPNESS, .4, 7), E(INVERT, .6, 8)},
    {E(SHEAR_X, .6, 5), E(EQUALIZE, 1., 9)},       {E(COLOR, .4, 0), E(EQUALIZE, .6, 3)},
    {E(EQUALIZE, .4, 7), E(SOLARIZE, .2, 4)},      {E(SOLARIZE, .6, 5), E(AUTOCONTRAST, .6, 5)},
    {E(INVERT, .6, 4), E(EQUALIZE, 1., 8)},        {E(COLOR, .6, 4), E(CONTRAST, 1., 8)},
    {E(EQUALIZE, .8, 8), E(EQUALIZE, .6, 3)}};
#undef E

/* The sub-policy table entry of policy `pol`: v0r and originalr are v0 and
 * original with PosterizeIncreasing for their posterize ops. */
static sub_op aa_entry(int pol, int k, int i) {
  sub_op s = (pol == FF__TIMM_V0 || pol == FF__TIMM_V0R ? aa_v0 : aa_original)[k][i];
  if ((pol == FF__TIMM_V0R || pol == FF__TIMM_ORIGINALR) && (s.op == POSTERIZE || s.op == POSTERIZE_ORIG))
    s.op = POSTERIZE_INC;
  return s;
}

void ff__timm_defaults(int kind, ff__timm *t) {
  memset(t, 0, sizeof *t);
  t->kind = kind;
  t->magnitude = kind == FF__TIMM_AUG_MIX ? 3 : 10;
  t->num_layers = 2;
  t->prob = 0.5;
  t->magnitude_std = kind == FF__TIMM_AUG_MIX ? INFINITY : 0; /* AugMix: uniform unless mstd is given */
  t->magnitude_max = 10;
  t->width = 3, t->depth = -1, t->alpha = 1.0;
  t->interpolation = FF__TIMM_RANDOM_INTERPOLATION;
  t->fill[0] = t->fill[1] = t->fill[2] = 128;
  t->translate_pct = 0.45;
  t->translate_const = 250;
}

/* A whole decimal number (what Python's int() / float() accept from
 * timm's sections, without signs or exponents). */
static int parse_number(const char *s, size_t n, int want_int, double *out) {
  char buf[32];
  if (n == 0 || n >= sizeof buf) return 0;
  memcpy(buf, s, n);
  buf[n] = 0;
  if (strspn(buf, want_int ? "0123456789" : "0123456789.") != n || (!want_int && strchr(buf, '.') != strrchr(buf, '.')))
    return 0;
  char *end;
  *out = strtod(buf, &end);
  return *end == 0 && isfinite(*out);
}

int ff__timm_parse(const char *config, int kind, ff__timm *t, char *why, size_t cap, size_t *column) {
  static const char *const heads[] = {"rand", NULL, "augmix"};
  static const char *const policies[] = {"v0", "v0r", "original", "originalr"};
  size_t len = strlen(config);
  if (len >= sizeof t->config) {
    *column = 0;
    snprintf(why, cap, "the config string is longer than %d characters", FF__TIMM_CONFIG_MAX - 1);
    return -1;
  }
  memcpy(t->config, config, len + 1);
  for (size_t pos = 0, k = 0; pos <= len; k++) {
    size_t n = strcspn(config + pos, "-");
    const char *sec = config + pos;
    *column = pos;
    if (k == 0) {
      if (kind == FF__TIMM_AUTO_AUGMENT) {
        int found = -1;
        for (int i = 0; i < 4; i++)
          if (strlen(policies[i]) == n && !strncmp(sec, policies[i], n)) found = i;
        if (found < 0) {
          snprintf(why, cap, "unknown AutoAugment policy '%.*s' (v0, v0r, original or originalr)", (int)n, sec);
          return -1;
        }
        t->policy = found;
      } else if (strlen(heads[kind]) != n || strncmp(sec, heads[kind], n)) {
        snprintf(why, cap, "the config must start with '%s', not '%.*s'", heads[kind], (int)n, sec);
        return -1;
      }
    } else if (kind == FF__TIMM_RAND_AUGMENT && n > 0 && sec[0] == 't') {
      if (n == 8 && !strncmp(sec, "tweights", 8)) t->set = FF__TIMM_SET_WEIGHTS;
      else {
        snprintf(why, cap, "unknown transform set '%.*s' (supported: tweights)", (int)n - 1, sec + 1);
        return -1;
      }
    } else {
      size_t key = 0;
      while (key < n && !isdigit((unsigned char)sec[key])) key++;
      double v;
#define KEY(s) (key == strlen(s) && !strncmp(sec, s, key))
      int is_int = KEY("m") || KEY("n") || KEY("inc") || KEY("mmax") || KEY("w") || KEY("d");
      int known = is_int || KEY("mstd") || KEY("p") || KEY("a");
      int allowed = KEY("mstd") || (kind == FF__TIMM_RAND_AUGMENT && (KEY("m") || KEY("n") || KEY("p") || KEY("inc") || KEY("mmax"))) ||
                    (kind == FF__TIMM_AUG_MIX && (KEY("m") || KEY("w") || KEY("d") || KEY("a")));
      if (!known || !allowed || key == n) {
        static const char *const keys[] = {"m, n, p, mstd, mmax, inc, t", "mstd", "m, w, d, a, mstd"};
        snprintf(why, cap, "unknown section '%.*s' (a key followed by a number; keys: %s)", (int)n, sec, keys[kind]);
        return -1;
      }
      if (!parse_number(sec + key, n - key, is_int, &v)) {
        snprintf(why, cap, "'%.*s' needs %s after '%.*s'", (int)n, sec, is_int ? "a whole number" : "a number",
                 (int)key, sec);
        return -1;
      }
      if (KEY("mstd")) t->magnitude_std = kind == FF__TIMM_RAND_AUGMENT && v > 100 ? INFINITY : v;
      else if (KEY("m")) t->magnitude = v;
      else if (KEY("n")) t->num_layers = (int)v;
      else if (KEY("p")) t->prob = v;
      else if (KEY("inc")) t->increasing = v != 0;
      else if (KEY("mmax")) t->magnitude_max = v;
      else if (KEY("w")) t->width = (int)v;
      else if (KEY("d")) t->depth = (int)v;
      else if (KEY("a")) t->alpha = v;
#undef KEY
      const char *range = NULL;
      if (t->num_layers > 16) range = "n is at most 16";
      else if (t->prob > 1) range = "p is a probability, at most 1";
      else if (t->width < 1 || t->width > FF__AUG_MIX_MAX_WIDTH) range = "w must be in [1, 8]";
      else if (t->depth > 8 || t->depth == 0) range = "d must be in [1, 8] (or absent: 1 to 3 per chain)";
      else if (t->alpha < 1e-3 || t->alpha > 1e3) range = "a must be in [0.001, 1000]";
      else if (t->magnitude_max <= 0) range = "mmax must be positive";
      if (range) {
        snprintf(why, cap, "'%.*s': %s", (int)n, sec, range);
        return -1;
      }
    }
    pos += n + 1;
  }
  if (kind == FF__TIMM_RAND_AUGMENT && t->set == FF__TIMM_SET_WEIGHTS && t->num_layers > 15) {
    *column = 0;
    snprintf(why, cap, "tweights draws n ops without replacement from 15: n must be at most 15");
    return -1;
  }
  return 0;
}

int ff__timm_max_steps(const ff__timm *t) {
  switch (t->kind) {
  case FF__TIMM_RAND_AUGMENT: return t->num_layers;
  case FF__TIMM_AUTO_AUGMENT: return 2;
  default: return 2 + t->width * (2 + (t->depth > 0 ? t->depth : 3));
  }
}

/* A standard normal variate (Box-Muller; host-only planning). */
static double normal(ff__philox *rng) {
  double u1 = ff__uniform_open(rng), u2 = ff__uniform_open(rng);
  return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* _randomly_negate: timm negates when random() > 0.5. */
static double negate(ff__philox *rng, double v) { return ff__uniform_open(rng) > 0.5 ? -v : v; }

/* timm's AugmentOp.__call__ for op k at `magnitude` with probability p:
 * appends its step unless the draw skips it. */
static void apply_op(const ff__timm *t, ff__philox *rng, int k, double p, double magnitude, int h, int w,
                     ff__step *out, int *n) {
  if (p < 1.0 && ff__uniform_open(rng) > p) return;
  double m = magnitude;
  if (t->magnitude_std > 0) m = isinf(t->magnitude_std) ? ff__uniform_open(rng) * m : m + t->magnitude_std * normal(rng);
  m = fmax(0.0, fmin(m, t->magnitude_max));
  const timm_op *op = &timm_ops[k];
  double l = m / 10.0, arg = 0;
  switch (op->level) {
  case L_NONE: break;
  case L_ROTATE: arg = negate(rng, l * 30.0); break;
  case L_POSTERIZE: arg = (int)(l * 4); break;
  case L_POSTERIZE_INC: arg = 4 - (int)(l * 4); break;
  case L_POSTERIZE_ORIG: arg = (int)(l * 4) + 4; break;
  case L_SOLARIZE: arg = fmin(256, (int)(l * 256)); break;
  case L_SOLARIZE_INC: arg = 256 - fmin(256, (int)(l * 256)); break;
  case L_SOLARIZE_ADD: arg = fmin(128, (int)(l * 110)); break;
  case L_ENHANCE: arg = l * 1.8 + 0.1; break;
  case L_ENHANCE_INC: arg = fmax(0.1, 1.0 + negate(rng, l * .9)); break;
  case L_SHEAR: arg = negate(rng, l * 0.3); break;
  case L_TRANSLATE_ABS: arg = negate(rng, l * t->translate_const); break;
  case L_TRANSLATE_REL: arg = negate(rng, l * t->translate_pct) * (op->op == FF__PIL_TRANSLATE_X ? w : h); break;
  }
  ff__step *s = &out[(*n)++];
  memset(s, 0, sizeof *s);
  s->kind = FF__STEP_PIL;
  s->pil.op = op->op;
  s->pil.arg = arg;
  memcpy(s->pil.fill, t->fill, 3);
  if (ff__pil_is_geometric(op->op))
    s->pil.resample = t->interpolation == FF__TIMM_RANDOM_INTERPOLATION
                          ? (ff__philox_randint(rng, 0, 1) ? FF__PIL_BICUBIC : FF__PIL_BILINEAR)
                          : t->interpolation;
}

static ff__step *add(ff__step *out, int *n, int kind) {
  ff__step *s = &out[(*n)++];
  memset(s, 0, sizeof *s);
  s->kind = kind;
  return s;
}

int ff__timm_plan(const ff__timm *t, ff__philox *rng, int h, int w, ff__step *out) {
  int n = 0;
  switch (t->kind) {
  case FF__TIMM_RAND_AUGMENT: {
    int chosen[16];
    if (t->set == FF__TIMM_SET_WEIGHTS) { /* weighted, without replacement (successive draws) */
      double wt[15];
      memcpy(wt, weighted_w, sizeof wt);
      for (int i = 0; i < t->num_layers; i++) {
        double sum = 0, acc = 0;
        for (int k = 0; k < 15; k++) sum += wt[k];
        double u = ff__uniform_open(rng) * sum;
        int k = 0;
        while (k < 14 && (wt[k] == 0 || u >= acc + wt[k])) acc += wt[k++];
        while (wt[k] == 0) k--; /* rounding at the top end */
        chosen[i] = weighted_ops[k];
        wt[k] = 0;
      }
    } else {
      for (int i = 0; i < t->num_layers; i++)
        chosen[i] = (t->increasing ? ra_inc_ops : ra_ops)[ff__philox_randint(rng, 0, 14)];
    }
    for (int i = 0; i < t->num_layers; i++) apply_op(t, rng, chosen[i], t->prob, t->magnitude, h, w, out, &n);
    break;
  }
  case FF__TIMM_AUTO_AUGMENT: {
    int k = (int)ff__philox_randint(rng, 0, 24);
    for (int i = 0; i < 2; i++) {
      sub_op s = aa_entry(t->policy, k, i);
      apply_op(t, rng, s.op, s.p, s.m, h, w, out, &n);
    }
    break;
  }
  case FF__TIMM_AUG_MIX: {
    /* mixing weights ~ Dirichlet(alpha), m ~ Beta(alpha, alpha), both float32 */
    float ws[FF__AUG_MIX_MAX_WIDTH];
    ff__dirichlet_f32(rng, t->alpha, t->width, ws);
    double x = ff__gamma_variate(rng, t->alpha), y = ff__gamma_variate(rng, t->alpha);
    float m = (float)(x / (x + y));
    add(out, &n, FF__STEP_MIX_BEGIN)->weight = 0.0f; /* timm's mixture starts from zeros */
    for (int i = 0; i < t->width; i++) {
      add(out, &n, FF__STEP_CHAIN_BEGIN);
      int depth = t->depth > 0 ? t->depth : (int)ff__philox_randint(rng, 1, 3);
      for (int d = 0; d < depth; d++) apply_op(t, rng, augmix_ops[ff__philox_randint(rng, 0, 12)], 1.0, t->magnitude, h, w, out, &n);
      add(out, &n, FF__STEP_CHAIN_END)->weight = ws[i];
    }
    add(out, &n, FF__STEP_PIL_MIX_END)->weight = m;
    break;
  }
  }
  return n;
}
