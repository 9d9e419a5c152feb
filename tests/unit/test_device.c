/* test_device.c — the device executor on the emulated device `emu`: every op
 * and policy, both output layouts, bit-identical with the CPU step runner on
 * the same decoded images and plans (a microbatch of 16 random samples of
 * random sizes per pipeline, written into permuted slots); injected
 * allocation and kernel faults come back as statuses and leave the device
 * usable, and an allocation failure that is not "out of memory" is a device
 * error, not a budget refusal; device names and queries. The emulator's
 * streams complete out of order unless one waits for another's event, and
 * it records which stream waited on which event; every call runs with the
 * device current and leaves the calling thread's current device as it was;
 * `auto` picks the trainer's device, else the local rank's. When a CUDA
 * device is present the same comparison runs on `cuda:0` (skipped
 * otherwise). */
#include <setjmp.h> /* cmocka.h needs these four first */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "exec/dev_batch.h"
#include "exec/device.h"
#include "exec/device_impl.h"
#include "fixtures.h"
#include "kernels/stage_block.h"
#include "ops/ops.h"
#include "pipeline/pipeline.h"

#define N 16
#define MAX_SIDE 72

static const char *const pipelines[] = {
    /* geometry and output */
    "decode | random_resized_crop(size=(24, 32)) | random_horizontal_flip | normalize(mean=imagenet, "
    "std=imagenet)",
    "decode | random_resized_crop(size=20, antialias=false) | random_vertical_flip(p=0.5)",
    "decode | random_resized_crop(size=(50, 70), scale=(0.5, 1.0)) | to_dtype",
    "decode | center_crop(size=(60, 40)) | resize(size=(21, 33))",
    "decode | resize(size=30) | center_crop(size=30) | random_horizontal_flip(p=1.0) | "
    "random_vertical_flip(p=1.0)",
    "decode | crop(top=-3, left=5, height=20, width=25) | resize(size=(40, 45), antialias=false) | to_dtype",
    "decode | resize(size=(90, 100), antialias=true) | center_crop(size=(17, 19))",
    /* single geometric ops: nearest / bilinear, black / fill */
    "decode | center_crop(size=(36, 44)) | shear_x(shear=0.3)",
    "decode | center_crop(size=(36, 44)) | shear_y(shear=-0.25, interpolation=bilinear)",
    "decode | center_crop(size=(36, 44)) | translate_x(pixels=7, fill=(10, 200, 128))",
    "decode | center_crop(size=(36, 44)) | translate_y(pixels=-5, interpolation=bilinear, fill=(10, 200, "
    "128.5))",
    "decode | center_crop(size=(36, 44)) | translate_x(pixels=-9, interpolation=bilinear)",
    "decode | center_crop(size=(36, 44)) | rotate(angle=30)",
    "decode | center_crop(size=(36, 44)) | rotate(angle=-47.5, interpolation=bilinear, fill=7) | to_dtype",
    "decode | center_crop(size=(36, 44)) | shear_x(shear=-0.4, interpolation=bilinear, fill=(1, 2, 250))",
    "decode | center_crop(size=(64, 64)) | rotate(angle=33.3, interpolation=bilinear, fill=(127.3, 0.5, 255))",
    "decode | center_crop(size=(64, 64)) | shear_y(shear=0.7, interpolation=bilinear, fill=(60.7, 99.1, 3.3))",
    /* single colour ops and fused table runs */
    "decode | center_crop(size=(30, 30)) | brightness(factor=1.4)",
    "decode | center_crop(size=(30, 30)) | color(factor=0.3)",
    "decode | center_crop(size=(30, 30)) | contrast(factor=0.6)",
    "decode | center_crop(size=(30, 30)) | sharpness(factor=1.8)",
    "decode | center_crop(size=(2, 30)) | sharpness(factor=0.2)",
    "decode | center_crop(size=(30, 30)) | posterize(bits=3)",
    "decode | center_crop(size=(30, 30)) | solarize(threshold=128)",
    "decode | center_crop(size=(30, 30)) | autocontrast",
    "decode | center_crop(size=(30, 30)) | equalize",
    "decode | center_crop(size=(30, 30)) | invert | normalize(mean=imagenet, std=imagenet)",
    "decode | center_crop(size=(31, 29)) | autocontrast | equalize | posterize(bits=3) | "
    "solarize(threshold=100) | "
    "invert | brightness(factor=1.3) | equalize",
    "decode | center_crop(size=(31, 29)) | posterize(bits=5) | invert | brightness(factor=0.7)",
    "decode | center_crop(size=(31, 29)) | contrast(factor=0.4) | sharpness(factor=1.7) | color(factor=0.2)",
    /* policies */
    "decode | random_resized_crop(size=32) | rand_augment(num_ops=3, magnitude=15)",
    "decode | random_resized_crop(size=32) | rand_augment(num_ops=2, magnitude=9, interpolation=bilinear, "
    "fill=(10, 200, 128.5)) | normalize(mean=imagenet, std=imagenet)",
    "decode | random_resized_crop(size=32) | trivial_augment_wide",
    "decode | random_resized_crop(size=32) | auto_augment(policy=imagenet) | to_dtype",
    "decode | random_resized_crop(size=32) | auto_augment(policy=cifar10)",
    "decode | random_resized_crop(size=32) | auto_augment(policy=svhn)",
    "decode | random_resized_crop(size=32) | aug_mix",
    "decode | random_resized_crop(size=(28, 36)) | random_horizontal_flip | aug_mix(severity=10, "
    "mixture_width=4, "
    "chain_depth=3, all_ops=false) | normalize(mean=imagenet, std=imagenet)",
    /* timm's policies (Pillow semantics): every op, each filter */
    "decode | random_resized_crop(size=32) | timm_rand_augment(config=\"rand-m9-n16-p1.0-mstd0.5-inc1\")",
    "decode | random_resized_crop(size=(30, 41)) | timm_rand_augment(config=\"rand-m8-n16-p1.0-mstd1\", "
    "interpolation=nearest, img_mean=(124, 116, 104))",
    "decode | center_crop(size=(33, 33)) | timm_rand_augment(config=\"rand-m10-n16-p1-mstd101\", "
    "interpolation=bicubic)",
    "decode | random_resized_crop(size=32) | timm_auto_augment(config=\"v0-mstd0.5\", translate_const=10)",
    "decode | random_resized_crop(size=32) | timm_aug_mix(config=\"augmix-m5-w4-d2\") | to_dtype",
    "decode | center_crop(size=(30, 30)) | pil_hue(factor=-0.3) | pil_color(factor=1.6) | "
    "pil_contrast(factor=0.4) | pil_brightness(factor=1.2) | pil_solarize(threshold=100)",
    "decode | center_crop(size=(31, 29)) | pil_rotate(angle=90) | pil_rotate(angle=180, interpolation=bicubic) | "
    "pil_rotate(angle=-33, fill=(9, 8, 7)) | pil_translate_x(pixels=-3.5, interpolation=bicubic)",
    /* torchvision's per-sample transforms, bicubic and random interpolation, groups */
    "decode | random_resized_crop(size=(30, 26), interpolation=bicubic) | hue(factor=0.3)",
    "decode | resize(size=(50, 41), interpolation=bicubic) | center_crop(size=(20, 24))",
    "decode | random_resized_crop(size=24, interpolation=random) | color_jitter(brightness=0.4, contrast=0.4, "
    "saturation=0.4, hue=0.5)",
    "decode | center_crop(size=(30, 30)) | gaussian_blur(kernel_size=(5, 9), sigma=(0.1, 3)) | to_dtype",
    "decode | center_crop(size=(3, 40)) | gaussian_blur(kernel_size=7)",
    /* Pillow's GaussianBlur: drawn radii, a radius past the image's size, radius 0 (a copy) */
    "decode | random_resized_crop(size=(29, 34)) | gaussian_blur(sigma=(0.1, 2.0), semantics=pil) | to_dtype",
    "decode | center_crop(size=(5, 40)) | pil_gaussian_blur(radius=9.5) | pil_gaussian_blur(radius=0) | "
    "random_apply(p=0.5, [gaussian_blur(sigma=(0.3, 30), semantics=pil)])",
    "decode | center_crop(size=(30, 30)) | random_grayscale(p=0.5) | random_solarize(threshold=100) | "
    "random_posterize(bits=2) | random_autocontrast | random_equalize | random_invert | "
    "random_adjust_sharpness(sharpness_factor=2)",
    "decode | center_crop(size=(32, 32)) | three_augment",
    "decode | center_crop(size=(32, 32)) | three_augment(semantics=pil)",
    "decode | random_resized_crop(size=(28, 30)) | random_apply(p=0.8, [color_jitter(brightness=0.4, contrast=0.4, "
    "saturation=0.2, hue=0.1, semantics=pil)]) | random_solarize(threshold=128, p=0.5, semantics=pil)",
    "decode | center_crop(size=(32, 32)) | random_apply(p=0.7, [color_jitter(hue=0.2) | grayscale(num_output_channels=3)])",
    "decode | random_resized_crop(size=(20, 28)) | normalize(mean=imagenet, std=imagenet) | "
    "random_erasing(p=0.9, value=random) | random_erasing(p=0.8, value=(1, -2, 0.5))",
    "decode | random_resized_crop(size=(20, 28)) | to_dtype | random_erasing(p=1, mode=pixel, min_count=1, "
    "max_count=3) | random_erasing(mode=rand)",
};
#define NUM_PIPELINES (sizeof pipelines / sizeof pipelines[0])

