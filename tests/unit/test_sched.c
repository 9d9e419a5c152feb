/* test_sched.c — the offload policy's pure functions on cases worked out by
 * hand: no offload for a slow consumer, a share that settles at the deficit
 * 1 - C/D for a fast one, a draining ring that raises it to the deficit
 * before the consumer waits, decay without a stall, the interference cap, the
 * balance point of a slow device, and the deterministic choice of the
 * costliest samples; the cost model's learned coefficients, a plan's
 * predicted cost step by step, and its split within a memory budget. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>

#include "sched/cost.h"
#include "sched/policy.h"

/* One batch of 64 where the CPU (2 threads, cost_s per sample) prepares the
 * CPU share and the consumer needs step_s per batch: the loader side of a
 * tiny model of the runtime, enough to drive the policy. */
static ff__sched_obs batch(const ff__sched_state *s, double cost_s, double step_s, int device_ok) {
  int n = 64, dev = device_ok ? ff__sched_device_count(s, n) : 0, cpu = n - dev;
  double cpu_time = cpu * cost_s / 2; /* two threads */
  double interval = cpu_time > step_s ? cpu_time : step_s;
  ff__sched_obs o = {interval, interval - step_s, interval > step_s ? 0 : 2, n, cpu, cpu * cost_s, 2,
                     dev, dev * 0.0001, device_ok};
  return o;
}

static void slow_consumer_gets_no_offload(void **state) {
  (void)state;
  ff__sched_params p;
  ff__sched_params_init(&p, 2);
  ff__sched_state s;
  ff__sched_state_init(&s);
  for (int i = 0; i < 200; i++) {
    ff__sched_obs o = batch(&s, 0.001, 0.1, 1); /* CPU: 32 ms per batch; consumer: 100 ms */
    ff__sched_update(&p, &s, &o);
    assert_true(s.share == 0.0);
  }
  assert_false(s.stalled);
}

static void fast_consumer_share_settles_at_the_deficit(void **state) {
  (void)state;
  ff__sched_params p;
  ff__sched_params_init(&p, 2);
  ff__sched_state s;
  ff__sched_state_init(&s);
  /* CPU capacity C = 2 / 0.004 = 500 samples/s; demand D = 64 / 0.064 = 1000:
   * the deficit is 1 - C/D = 0.5. */
  for (int i = 0; i < 400; i++) {
    ff__sched_obs o = batch(&s, 0.004, 0.064, 1);
    ff__sched_update(&p, &s, &o);
  }
  assert_true(fabs(s.demand_sps - 1000) < 1);
  assert_true(fabs(s.cpu_capacity_sps - 500) < 1);
  assert_true(s.share >= 0.49 && s.share <= 0.6);
  ff__sched_obs o = batch(&s, 0.004, 0.064, 1);
  assert_true(o.wait_s < 0.1 * o.interval_s); /* the stall is (nearly) gone */
}

static void share_decays_when_the_consumer_slows_down(void **state) {
  (void)state;
  ff__sched_params p;
  ff__sched_params_init(&p, 2);
  ff__sched_state s;
  ff__sched_state_init(&s);
  for (int i = 0; i < 100; i++) {
    ff__sched_obs o = batch(&s, 0.004, 0.064, 1);
    ff__sched_update(&p, &s, &o);
  }
  assert_true(s.share > 0.4);
  for (int i = 0; i < 400; i++) { /* now the consumer needs 1 s per batch */
    ff__sched_obs o = batch(&s, 0.004, 1.0, 1);
    ff__sched_update(&p, &s, &o);
  }
  assert_true(s.share == 0.0);
}

/* Before any wait: the share was 0 (say, after a quiet phase) while the
 * measured C = 2 / 0.004 = 500 samples/s falls short of D = 64 / 0.08 = 800.
 * With the ring half empty the share moves toward the deficit 1 - C/D =
 * 0.375 (half the gap per batch) without waiting for a stall; once there,
 * and with the ring full again, it stays (it never decays below the deficit). */
