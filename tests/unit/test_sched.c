/* test_sched.c — the offload policy's pure functions on cases worked out by
 * hand: no offload for a slow consumer, a share that settles at the deficit
 * 1 - C/D for a fast one, a draining ring that raises it to the deficit
 * before the consumer waits, decay without a stall, the interference cap, the
 * balance point of a slow device, and the deterministic choice of the
 * costliest samples; the cost model's learned coefficients and its split
 * within a memory budget. */
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

static void cost_model_learns_per_byte_and_per_sample_costs(void **state) {
  (void)state;
  ff__cost_model m;
  ff__cost_init(&m);
  assert_true(ff__cost_cpu_ns(&m, 1000) == 10000.0); /* the default: 10 ns a byte, no ops */
  ff__cost_observe_decode(&m, 1000, 50000);         /* the first measurement replaces it */
  ff__cost_observe_ops(&m, 20000);
  assert_true(fabs(ff__cost_cpu_ns(&m, 1000) - 70000) < 1e-6);
  for (int i = 0; i < 400; i++) ff__cost_observe_decode(&m, 2000, 40000); /* 20 ns a byte */
  assert_true(fabs(m.decode_ns_per_byte - 20) < 0.01);
  ff__cost_observe_device(&m, 1000, 64000);
  assert_int_equal(ff__cost_device_bytes(&m, 100), 6401);
}

static void split_sends_the_largest_files_within_the_budget(void **state) {
  (void)state;
  ff__cost_model m;
  ff__cost_init(&m);
  ff__cost_observe_device(&m, 1, 10); /* 10 device bytes per encoded byte */
  const uint64_t size[6] = {100, 900, 300, 700, 500, 800};
  unsigned char dev[6];
  assert_int_equal(ff__cost_split(&m, size, 6, 3, 1 << 20, dev), 3);
  const unsigned char want[6] = {0, 1, 0, 1, 0, 1}; /* 900, 800, 700 */
  assert_memory_equal(dev, want, 6);
  /* 24 KiB holds 900 + 800 (17 KB of device memory) but not 700 more */
  assert_int_equal(ff__cost_split(&m, size, 6, 3, 24000, dev), 2);
  const unsigned char want2[6] = {0, 1, 0, 0, 0, 1};
  assert_memory_equal(dev, want2, 6);
  assert_int_equal(ff__cost_split(&m, size, 6, 3, 1000, dev), 0);
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
      cmocka_unit_test(cost_model_learns_per_byte_and_per_sample_costs),
      cmocka_unit_test(split_sends_the_largest_files_within_the_budget),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