static const ff__pipeline *parse(const char *text, ff_semantics semantics) {
  static ff__pipeline p; /* large: off the stack */
  ff__error err = {0};
  if (ff__pipeline_parse(text, &p, &err) != FF_OK) fail_msg("'%s' does not parse: %s", text, err.msg);
  ff__pipeline_set_semantics(&p, semantics);
  return &p;
}

static ff__device *open_dev(const char *name, const ff__device_options *opt) {
  ff__device *d = NULL;
  ff__error err = {0};
  if (ff__device_open(name, opt, &d, &err) != FF_OK) fail_msg("%s: %s", name, err.msg);
  return d;
}

/* The microbatch's inputs: random images, their plans and the decoded
 * region (a view of the image, as the region decode gives it). */
typedef struct inputs {
  uint8_t *pixels[N];
  ff__image decoded[N];
  ff__plan plans[N];
} inputs;

static void make_inputs(const ff__pipeline *pipe, uint32_t seed, inputs *in) {
  uint32_t rng = seed;
  for (int i = 0; i < N; i++) {
    int w = 3 + (int)(ff_test_rand(&rng) % MAX_SIDE), h = 3 + (int)(ff_test_rand(&rng) % MAX_SIDE);
    uint8_t *px = malloc((size_t)w * h * 3);
    assert_non_null(px);
    int smooth = ff_test_rand(&rng) % 2; /* smooth images give histograms with gaps */
    for (int k = 0; k < w * h * 3; k++)
      px[k] = smooth ? (uint8_t)(40 + (k / 3 % w) + (k / 3 / w) + k % 3 * 20) : (uint8_t)ff_test_rand(&rng);
    ff__image_info info = {FF__FORMAT_PNG, w, h, 0};
    ff__plan_make(pipe, seed, 2, (uint64_t)i, &info, 0, &in->plans[i]);
    ff__image img = {px, w, h, 3, (size_t)w * 3};
    const ff__decode_req *r = &in->plans[i].decode;
    if (r->crop_width) {
      img.data += (size_t)r->crop_y * img.stride + (size_t)r->crop_x * 3;
      img.width = r->crop_width, img.height = r->crop_height;
    }
    in->pixels[i] = px, in->decoded[i] = img;
  }
}

