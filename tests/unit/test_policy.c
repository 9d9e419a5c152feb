/* test_policy.c — the augmentation policies in the planner (policy.c):
 * plans are a pure function of (seed, epoch, index), differ between samples,
 * respect the plan's step bound (checked by the parser), have AugMix's
 * structure, and rand_augment(num_ops=0) is the identity and draws nothing.
 * The values and distributions themselves are compared with torchvision in
 * tests/golden/test_policy_golden.py. */
#include <setjmp.h> /* cmocka.h needs these four first */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixtures.h"
#include "ops/ops.h"
#include "pipeline/pipeline.h"
#include "pipeline/policy.h"

static const char *const policy_pipelines[] = {
    "decode | rand_augment",
    "decode | rand_augment(num_ops=5, magnitude=20, num_magnitude_bins=50)",
    "decode | trivial_augment_wide",
    "decode | auto_augment(policy=imagenet)",
    "decode | auto_augment(policy=cifar10)",
    "decode | auto_augment(policy=svhn)",
    "decode | aug_mix",
    "decode | aug_mix(severity=10, mixture_width=8, chain_depth=8, alpha=0.5, all_ops=false)",
    ("decode | random_resized_crop(size=32) | random_horizontal_flip | rand_augment | aug_mix | "
     "trivial_augment_wide"),
};
#define NUM_PIPELINES (sizeof policy_pipelines / sizeof policy_pipelines[0])

static ff__pipeline *parse_ok(const char *text) {
  static ff__pipeline p; /* large: keep it off the stack */
  ff__error err = {0};
  ff_status st = ff__pipeline_parse_any_size(text, &p, &err);
  if (st != FF_OK) fail_msg("'%s' does not parse: %s", text, err.msg);
  return &p;
}

static const ff__image_info info_64x48 = {FF__FORMAT_PNG, 64, 48, 0};

static void plan(const ff__pipeline *p, uint64_t seed, uint64_t epoch, uint64_t index, ff__plan *out) {
  ff__plan_make(p, seed, epoch, index, &info_64x48, 0, out);
  assert_in_range(out->num_steps, 0, FF__PLAN_MAX_STEPS);
}

/* ff__plan_make clears the plan and every step it writes, so whole plans
 * compare with memcmp. */
static int same_plan(const ff__plan *a, const ff__plan *b) { return !memcmp(a, b, sizeof *a); }

/* ---- determinism ---- */

static void the_same_sample_gives_the_identical_plan(void **state) {
  (void)state;
  static ff__plan a, b, other;
  for (size_t k = 0; k < NUM_PIPELINES; k++) {
    const ff__pipeline *p = parse_ok(policy_pipelines[k]);
    for (uint64_t i = 0; i < 200; i++) {
      plan(p, 42, 3, i, &a);
      plan(p, 7, 0, i + 1000, &other); /* no state carried between plans */
      plan(p, 42, 3, i, &b);
      if (!same_plan(&a, &b)) fail_msg("'%s': index %llu planned twice differs", policy_pipelines[k],
                                       (unsigned long long)i);
    }
  }
}

/* AugMix draws continuous weights: any two samples differ. */
static void aug_mix_plans_of_different_samples_differ(void **state) {
  (void)state;
  enum { N = 300 };
  static ff__plan plans[N], p2;
  const ff__pipeline *p = parse_ok("decode | aug_mix");
  for (int i = 0; i < N; i++) plan(p, 1, 0, (uint64_t)i, &plans[i]);
  for (int i = 0; i < N; i++)
    for (int j = i + 1; j < N; j++)
      if (same_plan(&plans[i], &plans[j])) fail_msg("aug_mix: indices %d and %d have the same plan", i, j);
  /* another epoch or seed: another plan */
  for (int i = 0; i < N; i++) {
    plan(p, 1, 1, (uint64_t)i, &p2);
    assert_false(same_plan(&plans[i], &p2));
    plan(p, 2, 0, (uint64_t)i, &p2);
    assert_false(same_plan(&plans[i], &p2));
  }
}

/* The discrete policies have few outcomes, so samples may coincide, but not
 * often: count the distinct plans among consecutive indices. */
static int distinct_plans(const char *text, int n) {
  static ff__plan plans[1000];
  assert_true(n <= 1000);
  const ff__pipeline *p = parse_ok(text);
  int distinct = 0;
  for (int i = 0; i < n; i++) {
    plan(p, 9, 0, (uint64_t)i, &plans[i]);
    int seen = 0;
    for (int j = 0; j < i && !seen; j++) seen = same_plan(&plans[i], &plans[j]);
    distinct += !seen;
  }
  return distinct;
}

