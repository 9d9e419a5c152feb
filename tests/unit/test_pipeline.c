/* test_pipeline.c — the pipeline parser (defaults, output size and layout,
 * every error with its exact column) and the planner (determinism, the
 * RandomResizedCrop box, folding a leading crop into the decoder and the DCT
 * scaling floor). */
#include <setjmp.h> /* cmocka.h needs these four first */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "pipeline/pipeline.h"

static ff__pipeline pipe_ok(const char *text) {
  static ff__pipeline p; /* large: keep it off the stack */
  ff__error err = {0};
  ff_status st = ff__pipeline_parse(text, &p, &err);
  if (st != FF_OK) fail_msg("'%s' does not parse: %s", text, err.msg);
  return p;
}

/* Parses text, which must fail with FF_EPIPELINE at `column`; returns the message. */
static const char *parse_fails_at(const char *text, int column) {
  static ff__error err;
  static ff__pipeline p;
  memset(&err, 0, sizeof err);
  ff_status st = ff__pipeline_parse(text, &p, &err);
  assert_int_equal(st, FF_EPIPELINE);
  char want[64];
  snprintf(want, sizeof want, "pipeline column %d:", column);
  if (!strstr(err.msg, want)) fail_msg("'%s': message \"%s\" lacks \"%s\"", text, err.msg, want);
  return err.msg;
}

static void assert_contains(const char *text, const char *part) {
  if (!strstr(text, part)) fail_msg("\"%s\" does not contain \"%s\"", text, part);
}

/* ---- parsing ---- */

/* An integer argument out of its bounds says them as integers, and a whole
 * number past them (1e9) is out of bounds, not "not an integer". */
static void integer_bounds_are_printed_as_integers(void **state) {
  (void)state;
  static const char prefix[] = "decode | center_crop(size=8) | normalize(mean=imagenet, std=imagenet) "
                               "| mixup_cutmix(num_classes=";
  static const char *values[] = {"16777217", "1000000000", "1e12", "0"};
  char text[160];
  for (size_t i = 0; i < sizeof values / sizeof *values; i++) {
    snprintf(text, sizeof text, "%s%s)", prefix, values[i]);
    assert_contains(parse_fails_at(text, (int)sizeof prefix), "expected an integer in [1, 16777216]");
  }
  snprintf(text, sizeof text, "%s2.5)", prefix);
  assert_contains(parse_fails_at(text, (int)sizeof prefix), "expected an integer");
}

/* Ratios and scales whose crops round to nothing (a zero width used to
 * mean "the whole image" to the decoder) are refused, naming the column. */
static void degenerate_random_resized_crop_ranges_are_refused(void **state) {
  (void)state;
  /* "decode | random_resized_crop(size=8, " is 37 characters: the value starts at column 44 or 50 */
  assert_contains(parse_fails_at("decode | random_resized_crop(size=8, ratio=(0.0001, 0.0001))", 44), "degenerate");
  assert_contains(parse_fails_at("decode | random_resized_crop(size=8, ratio=(1, 1000))", 44), "ratio");
  assert_contains(parse_fails_at("decode | random_resized_crop(size=8, scale=(0.5, 2))", 44), "scale");
  parse_fails_at("decode | random_resized_crop(size=8, scale=(0, 1))", 44);
  pipe_ok("decode | random_resized_crop(size=8, scale=(0.01, 1), ratio=(0.01, 100))");
  pipe_ok("decode | random_resized_crop(size=8, scale=(1, 1), ratio=(1, 1))");
  /* The fallback box of an allowed extreme ratio on a 1-pixel-high image is
   * at least a pixel wide (0 would be read as "no region": the whole image). */
  ff__pipeline p = pipe_ok("decode | random_resized_crop(size=8, ratio=(0.01, 0.01))");
  ff__image_info info = {FF__FORMAT_PNG, 500, 1, 0};
  for (uint64_t i = 0; i < 20; i++) {
    ff__plan plan;
    ff__plan_make(&p, 1, 0, i, &info, 0, &plan);
    assert_true(plan.decode.crop_width >= 1 && plan.decode.crop_height == 1);
  }
}

