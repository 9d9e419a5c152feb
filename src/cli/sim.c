/* sim.c — `fusionflow sim`: runs the node simulator (src/sim/sim.h) for
 * cpu-only, gpu-only, the paper's static size-sorted split and the adaptive
 * policy, and prints throughput, stall, device share, the GPU time spent on
 * preprocessing and the trainer's slowdown; with --plan, the smallest
 * number of CPU cores per GPU for which cpu-only and the policy keep the
 * trainers within --max-loss of full speed; with --capacity, the smallest
 * number of remote CPUs per GPU beside the node's cores for which local
 * CPU + remote and local CPU + device + remote do. Costs come from flags or from a
 * profile (`fusionflow bench --json`, or a list of per-sample costs).
 * With --ranks it hands over to sim_node.c (several trainers sharing the
 * node's cores).
 * Human text goes to stderr, --json prints one object on stdout. */
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "sim/sim.h"

static void sim_usage(FILE *f) {
  fprintf(f,
          "usage: fusionflow sim --step-ms MS (--cpu-ms-per-sample MS | --profile FILE) [options]\n"
          "\n"
          "Simulates a node of --gpus trainers (one per GPU) fed by loaders that share --cores\n"
          "CPU cores, with the same offload policy as the runtime, and compares cpu-only,\n"
          "gpu-only, the paper's static split (the largest files of each batch to the GPU)\n"
          "and ours (the adaptive policy). With --plan: how many cores per GPU are needed.\n"
          "With --ranks N: N trainers sharing the node's cores with the node coordinator,\n"
          "without it and split statically, as bench/node.py runs them (see\n"
          "'fusionflow sim --ranks 8 --help').\n"
          "\n"
          "node and training:\n"
          "  --cores C                 CPU cores of the node (default 8)\n"
          "  --gpus G                  GPUs, one trainer each (default 1)\n"
          "  --step-ms MS              training step per batch, without interference (required)\n"
          "  --batch-size N            samples per batch and trainer (default 64)\n"
          "  --batches N               batches per trainer (default 400)\n"
          "  --warmup N                batches left out of the figures (default batches/5)\n"
          "  --prefetch N              the loader's ring depth in batches (default 2)\n"
          "  --no-sync                 trainers step independently (default: in lockstep, data parallel)\n"
          "costs:\n"
          "  --cpu-ms-per-sample MS    mean CPU cost of a sample on one core\n"
          "  --cpu-cv V                its coefficient of variation, log-normal (default 0)\n"
          "  --profile FILE            CPU costs from `fusionflow bench --json` output (the mean;\n"
          "                            --cpu-cv then sets the spread) or from a text file of\n"
          "                            per-sample costs, one 'cost_ms [size]' per line\n"
          "  --gpu-ms-per-sample MS    mean GPU time of a sample (default 0.08)\n"
          "  --gpu-launch-ms MS        GPU time per microbatch (default 0)\n"
          "  --micro-batch N           device samples per microbatch (default 0: one per batch)\n"
          "  --device-cpu-frac F|decode  share of a device sample's CPU cost that stays on the CPU\n"
          "                            (default 0: all on the GPU; 'decode': the profile's read+decode share)\n"
          "  --placement split|device  what a device sample leaves on the CPU, from the profile: split =\n"
          "                            read + decode (the ops go to the GPU), device = the read plus\n"
          "                            --host-decode-share of the decode (the GPU decodes too, adding\n"
          "                            --gpu-decode-ms-per-sample of GPU time); overrides --device-cpu-frac\n"
          "  --gpu-decode-ms-per-sample MS  GPU time of a device decode (default 0.25: an assumed\n"
          "                            4,000 images/s of the JPEG engines; measure it on the GPU)\n"
          "  --decode-on engines|sms   where a device decode runs: the JPEG engines (default; the\n"
          "                            step does not wait for them) or the SMs (nvJPEG hybrid: it\n"
          "                            pauses the step like the ops)\n"
          "  --host-decode-share H     share of the CPU decode a device decode leaves on the host\n"
          "                            (default 0: the hardware engine; nvJPEG hybrid keeps its Huffman\n"
          "                            phase on the host)\n"
          "  --size-noise S            file size = cost * exp(S * N(0,1)) (default 0.1)\n"
          "strategies and output:\n"
          "  --static-share F          the static split's GPU share (default: best of 0, 0.05, .., 1)\n"
          "  --plan                    find the cores per GPU cpu-only and ours need\n"
          "  --max-loss F              --plan's bound on 1 - throughput/full speed (default 0.05)\n"
          "  --plan-max-cores N        --plan tries 1..N cores per GPU (default 64)\n"
          "  --seed N                  seed of the sample costs (default 0)\n"
          "remote workers (docs/remote.md; the placement after the local CPU and the device):\n"
          "  --remote-cpus N           remote CPUs of the node, one-CPU workers shared out among the\n"
          "                            trainers (default 0)\n"
          "  --remote-overhead F       extra CPU of a remote sample over a local one, both ends\n"
          "                            (default 0.16: measured by bench/remote.py)\n"
          "  --remote-host-share F     of a remote sample's CPU, the share the loader spends taking it\n"
          "                            back (default 0.18: measured by bench/remote.py)\n"
          "  --remote-cpu-ms-per-sample MS  a remote sample's CPU time on its worker (default: the\n"
          "                            local cost x (1 + overhead) x (1 - host share))\n"
          "  --remote-bandwidth B      bytes/s of the node's link, shared by its trainers (default\n"
          "                            1.25e10, an assumed 100 Gb/s; 0: unlimited)\n"
          "  --remote-latency-ms MS    one-way latency (default 0.5, assumed)\n"
          "  --remote-bytes-per-sample B  bytes on the wire per remote sample (default 150528: uint8\n"
          "                            224 x 224 x 3 back, none out)\n"
          "  --remote-micro-batch N    samples per microbatch (default 16)\n"
          "  --remote-in-flight N      microbatches in flight per worker (default 2)\n"
          "  --capacity                the smallest remote CPUs per GPU, beside --cores local cores,\n"
          "                            for cpu-only + remote and ours + remote within --max-loss\n"
          "  --capacity-max N          --capacity tries 0..N remote CPUs per GPU (default 64)\n"
          "  --input-source NAME=TEXT  print TEXT as the source of input NAME (repeatable)\n"
          "  --json                    print the results as one JSON object on stdout\n"
          "  -h, --help                show this help\n"
          "\n"
          "The report goes to stderr; --json prints one JSON object on stdout instead.\n"
          "Exit status: 0 success, 1 runtime error, 2 usage.\n");
}