static void free_inputs(inputs *in) {
  for (int i = 0; i < N; i++)
    free(in->pixels[i]);
}

static size_t sample_bytes(const ff__pipeline *pipe) {
  return (size_t)pipe->out_height * pipe->out_width * 3 * (pipe->output == FF__OUTPUT_NCHW_F32 ? 4 : 1);
}

/* The CPU loader's batch: ops (on a copy: some work in place) then output
 * conversion and erasing, sample i in slot N-1-i. */
static void cpu_batch(const ff__pipeline *pipe, inputs *in, uint8_t *out) {
  static ff__op_scratch scratch;
  for (int i = 0; i < N; i++) {
    ff__image img = in->decoded[i];
    size_t row = (size_t)img.width * 3;
    uint8_t *copy = malloc(row * img.height + 1);
    assert_non_null(copy);
    for (int y = 0; y < img.height; y++)
      memcpy(copy + y * row, img.data + y * img.stride, row);
    img.data = copy, img.stride = row;
    ff__error err = {0};
    if (ff__ops_run(&in->plans[i], &scratch, &img, &err) != FF_OK) fail_msg("CPU ops: %s", err.msg);
    ff__op_write_output(pipe, &img, out, N - 1 - i);
    if (pipe->output == FF__OUTPUT_NCHW_F32) assert_int_equal(ff__op_erase(pipe, &in->plans[i], out, N - 1 - i, &scratch), FF_OK);
    free(copy);
  }
}

/* The same microbatch on device d; returns the status of submit/wait. */
static ff_status device_batch(ff__device *d, const ff__pipeline *pipe, inputs *in, uint8_t *out,
                              ff__error *err) {
  ff__dstream *s;
  ff__dev_batch *b;
  void *d_out;
  size_t bytes = N * sample_bytes(pipe);
  assert_int_equal(ff__device_stream_create(d, &s, err), FF_OK);
  assert_int_equal(ff__dev_batch_create(d, &b, err), FF_OK);
  assert_int_equal(ff__device_alloc(d, bytes, &d_out, err), FF_OK);
  assert_int_equal(ff__dev_batch_begin(b, pipe, err), FF_OK);
  for (int i = 0; i < N; i++)
    assert_int_equal(ff__dev_batch_add(b, &in->decoded[i], &in->plans[i], N - 1 - i, err), FF_OK);
  assert_int_equal(ff__dev_batch_count(b), N);
  ff_status st = ff__dev_batch_submit(b, s, d_out, err);
  float ms = -1;
  if (!st) st = ff__dev_batch_wait(b, &ms, err);
  if (!st) assert_true(ms >= 0);
  if (!st) {
    ff__devent *e;
    assert_int_equal(ff__device_event_create(d, &e, err), FF_OK);
    assert_int_equal(ff__device_download(d, s, out, d_out, bytes, err), FF_OK);
    assert_int_equal(ff__device_event_record(d, e, s, err), FF_OK);
    st = ff__device_event_wait(d, e, err);
    ff__device_event_destroy(d, e);
  }
  ff__dev_batch_destroy(b);
  ff__device_free(d, d_out);
  ff__device_stream_destroy(d, s);
  return st;
}

/* Every pipeline in both semantics (v2's kernels are the CPU's v2 too). */
static void compare_on(ff__device *d, const char *dev_name) {
  for (size_t k = 0; k < 2 * NUM_PIPELINES; k++) {
    ff_semantics sem = k < NUM_PIPELINES ? FF_SEMANTICS_V1 : FF_SEMANTICS_V2;
    const char *text = pipelines[k % NUM_PIPELINES];
    const ff__pipeline *pipe = parse(text, sem);
    inputs in;
    make_inputs(pipe, (uint32_t)(1000 + k), &in);
    size_t bytes = N * sample_bytes(pipe);
    uint8_t *want = calloc(1, bytes), *got = calloc(1, bytes);
    cpu_batch(pipe, &in, want);
    ff__error err = {0};
    if (device_batch(d, pipe, &in, got, &err) != FF_OK)
      fail_msg("%s: '%s': %s", dev_name, text, err.msg);
    for (size_t i = 0; i < bytes; i++)
      if (want[i] != got[i])
        fail_msg("%s: '%s' (semantics v%d): byte %zu (slot %zu) differs: cpu %u, device %u", dev_name, text,
                 (int)sem + 1, i, i / sample_bytes(pipe), want[i], got[i]);
    free(want), free(got);
    free_inputs(&in);
  }
}

/* ---- bit-identical with the CPU ---- */

static void every_op_and_policy_on_emu_is_bit_identical_to_the_cpu(void **state) {
  (void)state;
  ff__device *d = open_dev("emu:0?mem=256M", NULL);
  compare_on(d, "emu:0");
  ff__emu_counts c;
  assert_int_equal(ff__emu_probe(d, &c), FF_OK); /* the CUDA kernels' block-wide paths ran too */
  for (int shape = 0; shape < FF__DSHAPES; shape++)
    if (!c.shape_launches[shape]) fail_msg("no launch of shape %d (kernels/stage_block.h)", shape);
  ff__device_info info;
  ff__error err = {0};
  assert_int_equal(ff__device_query(d, &info, &err), FF_OK);
  assert_true(info.pool.peak_bytes > 0);
  assert_true(info.pool.peak_bytes <= info.pool.limit_bytes);
  assert_int_equal(info.pool.used_bytes, 0); /* everything went back */
  ff__device_close(d);
}

