/* test_sim.c — the node simulator on cases worked out by hand. One core,
 * one GPU, batch 10, 10 ms of CPU per sample (100 ms per batch), a 50 ms
 * step and 1 ms of GPU per sample:
 *   cpu-only: a batch every 100 ms -> 100 samples/s, the trainer waits 50%;
 *   gpu-only: each step carries 10 ms of preprocessing -> 60 ms -> 166.7/s;
 *   the best split: 5 samples on the CPU (50 ms) and 5 on the GPU (a 55 ms
 *   step) -> 181.8/s with no stall; the policy must come close;
 *   a 500 ms step: the CPU keeps up, the policy offloads nothing.
 * The plan (step 40 ms, GPU 0.1 ms per sample): cpu-only needs 3 cores
 * (100/3 ms per batch <= 40 ms), the policy 1 (6 samples on the GPU). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixtures.h"
#include "sim/sim.h"

static ff__sim_config by_hand(double step_ms) {
  ff__sim_config c;
  ff__sim_config_init(&c);
  c.cores = 1, c.gpus = 1, c.batch_size = 10, c.batches = 400, c.warmup = 100;
  c.step_s = step_ms * 1e-3;
  c.cpu_s = 0.010, c.gpu_s = 0.001, c.size_noise = 0;
  return c;
}

static ff__sim_result run(const ff__sim_config *c, ff__sim_strategy s, double share) {
  ff__sim_result r;
  ff__error err = {0};
  ff_status st = ff__sim_run(c, s, share, &r, &err);
  if (st) fprintf(stderr, "%s\n", err.msg);
  assert_int_equal(st, FF_OK);
  return r;
}

static void cpu_only_is_bound_by_the_cpu(void **state) {
  (void)state;
  ff__sim_config c = by_hand(50);
  ff__sim_result r = run(&c, FF__SIM_CPU_ONLY, 0);
  assert_true(fabs(r.samples_per_s - 100) < 0.5);
  assert_true(fabs(r.stall_share - 0.5) < 0.005);
  assert_true(r.device_share == 0 && r.gpu_prep_share == 0);
  assert_true(fabs(r.slowdown) < 1e-9);
}

static void gpu_only_slows_the_step_by_its_device_time(void **state) {
  (void)state;
  ff__sim_config c = by_hand(50);
  ff__sim_result r = run(&c, FF__SIM_GPU_ONLY, 0);
  assert_true(fabs(r.samples_per_s - 1000.0 / 6) < 1);
  assert_true(r.device_share == 1);
  assert_true(fabs(r.slowdown - 0.2) < 0.01); /* 60 ms instead of 50 */
  assert_true(r.stall_share < 0.01);
  assert_true(fabs(r.gpu_prep_share - 10.0 / 60) < 0.01);
}

static void best_static_split_is_half(void **state) {
  (void)state;
  ff__sim_config c = by_hand(50);
  ff__sim_result r;
  ff__error err = {0};
  assert_int_equal(ff__sim_best_static(&c, &r, &err), FF_OK);
  assert_true(fabs(r.samples_per_s - 1000.0 / 5.5) < 1);
  assert_true(fabs(r.device_share - 0.5) < 1e-9);
}

static void ours_comes_close_to_the_best_split(void **state) {
  (void)state;
  ff__sim_config c = by_hand(50);
  ff__sim_result r = run(&c, FF__SIM_OURS, 0);
  /* The optimum over real shares: 50 + x = 10 (10 - x) ms, x = 50/11 -> 183.3/s. */
  assert_true(r.samples_per_s > 0.97 * 1000.0 / 5.5);
  assert_true(r.samples_per_s < 1000.0 / (50 + 50.0 / 11) * 10 + 0.5);
  assert_true(r.stall_share < 0.05);
  assert_true(r.device_share > 0.4 && r.device_share < 0.6);
}

static void slow_consumer_gets_no_offload(void **state) {
  (void)state;
  ff__sim_config c = by_hand(500);
  ff__sim_result r = run(&c, FF__SIM_OURS, 0);
  assert_true(r.device_share == 0);
  assert_true(fabs(r.samples_per_s - 20) < 0.01);
  assert_true(r.stall_share == 0 && r.slowdown == 0);
}

