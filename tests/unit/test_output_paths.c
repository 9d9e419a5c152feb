/* test_output_paths.c — the output stage (ops/output.c) on whatever path
 * this process takes (AVX-512 VBMI, AVX2 or scalar: CMake runs this test
 * once per $FF_CPU_ISA) gives the bytes of kernels/out.h's element store for
 * every output format (float32, bfloat16, float16 and uint8, NCHW and NHWC),
 * from interleaved images with padded rows and from planes, into slots
 * whose addresses start anywhere; and the standard pipeline's tail run by
 * the output stage (a resize and its flip straight into the slot, as a
 * worker runs it: exec/cpu.c) gives the bytes of the plan's steps followed
 * by the output, whatever the draws. */
#include <setjmp.h> /* cmocka.h needs these four first */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec/codec.h"
#include "fixtures.h"
#include "fusionflow/fusionflow.h"
#include "kernels/out.h"
#include "ops/ops.h"
#include "pipeline/pipeline.h"

static const int SIZES[][2] = {{1, 1}, {5, 3}, {17, 9}, {63, 2}, {64, 64}, {65, 7}, {224, 224}, {225, 131}, {300, 41}};
#define N_SIZES (sizeof SIZES / sizeof *SIZES)

/* dtype, memory format */
static const int FORMATS[][2] = {{FF_OUTPUT_DTYPE_AUTO, FF_MEMORY_FORMAT_AUTO},
                                 {FF_OUTPUT_BFLOAT16, FF_MEMORY_FORMAT_AUTO},
                                 {FF_OUTPUT_FLOAT16, FF_MEMORY_FORMAT_AUTO},
                                 {FF_OUTPUT_FLOAT32, FF_MEMORY_FORMAT_CHANNELS_LAST},
                                 {FF_OUTPUT_UINT8, FF_MEMORY_FORMAT_CONTIGUOUS},
                                 {FF_OUTPUT_UINT8, FF_MEMORY_FORMAT_AUTO}};
#define N_FORMATS (sizeof FORMATS / sizeof *FORMATS)

/* The pipeline of size w x h in format f (uint8 formats: no normalize). */
static void pipeline_of(int w, int h, size_t f, const char *resize, ff__pipeline *p) {
  char text[512];
  int u8 = FORMATS[f][0] == FF_OUTPUT_UINT8;
  snprintf(text, sizeof text, "decode | %s%s", resize,
           u8 ? "" : " | normalize(mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225))");
  if (!resize[0]) snprintf(text, sizeof text, "decode | center_crop(size=(%d, %d))%s", h, w,
                           u8 ? "" : " | normalize(mean=imagenet, std=imagenet)");
  ff__error err;
  assert_int_equal(ff__pipeline_parse(text, p, &err), FF_OK);
  assert_int_equal(ff__pipeline_set_output(p, FORMATS[f][0], FORMATS[f][1], &err), FF_OK);
}

/* The reference: each pixel through kernels/out.h (NHWC uint8 without a table: the bytes). */
static void reference(const ff__pipeline *p, const uint8_t *px, size_t stride, int w, int h, void *dst) {
  size_t plane = (size_t)w * h;
  for (size_t e = 0; e < plane; e++) {
    const uint8_t *q = px + (e / w) * stride + (e % w) * 3;
    if (!p->out_custom && p->output == FF__OUTPUT_NHWC_U8) memcpy((uint8_t *)dst + e * 3, q, 3);
    else if (p->out_custom) ff__out_store(&p->out_table[0][0], p->out_elem_bytes, p->out_planar, plane, e, q, dst);
    else
      for (int c = 0; c < 3; c++) ((float *)dst)[c * plane + e] = p->lut[c][q[c]];
  }
}

