/* test_sim_remote.c — the simulator's remote workers and the capacity
 * search (`fusionflow sim --capacity`):
 *   - more remote CPUs never raise the stall (beyond 0.2 points of the
 *     policy's jitter), for local CPU + remote and local CPU + device +
 *     remote, while a microbatch's round trip fits the ring's lead;
 *   - with a free remote path (no overhead, latency or bandwidth limit) and
 *     no device, local + remote CPUs per GPU is the local-only arithmetic:
 *     the fewest c with c / (cost x demand) > 1 - max_loss, which is also
 *     what --plan answers for cpu-only;
 *   - a slow link caps what remote CPUs can add;
 *   - the CLI prints every input with its source, takes --input-source, and
 *     refuses bad values in one line (exit 2). */
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

/* Two trainers, one core each: batch 64 every 80 ms (800 samples/s) of 5 ms
 * samples, so each local core gives a quarter of the demand; a microbatch
 * of 16 takes 80 ms on its worker, within the ring's lead of two steps. */
static ff__sim_config starved(void) {
  ff__sim_config c;
  ff__sim_config_init(&c);
  c.gpus = 2, c.cores = 2, c.batch_size = 64, c.batches = 300, c.warmup = 100;
  c.step_s = 0.080, c.cpu_s = 0.005, c.cpu_cv = 0.3, c.gpu_s = 0.0001, c.size_noise = 0.2;
  c.remote_cpu_factor = 0.95, c.remote_host_factor = 0.2, c.remote_latency_s = 0.5e-3;
  c.remote_bandwidth = 1.25e9, c.remote_bytes = 150528;
  return c;
}

static ff__sim_result run(const ff__sim_config *c, ff__sim_strategy s) {
  ff__sim_result r;
  ff__error err = {0};
  ff_status st = ff__sim_run(c, s, 0, &r, &err);
  if (st) fprintf(stderr, "%s\n", err.msg);
  assert_int_equal(st, FF_OK);
  return r;
}

static void more_remote_cpus_never_raise_the_stall(void **state) {
  (void)state;
  ff__sim_strategy strat[] = {FF__SIM_CPU_ONLY, FF__SIM_OURS};
  for (size_t a = 0; a < 2; a++) {
    ff__sim_config c = starved();
    double prev = 2, first = 0, last = 0;
    for (int per = 0; per <= 10; per++) {
      c.remote_cpus = per * c.gpus;
      ff__sim_result r = run(&c, strat[a]);
      if (per == 0) first = r.stall_share, assert_true(r.remote_share == -1); /* no remote workers */
      else assert_true(r.remote_share > 0);
      if (r.stall_share > prev + 2e-3)
        fprintf(stderr, "strategy %zu: %d remote CPUs per GPU: stall %g after %g\n", a, per, r.stall_share, prev);
      assert_true(r.stall_share <= prev + 2e-3); /* 0.2 points: the policy's own jitter */
      prev = last = r.stall_share;
    }
    if (strat[a] == FF__SIM_CPU_ONLY) assert_true(first > 0.2 && last < 0.05); /* and they do remove it */
    else assert_true(last <= first + 2e-3); /* the device removed most of it already */
  }
}

/* The fewest remote CPUs per GPU beside `local` cores that lose less than
 * max_loss with all the work on the CPU: the local-only arithmetic. */
static int arithmetic(double local, double cost_s, double demand_sps, double max_loss) {
  for (int r = 0;; r++)
    if (1 - fmin(1, (local + r) / (cost_s * demand_sps)) < max_loss) return r;
}