static void plan_finds_the_cores_per_gpu(void **state) {
  (void)state;
  ff__sim_config c = by_hand(40);
  c.gpu_s = 0.0001;
  int need = -1;
  ff__sim_result at;
  ff__error err = {0};
  assert_int_equal(ff__sim_cores_needed(&c, FF__SIM_CPU_ONLY, 16, 0.05, &need, &at, &err), FF_OK);
  assert_int_equal(need, 3);
  assert_true(fabs(at.samples_per_s - 250) < 0.5);
  assert_int_equal(ff__sim_cores_needed(&c, FF__SIM_OURS, 16, 0.05, &need, &at, &err), FF_OK);
  assert_int_equal(need, 1);
  assert_true(at.device_share > 0.5 && at.device_share < 0.7); /* 6 of 10: 40 ms of CPU */
  assert_true(at.loss < 0.05);
  /* With 4 GPUs and their 4 loaders the answers are per GPU. */
  c.gpus = 4;
  assert_int_equal(ff__sim_cores_needed(&c, FF__SIM_CPU_ONLY, 16, 0.05, &need, NULL, &err), FF_OK);
  assert_int_equal(need, 3);
  /* Nothing suffices: 0. */
  c.gpus = 1;
  assert_int_equal(ff__sim_cores_needed(&c, FF__SIM_CPU_ONLY, 2, 0.05, &need, NULL, &err), FF_OK);
  assert_int_equal(need, 0);
}

static void cli_plan_prints_the_answers(void **state) {
  (void)state;
  const char *cli = getenv("FF_CLI");
  if (!cli) skip();
  char cmd[1024];
  snprintf(cmd, sizeof cmd,
           "%s sim --plan --json --gpus 2 --step-ms 40 --batch-size 10 --cpu-ms-per-sample 10 "
           "--gpu-ms-per-sample 0.1 --size-noise 0 --plan-max-cores 8",
           cli);
  FILE *p = popen(cmd, "r");
  assert_non_null(p);
  char out[16384];
  size_t n = fread(out, 1, sizeof out - 1, p);
  out[n] = 0;
  assert_int_equal(pclose(p), 0);
  assert_non_null(strstr(out, "\"cpu_only_cores_per_gpu\": 3"));
  assert_non_null(strstr(out, "\"ours_cores_per_gpu\": 1"));
}

static void same_config_same_result(void **state) {
  (void)state;
  ff__sim_config c = by_hand(50);
  c.cpu_cv = 0.6, c.size_noise = 0.3, c.gpus = 3, c.cores = 4, c.seed = 7;
  ff__sim_result a = run(&c, FF__SIM_OURS, 0), b = run(&c, FF__SIM_OURS, 0);
  assert_memory_equal(&a, &b, sizeof a);
  c.seed = 8;
  b = run(&c, FF__SIM_OURS, 0);
  assert_true(a.samples_per_s != b.samples_per_s);
}

static void lockstep_trainers_with_equal_costs_run_as_one(void **state) {
  (void)state;
  ff__sim_config one = by_hand(50), four = by_hand(50);
  four.gpus = 4, four.cores = 4;
  ff__sim_result a = run(&one, FF__SIM_OURS, 0), b = run(&four, FF__SIM_OURS, 0);
  assert_true(fabs(a.samples_per_s - b.samples_per_s) < 1e-6);
  assert_true(fabs(4 * a.samples_per_s - b.node_samples_per_s) < 1e-6);
}

static void costlier_samples_go_to_the_gpu(void **state) {
  (void)state;
  /* With a spread of costs and sizes that predict them, the static split's
   * GPU share of the work exceeds its share of samples. */
  ff__sim_config c = by_hand(50);
  c.cpu_cv = 1.0, c.size_noise = 0;
  ff__sim_result r = run(&c, FF__SIM_STATIC, 0.2);
  assert_true(fabs(r.device_share - 0.2) < 1e-9);
  /* GPU time scales with the CPU cost: the costliest 20% carry > 20% of it. */
  double per_sample_gpu = r.gpu_prep_share * (1.0 / r.samples_per_s) / r.device_share; /* s of GPU per device sample */
  assert_true(per_sample_gpu > 1.3 * c.gpu_s);
}