static void discrete_policies_vary_between_samples(void **state) {
  (void)state;
  /* rand_augment: 23^2 equally likely (op, sign) pairs per plan, ~500 plans */
  int ra = distinct_plans("decode | rand_augment", 1000);
  /* trivial_augment_wide: 623 (op, bin, sign) outcomes */
  int ta = distinct_plans("decode | trivial_augment_wide", 1000);
  /* auto_augment(imagenet): ~60 outcomes */
  int aa = distinct_plans("decode | auto_augment", 1000);
  print_message("distinct plans among 1000 samples: rand_augment %d, trivial_augment_wide %d, "
                "auto_augment %d\n", ra, ta, aa);
  assert_true(ra > 300);
  assert_true(ta > 300);
  assert_true(aa > 30);
}

/* ---- the step bound ---- */

static int aug_mix_steps(int width, int depth) { return 2 + width * (2 + depth); }

static void aug_mix_at_its_largest_fits_the_plan(void **state) {
  (void)state;
  static ff__plan pl;
  const ff__pipeline *p = parse_ok("decode | aug_mix(mixture_width=8, chain_depth=8)");
  assert_true(aug_mix_steps(8, 8) <= FF__PLAN_MAX_STEPS);
  for (uint64_t i = 0; i < 300; i++) {
    plan(p, 0, 0, i, &pl);
    assert_int_equal(pl.num_steps, aug_mix_steps(8, 8));
  }
  /* random depths: at most 3 ops per chain */
  p = parse_ok("decode | aug_mix(mixture_width=8)");
  int longest = 0;
  for (uint64_t i = 0; i < 2000; i++) {
    plan(p, 0, 0, i, &pl);
    assert_in_range(pl.num_steps, aug_mix_steps(8, 1), aug_mix_steps(8, 3));
    if (pl.num_steps > longest) longest = pl.num_steps;
  }
  assert_true(longest > aug_mix_steps(8, 2));
}

static void the_parser_refuses_pipelines_that_could_overflow_the_plan(void **state) {
  (void)state;
  /* 82 (aug_mix) + 14 (rand_augment) = 96 steps: accepted, and every plan fits */
  static char text[256];
  static ff__plan pl;
  const int budget = FF__PLAN_MAX_STEPS - aug_mix_steps(8, 8);
  assert_true(budget > 0 && budget <= 16);
  snprintf(text, sizeof text, "decode | aug_mix(mixture_width=8, chain_depth=8) | rand_augment(num_ops=%d)", budget);
  const ff__pipeline *p = parse_ok(text);
  for (uint64_t i = 0; i < 300; i++) {
    plan(p, 5, 0, i, &pl);
    assert_in_range(pl.num_steps, aug_mix_steps(8, 8), FF__PLAN_MAX_STEPS);
  }
  /* one more step than fits: refused */
  static ff__pipeline q;
  ff__error err = {0};
  snprintf(text, sizeof text, "decode | aug_mix(mixture_width=8, chain_depth=8) | rand_augment(num_ops=%d)",
           budget + 1);
  assert_int_equal(ff__pipeline_parse_any_size(text, &q, &err), FF_EPIPELINE);
  if (!strstr(err.msg, "too long")) fail_msg("message \"%s\" lacks \"too long\"", err.msg);
  memset(&err, 0, sizeof err);
  assert_int_equal(ff__pipeline_parse_any_size("decode | aug_mix(mixture_width=8, chain_depth=8) | "
                                               "aug_mix(mixture_width=4, chain_depth=2)", /* 82 + 18 */
                                               &q, &err),
                   FF_EPIPELINE);
}

static void every_policy_plan_stays_within_its_bound(void **state) {
  (void)state;
  static ff__plan pl;
  struct { const char *text; int most; } cases[] = {
      {"decode | rand_augment(num_ops=16)", 16},
      {"decode | trivial_augment_wide", 1},
      {"decode | auto_augment(policy=imagenet)", 2},
      {"decode | auto_augment(policy=cifar10)", 2},
      {"decode | auto_augment(policy=svhn)", 2},
      {"decode | aug_mix(mixture_width=3, chain_depth=-1)", aug_mix_steps(3, 3)},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    const ff__pipeline *p = parse_ok(cases[k].text);
    for (uint64_t i = 0; i < 2000; i++) {
      plan(p, 3, 0, i, &pl);
      if (pl.num_steps > cases[k].most)
        fail_msg("'%s' index %llu: %d steps > %d", cases[k].text, (unsigned long long)i, pl.num_steps,
                 cases[k].most);
    }
  }
}