static void draining_ring_raises_the_share_to_the_deficit_before_a_stall(void **state) {
  (void)state;
  ff__sched_params p;
  ff__sched_params_init(&p, 2);
  ff__sched_state s;
  ff__sched_state_init(&s);
  ff__sched_obs o = {.interval_s = 0.08, .ring_ready = 1, .batch_size = 64, .cpu_samples = 64,
                     .cpu_busy_s = 64 * 0.004, .cpu_threads = 2, .device_ok = 1};
  ff__sched_update(&p, &s, &o);
  assert_false(s.stalled);
  assert_true(fabs(s.share - 0.5 * 0.375) < 1e-9);
  for (int i = 0; i < 30; i++) ff__sched_update(&p, &s, &o);
  assert_true(fabs(s.share - 0.375) < 1e-6);
  o.ring_ready = 2;
  for (int i = 0; i < 30; i++) ff__sched_update(&p, &s, &o);
  assert_true(fabs(s.share - 0.375) < 1e-6);
}

static void no_device_means_no_share(void **state) {
  (void)state;
  ff__sched_params p;
  ff__sched_params_init(&p, 2);
  ff__sched_state s;
  ff__sched_state_init(&s);
  for (int i = 0; i < 50; i++) {
    ff__sched_obs o = batch(&s, 0.004, 0.064, 0);
    ff__sched_update(&p, &s, &o);
    assert_true(s.share == 0.0);
  }
  assert_true(s.stalled);
}

static void interference_cap_limits_device_time_without_a_stall(void **state) {
  (void)state;
  ff__sched_params p;
  ff__sched_params_init(&p, 2);
  p.max_device_time = 0.1;
  ff__sched_state s;
  ff__sched_state_init(&s);
  s.share = 0.5;
  ff__sched_obs o = {1.0, 0.0, 2, 64, 32, 0.01, 2, 32, 0.4, 1}; /* device busy 40% of the wall time */
  ff__sched_update(&p, &s, &o);
  assert_true(s.share <= 0.5 * 0.1 / 0.4 + 1e-12);
}

static void costliest_samples_go_to_the_device(void **state) {
  (void)state;
  const double cost[8] = {5, 1, 9, 3, 9, 2, 7, 5};
  unsigned char dev[8];
  ff__sched_pick_costliest(cost, 8, 3, dev);
  const unsigned char want[8] = {0, 0, 1, 0, 1, 0, 1, 0}; /* 9, 9, 7 */
  assert_memory_equal(dev, want, 8);
  ff__sched_pick_costliest(cost, 8, 4, dev); /* a tie at 5: the later index */
  const unsigned char want4[8] = {0, 0, 1, 0, 1, 0, 1, 1};
  assert_memory_equal(dev, want4, 8);
  ff__sched_pick_costliest(cost, 8, 0, dev);
  for (int i = 0; i < 8; i++) assert_int_equal(dev[i], 0);
}

static void a_slow_device_gets_no_more_than_the_balance_point(void **state) {
  (void)state;
  ff__sched_params p;
  ff__sched_params_init(&p, 2);
  ff__sched_state s;
  ff__sched_state_init(&s);
  /* A consumer that never waits on itself; the CPU pool (2 threads, 4 ms a
   * sample: 2 ms a sample for the pool) and a device at 6 ms a sample: the
   * two finish together at share 2 / (2 + 6) = 0.25. */
  for (int i = 0; i < 300; i++) {
    int n = 64, dev = ff__sched_device_count(&s, n), cpu = n - dev;
    double cpu_time = cpu * 0.004 / 2, dev_time = dev * 0.006;
    double interval = cpu_time > dev_time ? cpu_time : dev_time;
    ff__sched_obs o = {interval, interval - 1e-4, 0, n, cpu, cpu * 0.004, 2, dev, dev_time, 1};
    ff__sched_update(&p, &s, &o);
    if (s.device_cost_s > 0) assert_true(s.share <= 0.25 + 1e-9); /* once the device's cost is known */
  }
  assert_true(s.share > 0.24);
}