/* The subcommand's integer options (cli/args.c). */
static int parse_long(const char *opt, const char *s, long min, long max, long *out) {
  return ff__cli_parse_long("sim", opt, s, min, max, out);
}

static int parse_double(const char *opt, const char *s, double min, double max, double *out) {
  return ff__cli_parse_double("sim", opt, s, min, max, out);
}

static void json_result(const char *name, const ff__sim_result *r, double speedup) {
  printf("{\"strategy\": \"%s\", \"samples_per_s_per_gpu\": %.2f, \"samples_per_s_node\": %.2f, "
         "\"stall_share\": %.4f, \"wait_share\": %.4f, \"device_share\": %.4f, \"gpu_prep_share\": %.4f, "
         "\"slowdown\": %.4f, \"loss\": %.4f",
         name, r->samples_per_s, r->node_samples_per_s, r->stall_share, r->wait_share, r->device_share,
         r->gpu_prep_share, r->slowdown, r->loss);
  if (r->static_share >= 0) printf(", \"static_share\": %.2f", r->static_share);
  if (r->remote_share >= 0) printf(", \"remote_share\": %.4f", r->remote_share);
  if (speedup > 0) printf(", \"speedup_vs_cpu_only\": %.3f", speedup);
  printf("}");
}

/* One number the model runs on and its source. */
typedef struct sim_input {
  const char *name;
  double value;
  const char *source;
} sim_input;

static const char *placement_name(int placement) {
  return placement == 1 ? "split" : placement == 2 ? "device" : "by --device-cpu-frac";
}

typedef struct sim_inputs {
  const sim_input *in;
  size_t n;
  int placement;
} sim_inputs;

/* The inputs on stderr, or as the JSON members "placement" and "inputs". */
static void print_inputs(const sim_inputs *x, int json) {
  if (json) {
    printf("\"placement\": \"%s\", \"inputs\": {", placement_name(x->placement));
    for (size_t i = 0; i < x->n; i++)
      printf("%s\"%s\": {\"value\": %.6g, \"source\": \"%s\"}", i ? ", " : "", x->in[i].name, x->in[i].value,
             x->in[i].source);
    printf("}, ");
    return;
  }
  fprintf(stderr, "fusionflow sim: placement %s; the model's inputs:\n", placement_name(x->placement));
  for (size_t i = 0; i < x->n; i++)
    fprintf(stderr, "  %-26s %10.4g  %s\n", x->in[i].name, x->in[i].value, x->in[i].source);
}

static void json_config(const ff__sim_config *c, const char *profile) {
  printf("\"config\": {\"cores\": %d, \"gpus\": %d, \"step_ms\": %g, \"batch_size\": %d, \"batches\": %ld, "
         "\"warmup\": %ld, \"prefetch\": %d, \"cpu_ms_per_sample\": %.6g, \"cpu_cv\": %g, "
         "\"gpu_ms_per_sample\": %g, \"gpu_launch_ms\": %g, \"micro_batch\": %d, \"device_cpu_frac\": %.4g, "
         "\"size_noise\": %g, \"sync\": %s, \"seed\": %llu, \"profile\": ",
         c->cores, c->gpus, c->step_s * 1e3, c->batch_size, c->batches, c->warmup >= 0 ? c->warmup : c->batches / 5,
         c->prefetch, c->cpu_s * 1e3, c->cpu_list ? -1.0 : c->cpu_cv, c->gpu_s * 1e3, c->launch_s * 1e3,
         c->micro_batch, c->device_cpu_frac, c->size_noise, c->sync ? "true" : "false",
         (unsigned long long)c->seed);
  if (profile) {
    putchar('"');
    for (const char *s = profile; *s; s++) {
      if (*s == '"' || *s == '\\') putchar('\\');
      if ((unsigned char)*s >= 0x20) putchar(*s);
    }
    putchar('"');
  } else {
    printf("null");
  }
  printf("}");
}

