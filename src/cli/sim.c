/* sim.c — `fusionflow sim`: runs the node simulator (src/sim/sim.h) for
 * cpu-only, gpu-only, the paper's static size-sorted split and the adaptive
 * policy, and prints throughput, stall, device share, the GPU time spent on
 * preprocessing and the trainer's slowdown; with --plan, the smallest
 * number of CPU cores per GPU for which cpu-only and the policy keep the
 * trainers within --max-loss of full speed. Costs come from flags or from a
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
  fprintf(stderr, "\n%-10s %7s %12s %12s %7s %8s %8s %9s %8s\n", "strategy", "share", "samples/s", "node/s", "stall",
          "device", "GPU prep", "slowdown", "speed-up");
  fprintf(stderr, "%-10s %7s %12s %12s %7s %8s %8s %9s %8s\n", "", "", "per GPU", "", "", "samples", "time", "", "");
  for (int s = 0; s < FF__SIM_NSTRATEGIES; s++) {
    char share[16] = "-";
    if (r[s].static_share >= 0) snprintf(share, sizeof share, "%.2f", r[s].static_share);
    fprintf(stderr, "%-10s %7s %12.1f %12.1f %6.1f%% %7.1f%% %7.1f%% %8.1f%% %7.2fx\n",
            ff__sim_strategy_name((ff__sim_strategy)s), share, r[s].samples_per_s, r[s].node_samples_per_s,
            100 * r[s].stall_share, 100 * r[s].device_share, 100 * r[s].gpu_prep_share, 100 * r[s].slowdown,
            base > 0 ? r[s].samples_per_s / base : 0);
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

int ff__cli_sim(int argc, char **argv) {
  enum { O_CORES = 256, O_GPUS, O_STEP, O_BATCH, O_BATCHES, O_WARMUP, O_PREFETCH, O_NOSYNC, O_CPU, O_CV,
         O_PROFILE, O_GPU, O_LAUNCH, O_MICRO, O_DEVFRAC, O_NOISE, O_STATIC, O_PLAN, O_MAXLOSS, O_PLANMAX, O_SEED,
         O_JSON, O_PLACEMENT, O_GPUDEC, O_HOSTDEC, O_DECODEON };
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
    case O_PREFETCH: if (!parse_long(name, optarg, 1, 64, &v)) return 2; cfg.prefetch = (int)v; break;
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
    case O_MAXLOSS: if (!parse_double(name, optarg, 1e-6, 1, &x)) return 2; max_loss = x; break;
    case O_PLANMAX: if (!parse_long(name, optarg, 1, 4096, &plan_max)) return 2; break;
    case O_SEED: if (!parse_long(name, optarg, 0, LONG_MAX, &v)) return 2; cfg.seed = (uint64_t)v; break;
    case O_JSON: json = 1; break;
    case 'h': sim_usage(stdout); return 0;
    default: return 2; /* ff__cli_getopt said why */
    }
  }
  if (optind < argc) return ff__cli_usage_error("fusionflow sim", NULL, "unexpected argument '%s'", argv[optind]);
  if (step_ms < 0) return ff__cli_usage_error("fusionflow sim", NULL, "--step-ms is required");
  if ((cpu_ms < 0) == !profile_path)
    return ff__cli_usage_error("fusionflow sim", NULL, "give exactly one of --cpu-ms-per-sample and --profile");
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
  };
  sim_inputs listed = {input_list, sizeof input_list / sizeof *input_list, placement};
  int rc = plan ? run_plan(&cfg, (int)plan_max, max_loss, json, profile_path, profile_path ? &prof : NULL, &listed)
                : run_compare(&cfg, static_share, json, profile_path, profile_path ? &prof : NULL, &listed);
  ff__sim_profile_free(&prof);
  return rc;
}
