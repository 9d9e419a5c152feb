/* test_feeder.c — the device feeder overlaps the stages of consecutive
 * microbatches. On the emulated device each engine (copy in, copy out,
 * kernels, decoder) is a thread of its own, and FF_EMU_DELAYS makes each
 * of its commands take a set time; with every sample decoded and prepared
 * on the device, a microbatch costs D_decode + D_copy_in + D_kernels +
 * D_copy_out of engine time, and the time per batch in the steady state
 * approaches the largest of them, not their sum (a generous bound: a noisy
 * 2-core machine), while the batches stay the CPU's bit for bit. */
#include <setjmp.h> /* cmocka.h needs these four first */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "exec/device_impl.h"
#include "exec/emu_probe.h"
#include "fixtures.h"
#include "fusionflow/fusionflow.h"
#include "loader/loader_internal.h"

/* µs per command of each engine (emu.c) */
#define D_DECODE 80000
#define D_KERNELS 60000
#define D_COPY_IN 40000
#define D_COPY_OUT 40000
#define BATCHES 20
#define WARMUP 7 /* batches before the steady state: the ring (6 entries) fills and drains its first turn */

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static ff_config config(const char *source, const char *device) {
  ff_config c;
  ff_config_init(&c);
  c.source = source;
  c.pipeline = "decode | center_crop(size=24)"; /* the crop is the decoded region: one stage, the output */
  c.batch_size = 8;
  c.shuffle = 0;
  c.num_threads = 2;
  c.prefetch = 5; /* room for a microbatch at each engine */
  c.rank = 0, c.world_size = 1;
  c.device = device;
  c.device_decode = FF_DEVICE_DECODE_ON;
  return c;
}

/* FNV-1a over every batch's pixels, and when each batch came (times may be NULL). */
static uint32_t consume(ff_loader *l, double *times) {
  uint32_t h = 2166136261u;
  ff_batch *b;
  for (int i = 0; i < BATCHES; i++) {
    ff_status st = ff_loader_next(l, &b);
    if (st) fail_msg("batch %d: %s", i, ff_loader_errmsg(l));
    if (times) times[i] = now_s();
    ff_tensor t;
    ff_batch_images(b, &t);
    for (size_t k = 0; k < ff_batch_size(b) * 24 * 24 * 3; k++) h = (h ^ ((uint8_t *)t.data)[k]) * 16777619u;
    ff_batch_release(b);
  }
  return h;
}

static void the_stages_of_consecutive_microbatches_overlap(void **state) {
  (void)state;
  char dir[1024], src[1100];
  snprintf(dir, sizeof dir, "%s", ff_test_dir("feeder-overlap"));
  ff_test_make_imagefolder(dir, 2, BATCHES * 4, 32, 64, 3);
  snprintf(src, sizeof src, "imagefolder:%s", dir);

  ff_config c = config(src, "cpu");
  ff_loader *l = NULL;
  assert_int_equal(ff_loader_open(&c, &l), FF_OK);
  uint32_t want = consume(l, NULL);
  ff_loader_close(l);

  char delays[128];
  snprintf(delays, sizeof delays, "decode:%d,kernel:%d,h2d:%d,d2h:%d", D_DECODE, D_KERNELS, D_COPY_IN, D_COPY_OUT);
  setenv("FF_EMU_DELAYS", delays, 1);
  setenv("FF_FORCE_DEVICE_SHARE", "1.0", 1);
  c = config(src, "emu:0");
  ff_status st = ff_loader_open(&c, &l);
  unsetenv("FF_EMU_DELAYS"), unsetenv("FF_FORCE_DEVICE_SHARE");
  if (st) fail_msg("%s", ff_loader_errmsg(l));
  double times[BATCHES];
  uint32_t got = consume(l, times);
  ff_stats s;
  ff_loader_stats(l, &s);
  ff__emu_counts n;
  assert_int_equal(ff__emu_probe(ff__offload_device(l->offload), &n), FF_OK);
  ff_loader_close(l);

  assert_int_equal(got, want);
  assert_int_equal(s.device_decodes, s.samples); /* every sample through every engine */
  /* the engine time of a microbatch, from what was queued (the ring prefetched a few more) */
  double mb = (double)n.decodes;
  assert_true(mb >= BATCHES);
  double d_decode = D_DECODE * (double)n.decodes / mb, d_kernels = D_KERNELS * (double)n.launches / mb;
  double d_in = D_COPY_IN * (double)n.copy_calls[FF__COPY_H2D] / mb;
  double d_out = D_COPY_OUT * (double)n.copy_calls[FF__COPY_D2H] / mb;
  double sum_ms = (d_decode + d_kernels + d_in + d_out) * 1e-3, max_ms = d_decode;
  if (d_kernels > max_ms) max_ms = d_kernels;
  if (d_in > max_ms) max_ms = d_in;
  if (d_out > max_ms) max_ms = d_out;
  max_ms *= 1e-3;
  double per_batch_ms = (times[BATCHES - 1] - times[WARMUP - 1]) / (BATCHES - WARMUP) * 1e3;
  print_message("steady state: %.1f ms per microbatch; engine delays: sum %.1f ms, largest %.1f ms "
                "(%.2f x the sum, %.2f x the largest)\n",
                per_batch_ms, sum_ms, max_ms, per_batch_ms / sum_ms, per_batch_ms / max_ms);
  assert_true(sum_ms > 1.5 * max_ms); /* the premise: they would add up to much more than the largest */
  if (per_batch_ms >= 0.75 * sum_ms)
    fail_msg("%.1f ms per microbatch: the stages add up (sum %.1f ms, largest %.1f ms)", per_batch_ms, sum_ms,
             max_ms);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(the_stages_of_consecutive_microbatches_overlap),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