static void reference_pipeline_parses_with_torchvision_defaults(void **state) {
  (void)state;
  ff__pipeline p = pipe_ok("decode | random_resized_crop(size=224) | random_horizontal_flip | "
                           "normalize(mean=imagenet, std=imagenet)");
  assert_int_equal(p.num_ops, 4);
  assert_int_equal(p.ops[0].kind, FF__OP_DECODE);
  assert_int_equal(p.ops[0].dct_scale, 0); /* exact by default: DCT scaling is an opt-in */
  const ff__op *rrc = &p.ops[1];
  assert_int_equal(rrc->kind, FF__OP_RANDOM_RESIZED_CROP);
  assert_int_equal(rrc->column, 10);
  assert_int_equal(rrc->size[0], 224);
  assert_int_equal(rrc->size[1], 224);
  assert_true(rrc->scale[0] == 0.08 && rrc->scale[1] == 1.0);
  assert_true(rrc->ratio[0] == 3.0 / 4.0 && rrc->ratio[1] == 4.0 / 3.0);
  assert_int_equal(rrc->antialias, 1);
  assert_int_equal(p.ops[2].kind, FF__OP_RANDOM_HORIZONTAL_FLIP);
  assert_true(p.ops[2].p == 0.5);
  const ff__op *norm = &p.ops[3];
  assert_int_equal(norm->kind, FF__OP_NORMALIZE);
  const float mean[3] = {0.485f, 0.456f, 0.406f}, std[3] = {0.229f, 0.224f, 0.225f};
  assert_memory_equal(norm->mean, mean, sizeof mean);
  assert_memory_equal(norm->std, std, sizeof std);
  assert_int_equal(p.out_height, 224);
  assert_int_equal(p.out_width, 224);
  assert_int_equal(p.output, FF__OUTPUT_NCHW_F32);
}

static void explicit_arguments_override_the_defaults(void **state) {
  (void)state;
  ff__pipeline p = pipe_ok("decode(dct_scale=true)|random_resized_crop(size=(32, 48), scale=(0.5, 0.75), "
                           "ratio=[1, 2], antialias=false)|random_vertical_flip(p=0.25)");
  assert_int_equal(p.ops[0].dct_scale, 1);
  const ff__op *rrc = &p.ops[1];
  assert_int_equal(rrc->size[0], 32);
  assert_int_equal(rrc->size[1], 48);
  assert_true(rrc->scale[0] == 0.5 && rrc->scale[1] == 0.75);
  assert_true(rrc->ratio[0] == 1.0 && rrc->ratio[1] == 2.0);
  assert_int_equal(rrc->antialias, 0);
  assert_true(p.ops[2].p == 0.25);
  assert_int_equal(p.out_height, 32);
  assert_int_equal(p.out_width, 48);
  assert_int_equal(p.output, FF__OUTPUT_NHWC_U8);
}

static void crop_and_explicit_normalize_values_parse(void **state) {
  (void)state;
  ff__pipeline p = pipe_ok("decode | crop(top=1, left=2, height=30, width=40) | "
                           "normalize(mean=(0.5, 0.25, 0), std=0.5)");
  const ff__op *crop = &p.ops[1];
  assert_int_equal(crop->top, 1);
  assert_int_equal(crop->left, 2);
  assert_int_equal(crop->height, 30);
  assert_int_equal(crop->width, 40);
  const float mean[3] = {0.5f, 0.25f, 0.0f}, std[3] = {0.5f, 0.5f, 0.5f};
  assert_memory_equal(p.ops[2].mean, mean, sizeof mean);
  assert_memory_equal(p.ops[2].std, std, sizeof std);
  assert_int_equal(p.out_height, 30);
  assert_int_equal(p.out_width, 40);
  /* (255 / 255 - 0.5) / 0.5 = 1, (0 / 255 - 0.25) / 0.5 = -0.5 */
  assert_true(p.lut[0][255] == 1.0f);
  assert_true(p.lut[1][0] == -0.5f);
}