static void free_remote_path_gives_the_local_arithmetic(void **state) {
  (void)state;
  struct {
    double cost_ms, step_ms;
    int batch, cores; /* of the node (2 GPUs) */
  } cases[] = {{10, 100, 64, 4}, {5, 40, 32, 2}, {3.7, 85, 256, 8}, {1.2, 20, 64, 1}, {5, 40, 32, 3}};
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    ff__sim_config c;
    ff__sim_config_init(&c);
    c.gpus = 2, c.cores = cases[i].cores, c.batch_size = cases[i].batch, c.batches = 300, c.warmup = 100;
    c.step_s = cases[i].step_ms * 1e-3, c.cpu_s = cases[i].cost_ms * 1e-3, c.gpu_s = 1e-4, c.size_noise = 0;
    c.remote_cpu_factor = 1, c.remote_host_factor = 0, c.remote_latency_s = 0, c.remote_bandwidth = 0;
    /* microbatches of 3/4 of a step's work on a worker: two in flight keep it busy, one fits the ring's lead */
    c.remote_micro_batch = (int)ceil(0.75 * cases[i].step_ms / cases[i].cost_ms);
    double local = (double)c.cores / c.gpus, demand = c.batch_size / c.step_s;
    int want = arithmetic(local, c.cpu_s, demand, 0.05), need = -1, tried = 0;
    ff__error err = {0};
    ff__sim_result rows[65];
    assert_int_equal(ff__sim_remote_needed(&c, FF__SIM_CPU_ONLY, 64, 0.05, &need, rows, &tried, &err), FF_OK);
    if (need != want) fprintf(stderr, "case %zu: %g local + %d remote, the arithmetic %d\n", i, local, need, want);
    assert_int_equal(need, want);
    assert_int_equal(tried, need + 1);
    assert_true(rows[need].loss < 0.05 && (need == 0 || rows[need - 1].loss >= 0.05));
    if (c.cores % c.gpus == 0) { /* whole cores: --plan's cpu-only answer is the same total */
      int plan = 0;
      assert_int_equal(ff__sim_cores_needed(&c, FF__SIM_CPU_ONLY, 64, 0.05, &plan, NULL, &err), FF_OK);
      assert_int_equal(plan, (int)local + need);
    }
  }
}

static void a_slow_link_caps_remote_work(void **state) {
  (void)state;
  ff__sim_config c = starved();
  c.remote_cpus = 16 * c.gpus;
  ff__sim_result fast = run(&c, FF__SIM_CPU_ONLY);
  /* 150,528 bytes a sample over 60 MB/s shared by 2 trainers: ~200 samples/s each at most */
  c.remote_bandwidth = 6e7;
  ff__sim_result slow = run(&c, FF__SIM_CPU_ONLY);
  assert_true(fast.loss < 0.05);
  assert_true(slow.samples_per_s < 200 + 200 * 1.1 && slow.stall_share > 0.3);
  ff__error err = {0};
  int need = 0;
  assert_int_equal(ff__sim_remote_needed(&c, FF__SIM_CPU_ONLY, 16, 0.05, &need, NULL, NULL, &err), FF_OK);
  assert_int_equal(need, -1);
}

static void bad_remote_config_is_refused(void **state) {
  (void)state;
  ff__sim_config c = starved();
  ff__sim_result r;
  ff__error err = {0};
  c.remote_cpus = 2, c.remote_micro_batch = 0;
  assert_int_equal(ff__sim_run(&c, FF__SIM_OURS, 0, &r, &err), FF_EINVAL);
  assert_non_null(strstr(err.msg, "microbatch"));
  c = starved();
  c.remote_cpus = -1;
  assert_int_equal(ff__sim_run(&c, FF__SIM_OURS, 0, &r, &err), FF_EINVAL);
  c = starved();
  c.remote_latency_s = NAN;
  assert_int_equal(ff__sim_run(&c, FF__SIM_OURS, 0, &r, &err), FF_EINVAL);
}

/* Runs the CLI with args; returns its exit status, stdout+stderr in out. */
static int cli(const char *args, char *out, size_t cap) {
  const char *exe = getenv("FF_CLI");
  if (!exe) skip();
  char cmd[2048];
  snprintf(cmd, sizeof cmd, "%s sim %s 2>&1", exe, args);
  return ff_test_run(cmd, out, cap);
}

#define SMALL "--gpus 2 --cores 2 --step-ms 40 --batch-size 32 --cpu-ms-per-sample 5 --batches 200 "