static void every_op_and_policy_on_cuda_is_bit_identical_to_the_cpu(void **state) {
  (void)state;
  ff__device *d = NULL;
  ff__error err = {0};
  if (ff__device_open("cuda:0", NULL, &d, &err) != FF_OK) {
    print_message("skipped: %s\n", err.msg);
    skip();
  }
  compare_on(d, "cuda:0");
  ff__device_close(d);
}

static void steady_state_makes_no_raw_allocation(void **state) {
  (void)state;
  ff__device *d = open_dev("emu:0", NULL);
  const ff__pipeline *pipe = parse(pipelines[0], FF_SEMANTICS_V1);
  inputs in;
  make_inputs(pipe, 7, &in);
  uint8_t *out = malloc(N * sample_bytes(pipe));
  ff__error err = {0};
  assert_int_equal(device_batch(d, pipe, &in, out, &err), FF_OK);
  ff__device_info a, b;
  assert_int_equal(ff__device_query(d, &a, &err), FF_OK);
  for (int r = 0; r < 3; r++)
    assert_int_equal(device_batch(d, pipe, &in, out, &err), FF_OK);
  assert_int_equal(ff__device_query(d, &b, &err), FF_OK);
  assert_int_equal(a.pool.raw_allocs, b.pool.raw_allocs);
  free(out);
  free_inputs(&in);
  ff__device_close(d);
}

static void query_reports_completion_without_blocking(void **state) {
  (void)state;
  ff__device *d = open_dev("emu:0", NULL);
  const ff__pipeline *pipe = parse(pipelines[8], FF_SEMANTICS_V1);
  inputs in;
  make_inputs(pipe, 17, &in);
  size_t bytes = N * sample_bytes(pipe);
  uint8_t *want = malloc(bytes), *got = malloc(bytes);
  ff__error err = {0};
  ff__dstream *s;
  ff__dev_batch *b;
  void *d_out;
  assert_int_equal(ff__device_stream_create(d, &s, &err), FF_OK);
  assert_int_equal(ff__dev_batch_create(d, &b, &err), FF_OK);
  assert_int_equal(ff__device_alloc(d, bytes, &d_out, &err), FF_OK);
  assert_int_equal(ff__dev_batch_begin(b, pipe, &err), FF_OK);
  for (int i = 0; i < N; i++)
    assert_int_equal(ff__dev_batch_add(b, &in.decoded[i], &in.plans[i], N - 1 - i, &err), FF_OK);
  assert_int_equal(ff__dev_batch_submit(b, s, d_out, &err), FF_OK);
  assert_int_equal(ff__dev_batch_begin(b, pipe, &err), FF_EINVAL); /* still running */
  int done = 0;
  while (!done)
    assert_int_equal(ff__dev_batch_query(b, &done, &err), FF_OK);
  ff__device_info info;
  assert_int_equal(ff__device_query(d, &info, &err), FF_OK);
  assert_int_equal(info.pool.used_bytes, ff__pool_class_bytes(bytes)); /* only the output tensor */
  assert_int_equal(ff__device_download(d, s, got, d_out, bytes, &err), FF_OK);
  ff__device_synchronize(d);
  cpu_batch(pipe, &in, want);
  assert_memory_equal(want, got, bytes);
  assert_int_equal(ff__dev_batch_begin(b, pipe, &err), FF_OK);
  ff__dev_batch_destroy(b);
  ff__device_free(d, d_out);
  ff__device_stream_destroy(d, s);
  ff__device_close(d);
  free(want), free(got);
  free_inputs(&in);
}

/* The RGB triples whose v1 and v2 gray differ (21 of 2^24), as a 7 x 3
 * image, N times: the gray sum over it differs by 21 between the two, so a
 * contrast's mean does by one level. */
static void gray_triples_inputs(const ff__pipeline *pipe, inputs *in) {
  uint8_t *px = malloc(7 * 3 * 3);
  assert_non_null(px);
  int found = 0;
  for (int rgb = 0; rgb < 1 << 24; rgb++) {
    uint8_t r = (uint8_t)(rgb >> 16), g = (uint8_t)(rgb >> 8), b = (uint8_t)rgb;
    if (ff__gray_u8(r, g, b) == ff__gray_v2_u8(r, g, b)) continue;
    assert_true(found < 21);
    px[3 * found] = r, px[3 * found + 1] = g, px[3 * found + 2] = b;
    found++;
  }
  assert_int_equal(found, 21);
  ff__image_info info = {FF__FORMAT_PNG, 7, 3, 0};
  for (int i = 0; i < N; i++) {
    in->pixels[i] = i ? NULL : px;
    in->decoded[i] = (ff__image){px, 7, 3, 3, 7 * 3};
    ff__plan_make(pipe, 1, 0, (uint64_t)i, &info, 0, &in->plans[i]);
  }
}

/* The CUDA contrast kernel's sum ran v1's gray under v2 once: the block
 * sums and their terms are the emulator's too now (kernels/stage_block.h),
 * so such a slip shows here, on the triples where the two differ. */