static void to_dtype_gives_float32_scaled_to_one(void **state) {
  (void)state;
  ff__pipeline p = pipe_ok("decode | center_crop(size=8) | to_dtype(dtype=float32, scale=true)");
  assert_int_equal(p.output, FF__OUTPUT_NCHW_F32);
  assert_true(p.lut[0][0] == 0.0f);
  assert_true(p.lut[1][255] == 1.0f);
  assert_true(p.lut[2][51] == 51.0f / 255.0f); /* a float32 division, as ConvertImageDtype */
}

static void resize_of_shorter_side_after_fixed_size_is_fixed(void **state) {
  (void)state;
  ff__pipeline p = pipe_ok("decode | center_crop(size=(20, 40)) | resize(size=10)");
  assert_int_equal(p.ops[2].size[0], 10);
  assert_int_equal(p.ops[2].size[1], 0); /* shorter side */
  assert_int_equal(p.out_height, 10);
  assert_int_equal(p.out_width, 20);
  p = pipe_ok("decode | resize(size=(64, 48))");
  assert_int_equal(p.out_height, 64);
  assert_int_equal(p.out_width, 48);
}

/* An unknown op: its column, the nearest op by edit distance (or the one op
 * holding the name whole), and where the list is -- not the list itself. */
static void unknown_op_names_its_column_and_the_nearest_op(void **state) {
  (void)state;
  const char *msg = parse_fails_at("decode | normalise(mean=imagenet, std=imagenet)", 10);
  assert_string_equal(msg, "pipeline column 10: unknown op 'normalise' (did you mean 'normalize'?); "
                           "see 'fusionflow ops' for the list");
  assert_contains(parse_fails_at("decode | Random_Resized_Crp(size=8)", 10), "did you mean 'random_resized_crop'?");
  assert_contains(parse_fails_at("decode | resized_crop(size=8)", 10), "did you mean 'random_resized_crop'?");
  /* held whole by gaussian_blur and pil_gaussian_blur: the public one */
  assert_contains(parse_fails_at("decode | blur", 10), "did you mean 'gaussian_blur'?");
  assert_contains(parse_fails_at("decode | pil_rotat(angle=3)", 10), "did you mean 'pil_rotate'?");
  msg = parse_fails_at("decode | xyzzy", 10);
  assert_string_equal(msg, "pipeline column 10: unknown op 'xyzzy'; see 'fusionflow ops' for the list");
  assert_true(strlen(parse_fails_at("decode | flip", 10)) < 120); /* two flips hold it: no guess, no list */
  /* a views pipeline given where one image is made: said so, not "unknown op" */
  assert_contains(parse_fails_at("decode || 2 x center_crop(size=8)", 9), "views are made by a loader only");
}

static void unknown_argument_names_its_column_the_nearest_and_the_arguments(void **state) {
  (void)state;
  assert_string_equal(parse_fails_at("decode | resize(size=8, mode=1)", 25),
                      "pipeline column 25: resize has no argument 'mode' (its arguments: size, antialias, "
                      "interpolation)");
  assert_string_equal(parse_fails_at("decode | resize(sise=8)", 17),
                      "pipeline column 17: resize has no argument 'sise' (did you mean 'size'?; its arguments: "
                      "size, antialias, interpolation)");
  assert_contains(parse_fails_at("decode | invert(p=1) | center_crop(size=8)", 17), "invert has no argument 'p' "
                                                                                     "(it takes none)");
}

static void rand_augment_magnitude_error_gives_the_allowed_range(void **state) {
  (void)state;
  assert_contains(parse_fails_at("decode | rand_augment(magnitude=50)", 10), "must be in [0, 30]");
  assert_contains(parse_fails_at("decode | rand_augment(magnitude=5, num_magnitude_bins=5)", 10), "[0, 4]");
  /* a value past the bound names the bound */
  assert_contains(parse_fails_at("decode | gaussian_blur(kernel_size=5, sigma=1e9)", 45), "max <= 1e+06");
}

static void missing_equals_names_its_column(void **state) {
  (void)state;
  assert_contains(parse_fails_at("decode | center_crop(size 8)", 27), "'='");
}

static void bad_number_names_its_column(void **state) {
  (void)state;
  parse_fails_at("decode | center_crop(size=@)", 27);
  parse_fails_at("decode | center_crop(size=0)", 27);
  parse_fails_at("decode | center_crop(size=(8, x))", 31);
  parse_fails_at("decode | random_horizontal_flip(p=1.5)", 35);
}