static void cli_capacity_echoes_every_input(void **state) {
  (void)state;
  static char out[1 << 16];
  assert_int_equal(cli(SMALL "--capacity --capacity-max 8 --remote-latency-ms 1 --input-source "
                             "'step_ms=assumed: ResNet-50 on one GPU' --json",
                       out, sizeof out),
                   0);
  const char *keys[] = {"\"gpus\": {\"value\": 2, \"source\": \"given\"}",
                        "\"local_cores\": {\"value\": 2, \"source\": \"given\"}",
                        "\"step_ms\": {\"value\": 40, \"source\": \"assumed: ResNet-50 on one GPU\"}",
                        "\"batch_size\": {\"value\": 32",
                        "\"cpu_ms_per_sample\": {\"value\": 5, \"source\": \"given\"}",
                        "\"gpu_ms_per_sample\": {\"value\": 0.08, \"source\": \"assumed (default)\"}",
                        "\"remote_overhead\": {\"value\": 0.16, \"source\": \"measured by bench/remote.py",
                        "\"remote_host_share\": {\"value\": 0.18",
                        "\"remote_cpu_ms_per_sample\": {\"value\": 4.756",
                        "\"remote_host_ms_per_sample\": {\"value\": 1.044",
                        "\"remote_bandwidth\": {\"value\": 1.25e+10, \"source\": \"assumed",
                        "\"remote_latency_ms\": {\"value\": 1, \"source\": \"given\"}",
                        "\"remote_bytes_per_sample\": {\"value\": 150528",
                        "\"remote_micro_batch\": {\"value\": 16",
                        "\"remote_in_flight\": {\"value\": 2",
                        "\"max_loss\": {\"value\": 0.05",
                        "\"cpu_only_remote_cpus_per_gpu\": ",
                        "\"ours_remote_cpus_per_gpu\": "};
  for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
    if (!strstr(out, keys[i])) fprintf(stderr, "missing %s in\n%s\n", keys[i], out);
    assert_non_null(strstr(out, keys[i]));
  }
  /* the text report names every input too, and the two answers */
  assert_int_equal(cli(SMALL "--capacity --capacity-max 8", out, sizeof out), 0);
  const char *lines[] = {"remote_bandwidth", "remote_latency_ms", "remote_cpu_ms_per_sample", "step_ms",
                         "(a) local CPU + remote", "(b) local CPU + device + remote", " = "};
  for (size_t i = 0; i < sizeof lines / sizeof *lines; i++) assert_non_null(strstr(out, lines[i]));
}

static void cli_refuses_bad_remote_values_in_one_line(void **state) {
  (void)state;
  static char out[1 << 14];
  const char *bad[][2] = {
      {"--remote-cpus -1", "--remote-cpus expects"},
      {"--remote-cpus 4 --remote-bandwidth fast", "--remote-bandwidth expects a number"},
      {"--remote-cpus 4 --remote-latency-ms nan", "--remote-latency-ms expects a number"},
      {"--remote-cpus 4 --remote-host-share 1.5", "--remote-host-share expects a number in [0, 1]"},
      {"--remote-cpus 4 --remote-micro-batch 0", "--remote-micro-batch expects"},
      {"--capacity --capacity-max -2", "--capacity-max expects"},
      {"--remote-latency-ms 2", "the --remote-* options need --remote-cpus N"},
      {"--capacity --remote-cpus 4", "--capacity searches the remote CPUs itself"},
      {"--capacity --plan", "leave out --plan"},
      {"--capacity --remote-overhead 0.2 --remote-cpu-ms-per-sample 3", "at most one of"},
      {"--capacity --input-source nosuch=x", "--input-source: no input 'nosuch'"},
      {"--capacity --input-source =x", "--input-source expects NAME=TEXT"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    char args[512];
    snprintf(args, sizeof args, SMALL "%s", bad[i][0]);
    int rc = cli(args, out, sizeof out);
    if (rc != 2 || !strstr(out, bad[i][1]) || strchr(out, '\n') != out + strlen(out) - 1)
      fprintf(stderr, "%s -> %d:\n%s", bad[i][0], rc, out);
    assert_int_equal(rc, 2);
    assert_non_null(strstr(out, bad[i][1]));
    assert_true(strchr(out, '\n') == out + strlen(out) - 1); /* one line */
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(more_remote_cpus_never_raise_the_stall),
      cmocka_unit_test(free_remote_path_gives_the_local_arithmetic),
      cmocka_unit_test(a_slow_link_caps_remote_work),
      cmocka_unit_test(bad_remote_config_is_refused),
      cmocka_unit_test(cli_capacity_echoes_every_input),
      cmocka_unit_test(cli_refuses_bad_remote_values_in_one_line),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