/* ---- AugMix structure ---- */

static void aug_mix_plans_have_the_mixing_structure(void **state) {
  (void)state;
  static ff__plan pl;
  const ff__pipeline *p = parse_ok("decode | aug_mix(mixture_width=4, all_ops=false)");
  for (uint64_t i = 0; i < 500; i++) {
    plan(p, 0, 0, i, &pl);
    assert_int_equal(pl.steps[0].kind, FF__STEP_MIX_BEGIN);
    assert_int_equal(pl.steps[pl.num_steps - 1].kind, FF__STEP_MIX_END);
    double total = pl.steps[0].weight;
    assert_true(pl.steps[0].weight >= 0.0f && pl.steps[0].weight <= 1.0f);
    int chains = 0, s = 1;
    while (s < pl.num_steps - 1) {
      assert_int_equal(pl.steps[s++].kind, FF__STEP_CHAIN_BEGIN);
      int depth = 0;
      while (pl.steps[s].kind == FF__STEP_AUG) {
        ff__aug_op op = pl.steps[s].aug.op;
        /* all_ops=false: no brightness, color, contrast, sharpness; never identity or invert */
        assert_true(op >= FF__AUG_SHEAR_X && op <= FF__AUG_EQUALIZE);
        assert_false(op >= FF__AUG_BRIGHTNESS && op <= FF__AUG_SHARPNESS);
        assert_int_equal(pl.steps[s].aug.bilinear, 1); /* AugMix's default interpolation */
        depth++, s++;
      }
      assert_in_range(depth, 1, 3);
      assert_int_equal(pl.steps[s].kind, FF__STEP_CHAIN_END);
      assert_true(pl.steps[s].weight >= 0.0f);
      total += pl.steps[s++].weight;
      chains++;
    }
    assert_int_equal(chains, 4);
    assert_true(fabs(total - 1.0) < 1e-5);
  }
}

/* alpha = 0.001: the gamma draws underflow to 0 for most components; the
 * weights must still be finite and sum to 1 (the image is not all white). */
static void aug_mix_with_a_tiny_alpha_has_finite_weights(void **state) {
  (void)state;
  static ff__plan pl;
  const char *texts[] = {"decode | aug_mix(alpha=0.001, mixture_width=1)", "decode | aug_mix(alpha=0.001)",
                         "decode | aug_mix(alpha=0.002, mixture_width=8)"};
  for (int t = 0; t < 3; t++) {
    const ff__pipeline *p = parse_ok(texts[t]);
    for (uint64_t i = 0; i < 400; i++) {
      plan(p, 0, 0, i, &pl);
      double total = 0;
      for (int s = 0; s < pl.num_steps; s++)
        if (pl.steps[s].kind == FF__STEP_MIX_BEGIN || pl.steps[s].kind == FF__STEP_CHAIN_END) {
          assert_true(isfinite(pl.steps[s].weight) && pl.steps[s].weight >= 0.0f);
          total += pl.steps[s].weight;
        }
      assert_true(fabs(total - 1.0) < 1e-5);
    }
  }
}

/* ---- rand_augment(num_ops=0) ---- */

static void rand_augment_with_no_ops_is_the_identity(void **state) {
  (void)state;
  static ff__plan pl, with, without;
  const ff__pipeline *p = parse_ok("decode | rand_augment(num_ops=0)");
  for (uint64_t i = 0; i < 100; i++) {
    plan(p, 0, 0, i, &pl);
    assert_int_equal(pl.num_steps, 0);
  }
  /* ... and draws nothing: what follows sees the same stream */
  static ff__pipeline a, b;
  ff__error err = {0};
  assert_int_equal(ff__pipeline_parse_any_size("decode | rand_augment(num_ops=0) | aug_mix", &a, &err), FF_OK);
  assert_int_equal(ff__pipeline_parse_any_size("decode | aug_mix", &b, &err), FF_OK);
  for (uint64_t i = 0; i < 100; i++) {
    ff__plan_make(&a, 4, 1, i, &info_64x48, 0, &with);
    ff__plan_make(&b, 4, 1, i, &info_64x48, 0, &without);
    assert_true(same_plan(&with, &without));
  }
  /* running it leaves the pixels as they are */
  enum { W = 23, H = 17 };
  uint8_t px[W * H * 3], orig[W * H * 3];
  uint32_t rng = 12345;
  for (size_t k = 0; k < sizeof px; k++) px[k] = orig[k] = (uint8_t)ff_test_rand(&rng);
  const ff__image_info info = {FF__FORMAT_PNG, W, H, 0};
  ff__plan_make(p, 0, 0, 7, &info, 0, &pl);
  ff__image img = {px, W, H, 3, W * 3};
  ff__op_scratch scratch = {0};
  assert_int_equal(ff__ops_run(&pl, &scratch, &img, &err), FF_OK);
  ff__op_scratch_free(&scratch);
  assert_int_equal(img.width, W);
  assert_int_equal(img.height, H);
  for (int y = 0; y < H; y++) assert_memory_equal(img.data + y * img.stride, orig + y * W * 3, W * 3);
}