static void missing_closing_paren_names_the_end(void **state) {
  (void)state;
  assert_contains(parse_fails_at("decode | center_crop(size=8", 28), "')'");
}

static void second_decode_names_its_column(void **state) {
  (void)state;
  parse_fails_at("decode | decode | center_crop(size=8)", 10);
}

static void normalize_before_the_end_names_its_column(void **state) {
  (void)state;
  parse_fails_at("decode | normalize(mean=imagenet, std=imagenet) | center_crop(size=8)", 10);
  parse_fails_at("decode | center_crop(size=8) | to_dtype | normalize(mean=0, std=1)", 32);
}

static void missing_decode_names_the_first_op(void **state) {
  (void)state;
  assert_contains(parse_fails_at("center_crop(size=8)", 1), "decode");
  parse_fails_at("  resize(size=(8, 8)) | decode", 3);
}

static void image_dependent_output_size_is_refused(void **state) {
  (void)state;
  parse_fails_at("decode | resize(size=8)", 24); /* the end of the text */
  parse_fails_at("decode | random_horizontal_flip", 32);
  parse_fails_at("decode", 7);
}

static void empty_text_is_refused(void **state) {
  (void)state;
  parse_fails_at("", 1);
  ff__pipeline p;
  ff__error err = {0};
  assert_int_equal(ff__pipeline_parse(NULL, &p, &err), FF_EPIPELINE);
}

static void trailing_bar_names_the_end(void **state) {
  (void)state;
  parse_fails_at("decode | center_crop(size=8) |", 31);
}

static void failed_parse_leaves_the_output_untouched(void **state) {
  (void)state;
  static ff__pipeline p;
  memset(&p, 0xAB, sizeof p);
  ff__error err = {0};
  assert_int_equal(ff__pipeline_parse("decode | blur", &p, &err), FF_EPIPELINE);
  assert_int_equal(p.num_ops, (int)0xABABABAB);
}

/* ---- planning ---- */

static ff__image_info info_of(int w, int h) {
  ff__image_info i = {FF__FORMAT_JPEG, w, h, 0};
  return i;
}

static void same_key_gives_the_same_plan(void **state) {
  (void)state;
  ff__pipeline p =
      pipe_ok("decode | random_resized_crop(size=32) | random_horizontal_flip | random_vertical_flip");
  ff__image_info info = info_of(500, 375);
  ff__plan a, b;
  ff__plan_make(&p, 7, 3, 42, &info, 1000000, &a);
  ff__plan_make(&p, 7, 3, 42, &info, 1000000, &b);
  assert_memory_equal(&a, &b, sizeof a);
  assert_int_equal(a.decode.max_pixels, 1000000);
  int differ = 0;
  for (uint64_t k = 0; k < 3; k++) {
    ff__plan_make(&p, 7 + (k == 0), 3 + (k == 1), 42 + (k == 2), &info, 1000000, &b);
    differ += memcmp(&a, &b, sizeof a) != 0;
  }
  assert_int_equal(differ, 3); /* seed, epoch and index each change it */
}