static void output_matches_the_element_stores(void **state) {
  (void)state;
  uint32_t rng = 21;
  int checked = 0;
  for (size_t s = 0; s < N_SIZES; s++)
    for (size_t f = 0; f < N_FORMATS; f++) {
      int w = SIZES[s][0], h = SIZES[s][1];
      static ff__pipeline p;
      pipeline_of(w, h, f, "", &p);
      size_t stride = (size_t)w * 3 + 5, bytes = ff__pipeline_sample_bytes(&p);
      ff_test_guarded g = ff_test_guarded_image(w, h, stride, &rng);
      uint8_t *planes = test_malloc((size_t)3 * w * h), *packed = test_malloc((size_t)3 * w * h);
      for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
          for (int c = 0; c < 3; c++) {
            uint8_t v = g.data[(size_t)y * stride + (size_t)x * 3 + c];
            planes[((size_t)c * h + y) * w + x] = v, packed[((size_t)y * w + x) * 3 + c] = v;
          }
      uint8_t *want = test_malloc(bytes), *batch = test_malloc(3 * bytes + 64);
      reference(&p, g.data, stride, w, h, want);
      for (int shift = 0; shift < 64; shift += 36) { /* slots that start on a line and past one */
        uint8_t *base = batch + shift;
        ff__image img = {g.data, w, h, 3, stride};
        for (int from_planes = 0; from_planes < 2; from_planes++) {
          if (from_planes && !(p.out_custom ? p.out_planar : p.output == FF__OUTPUT_NCHW_F32)) continue;
          memset(batch, 0xA5, 3 * bytes + 64);
          if (from_planes) ff__op_write_output_planar(&p, planes, base, 1);
          else ff__op_write_output(&p, &img, base, 1);
          if (memcmp(base + bytes, want, bytes))
            fail_msg("%s: %dx%d format %zu from %s, slot at +%d: not the element stores' bytes", ff_cpu_isa(), w, h, f,
                     from_planes ? "planes" : "rows", shift);
          for (size_t i = 0; i < bytes; i++)
            if (base[i] != 0xA5 || base[2 * bytes + i] != 0xA5) fail_msg("%s: a neighbouring slot written", ff_cpu_isa());
          checked++;
        }
      }
      test_free(planes), test_free(packed), test_free(want), test_free(batch);
      ff_test_guarded_free(&g);
    }
  assert_true(checked > (int)(N_SIZES * N_FORMATS));
}

/* The plan's steps then the output, against the output stage's tail. */
static void output_stage_tail_equals_the_steps_then_the_output(void **state) {
  (void)state;
  static const char *const resizes[] = {
      "random_resized_crop(size=(224, 224)) | random_horizontal_flip",
      "random_resized_crop(size=(61, 33), interpolation=bicubic) | random_horizontal_flip",
      "resize(size=(40, 90)) | random_horizontal_flip(p=1)",
      "random_resized_crop(size=(224, 224), antialias=false)"};
  uint32_t rng = 23;
  int fused = 0, flipped = 0;
  ff__op_scratch scratch = {0};
  for (size_t r = 0; r < sizeof resizes / sizeof *resizes; r++)
    for (size_t f = 0; f < 3; f++)
      for (int sample = 0; sample < 6; sample++) {
        static ff__pipeline p;
        pipeline_of(0, 0, f, resizes[r], &p);
        int w = 40 + (int)(ff_test_rand(&rng) % 500), h = 40 + (int)(ff_test_rand(&rng) % 400);
        ff_test_guarded g = ff_test_guarded_image(w, h, (size_t)w * 3, &rng);
        ff__image_info info = {FF__FORMAT_PNG, w, h, 0};
        ff__plan plan;
        ff__plan_make(&p, 7, 1, (uint64_t)sample, &info, 0, &plan);
        int tail = ff__ops_output_tail(&plan, &p);
        assert_true(tail >= 0);
        size_t bytes = ff__pipeline_sample_bytes(&p);
        uint8_t *want = test_malloc(bytes), *got = test_malloc(bytes);
        uint8_t *copy = test_malloc((size_t)w * h * 3);
        ff__error err;
        /* the steps then the output (on a copy: flips work in place) */
        memcpy(copy, g.data, (size_t)w * h * 3);
        ff__image img = {copy, w, h, 3, (size_t)w * 3};
        if (plan.decode.crop_width)
          ff__op_crop(&img, plan.decode.crop_x, plan.decode.crop_y, plan.decode.crop_width, plan.decode.crop_height,
                      NULL, &img);
        assert_int_equal(ff__ops_run(&plan, &scratch, &img, &err), FF_OK);
        ff__op_write_output(&p, &img, want, 0);
        /* the output stage's tail */
        memcpy(copy, g.data, (size_t)w * h * 3);
        img = (ff__image){copy, w, h, 3, (size_t)w * 3};
        if (plan.decode.crop_width)
          ff__op_crop(&img, plan.decode.crop_x, plan.decode.crop_y, plan.decode.crop_width, plan.decode.crop_height,
                      NULL, &img);
        uint64_t output_ns;
        assert_int_equal(ff__ops_run_until(&plan, tail, &scratch, &img, &err), FF_OK);
        assert_int_equal(ff__ops_resize_to_output(&p, &plan, tail, &scratch, &img, got, 0, &output_ns), FF_OK);
        if (memcmp(got, want, bytes))
          fail_msg("%s: %s format %zu sample %d on %dx%d: the tail's bytes differ", ff_cpu_isa(), resizes[r], f, sample,
                   w, h);
        fused++;
        flipped += tail + 1 < plan.num_steps && plan.steps[tail + 1].kind == FF__STEP_HFLIP;
        test_free(want), test_free(got), test_free(copy);
        ff_test_guarded_free(&g);
      }
  ff__op_scratch_free(&scratch);
  assert_true(fused == 72 && flipped > 12 && flipped < fused);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(output_matches_the_element_stores),
      cmocka_unit_test(output_stage_tail_equals_the_steps_then_the_output),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