/* plan: the cores vary, so the header does not name them. */
static void print_header(const ff__sim_config *c, const ff__sim_profile *prof, int plan) {
  double per = (double)c->cores / c->gpus;
  char cores[64] = "";
  if (!plan) snprintf(cores, sizeof cores, ", %d core%s (%.3g per GPU)", c->cores, c->cores == 1 ? "" : "s", per);
  fprintf(stderr, "fusionflow sim: %d GPU%s%s, step %g ms, batch %d, prefetch %d, %ld batches (%ld warm-up)%s\n",
          c->gpus, c->gpus == 1 ? "" : "s", cores, c->step_s * 1e3, c->batch_size, c->prefetch, c->batches,
          c->warmup >= 0 ? c->warmup : c->batches / 5, c->gpus > 1 ? (c->sync ? ", lockstep" : ", independent") : "");
  if (c->cpu_list)
    fprintf(stderr, "  CPU %.3f ms/sample (mean of %zu profiled samples)", c->cpu_s * 1e3, c->list_len);
  else
    fprintf(stderr, "  CPU %.3f ms/sample (cv %g)%s", c->cpu_s * 1e3, c->cpu_cv, prof ? " from the profile" : "");
  fprintf(stderr, ", GPU %g ms/sample + %g ms/microbatch, device CPU fraction %.3g\n", c->gpu_s * 1e3,
          c->launch_s * 1e3, c->device_cpu_frac);
  if (plan)
    fprintf(stderr, "  full speed %.1f samples/s per GPU; each core alone gives %.1f\n", c->batch_size / c->step_s,
            1 / c->cpu_s);
  else
    fprintf(stderr, "  full speed %.1f samples/s per GPU; the CPU pool alone gives %.1f\n", c->batch_size / c->step_s,
            per / c->cpu_s);
}

static int run_compare(const ff__sim_config *c, double static_share, int json, const char *profile_path,
                       const ff__sim_profile *prof, const sim_inputs *inputs) {
  ff__sim_result r[FF__SIM_NSTRATEGIES];
  ff__error err = {0};
  for (int s = 0; s < FF__SIM_NSTRATEGIES; s++) {
    ff_status st = s == FF__SIM_STATIC && static_share < 0 ? ff__sim_best_static(c, &r[s], &err)
                                                           : ff__sim_run(c, (ff__sim_strategy)s, static_share,
                                                                         &r[s], &err);
    if (st) {
      fprintf(stderr, "fusionflow sim: %s\n", err.msg);
      return st == FF_EINVAL ? 2 : 1;
    }
  }
  double base = r[FF__SIM_CPU_ONLY].samples_per_s;
  if (json) {
    printf("{");
    print_inputs(inputs, 1);
    json_config(c, profile_path);
    printf(", \"results\": [");
    for (int s = 0; s < FF__SIM_NSTRATEGIES; s++) {
      if (s) printf(", ");
      json_result(ff__sim_strategy_name((ff__sim_strategy)s), &r[s], base > 0 ? r[s].samples_per_s / base : 0);
    }
    const ff__sim_result *cpu = &r[FF__SIM_CPU_ONLY], *ours = &r[FF__SIM_OURS];
    printf("], \"ours_stall_removed\": %.4f}\n",
           cpu->stall_share > 0 ? 1 - ours->stall_share / cpu->stall_share : 0.0);
    return 0;
  }
  print_inputs(inputs, 0);
  print_header(c, prof, 0);
  int rem = c->remote_cpus > 0;
  fprintf(stderr, "\n%-10s %7s %12s %12s %7s %8s %8s %9s %8s%s\n", "strategy", "share", "samples/s", "node/s", "stall",
          "device", "GPU prep", "slowdown", "speed-up", rem ? "   remote" : "");
  fprintf(stderr, "%-10s %7s %12s %12s %7s %8s %8s %9s %8s%s\n", "", "", "per GPU", "", "", "samples", "time", "", "",
          rem ? "  samples" : "");
  for (int s = 0; s < FF__SIM_NSTRATEGIES; s++) {
    char share[16] = "-";
    if (r[s].static_share >= 0) snprintf(share, sizeof share, "%.2f", r[s].static_share);
    fprintf(stderr, "%-10s %7s %12.1f %12.1f %6.1f%% %7.1f%% %7.1f%% %8.1f%% %7.2fx",
            ff__sim_strategy_name((ff__sim_strategy)s), share, r[s].samples_per_s, r[s].node_samples_per_s,
            100 * r[s].stall_share, 100 * r[s].device_share, 100 * r[s].gpu_prep_share, 100 * r[s].slowdown,
            base > 0 ? r[s].samples_per_s / base : 0);
    if (rem) fprintf(stderr, " %8.1f%%", 100 * r[s].remote_share);
    fputc('\n', stderr);
  }
  const ff__sim_result *cpu = &r[FF__SIM_CPU_ONLY], *ours = &r[FF__SIM_OURS];
  if (cpu->stall_share > 0.005)
    fprintf(stderr, "\nours removes %.0f%% of the stall cpu-only leaves, slowing the trainer by %.1f%%\n",
            100 * (1 - ours->stall_share / cpu->stall_share), 100 * ours->slowdown);
  return 0;
}