/* Checks the RandomResizedCrop box of many samples; returns how many used the fallback. */
static int check_rrc_boxes(const char *text, int w, int h, double s0, double s1, double r0, double r1) {
  ff__pipeline p = pipe_ok(text);
  ff__image_info info = info_of(w, h);
  int fallbacks = 0;
  for (uint64_t index = 0; index < 1000; index++) {
    ff__plan plan;
    ff__plan_make(&p, 1, 0, index, &info, 0, &plan);
    const ff__decode_req *d = &plan.decode;
    /* The box is in bounds, so it is the decoder's region. */
    assert_true(d->crop_width > 0 && d->crop_height > 0);
    assert_true(d->crop_x >= 0 && d->crop_y >= 0);
    assert_true(d->crop_x + d->crop_width <= w && d->crop_y + d->crop_height <= h);
    assert_int_equal(plan.steps[0].kind, FF__STEP_RESIZE);
    double bw = d->crop_width, bh = d->crop_height, area = (double)w * h;
    int fallback = d->crop_x == (w - d->crop_width) / 2 && d->crop_y == (h - d->crop_height) / 2 &&
                   (d->crop_width == w || d->crop_height == h);
    /* w and h are each rounded, so allow half a pixel on each side. */
    int in_scale = bw * bh >= s0 * area - (bw + bh) / 2 - 0.25 && bw * bh <= s1 * area + (bw + bh) / 2 + 0.25;
    int in_ratio = (bw + 0.5) / (bh - 0.5) >= r0 && (bw - 0.5) / (bh + 0.5) <= r1;
    if (!(in_scale && in_ratio)) {
      if (!fallback)
        fail_msg("sample %d: box %gx%g of %dx%d is neither in bounds nor the fallback", (int)index, bw, bh, w,
                 h);
      fallbacks++;
    }
  }
  return fallbacks;
}

static void random_resized_crop_box_is_inside_and_within_scale(void **state) {
  (void)state;
  int f = check_rrc_boxes("decode | random_resized_crop(size=32)", 500, 375, 0.08, 1.0, 0.75, 4.0 / 3.0);
  assert_true(f < 20);
  f = check_rrc_boxes("decode | random_resized_crop(size=32, scale=(0.5, 0.6))", 300, 200, 0.5, 0.6, 0.75,
                      4.0 / 3.0);
  assert_true(f < 20);
}

static void random_resized_crop_on_a_thin_image_falls_back_to_the_centre(void **state) {
  (void)state;
  /* 1000 x 20: no box of ratio >= 3/4 and area >= 0.08 fits, so every sample
   * takes the fallback: h = 20, w = round(20 * 4/3) = 27, centred. */
  ff__pipeline p = pipe_ok("decode | random_resized_crop(size=16)");
  ff__image_info info = info_of(1000, 20);
  for (uint64_t index = 0; index < 50; index++) {
    ff__plan plan;
    ff__plan_make(&p, 1, 0, index, &info, 0, &plan);
    assert_int_equal(plan.decode.crop_width, 27);
    assert_int_equal(plan.decode.crop_height, 20);
    assert_int_equal(plan.decode.crop_x, (1000 - 27) / 2);
    assert_int_equal(plan.decode.crop_y, 0);
  }
}

static void leading_in_bounds_crop_is_folded_into_decode(void **state) {
  (void)state;
  ff__pipeline p =
      pipe_ok("decode(dct_scale=true) | crop(top=5, left=7, height=20, width=30) | resize(size=(10, 15))");
  ff__image_info info = info_of(100, 80);
  ff__plan plan;
  ff__plan_make(&p, 0, 0, 0, &info, 0, &plan);
  assert_int_equal(plan.decode.crop_x, 7);
  assert_int_equal(plan.decode.crop_y, 5);
  assert_int_equal(plan.decode.crop_width, 30);
  assert_int_equal(plan.decode.crop_height, 20);
  assert_int_equal(plan.num_steps, 1);
  assert_int_equal(plan.steps[0].kind, FF__STEP_RESIZE);
  assert_int_equal(plan.steps[0].w, 15);
  assert_int_equal(plan.steps[0].h, 10);
  /* a downscale follows and DCT scaling is asked for: the decoder may reduce while keeping 15 x 10 */
  assert_int_equal(plan.decode.min_width, 15);
  assert_int_equal(plan.decode.min_height, 10);
}

static void out_of_bounds_crop_stays_a_step(void **state) {
  (void)state;
  ff__pipeline p = pipe_ok("decode | center_crop(size=50)");
  ff__image_info info = info_of(40, 40);
  ff__plan plan;
  ff__plan_make(&p, 0, 0, 0, &info, 0, &plan);
  assert_int_equal(plan.decode.crop_width, 0); /* whole image */
  assert_int_equal(plan.num_steps, 1);
  assert_int_equal(plan.steps[0].kind, FF__STEP_CROP);
  assert_int_equal(plan.steps[0].x, -5); /* torchvision pads (50 - 40) // 2 on the left */
  assert_int_equal(plan.steps[0].y, -5);
  assert_int_equal(plan.steps[0].w, 50);
  assert_int_equal(plan.steps[0].h, 50);
}