static void bench_profile_gives_the_mean_cost(void **state) {
  (void)state;
  char path[512];
  snprintf(path, sizeof path, "%s/profile.json", ff_test_dir("sim_profile"));
  const char *json = "{\"images_per_s\": 2000.0, \"batches\": 10, \"samples\": 640, \"elapsed_s\": 0.32, "
                     "\"read_s\": 0.064, \"decode_s\": 0.256, \"ops_s\": 0.32, \"wait_s\": 0.1, \"threads\": 2, "
                     "\"skipped_samples\": [], \"op_costs\": {}}\n";
  ff_test_write(path, json, strlen(json));
  ff__sim_profile p;
  ff__error err = {0};
  assert_int_equal(ff__sim_profile_load(path, &p, &err), FF_OK);
  assert_true(fabs(p.cpu_s - 0.001) < 1e-12); /* 0.64 s of worker time / 640 samples */
  assert_true(fabs(p.decode_frac - 0.5) < 1e-12);
  assert_int_equal(p.threads, 2);
  assert_null(p.cpu_list);
  ff__sim_profile_free(&p);

  snprintf(path, sizeof path, "%s/costs.txt", ff_test_dir("sim_profile"));
  const char *list = "# cost_ms size\n2 100\n4 300\n\n6 200 # big\n";
  ff_test_write(path, list, strlen(list));
  assert_int_equal(ff__sim_profile_load(path, &p, &err), FF_OK);
  assert_int_equal(p.list_len, 3);
  assert_true(fabs(p.cpu_s - 0.004) < 1e-12);
  assert_non_null(p.size_list);
  assert_true(p.size_list[1] == 300);
  ff__sim_profile_free(&p);

  const char *bad[] = {"2 100\n4\n", "inf\n", "1e400\n", "nan\n", "2 inf\n",
                       "{\"samples\": 10, \"read_s\": 1e400, \"decode_s\": 1, \"ops_s\": 1}"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    ff_test_write(path, bad[i], strlen(bad[i]));
    assert_int_equal(ff__sim_profile_load(path, &p, &err), FF_EDATA);
  }
  assert_int_equal(ff__sim_profile_load("/nonexistent/ff-profile", &p, &err), FF_EIO);
  assert_int_equal(ff__sim_profile_load(ff_test_dir("sim_profile"), &p, &err), FF_EIO);
  assert_non_null(strstr(err.msg, "is a directory"));
}

static void bad_config_is_refused(void **state) {
  (void)state;
  ff__sim_config c = by_hand(50);
  ff__sim_result r;
  ff__error err = {0};
  c.cpu_s = 0;
  assert_int_equal(ff__sim_run(&c, FF__SIM_OURS, 0, &r, &err), FF_EINVAL);
  assert_non_null(strstr(err.msg, "CPU cost"));
  c = by_hand(50);
  c.warmup = c.batches;
  assert_int_equal(ff__sim_run(&c, FF__SIM_OURS, 0, &r, &err), FF_EINVAL);
  c = by_hand(50);
  assert_int_equal(ff__sim_run(&c, FF__SIM_STATIC, 1.5, &r, &err), FF_EINVAL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(cpu_only_is_bound_by_the_cpu),
      cmocka_unit_test(gpu_only_slows_the_step_by_its_device_time),
      cmocka_unit_test(best_static_split_is_half),
      cmocka_unit_test(ours_comes_close_to_the_best_split),
      cmocka_unit_test(slow_consumer_gets_no_offload),
      cmocka_unit_test(plan_finds_the_cores_per_gpu),
      cmocka_unit_test(cli_plan_prints_the_answers),
      cmocka_unit_test(same_config_same_result),
      cmocka_unit_test(lockstep_trainers_with_equal_costs_run_as_one),
      cmocka_unit_test(costlier_samples_go_to_the_gpu),
      cmocka_unit_test(bench_profile_gives_the_mean_cost),
      cmocka_unit_test(bad_config_is_refused),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