static void cost_model_learns_ops_time_and_device_memory(void **state) {
  (void)state;
  ff__cost_model m;
  ff__cost_init(&m);
  assert_true(fabs(ff__cost_unknown_ns(&m, 1000) - 1e-6) < 1e-15); /* no ops measured: the size's tie-break */
  ff__cost_observe_ops(&m, 20000);                    /* the first measurement replaces the default */
  assert_true(fabs(ff__cost_unknown_ns(&m, 1000) - 20000) < 1e-5);
  assert_true(ff__cost_unknown_ns(&m, 2000) > ff__cost_unknown_ns(&m, 1000)); /* ties: the larger file */
  for (int i = 0; i < 400; i++) ff__cost_observe_ops(&m, 40000);
  assert_true(fabs(m.ops_ns_per_sample - 40000) < 1);
  ff__cost_observe_device(&m, 1000, 64000);
  assert_int_equal(ff__cost_device_bytes(&m, 100), 6401);
}

/* Decodes that cost 3 ns per encoded byte and 0.5 ns per pixel: the fit
 * recovers both from bytes and pixels that vary independently, and a host
 * share of 30% leaves 70% of the decode as the device placement's saving. */
static void decode_cost_is_fitted_per_byte_and_per_pixel(void **state) {
  (void)state;
  ff__cost_model m;
  ff__cost_init(&m);
  assert_true(ff__cost_decode_ns(&m, 4000, 50000) == 0);
  for (uint64_t i = 0; i < 300; i++) {
    uint64_t bytes = 1000 + (i * 37) % 5000, pixels = 20000 + (i * 7919) % 80000;
    ff__cost_observe_decode(&m, bytes, pixels, 3 * bytes + pixels / 2);
  }
  double want = 3 * 4000 + 0.5 * 50000;
  assert_true(fabs(ff__cost_decode_ns(&m, 4000, 50000) - want) < 0.01 * want);
  ff__cost_observe_host_decode(&m, 3000, 10000);
  assert_true(fabs(ff__cost_device_decode_saving_ns(&m, 4000, 50000) - 0.7 * want) < 0.01 * want);
}

static void headers_pack_and_unpack(void **state) {
  (void)state;
  ff__image_info in = {FF__FORMAT_JPEG, 4000, 3000, 1}, out;
  uint64_t p = ff__cost_header_pack(&in);
  assert_true(p != 0);
  assert_true(ff__cost_header_unpack(p, &out));
  assert_memory_equal(&in, &out, sizeof in);
  in = (ff__image_info){FF__FORMAT_PNG, 1, (1 << 29) - 1, 0};
  assert_true(ff__cost_header_unpack(ff__cost_header_pack(&in), &out));
  assert_memory_equal(&in, &out, sizeof in);
  in.height = 1 << 29; /* too large to cache: predicted as unknown */
  assert_true(ff__cost_header_pack(&in) == 0);
  assert_false(ff__cost_header_unpack(0, &out));
}

/* A 16x16 PNG through resize to 8x8, sharpness, a brightness of factor 1
 * (skipped by the step runner: 0) and equalize + posterize (one fused
 * table pass), with made-up measured costs: resize 1 ns per input pixel,
 * sharpness 10, the fused pass 3, output 0.5:
 * 256*1 + 64*10 + 64*3 + 64*0.5 = 1120 ns. */