static void center_crop_offset_rounds_half_to_even(void **state) {
  (void)state;
  /* top = int(round((H - h) / 2.0)): (11 - 8) / 2 = 1.5 → 2, (13 - 8) / 2 = 2.5 → 2 */
  ff__pipeline p = pipe_ok("decode | center_crop(size=8)");
  ff__image_info info = info_of(13, 11);
  ff__plan plan;
  ff__plan_make(&p, 0, 0, 0, &info, 0, &plan);
  assert_int_equal(plan.decode.crop_y, 2);
  assert_int_equal(plan.decode.crop_x, 2);
  assert_int_equal(plan.num_steps, 0);
}

static void no_dct_floor_with_dct_scale_false(void **state) {
  (void)state;
  const char *texts[] = {"decode(dct_scale=false) | crop(top=5, left=7, height=20, width=30) | resize(size=(10, 15))",
                         "decode | crop(top=5, left=7, height=20, width=30) | resize(size=(10, 15))"}; /* the default */
  for (int k = 0; k < 2; k++) {
    ff__pipeline p = pipe_ok(texts[k]);
    ff__image_info info = info_of(100, 80);
    ff__plan plan;
    ff__plan_make(&p, 0, 0, 0, &info, 0, &plan);
    assert_int_equal(plan.decode.crop_width, 30); /* still folded */
    assert_int_equal(plan.decode.min_width, 0);
    assert_int_equal(plan.decode.min_height, 0);
  }
}

static void no_dct_floor_when_upscaling(void **state) {
  (void)state;
  ff__pipeline p = pipe_ok("decode(dct_scale=true) | center_crop(size=16) | resize(size=(32, 32))");
  ff__image_info info = info_of(20, 20);
  ff__plan plan;
  ff__plan_make(&p, 0, 0, 0, &info, 0, &plan);
  assert_int_equal(plan.decode.crop_x, 2);
  assert_int_equal(plan.decode.crop_width, 16);
  assert_int_equal(plan.decode.min_width, 0);
  assert_int_equal(plan.decode.min_height, 0);
}

static void random_resized_crop_sets_the_dct_floor_to_its_size(void **state) {
  (void)state;
  ff__pipeline p = pipe_ok("decode(dct_scale=true) | random_resized_crop(size=(16, 24))");
  ff__image_info info = info_of(640, 480);
  ff__plan plan;
  ff__plan_make(&p, 3, 1, 9, &info, 0, &plan);
  assert_int_equal(plan.decode.min_width, 24);
  assert_int_equal(plan.decode.min_height, 16);
}

static void flip_probabilities_zero_and_one_are_exact(void **state) {
  (void)state;
  ff__pipeline p =
      pipe_ok("decode | center_crop(size=8) | random_horizontal_flip(p=1) | random_vertical_flip(p=0)");
  ff__image_info info = info_of(8, 8);
  for (uint64_t index = 0; index < 100; index++) {
    ff__plan plan;
    ff__plan_make(&p, 5, 0, index, &info, 0, &plan);
    assert_int_equal(plan.num_steps, 1);
    assert_int_equal(plan.steps[0].kind, FF__STEP_HFLIP);
    /* the vertical flip not drawn is no step, but kept for the plan's JSON, after the horizontal one */
    assert_int_equal(plan.num_unflipped, 1);
    assert_int_equal(plan.unflipped[0].vertical, 1);
    assert_int_equal(plan.unflipped[0].at, 1);
  }
}

static void a_flip_not_drawn_keeps_its_place_when_a_leading_crop_folds(void **state) {
  (void)state;
  /* center_crop is step 0 until it folds into the decode: the flips move up with the steps after it */
  ff__pipeline p = pipe_ok("decode | random_vertical_flip(p=0) | center_crop(size=8) | random_horizontal_flip(p=0)"
                           " | resize(size=(4, 4))");
  ff__image_info info = info_of(20, 20);
  ff__plan plan;
  ff__plan_make(&p, 1, 0, 0, &info, 0, &plan);
  assert_int_equal(plan.decode.crop_width, 8);
  assert_int_equal(plan.num_steps, 1);
  assert_int_equal(plan.steps[0].kind, FF__STEP_RESIZE);
  assert_int_equal(plan.num_unflipped, 2);
  assert_int_equal(plan.unflipped[0].vertical, 1);
  assert_int_equal(plan.unflipped[0].at, 0);
  assert_int_equal(plan.unflipped[1].vertical, 0);
  assert_int_equal(plan.unflipped[1].at, 0); /* before the resize */
}

