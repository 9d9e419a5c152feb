/* policy.h — the automatic augmentation policies' random draws, lowered to
 * plan steps (used by the planner). */
#ifndef FF_PIPELINE_POLICY_H
#define FF_PIPELINE_POLICY_H

#include "core/philox.h"
#include "pipeline/pipeline.h"

/* Element k of torch.linspace(lo, hi, n) in float32, computed as torch 2.x's
 * CPU kernel does (spec 3.3; torch 1.13 differs in the last bit of some
 * bins). */
float ff__linspace_f32(float lo, float hi, int n, int k);

/* Draws the choices of policy op `op` (rand_augment, trivial_augment_wide,
 * auto_augment, aug_mix) for an h x w image from rng and writes its steps to
 * out (room for ff__op's bound, see parse.c); returns how many. */
int ff__policy_plan(const ff__op *op, ff__philox *rng, int h, int w, ff__step *out);

/* A uniform double in (0, 1) from 53 random bits. */
double ff__uniform_open(ff__philox *rng);

/* A Gamma(alpha, 1) variate (Marsaglia and Tsang, 2000). */
double ff__gamma_variate(ff__philox *rng, double alpha);

/* Dirichlet(alpha, ..., alpha) of k <= 16 components, as float32. */
void ff__dirichlet_f32(ff__philox *rng, double alpha, int k, float *out);
/* The same for policy_file (op) with its table t: a sub-policy chosen
 * uniformly, then for each of its ops a probability and a sign, all drawn
 * first, as torchvision's AutoAugment draws them; or, layer by layer, one
 * entry by its probability and its sign (DeepAutoAugment). Magnitude bins
 * are torchvision's AutoAugment space of t->num_magnitude_bins bins. */
int ff__policy_file_plan(const ff__policy_table *t, const ff__op *op, ff__philox *rng, int h, int w, ff__step *out);

#endif