static void plan_cost_follows_the_steps(void **state) {
  (void)state;
  ff__pipeline pipe;
  ff__error err;
  assert_int_equal(ff__pipeline_parse("decode | resize(size=(8, 8)) | sharpness(factor=2) | brightness(factor=1) | "
                                      "equalize | posterize(bits=4)",
                                      &pipe, &err),
                   FF_OK);
  ff__image_info info = {FF__FORMAT_PNG, 16, 16, 0};
  static ff__plan plan;
  ff__plan_make(&pipe, 1, 0, 0, &info, 0, &plan);
  ff__op_costs c = {0};
  c.ns[FF__COST_RESIZE] = 1000, c.pixels[FF__COST_RESIZE] = 1000;
  c.ns[FF__AUG_SHARPNESS] = 10000, c.pixels[FF__AUG_SHARPNESS] = 1000;
  c.ns[FF__AUG_BRIGHTNESS] = 5000, c.pixels[FF__AUG_BRIGHTNESS] = 1000;
  c.ns[FF__AUG_EQUALIZE] = 7000, c.pixels[FF__AUG_EQUALIZE] = 1000; /* not used: equalize runs fused */
  c.ns[FF__COST_LUT] = 3000, c.pixels[FF__COST_LUT] = 1000;
  c.ns[FF__COST_OUTPUT] = 500, c.pixels[FF__COST_OUTPUT] = 1000;
  assert_true(fabs(ff__cost_plan_ns(&plan, &info, &c, 8, 8) - 1120) < 1e-9);
  /* a 64x64 image: 16x the resize input */
  info.width = info.height = 64;
  ff__plan_make(&pipe, 1, 0, 0, &info, 0, &plan);
  assert_true(fabs(ff__cost_plan_ns(&plan, &info, &c, 8, 8) - (4096 + 640 + 192 + 32)) < 1e-9);
}

static void split_sends_the_largest_savings_within_the_budget(void **state) {
  (void)state;
  ff__cost_model m;
  ff__cost_init(&m);
  ff__cost_observe_device(&m, 1, 10); /* 10 device bytes per encoded byte */
  const double saving[6] = {5, 1, 9, 3, 7, 2};
  const uint64_t size[6] = {100, 900, 300, 700, 500, 800};
  unsigned char dev[6];
  assert_int_equal(ff__cost_split(&m, saving, size, 6, 3, 1 << 20, dev), 3);
  const unsigned char want[6] = {1, 0, 1, 0, 1, 0}; /* savings 9, 7, 5 */
  assert_memory_equal(dev, want, 6);
  /* 10.1 KB holds samples 2 and 4 (3003 + 5001 bytes of device memory, 10005 with the size
   * classes' 25%) but not sample 0's 1001 more (11256) */
  assert_int_equal(ff__cost_split(&m, saving, size, 6, 3, 10100, dev), 2);
  const unsigned char want2[6] = {0, 0, 1, 0, 1, 0};
  assert_memory_equal(dev, want2, 6);
  assert_int_equal(ff__cost_split(&m, saving, size, 6, 3, 1000, dev), 0);
  for (int i = 0; i < 6; i++) assert_int_equal(dev[i], 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(slow_consumer_gets_no_offload),
      cmocka_unit_test(fast_consumer_share_settles_at_the_deficit),
      cmocka_unit_test(share_decays_when_the_consumer_slows_down),
      cmocka_unit_test(draining_ring_raises_the_share_to_the_deficit_before_a_stall),
      cmocka_unit_test(no_device_means_no_share),
      cmocka_unit_test(interference_cap_limits_device_time_without_a_stall),
      cmocka_unit_test(costliest_samples_go_to_the_device),
      cmocka_unit_test(a_slow_device_gets_no_more_than_the_balance_point),
      cmocka_unit_test(cost_model_learns_ops_time_and_device_memory),
      cmocka_unit_test(headers_pack_and_unpack),
      cmocka_unit_test(decode_cost_is_fitted_per_byte_and_per_pixel),
      cmocka_unit_test(plan_cost_follows_the_steps),
      cmocka_unit_test(split_sends_the_largest_savings_within_the_budget),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