static int run_plan(const ff__sim_config *c, int max_per_gpu, double max_loss, int json, const char *profile_path,
                    const ff__sim_profile *prof, const sim_inputs *inputs) {
  ff__sim_config k = *c;
  ff__error err = {0};
  int need_cpu = 0, need_ours = 0, last = max_per_gpu;
  ff__sim_result *rows = malloc((size_t)max_per_gpu * 2 * sizeof *rows);
  if (!rows) {
    fprintf(stderr, "fusionflow sim: out of memory\n");
    return 1;
  }
  for (int per = 1; per <= max_per_gpu; per++) {
    k.cores = per * c->gpus;
    ff_status st = ff__sim_run(&k, FF__SIM_CPU_ONLY, 0, &rows[2 * (per - 1)], &err);
    if (!st) st = ff__sim_run(&k, FF__SIM_OURS, 0, &rows[2 * (per - 1) + 1], &err);
    if (st) {
      fprintf(stderr, "fusionflow sim: %s\n", err.msg);
      free(rows);
      return st == FF_EINVAL ? 2 : 1;
    }
    if (!need_cpu && rows[2 * (per - 1)].loss < max_loss) need_cpu = per;
    if (!need_ours && rows[2 * (per - 1) + 1].loss < max_loss) need_ours = per;
    if (need_cpu && need_ours) {
      last = per;
      break;
    }
  }
  if (json) {
    printf("{");
    print_inputs(inputs, 1);
    json_config(c, profile_path);
    printf(", \"max_loss\": %g, \"rows\": [", max_loss);
    for (int per = 1; per <= last; per++) {
      printf("%s{\"cores_per_gpu\": %d, \"cpu-only\": ", per > 1 ? ", " : "", per);
      json_result("cpu-only", &rows[2 * (per - 1)], 0);
      printf(", \"ours\": ");
      json_result("ours", &rows[2 * (per - 1) + 1], 0);
      printf("}");
    }
    printf("], \"cpu_only_cores_per_gpu\": %d, \"ours_cores_per_gpu\": %d}\n", need_cpu, need_ours);
  } else {
    print_inputs(inputs, 0);
    print_header(c, prof, 1);
    fprintf(stderr, "\n%9s | %-28s | %-44s\n", "", "cpu-only", "ours");
    fprintf(stderr, "%9s | %12s %7s %7s | %12s %7s %7s %7s %8s\n", "cores/GPU", "samples/s", "stall", "loss",
            "samples/s", "stall", "device", "slowdn", "loss");
    for (int per = 1; per <= last; per++) {
      const ff__sim_result *a = &rows[2 * (per - 1)], *b = &rows[2 * (per - 1) + 1];
      fprintf(stderr, "%9d | %12.1f %6.1f%% %6.1f%% | %12.1f %6.1f%% %6.1f%% %6.1f%% %7.1f%%%s\n", per,
              a->samples_per_s, 100 * a->stall_share, 100 * a->loss, b->samples_per_s, 100 * b->stall_share,
              100 * b->device_share, 100 * b->slowdown, 100 * b->loss,
              per == need_cpu && per == need_ours ? "  <- both"
              : per == need_cpu                   ? "  <- cpu-only"
              : per == need_ours                  ? "  <- ours"
                                                  : "");
    }
    fprintf(stderr, "\nwithin %.0f%% of full speed (stall and slowdown together):\n", 100 * max_loss);
    if (need_cpu)
      fprintf(stderr, "  cpu-only needs %d core%s per GPU (%d for the node)\n", need_cpu, need_cpu == 1 ? "" : "s",
              need_cpu * c->gpus);
    else
      fprintf(stderr, "  cpu-only needs more than %d cores per GPU\n", max_per_gpu);
    if (need_ours)
      fprintf(stderr, "  ours     needs %d core%s per GPU (%d for the node)\n", need_ours, need_ours == 1 ? "" : "s",
              need_ours * c->gpus);
    else
      fprintf(stderr, "  ours     needs more than %d cores per GPU\n", max_per_gpu);
  }
  free(rows);
  return 0;
}

/* --capacity: remote CPUs per GPU 0, 1, .. beside the node's cores, for
 * cpu-only + remote (a) and ours + remote (b), until each is within
 * max_loss of full speed. */