static void contrast_sums_v2_gray_under_v2_on_the_block_path(void **state) {
  (void)state;
  ff__device *d = open_dev("emu:0", NULL);
  for (int v2 = 0; v2 < 2; v2++) {
    const ff__pipeline *pipe = parse("decode | center_crop(size=(3, 7)) | contrast(factor=0.5)", v2 ? FF_SEMANTICS_V2 : FF_SEMANTICS_V1);
    inputs in;
    gray_triples_inputs(pipe, &in);
    size_t bytes = N * sample_bytes(pipe);
    uint8_t *want = calloc(1, bytes), *got = calloc(1, bytes);
    cpu_batch(pipe, &in, want);
    ff__emu_counts before, after;
    assert_int_equal(ff__emu_probe(d, &before), FF_OK);
    ff__error err = {0};
    assert_int_equal(device_batch(d, pipe, &in, got, &err), FF_OK);
    assert_int_equal(ff__emu_probe(d, &after), FF_OK);
    assert_true(after.shape_launches[FF__SHAPE_SUM] > before.shape_launches[FF__SHAPE_SUM]);
    assert_memory_equal(want, got, bytes);
    free(want), free(got);
    free_inputs(&in);
  }
  ff__device_close(d);
}

/* The sum term is the CPU's gray, each semantics, for every RGB triple. */
static void the_sum_term_is_the_cpus_gray_for_every_triple(void **state) {
  (void)state;
  uint8_t px[3];
  ff__dstage st = {.kind = FF__DS_GRAY_SUM, .count = 1, .src = {(uint64_t)(uintptr_t)px, 1, 1, 3}};
  for (int v2 = 0; v2 < 2; v2++) {
    st.p.blend.v2 = v2;
    for (int rgb = 0; rgb < 1 << 24; rgb++) {
      px[0] = (uint8_t)(rgb >> 16), px[1] = (uint8_t)(rgb >> 8), px[2] = (uint8_t)rgb;
      uint8_t cpu = v2 ? ff__gray_v2_u8(px[0], px[1], px[2]) : ff__gray_u8(px[0], px[1], px[2]);
      if (ff__dstage_sum_term(&st, FF__DS_GRAY_SUM, 0) != cpu)
        fail_msg("v%d gray of (%u, %u, %u): term %llu, cpu %u", v2 + 1, px[0], px[1], px[2],
                 (unsigned long long)ff__dstage_sum_term(&st, FF__DS_GRAY_SUM, 0), cpu);
    }
  }
}

/* ---- streams, events and the calling thread ---- */

/* Stream a uploads, stream b downloads what a wrote; with wait, b waits for
 * a's event first. Returns the trials in which b read stale bytes. */
static int stale_reads(ff__device *d, int wait, int trials) {
  enum { BYTES = 4096 };
  ff__error err = {0};
  ff__dstream *a, *b;
  ff__devent *e;
  uint8_t *src, *dst, *d_buf;
  assert_int_equal(ff__device_stream_create(d, &a, &err), FF_OK);
  assert_int_equal(ff__device_stream_create(d, &b, &err), FF_OK);
  assert_int_equal(ff__device_event_create(d, &e, &err), FF_OK);
  assert_int_equal(ff__device_host_alloc(d, BYTES, (void **)&src, &err), FF_OK);
  assert_int_equal(ff__device_host_alloc(d, BYTES, (void **)&dst, &err), FF_OK);
  assert_int_equal(ff__device_alloc(d, BYTES, (void **)&d_buf, &err), FF_OK);
  int stale = 0;
  for (int t = 0; t < trials; t++) {
    memset(src, 1 + t % 200, BYTES);
    memset(d_buf, 0, BYTES); /* emu memory is host memory */
    assert_int_equal(ff__device_upload(d, a, d_buf, src, BYTES, &err), FF_OK);
    assert_int_equal(ff__device_event_record(d, e, a, &err), FF_OK);
    if (wait) assert_int_equal(ff__device_stream_wait(d, b, e, &err), FF_OK);
    assert_int_equal(ff__device_download(d, b, dst, d_buf, BYTES, &err), FF_OK);
    ff__device_synchronize(d);
    stale += memcmp(dst, src, BYTES) != 0;
  }
  assert_int_equal(ff__emu_waited(d, b, e), wait ? trials : 0);
  assert_int_equal(ff__emu_waited(d, a, e), 0);
  ff__device_free(d, d_buf);
  ff__device_host_free(d, src);
  ff__device_host_free(d, dst);
  ff__device_event_destroy(d, e);
  ff__device_stream_destroy(d, a);
  ff__device_stream_destroy(d, b);
  return stale;
}

