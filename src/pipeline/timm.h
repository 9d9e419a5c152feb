/* timm.h — timm's automatic augmentation policies (timm.data.auto_augment:
 * RandAugment, AutoAugment, AugMix) from timm's config strings, planned as
 * Pillow-semantics steps (kernels/pil.h). */
#ifndef FF_PIPELINE_TIMM_H
#define FF_PIPELINE_TIMM_H

#include <stddef.h>
#include <stdint.h>

typedef enum ff__timm_kind { FF__TIMM_RAND_AUGMENT, FF__TIMM_AUTO_AUGMENT, FF__TIMM_AUG_MIX } ff__timm_kind;

/* RandAugment's op sets (the config's `t` section): the default list (or its
 * "increasing" variant with inc1), and the weighted list `tweights`. */
typedef enum ff__timm_set { FF__TIMM_SET_DEFAULT, FF__TIMM_SET_WEIGHTS } ff__timm_set;

/* AutoAugment's policies. */
typedef enum ff__timm_policy { FF__TIMM_V0, FF__TIMM_V0R, FF__TIMM_ORIGINAL, FF__TIMM_ORIGINALR } ff__timm_policy;

#define FF__TIMM_RANDOM_INTERPOLATION (-1) /* bilinear or bicubic, drawn per op (timm's default) */
#define FF__TIMM_CONFIG_MAX 96

/* One parsed timm policy: the config string's options and timm's hparams. */
typedef struct ff__timm {
  int kind;            /* ff__timm_kind */
  char config[FF__TIMM_CONFIG_MAX];
  double magnitude;    /* m: 0..mmax (RandAugment default 10, AugMix 3) */
  int num_layers;      /* n (RandAugment, default 2) */
  double prob;         /* p: each RandAugment op's probability (default 0.5) */
  double magnitude_std; /* mstd: Gaussian noise on the magnitude; INFINITY: uniform in [0, m] */
  double magnitude_max; /* mmax: the clip bound of the magnitude (default 10) */
  int increasing;      /* inc: the "increasing" op variants */
  int set;             /* t: ff__timm_set */
  int policy;          /* AutoAugment: ff__timm_policy */
  int width, depth;    /* AugMix: w (default 3), d (default -1: 1 to 3 per chain) */
  double alpha;        /* AugMix: a, the Dirichlet and Beta concentration (default 1) */
  /* hparams */
  int interpolation;   /* ff__pil_resample, or FF__TIMM_RANDOM_INTERPOLATION */
  uint8_t fill[3];     /* img_mean: the geometric ops' fill (default 128, 128, 128) */
  double translate_pct;   /* TranslateXRel/YRel: the largest shift as a share of the side (0.45) */
  double translate_const; /* TranslateX/Y (AutoAugment v0 policies): the largest shift in pixels (250) */
} ff__timm;

/* Parses config (e.g. "rand-m9-mstd0.5-inc1", "augmix-m5-w4-d2",
 * "original-mstd0.5") for a policy of `kind` into *out, over the defaults
 * already set there (ff__timm_defaults). On error returns FF_EPIPELINE with
 * why (cap bytes) naming the offending section and *column its 0-based
 * offset in config. */
int ff__timm_parse(const char *config, int kind, ff__timm *out, char *why, size_t cap, size_t *column);

/* timm's defaults for a policy of `kind` (before its config string). */
void ff__timm_defaults(int kind, ff__timm *out);

/* The most plan steps the policy can produce. */
int ff__timm_max_steps(const ff__timm *t);

struct ff__philox;
struct ff__step;
/* Draws the policy's choices for an h x w image from rng (op choice, each
 * op's application, magnitude noise, sign, interpolation; AugMix's weights
 * and chains) and writes its steps to out; returns how many. */
int ff__timm_plan(const ff__timm *t, struct ff__philox *rng, int h, int w, struct ff__step *out);

#endif