static int run_capacity(const ff__sim_config *c, int max_per_gpu, double max_loss, int json, const char *profile_path,
                        const sim_inputs *inputs) {
  static const ff__sim_strategy strat[2] = {FF__SIM_CPU_ONLY, FF__SIM_OURS};
  ff__sim_result *rows[2] = {calloc((size_t)max_per_gpu + 1, sizeof(ff__sim_result)),
                             calloc((size_t)max_per_gpu + 1, sizeof(ff__sim_result))};
  int need[2], tried[2];
  ff__error err = {0};
  if (!rows[0] || !rows[1]) {
    free(rows[0]), free(rows[1]);
    fprintf(stderr, "fusionflow sim: out of memory\n");
    return 1;
  }
  for (int a = 0; a < 2; a++) {
    ff_status st = ff__sim_remote_needed(c, strat[a], max_per_gpu, max_loss, &need[a], rows[a], &tried[a], &err);
    if (st) {
      fprintf(stderr, "fusionflow sim: %s\n", err.msg);
      free(rows[0]), free(rows[1]);
      return st == FF_EINVAL ? 2 : 1;
    }
  }
  double local = (double)c->cores / c->gpus;
  int last = tried[0] > tried[1] ? tried[0] : tried[1];
  if (json) {
    printf("{");
    print_inputs(inputs, 1);
    json_config(c, profile_path);
    printf(", \"max_loss\": %g, \"local_cores_per_gpu\": %.6g, \"rows\": [", max_loss, local);
    for (int per = 0; per < last; per++) {
      printf("%s{\"remote_cpus_per_gpu\": %d", per ? ", " : "", per);
      for (int a = 0; a < 2; a++)
        if (per < tried[a]) {
          printf(", \"%s\": ", a ? "ours+remote" : "cpu-only+remote");
          json_result(a ? "ours+remote" : "cpu-only+remote", &rows[a][per], 0);
        }
      printf("}");
    }
    printf("], \"cpu_only_remote_cpus_per_gpu\": %d, \"ours_remote_cpus_per_gpu\": %d}\n", need[0], need[1]);
  } else {
    print_inputs(inputs, 0);
    fprintf(stderr, "fusionflow sim: %d GPU%s, %d local core%s (%.3g per GPU), step %g ms, batch %d, prefetch %d, "
            "%ld batches\n", c->gpus, c->gpus == 1 ? "" : "s", c->cores, c->cores == 1 ? "" : "s", local,
            c->step_s * 1e3, c->batch_size, c->prefetch, c->batches);
    fprintf(stderr, "  full speed %.1f samples/s per GPU; a local core alone gives %.1f\n", c->batch_size / c->step_s,
            1 / c->cpu_s);
    fprintf(stderr, "\n%10s | %-30s | %-39s\n", "remote", "(a) local CPU + remote", "(b) local CPU + device + remote");
    fprintf(stderr, "%10s | %12s %7s %7s %7s | %12s %7s %7s %7s %7s\n", "CPUs/GPU", "samples/s", "stall", "remote",
            "loss", "samples/s", "stall", "device", "remote", "loss");
    for (int per = 0; per < last; per++) {
      fprintf(stderr, "%10d |", per);
      for (int a = 0; a < 2; a++) {
        const ff__sim_result *r = &rows[a][per];
        if (per >= tried[a])
          fprintf(stderr, a ? " %12s %7s %7s %7s %7s" : " %12s %7s %7s %7s |", "", "", "", "", "");
        else if (a)
          fprintf(stderr, " %12.1f %6.1f%% %6.1f%% %6.1f%% %6.1f%%", r->samples_per_s, 100 * r->stall_share,
                  100 * r->device_share, 100 * r->remote_share, 100 * r->loss);
        else
          fprintf(stderr, " %12.1f %6.1f%% %6.1f%% %6.1f%% |", r->samples_per_s, 100 * r->stall_share,
                  100 * r->remote_share, 100 * r->loss);
      }
      fprintf(stderr, "%s\n", per == need[0] && per == need[1] ? "  <- both" : per == need[0] ? "  <- (a)"
                               : per == need[1] ? "  <- (b)" : "");
    }
    fprintf(stderr, "\nwithin %.0f%% of full speed (stall and slowdown together), CPUs per GPU:\n", 100 * max_loss);
    for (int a = 0; a < 2; a++) {
      const char *name = a ? "(b) local CPU + device + remote" : "(a) local CPU + remote         ";
      if (need[a] >= 0)
        fprintf(stderr, "  %s: %.3g local + %d remote = %.3g (%.3g for the node)\n", name, local, need[a],
                local + need[a], (local + need[a]) * c->gpus);
      else
        fprintf(stderr, "  %s: more than %.3g local + %d remote\n", name, local, max_per_gpu);
    }
  }
  free(rows[0]), free(rows[1]);
  return 0;
}