/* ---- magnitude tables (spec 3.2, values printed from torch 2.15's
 * torch.linspace(lo, hi, n)[k]) ---- */

static void linspace_reproduces_torch_float32_bins(void **state) {
  (void)state;
  /* RandAugment 31 bins: bin 9 of 0..0.9 and 0..0.3 */
  assert_true(ff__linspace_f32(0.0f, 0.9f, 31, 9) == 0.26999998f);
  assert_true(ff__linspace_f32(0.0f, 0.3f, 31, 7) == 0.07000001f);
  assert_true(ff__linspace_f32(0.0f, 0.3f, 31, 30) == 0.3f);
  /* TrivialAugmentWide 31 bins; bin 15 of 0..32 is just below 16 (torch
   * 1.13 gave 16.0) */
  assert_true(ff__linspace_f32(0.0f, 0.99f, 31, 19) == 0.62700003f);
  assert_true(ff__linspace_f32(0.0f, 0.99f, 31, 27) == 0.89100003f);
  assert_true(ff__linspace_f32(0.0f, 32.0f, 31, 3) == 3.2000003f);
  assert_true(ff__linspace_f32(0.0f, 32.0f, 31, 15) == 15.999999f);
  /* AutoAugment / AugMix 10 bins */
  assert_true(ff__linspace_f32(0.0f, 0.9f, 10, 8) == 0.79999995f);
  assert_true(ff__linspace_f32(255.0f, 0.0f, 10, 5) == 113.333336f);
  assert_true(ff__linspace_f32(0.0f, 30.0f, 10, 5) == 16.666668f);
  assert_true(ff__linspace_f32(0.0f, 0.3f, 10, 3) == 0.10000001f);
}

/* More bins: each element on its own, fused, from the start below the middle
 * and from the end above it; these are bins where torch 1.13's vectorised
 * kernel gave another float. */
static void linspace_reproduces_torch_beyond_31_bins(void **state) {
  (void)state;
  assert_true(ff__linspace_f32(0.0f, 0.3f, 50, 25) == 0.153061226f);
  assert_true(ff__linspace_f32(0.0f, 0.3f, 64, 11) == 0.052380953f);
  assert_true(ff__linspace_f32(0.0f, 0.99f, 100, 15) == 0.149999991f);
  assert_true(ff__linspace_f32(0.0f, 0.99f, 64, 22) == 0.345714301f);
  assert_true(ff__linspace_f32(0.0f, 30.0f, 100, 41) == 12.424243f);
  assert_true(ff__linspace_f32(0.0f, 30.0f, 48, 32) == 20.425531f);
  assert_true(ff__linspace_f32(255.0f, 0.0f, 87, 24) == 183.8372f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(the_same_sample_gives_the_identical_plan),
      cmocka_unit_test(aug_mix_plans_of_different_samples_differ),
      cmocka_unit_test(discrete_policies_vary_between_samples),
      cmocka_unit_test(aug_mix_at_its_largest_fits_the_plan),
      cmocka_unit_test(the_parser_refuses_pipelines_that_could_overflow_the_plan),
      cmocka_unit_test(every_policy_plan_stays_within_its_bound),
      cmocka_unit_test(aug_mix_plans_have_the_mixing_structure),
      cmocka_unit_test(aug_mix_with_a_tiny_alpha_has_finite_weights),
      cmocka_unit_test(rand_augment_with_no_ops_is_the_identity),
      cmocka_unit_test(linspace_reproduces_torch_float32_bins),
      cmocka_unit_test(linspace_reproduces_torch_beyond_31_bins),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