static void emu_streams_complete_out_of_order_unless_one_waits_for_the_other(void **state) {
  (void)state;
  ff__device *d = open_dev("emu:0?delay=300", NULL);
  assert_true(stale_reads(d, 0, 24) > 0); /* order across streams is not kept */
  assert_int_equal(stale_reads(d, 1, 24), 0);
  ff__device_close(d);
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* An upload and a download of 200 ms each (FF_EMU_DELAYS): on two streams
 * the copy engines in and out run them side by side; on one stream they
 * follow each other. Returns the seconds both took. */
static double two_copies(ff__device *d, int one_stream) {
  ff__error err = {0};
  ff__dstream *a, *b;
  uint8_t src[64] = {1}, dst[64];
  void *d_buf, *d_other;
  assert_int_equal(ff__device_stream_create(d, &a, &err), FF_OK);
  assert_int_equal(ff__device_stream_create(d, &b, &err), FF_OK);
  assert_int_equal(ff__device_alloc(d, 64, &d_buf, &err), FF_OK);
  assert_int_equal(ff__device_alloc(d, 64, &d_other, &err), FF_OK);
  double t0 = now_s();
  assert_int_equal(ff__device_upload(d, a, d_buf, src, 64, &err), FF_OK);
  assert_int_equal(ff__device_download(d, one_stream ? a : b, dst, one_stream ? d_buf : d_other, 64, &err), FF_OK);
  ff__device_synchronize(d);
  double dt = now_s() - t0;
  if (one_stream) assert_memory_equal(dst, src, 64); /* in order: the download read what the upload wrote */
  ff__device_free(d, d_buf);
  ff__device_free(d, d_other);
  ff__device_stream_destroy(d, a);
  ff__device_stream_destroy(d, b);
  return dt;
}

static void emu_engines_work_side_by_side_and_a_stream_keeps_its_order(void **state) {
  (void)state;
  setenv("FF_EMU_DELAYS", "h2d:200000,d2h:200000", 1);
  ff__device *d = open_dev("emu:0", NULL);
  unsetenv("FF_EMU_DELAYS");
  double apart = two_copies(d, 0), one = two_copies(d, 1);
  print_message("two 200 ms copies: %.0f ms on two streams, %.0f ms on one\n", apart * 1e3, one * 1e3);
  assert_true(one >= 0.4);
  assert_true(apart < 0.34);
  ff__device_close(d);
  setenv("FF_EMU_DELAYS", "h2d:1,kernels:2", 1); /* a misspelt engine is refused */
  ff__device *bad = NULL;
  ff__error err;
  assert_int_equal(ff__device_open("emu:0", NULL, &bad, &err), FF_EINVAL);
  assert_non_null(strstr(err.msg, "FF_EMU_DELAYS"));
  unsetenv("FF_EMU_DELAYS");
}

static void every_call_runs_on_the_device_and_leaves_the_threads_current_device(void **state) {
  (void)state;
  ff__emu_set_current_device(5); /* as a trainer that made its own device current */
  ff__device_options opt;
  ff__device_options_init(&opt);
  opt.refresh_every = 1;
  ff__device *d = open_dev("emu:2", &opt);
  assert_int_equal(ff__emu_current_device(), 5);
  const ff__pipeline *pipe = parse(pipelines[30], FF_SEMANTICS_V1);
  inputs in;
  make_inputs(pipe, 21, &in);
  uint8_t *out = malloc(N * sample_bytes(pipe));
  ff__error err = {0};
  assert_int_equal(device_batch(d, pipe, &in, out, &err), FF_OK);
  ff__device_info info;
  assert_int_equal(ff__device_query(d, &info, &err), FF_OK);
  assert_int_equal(ff__device_refresh(d, NULL, &err), FF_OK);
  assert_int_equal(ff__emu_current_device(), 5);
  ff__emu_counts c;
  assert_int_equal(ff__emu_probe(d, &c), FF_OK);
  assert_int_equal(c.misplaced_calls, 0);
  assert_true(c.device_switches > 10); /* made current for each call, put back after */
  ff__device_close(d);
  assert_int_equal(ff__emu_current_device(), 5);
  ff__emu_set_current_device(-1);
  free(out);
  free_inputs(&in);
}

/* ---- the caller's allocator and a busy consumer ---- */

static int hook_allocs, hook_frees;

static int counting_alloc(void *ctx, size_t size_bytes, void *stream, void **out) {
  (void)ctx, (void)stream;
  hook_allocs++;
  *out = aligned_alloc(256, (size_bytes + 255) / 256 * 256);
  return *out == NULL;
}

static void counting_free(void *ctx, void *ptr, size_t size_bytes, void *stream) {
  (void)ctx, (void)size_bytes, (void)stream;
  hook_frees++;
  free(ptr);
}

typedef struct gate {
  ff__device *d;
  ff__devent *e;
  atomic_int opened;
} gate;

static void *open_gate_in_2s(void *arg) {
  gate *g = arg;
  struct timespec t = {2, 0};
  nanosleep(&t, NULL);
  atomic_store(&g->opened, 1);
  ff__emu_event_signal(g->d, g->e);
  return NULL;
}

/* One of our streams waits for a consumer's (as the output stream waits for
 * a released batch's): shrinking the budget hands a cached block back to
 * the caller's allocator only once that stream is done with it, and the
 * call that shrinks it (the trainer's thread, in next()) does not wait for
 * the consumer's stream; it used to synchronise our streams. */
static void giving_memory_back_never_waits_for_a_busy_consumer(void **state) {
  (void)state;
  ff_test_stop_on_alarm("giving memory back waited for the consumer's stream");
  alarm(60);
  hook_allocs = hook_frees = 0;
  ff__device_options opt;
  ff__device_options_init(&opt);
  opt.alloc_hook = counting_alloc, opt.free_hook = counting_free;
  opt.headroom_bytes = 1 << 20; /* a budget of what is free less 1 MiB */
  ff__device *d = open_dev("emu:0", &opt);
  ff__error err = {0};
  gate g = {d, NULL, 0};
  ff__dstream *ours;
  void *block;
  assert_int_equal(ff__device_event_create(d, &g.e, &err), FF_OK);
  assert_int_equal(ff__device_stream_create(d, &ours, &err), FF_OK);
  ff__emu_event_hold(d, g.e); /* the consumer's stream is busy */
  assert_int_equal(ff__device_stream_wait(d, ours, g.e, &err), FF_OK);
  assert_int_equal(ff__device_alloc(d, 1 << 16, &block, &err), FF_OK);
  ff__device_free(d, block); /* cached */
  assert_int_equal(hook_allocs, 1);
  pthread_t opener;
  assert_int_equal(pthread_create(&opener, NULL, open_gate_in_2s, &g), 0);
  assert_int_equal(ff__device_set_free(d, 0, &err), FF_OK); /* the budget shrinks to nothing */
  ff__device_info info;
  assert_int_equal(ff__device_query(d, &info, &err), FF_OK);
  assert_int_equal(info.pool.reserved_bytes, 0);            /* the block was given up */
  assert_int_equal(atomic_load(&g.opened), 0);              /* returned while the consumer was busy */
  assert_int_equal(hook_frees, 0);                          /* ours may still use it */
  pthread_join(opener, NULL);
  ff__device_synchronize(d); /* our stream, and the retire event after it */
  assert_int_equal(ff__device_refresh(d, NULL, &err), FF_OK);
  assert_int_equal(hook_frees, 1); /* back once our stream was past it */
  ff__device_stream_destroy(d, ours);
  ff__device_event_destroy(d, g.e);
  ff__device_close(d);
  assert_int_equal(hook_frees, hook_allocs);
  alarm(0);
}

static void an_allocation_error_that_is_not_out_of_memory_is_a_device_error(void **state) {
  (void)state;
  ff__device_options opt;
  ff__device_options_init(&opt);
  opt.emu_alloc_error_at = 2; /* the output tensor gets memory, the microbatch a device error */
  ff__device *d = open_dev("emu:0", &opt);
  const ff__pipeline *pipe = parse(pipelines[0], FF_SEMANTICS_V1);
  inputs in;
  make_inputs(pipe, 9, &in);
  uint8_t *out = malloc(N * sample_bytes(pipe));
  ff__error err = {0};
  assert_int_equal(device_batch(d, pipe, &in, out, &err), FF_EDEVICE);
  assert_non_null(strstr(err.msg, "device error"));
  assert_int_equal(device_batch(d, pipe, &in, out, &err), FF_OK); /* the next one works */
  free(out);
  free_inputs(&in);
  ff__device_close(d);
  ff__device_options_init(&opt);
  opt.emu_fail_alloc_after = 1; /* out of memory: a budget refusal */
  d = open_dev("emu:0", &opt);
  void *a, *b;
  assert_int_equal(ff__device_alloc(d, 1000, &a, &err), FF_OK);
  assert_int_equal(ff__device_alloc(d, 100000, &b, &err), FF__EBUDGET);
  ff__device_free(d, a);
  ff__device_close(d);
}

static void auto_picks_the_current_device_else_the_local_rank(void **state) {
  (void)state;
  assert_int_equal(ff__device_auto_pick(3, "1", 8), 3); /* the trainer's device wins */
  assert_int_equal(ff__device_auto_pick(-1, "5", 8), 5);
  assert_int_equal(ff__device_auto_pick(-1, "5", 1), 0); /* per-rank CUDA_VISIBLE_DEVICES: one visible */
  assert_int_equal(ff__device_auto_pick(-1, "6", 4), 2);
  assert_int_equal(ff__device_auto_pick(-1, NULL, 4), 0);
  assert_int_equal(ff__device_auto_pick(-1, "x", 4), 0);
  assert_int_equal(ff__device_auto_pick(-1, "-2", 4), 0);
  assert_int_equal(ff__device_auto_pick(9, "1", 4), 1); /* not a visible device: the rank's */
}

/* ---- faults ---- */

static void an_allocation_failure_is_a_budget_status_and_the_samples_can_go_to_the_cpu(void **state) {
  (void)state;
  ff__device_options opt;
  ff__device_options_init(&opt);
  opt.emu_fail_alloc_after = 1; /* the output tensor gets memory, the microbatch does not */
  ff__device *d = open_dev("emu:0", &opt);
  const ff__pipeline *pipe = parse(pipelines[30], FF_SEMANTICS_V1);
  inputs in;
  make_inputs(pipe, 9, &in);
  ff__error err = {0};
  ff__dstream *s;
  ff__dev_batch *b;
  void *d_out;
  assert_int_equal(ff__device_stream_create(d, &s, &err), FF_OK);
  assert_int_equal(ff__dev_batch_create(d, &b, &err), FF_OK);
  assert_int_equal(ff__device_alloc(d, N * sample_bytes(pipe), &d_out, &err), FF_OK);
  assert_int_equal(ff__dev_batch_begin(b, pipe, &err), FF_OK);
  for (int i = 0; i < N; i++)
    assert_int_equal(ff__dev_batch_add(b, &in.decoded[i], &in.plans[i], i, &err), FF_OK);
  assert_true(ff__dev_batch_device_bytes(b) > 0);
  assert_int_equal(ff__dev_batch_submit(b, s, d_out, &err), FF__EBUDGET);
  assert_non_null(strstr(err.msg, "no"));
  /* the staged samples run on the CPU instead */
  ff__image img;
  const ff__plan *plan;
  int slot;
  ff__dev_batch_sample(b, 3, &img, &plan, &slot);
  assert_int_equal(slot, 3);
  assert_int_equal(img.width, in.decoded[3].width);
  assert_memory_equal(img.data, in.decoded[3].data, (size_t)img.width * 3);
  static ff__op_scratch scratch;
  assert_int_equal(ff__ops_run(plan, &scratch, &img, &err), FF_OK);
  /* nothing is held; the device is still usable and closes */
  ff__device_info info;
  assert_int_equal(ff__device_query(d, &info, &err), FF_OK);
  assert_int_equal(info.pool.used_bytes, ff__pool_class_bytes(N * sample_bytes(pipe)));
  assert_int_equal(ff__dev_batch_begin(b, pipe, &err), FF_OK);
  ff__device_free(d, d_out);
  void *again;
  assert_int_equal(ff__device_alloc(d, N * sample_bytes(pipe), &again, &err), FF_OK); /* from the cache */
  ff__device_free(d, again);
  ff__dev_batch_destroy(b);
  ff__device_stream_destroy(d, s);
  ff__device_close(d);
  free_inputs(&in);
}

static void a_kernel_error_is_reported_and_the_device_stays_usable(void **state) {
  (void)state;
  ff__device_options opt;
  ff__device_options_init(&opt);
  opt.emu_fail_kernel_at = 2;
  ff__device *d = open_dev("emu:0", &opt);
  const ff__pipeline *pipe = parse(pipelines[0], FF_SEMANTICS_V1);
  inputs in;
  make_inputs(pipe, 11, &in);
  size_t bytes = N * sample_bytes(pipe);
  uint8_t *want = malloc(bytes), *got = malloc(bytes);
  ff__error err = {0};
  assert_int_equal(device_batch(d, pipe, &in, got, &err), FF_EDEVICE);
  assert_non_null(strstr(err.msg, "kernel launch 2"));
  cpu_batch(pipe, &in, want);
  assert_int_equal(device_batch(d, pipe, &in, got, &err), FF_OK);
  assert_memory_equal(want, got, bytes);
  free(want), free(got);
  free_inputs(&in);
  ff__device_close(d);
}

static void faults_come_from_the_environment(void **state) {
  (void)state;
  setenv("FF_EMU_FAULTS", "alloc:0,kernel:1", 1);
  ff__device *d = open_dev("emu:1", NULL);
  unsetenv("FF_EMU_FAULTS");
  const ff__pipeline *pipe = parse(pipelines[1], FF_SEMANTICS_V1);
  inputs in;
  make_inputs(pipe, 13, &in);
  uint8_t *got = malloc(N * sample_bytes(pipe));
  ff__error err = {0};
  assert_int_equal(device_batch(d, pipe, &in, got, &err), FF_EDEVICE);
  assert_int_equal(device_batch(d, pipe, &in, got, &err), FF_OK);
  free(got);
  free_inputs(&in);
  ff__device_close(d);

  setenv("FF_EMU_FAULTS", "disk:3", 1);
  assert_int_equal(ff__device_open("emu:0", NULL, &d, &err), FF_EINVAL);
  unsetenv("FF_EMU_FAULTS");
}

/* ---- names and queries ---- */

static void device_names_are_checked(void **state) {
  (void)state;
  ff__device *d = NULL;
  ff__error err = {0};
  assert_int_equal(ff__device_open("tpu:0", NULL, &d, &err), FF_EINVAL);
  assert_int_equal(ff__device_open("emu:x", NULL, &d, &err), FF_EINVAL);
  assert_int_equal(ff__device_open("emu:0?mem=lots", NULL, &d, &err), FF_EINVAL);
  assert_int_equal(ff__device_open("emu:0?size=3", NULL, &d, &err), FF_EINVAL);
  assert_null(d);
  ff_status st = ff__device_open("cuda:0", NULL, &d, &err);
  if (st != FF_OK) { /* no GPU here, or built without CUDA: a clear message */
    assert_int_equal(st, FF_EDEVICE);
    assert_non_null(strstr(err.msg, "cuda:0"));
    assert_non_null(strstr(err.msg, "emu:0"));
  }
  ff__device_close(d);
  ff__device_close(NULL);
}

static void emu_reports_its_size_and_the_pool_its_budget(void **state) {
  (void)state;
  ff__device_options opt;
  ff__device_options_init(&opt);
  opt.limit_bytes = 8u << 20;
  ff__device *d = open_dev("emu:3?mem=64M", &opt);
  ff__device_info info;
  ff__error err = {0};
  assert_int_equal(ff__device_query(d, &info, &err), FF_OK);
  assert_string_equal(info.name, "emu:3");
  assert_int_equal(info.total_bytes, 64u << 20);
  assert_int_equal(info.free_bytes, 64u << 20);
  assert_int_equal(info.pool.limit_bytes, 8u << 20);
  void *a, *b;
  assert_int_equal(ff__device_alloc(d, 5u << 20, &a, &err), FF_OK);
  assert_int_equal(ff__device_alloc(d, 5u << 20, &b, &err), FF__EBUDGET);
  assert_int_equal(ff__device_query(d, &info, &err), FF_OK);
  assert_int_equal(info.pool.used_bytes, 5u << 20);
  assert_int_equal(info.free_bytes, (64u - 5u) << 20);
  ff__device_free(d, a);
  void *h;
  assert_int_equal(ff__device_host_alloc(d, 1000, &h, &err), FF_OK);
  ff__device_host_free(d, h);
  ff__device_close(d);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(every_op_and_policy_on_emu_is_bit_identical_to_the_cpu),
      cmocka_unit_test(every_op_and_policy_on_cuda_is_bit_identical_to_the_cpu),
      cmocka_unit_test(contrast_sums_v2_gray_under_v2_on_the_block_path),
      cmocka_unit_test(the_sum_term_is_the_cpus_gray_for_every_triple),
      cmocka_unit_test(steady_state_makes_no_raw_allocation),
      cmocka_unit_test(query_reports_completion_without_blocking),
      cmocka_unit_test(an_allocation_failure_is_a_budget_status_and_the_samples_can_go_to_the_cpu),
      cmocka_unit_test(a_kernel_error_is_reported_and_the_device_stays_usable),
      cmocka_unit_test(faults_come_from_the_environment),
      cmocka_unit_test(device_names_are_checked),
      cmocka_unit_test(emu_reports_its_size_and_the_pool_its_budget),
      cmocka_unit_test(emu_streams_complete_out_of_order_unless_one_waits_for_the_other),
      cmocka_unit_test(emu_engines_work_side_by_side_and_a_stream_keeps_its_order),
      cmocka_unit_test(every_call_runs_on_the_device_and_leaves_the_threads_current_device),
      cmocka_unit_test(an_allocation_error_that_is_not_out_of_memory_is_a_device_error),
      cmocka_unit_test(giving_memory_back_never_waits_for_a_busy_consumer),
      cmocka_unit_test(auto_picks_the_current_device_else_the_local_rank),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