int ff__cli_sim(int argc, char **argv) {
  enum { O_CORES = 256, O_GPUS, O_STEP, O_BATCH, O_BATCHES, O_WARMUP, O_PREFETCH, O_NOSYNC, O_CPU, O_CV,
         O_PROFILE, O_GPU, O_LAUNCH, O_MICRO, O_DEVFRAC, O_NOISE, O_STATIC, O_PLAN, O_MAXLOSS, O_PLANMAX, O_SEED,
         O_JSON, O_PLACEMENT, O_GPUDEC, O_HOSTDEC, O_DECODEON, O_RCPUS, O_ROVER, O_RHOST, O_RCPU, O_RBW, O_RLAT,
         O_RBYTES, O_RMICRO, O_RFLIGHT, O_CAPACITY, O_CAPMAX, O_SOURCE };
  static const struct option opts[] = {
      {"cores", required_argument, 0, O_CORES},
      {"gpus", required_argument, 0, O_GPUS},
      {"step-ms", required_argument, 0, O_STEP},
      {"batch-size", required_argument, 0, O_BATCH},
      {"batches", required_argument, 0, O_BATCHES},
      {"warmup", required_argument, 0, O_WARMUP},
      {"prefetch", required_argument, 0, O_PREFETCH},
      {"no-sync", no_argument, 0, O_NOSYNC},
      {"cpu-ms-per-sample", required_argument, 0, O_CPU},
      {"cpu-cv", required_argument, 0, O_CV},
      {"profile", required_argument, 0, O_PROFILE},
      {"gpu-ms-per-sample", required_argument, 0, O_GPU},
      {"gpu-launch-ms", required_argument, 0, O_LAUNCH},
      {"micro-batch", required_argument, 0, O_MICRO},
      {"device-cpu-frac", required_argument, 0, O_DEVFRAC},
      {"size-noise", required_argument, 0, O_NOISE},
      {"static-share", required_argument, 0, O_STATIC},
      {"plan", no_argument, 0, O_PLAN},
      {"max-loss", required_argument, 0, O_MAXLOSS},
      {"plan-max-cores", required_argument, 0, O_PLANMAX},
      {"seed", required_argument, 0, O_SEED},
      {"json", no_argument, 0, O_JSON},
      {"placement", required_argument, 0, O_PLACEMENT},
      {"gpu-decode-ms-per-sample", required_argument, 0, O_GPUDEC},
      {"host-decode-share", required_argument, 0, O_HOSTDEC},
      {"decode-on", required_argument, 0, O_DECODEON},
      {"remote-cpus", required_argument, 0, O_RCPUS},
      {"remote-overhead", required_argument, 0, O_ROVER},
      {"remote-host-share", required_argument, 0, O_RHOST},
      {"remote-cpu-ms-per-sample", required_argument, 0, O_RCPU},
      {"remote-bandwidth", required_argument, 0, O_RBW},
      {"remote-latency-ms", required_argument, 0, O_RLAT},
      {"remote-bytes-per-sample", required_argument, 0, O_RBYTES},
      {"remote-micro-batch", required_argument, 0, O_RMICRO},
      {"remote-in-flight", required_argument, 0, O_RFLIGHT},
      {"capacity", no_argument, 0, O_CAPACITY},
      {"capacity-max", required_argument, 0, O_CAPMAX},
      {"input-source", required_argument, 0, O_SOURCE},
      {"help", no_argument, 0, 'h'},
      {0, 0, 0, 0}};
  for (int i = 1; i < argc && strcmp(argv[i], "--"); i++)
    if (!strcmp(argv[i], "--ranks") || !strncmp(argv[i], "--ranks=", 8)) return ff__cli_sim_node(argc, argv);
  ff__sim_config cfg;
  ff__sim_config_init(&cfg);
  cfg.cores = 8;
  cfg.batches = 400;
  cfg.gpu_s = 0.08e-3;
  double step_ms = -1, cpu_ms = -1, gpu_ms = 0.08, launch_ms = 0, static_share = -1, max_loss = 0.05, x;
  long v, plan_max = 64;
  double gpu_decode_ms = 0.25, host_share = 0;
  int json = 0, plan = 0, frac_from_profile = 0, cores_given = 0, c, li = 0, placement = -1;
  int gpu_given = 0, launch_given = 0, gpu_decode_given = 0, host_given = 0, cv_given = 0, frac_given = 0;
  int engines = 1, engines_given = 0;
  const char *profile_path = NULL;
  /* remote workers: given[] marks the flags given, for the sources */
  enum { R_CPUS, R_OVER, R_HOST, R_CPU, R_BW, R_LAT, R_BYTES, R_MICRO, R_FLIGHT, R_N };
  int rgiven[R_N] = {0}, capacity = 0, prefetch_given = 0, maxloss_given = 0;
  long capacity_max = 64;
  double r_over = 0.16, r_host = 0.18, r_cpu_ms = -1, r_lat_ms = 0.5;
  cfg.remote_bandwidth = 1.25e10, cfg.remote_bytes = 150528;
  const char *source_name[32], *source_text[32];
  int nsources = 0;
  optind = 1;
  while ((c = ff__cli_getopt(argc, argv, opts, &li, NULL)) != -1) {
    const char *name = opts[li].name;
    switch (c) {
    case O_CORES: if (!parse_long(name, optarg, 1, 1 << 20, &v)) return 2; cfg.cores = (int)v, cores_given = 1; break;
    case O_GPUS: if (!parse_long(name, optarg, 1, 4096, &v)) return 2; cfg.gpus = (int)v; break;
    case O_STEP: if (!parse_double(name, optarg, 1e-6, 1e9, &step_ms)) return 2; break;
    case O_BATCH: if (!parse_long(name, optarg, 1, 1 << 20, &v)) return 2; cfg.batch_size = (int)v; break;
    case O_BATCHES: if (!parse_long(name, optarg, 1, 100000000, &cfg.batches)) return 2; break;
    case O_WARMUP: if (!parse_long(name, optarg, 0, LONG_MAX, &cfg.warmup)) return 2; break;
    case O_PREFETCH: if (!parse_long(name, optarg, 1, 64, &v)) return 2; cfg.prefetch = (int)v, prefetch_given = 1; break;
    case O_NOSYNC: cfg.sync = 0; break;
    case O_CPU: if (!parse_double(name, optarg, 1e-9, 1e9, &cpu_ms)) return 2; break;
    case O_CV: if (!parse_double(name, optarg, 0, 100, &cfg.cpu_cv)) return 2; cv_given = 1; break;
    case O_PROFILE: profile_path = optarg; break;
    case O_GPU: if (!parse_double(name, optarg, 0, 1e9, &gpu_ms)) return 2; gpu_given = 1; break;
    case O_LAUNCH: if (!parse_double(name, optarg, 0, 1e9, &launch_ms)) return 2; launch_given = 1; break;
    case O_GPUDEC: if (!parse_double(name, optarg, 0, 1e9, &gpu_decode_ms)) return 2; gpu_decode_given = 1; break;
    case O_HOSTDEC: if (!parse_double(name, optarg, 0, 1, &host_share)) return 2; host_given = 1; break;
    case O_DECODEON:
      if (strcmp(optarg, "engines") && strcmp(optarg, "sms")) {
        fprintf(stderr, "fusionflow sim: --decode-on expects engines or sms, got '%s'\n", optarg);
        return 2;
      }
      engines = !strcmp(optarg, "engines"), engines_given = 1;
      break;
    case O_PLACEMENT:
      if (!strcmp(optarg, "split")) placement = 1;
      else if (!strcmp(optarg, "device")) placement = 2;
      else {
        fprintf(stderr, "fusionflow sim: --placement expects split or device, got '%s'\n", optarg);
        return 2;
      }
      break;
    case O_MICRO: if (!parse_long(name, optarg, 0, 1 << 20, &v)) return 2; cfg.micro_batch = (int)v; break;
    case O_DEVFRAC:
      if (!strcmp(optarg, "decode")) frac_from_profile = 1;
      else if (!parse_double(name, optarg, 0, 1, &cfg.device_cpu_frac)) return 2;
      frac_given = 1;
      break;
    case O_NOISE: if (!parse_double(name, optarg, 0, 100, &cfg.size_noise)) return 2; break;
    case O_STATIC: if (!parse_double(name, optarg, 0, 1, &static_share)) return 2; break;
    case O_PLAN: plan = 1; break;
    case O_MAXLOSS: if (!parse_double(name, optarg, 1e-6, 1, &x)) return 2; max_loss = x, maxloss_given = 1; break;
    case O_PLANMAX: if (!parse_long(name, optarg, 1, 4096, &plan_max)) return 2; break;
    case O_SEED: if (!parse_long(name, optarg, 0, LONG_MAX, &v)) return 2; cfg.seed = (uint64_t)v; break;
    case O_JSON: json = 1; break;
    case O_RCPUS: if (!parse_long(name, optarg, 0, 1 << 24, &v)) return 2; cfg.remote_cpus = (int)v, rgiven[R_CPUS] = 1; break;
    case O_ROVER: if (!parse_double(name, optarg, 0, 100, &r_over)) return 2; rgiven[R_OVER] = 1; break;
    case O_RHOST: if (!parse_double(name, optarg, 0, 1, &r_host)) return 2; rgiven[R_HOST] = 1; break;
    case O_RCPU: if (!parse_double(name, optarg, 1e-9, 1e9, &r_cpu_ms)) return 2; rgiven[R_CPU] = 1; break;
    case O_RBW: if (!parse_double(name, optarg, 0, 1e15, &cfg.remote_bandwidth)) return 2; rgiven[R_BW] = 1; break;
    case O_RLAT: if (!parse_double(name, optarg, 0, 1e6, &r_lat_ms)) return 2; rgiven[R_LAT] = 1; break;
    case O_RBYTES: if (!parse_double(name, optarg, 0, 1e12, &cfg.remote_bytes)) return 2; rgiven[R_BYTES] = 1; break;
    case O_RMICRO: if (!parse_long(name, optarg, 1, 1 << 16, &v)) return 2; cfg.remote_micro_batch = (int)v, rgiven[R_MICRO] = 1; break;
    case O_RFLIGHT: if (!parse_long(name, optarg, 1, 1024, &v)) return 2; cfg.remote_in_flight = (int)v, rgiven[R_FLIGHT] = 1; break;
    case O_CAPACITY: capacity = 1; break;
    case O_CAPMAX: if (!parse_long(name, optarg, 0, 4096, &capacity_max)) return 2; break;
    case O_SOURCE: {
      const char *eq = strchr(optarg, '=');
      if (!eq || eq == optarg || !eq[1] || nsources == 32) {
        fprintf(stderr, "fusionflow sim: --input-source expects NAME=TEXT (at most 32), got '%s'\n", optarg);
        return 2;
      }
      source_name[nsources] = optarg, source_text[nsources++] = eq + 1;
      break;
    }
    case 'h': sim_usage(stdout); return 0;
    default: return 2; /* ff__cli_getopt said why */
    }
  }
  if (optind < argc) return ff__cli_usage_error("fusionflow sim", NULL, "unexpected argument '%s'", argv[optind]);
  if (step_ms < 0) return ff__cli_usage_error("fusionflow sim", NULL, "--step-ms is required");
  if ((cpu_ms < 0) == !profile_path)
    return ff__cli_usage_error("fusionflow sim", NULL, "give exactly one of --cpu-ms-per-sample and --profile");
  int remote = cfg.remote_cpus > 0 || capacity;
  for (int i = 1; i < R_N; i++)
    if (rgiven[i] && !remote)
      return ff__cli_usage_error("fusionflow sim", NULL, "the --remote-* options need --remote-cpus N (N >= 1) or "
                                 "--capacity");
  if (capacity && (plan || rgiven[R_CPUS]))
    return ff__cli_usage_error("fusionflow sim", NULL, "--capacity searches the remote CPUs itself: leave out %s",
                               plan ? "--plan" : "--remote-cpus");
  if (rgiven[R_CPU] && rgiven[R_OVER])
    return ff__cli_usage_error("fusionflow sim", NULL, "give at most one of --remote-cpu-ms-per-sample and "
                               "--remote-overhead");
  if ((frac_from_profile || placement > 0) && !profile_path) {
    fprintf(stderr, "fusionflow sim: --device-cpu-frac decode and --placement need a --profile\n");
    return 2;
  }
  cfg.step_s = step_ms * 1e-3;
  cfg.gpu_s = gpu_ms * 1e-3;
  cfg.launch_s = launch_ms * 1e-3;

  ff__sim_profile prof = {0};
  if (profile_path) {
    ff__error err = {0};
    if (ff__sim_profile_load(profile_path, &prof, &err)) {
      fprintf(stderr, "fusionflow sim: %s\n", err.msg);
      return 1;
    }
    cfg.cpu_s = prof.cpu_s;
    cfg.cpu_list = prof.cpu_list, cfg.size_list = prof.size_list, cfg.list_len = prof.list_len;
    if (frac_from_profile) {
      if (prof.decode_frac < 0) {
        fprintf(stderr, "fusionflow sim: %s does not split read/decode from ops: give --device-cpu-frac F\n",
                profile_path);
        ff__sim_profile_free(&prof);
        return 2;
      }
      cfg.device_cpu_frac = prof.decode_frac;
    }
    if (placement > 0 && (prof.decode_frac < 0 || prof.read_frac < 0)) {
      fprintf(stderr, "fusionflow sim: %s does not split read, decode and ops: --placement needs a bench profile\n",
              profile_path);
      ff__sim_profile_free(&prof);
      return 2;
    }
    if (placement == 1) cfg.device_cpu_frac = prof.decode_frac;
    if (placement == 2) {
      cfg.device_cpu_frac = prof.read_frac + host_share * (prof.decode_frac - prof.read_frac);
      cfg.gpu_decode_s = gpu_decode_ms * 1e-3;
      cfg.decode_engines = engines;
    }
  } else {
    cfg.cpu_s = cpu_ms * 1e-3;
  }
  /* a remote sample: the local cost x (1 + overhead), of which the host share stays on the loader's workers */
  cfg.remote_host_factor = (1 + r_over) * r_host;
  cfg.remote_cpu_factor = r_cpu_ms > 0 ? r_cpu_ms * 1e-3 / cfg.cpu_s : (1 + r_over) * (1 - r_host);
  cfg.remote_latency_s = r_lat_ms * 1e-3;
  ff__error err = {0};
  if (ff__sim_config_check(&cfg, &err)) {
    fprintf(stderr, "fusionflow sim: %s\n", err.msg);
    ff__sim_profile_free(&prof);
    return 2;
  }
  if (plan && cores_given)
    fprintf(stderr, "fusionflow sim: --plan tries 1..%ld cores per GPU itself; --cores is ignored\n", plan_max);
  /* every number the model runs on, and where it came from */
  const char *m = "measured (profile)", *a = "assumed (default)", *g = "given";
  sim_input input_list[] = {
      {"cpu_ms_per_sample", cfg.cpu_s * 1e3, profile_path ? m : g},
      {"cpu_cv", cfg.cpu_list ? -1 : cfg.cpu_cv, cfg.cpu_list ? "measured (per-sample list)" : cv_given ? g : a},
      {"gpu_ms_per_sample", cfg.gpu_s * 1e3, gpu_given ? g : a},
      {"gpu_launch_ms", cfg.launch_s * 1e3, launch_given ? g : a},
      {"device_cpu_frac", cfg.device_cpu_frac,
       placement > 0 || frac_from_profile ? "measured (profile read/decode/ops split)" : frac_given ? g : a},
      {"gpu_decode_ms_per_sample", cfg.gpu_decode_s * 1e3, placement == 2 ? (gpu_decode_given ? g : a) : "unused"},
      {"host_decode_share", placement == 2 ? host_share : 0, placement == 2 ? (host_given ? g : a) : "unused"},
      {"decode_on_engines", placement == 2 ? engines : 0, placement == 2 ? (engines_given ? g : a) : "unused"},
      {"size_noise", cfg.size_noise, cfg.size_list ? "measured (profile sizes)" : a},
      /* with remote workers only (the output without them stays as it was) */
      {"gpus", cfg.gpus, g},
      {"local_cores", cfg.cores, cores_given ? g : a},
      {"step_ms", cfg.step_s * 1e3, g},
      {"batch_size", cfg.batch_size, g},
      {"prefetch", cfg.prefetch, prefetch_given ? g : a},
      {"max_loss", max_loss, maxloss_given ? g : a},
      {"remote_cpus", capacity ? -1 : cfg.remote_cpus, capacity ? "searched (--capacity)" : g},
      {"remote_overhead", r_cpu_ms > 0 ? cfg.remote_cpu_factor + cfg.remote_host_factor - 1 : r_over,
       r_cpu_ms > 0 ? "from --remote-cpu-ms-per-sample" : rgiven[R_OVER] ? g : "measured by bench/remote.py (default)"},
      {"remote_host_share", r_host, rgiven[R_HOST] ? g : "measured by bench/remote.py (default)"},
      {"remote_cpu_ms_per_sample", cfg.remote_cpu_factor * cfg.cpu_s * 1e3,
       rgiven[R_CPU] ? g : "local cost x (1 + overhead) x (1 - host share)"},
      {"remote_host_ms_per_sample", cfg.remote_host_factor * cfg.cpu_s * 1e3, "local cost x (1 + overhead) x host share"},
      {"remote_bandwidth", cfg.remote_bandwidth, rgiven[R_BW] ? g : "assumed (default: 100 Gb/s)"},
      {"remote_latency_ms", r_lat_ms, rgiven[R_LAT] ? g : a},
      {"remote_bytes_per_sample", cfg.remote_bytes, rgiven[R_BYTES] ? g : "uint8 224 x 224 x 3 back (default)"},
      {"remote_micro_batch", cfg.remote_micro_batch, rgiven[R_MICRO] ? g : a},
      {"remote_in_flight", cfg.remote_in_flight, rgiven[R_FLIGHT] ? g : a},
  };
  size_t ninputs = sizeof input_list / sizeof *input_list;
  if (!remote) /* up to "gpus", the first of the remote runs' inputs */
    for (ninputs = 0; strcmp(input_list[ninputs].name, "gpus"); ninputs++) {}
  for (int i = 0; i < nsources; i++) {
    size_t len = (size_t)(strchr(source_name[i], '=') - source_name[i]), k = 0;
    while (k < ninputs && (strlen(input_list[k].name) != len || strncmp(input_list[k].name, source_name[i], len))) k++;
    if (k == ninputs) {
      fprintf(stderr, "fusionflow sim: --input-source: no input '%.*s' in this run (see the list the report prints)\n",
              (int)len, source_name[i]);
      ff__sim_profile_free(&prof);
      return 2;
    }
    input_list[k].source = source_text[i];
  }
  sim_inputs listed = {input_list, ninputs, placement};
  int rc = capacity ? run_capacity(&cfg, (int)capacity_max, max_loss, json, profile_path, &listed)
           : plan   ? run_plan(&cfg, (int)plan_max, max_loss, json, profile_path, profile_path ? &prof : NULL, &listed)
                    : run_compare(&cfg, static_share, json, profile_path, profile_path ? &prof : NULL, &listed);
  ff__sim_profile_free(&prof);
  return rc;
}