static void a_flip_consumes_its_draw_whatever_its_outcome(void **state) {
  (void)state;
  /* The crop after the flip is drawn from the same stream position. */
  ff__pipeline never =
      pipe_ok("decode | center_crop(size=100) | random_vertical_flip(p=0) | random_resized_crop(size=8)");
  ff__pipeline always =
      pipe_ok("decode | center_crop(size=100) | random_vertical_flip(p=1) | random_resized_crop(size=8)");
  ff__image_info info = info_of(100, 100);
  for (uint64_t index = 0; index < 20; index++) {
    ff__plan a, b;
    ff__plan_make(&never, 2, 0, index, &info, 0, &a);
    ff__plan_make(&always, 2, 0, index, &info, 0, &b);
    /* never: [crop, resize]; always: [vflip, crop, resize] */
    assert_int_equal(a.steps[0].kind, FF__STEP_CROP);
    assert_int_equal(b.steps[0].kind, FF__STEP_VFLIP);
    assert_int_equal(b.steps[1].kind, FF__STEP_CROP);
    assert_memory_equal(&a.steps[0], &b.steps[1], sizeof a.steps[0]);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(degenerate_random_resized_crop_ranges_are_refused),
      cmocka_unit_test(integer_bounds_are_printed_as_integers),
      cmocka_unit_test(reference_pipeline_parses_with_torchvision_defaults),
      cmocka_unit_test(explicit_arguments_override_the_defaults),
      cmocka_unit_test(crop_and_explicit_normalize_values_parse),
      cmocka_unit_test(to_dtype_gives_float32_scaled_to_one),
      cmocka_unit_test(resize_of_shorter_side_after_fixed_size_is_fixed),
      cmocka_unit_test(unknown_op_names_its_column_and_the_nearest_op),
      cmocka_unit_test(unknown_argument_names_its_column_the_nearest_and_the_arguments),
      cmocka_unit_test(rand_augment_magnitude_error_gives_the_allowed_range),
      cmocka_unit_test(missing_equals_names_its_column),
      cmocka_unit_test(bad_number_names_its_column),
      cmocka_unit_test(missing_closing_paren_names_the_end),
      cmocka_unit_test(second_decode_names_its_column),
      cmocka_unit_test(normalize_before_the_end_names_its_column),
      cmocka_unit_test(missing_decode_names_the_first_op),
      cmocka_unit_test(image_dependent_output_size_is_refused),
      cmocka_unit_test(empty_text_is_refused),
      cmocka_unit_test(trailing_bar_names_the_end),
      cmocka_unit_test(failed_parse_leaves_the_output_untouched),
      cmocka_unit_test(same_key_gives_the_same_plan),
      cmocka_unit_test(random_resized_crop_box_is_inside_and_within_scale),
      cmocka_unit_test(random_resized_crop_on_a_thin_image_falls_back_to_the_centre),
      cmocka_unit_test(leading_in_bounds_crop_is_folded_into_decode),
      cmocka_unit_test(out_of_bounds_crop_stays_a_step),
      cmocka_unit_test(center_crop_offset_rounds_half_to_even),
      cmocka_unit_test(no_dct_floor_with_dct_scale_false),
      cmocka_unit_test(no_dct_floor_when_upscaling),
      cmocka_unit_test(random_resized_crop_sets_the_dct_floor_to_its_size),
      cmocka_unit_test(flip_probabilities_zero_and_one_are_exact),
      cmocka_unit_test(a_flip_not_drawn_keeps_its_place_when_a_leading_crop_folds),
      cmocka_unit_test(a_flip_consumes_its_draw_whatever_its_outcome),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
