/* sim_node.c — `fusionflow sim --ranks N`: bench/node.py in simulated
 * time (src/sim/node.h). For each scenario it runs the node with the
 * coordinator, without it and with the static split and prints, per mode,
 * the node's images/s, its CPU use and every trainer's images/s, stall
 * share and threads, in bench/node.py's form; --json prints one object in
 * bench/node.py's --json layout (so `bench/node.py --print FILE` shows it
 * too), marked "simulated". The per-sample costs are the measured input
 * (a profile); everything else is the model's, and the output says which
 * is which. */
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cli/cli.h"
#include "sched/coord_policy.h"
#include "sim/node.h"
#include "sim/sim.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: fusionflow sim --ranks N (--profile FILE | --cpu-ms-per-sample MS) [options]\n"
          "\n"
          "Simulates N trainers (one per GPU) on a node of --cores cores, each with its own\n"
          "CPU-only loader, in bench/node.py's scenarios, and compares three ways of sharing\n"
          "the cores: coord (the node coordinator: its real rebalancing code, fed the reports\n"
          "a loader makes, each loader owning --budget threads; the allotments share the budget\n"
          "less --trainer-cores per trainer, and a loader allotted no thread runs all its threads\n"
          "as spares in SCHED_IDLE), off (each loader runs --cores threads and the OS shares the\n"
          "cores fairly among the runnable threads, modelled as processor sharing) and static\n"
          "(each loader runs cores/N threads). Normal-priority threads (workers, the trainer\n"
          "stand-in) share the cores first; spares get only the cores they leave.\n"
          "\n"
          "The numbers are simulated. Measured inputs: the per-sample CPU costs, from a profile.\n"
          "Assumed: the OS shares the cores as an ideal fair scheduler (no context-switch,\n"
          "cache or memory-bandwidth cost; SCHED_IDLE gets nothing beside a runnable normal\n"
          "thread), the trainer's step is a sleep (no CPU: the cores kept for the trainers idle\n"
          "unless spares take them), the coordinator's other parameters are its defaults, and a\n"
          "profile that has only the mean cost gets --cpu-cv as its spread.\n"
          "\n"
          "node:\n"
          "  --ranks N                 trainers, one loader each (1..64)\n"
          "  --cores C                 the node's cores (default 16)\n"
          "  --budget B                the coordinator's budget, FF_NODE_THREADS (default: --cores)\n"
          "  --trainer-cores T         cores the coordinator keeps for the trainers' own threads,\n"
          "                            FF_NODE_TRAINER_CORES: auto (the default, the coordinator's:\n"
          "                            as many as the node's CPU use beside the loaders' workers\n"
          "                            measures, here the stand-in's) or 0..4096 per trainer\n"
          "  --batch-size N            samples per batch (default 32, as bench/node.py)\n"
          "  --prefetch N              batches prepared ahead (default 2)\n"
          "  --seconds S               simulated length of each run (default 10)\n"
          "  --warmup S                the figures count from S on (default 0: the whole run, as\n"
          "                            bench/node.py measures it, start-up included)\n"
          "costs (even ranks: RandAugment in bench/node.py; odd ranks: crop-flip-normalize):\n"
          "  --profile FILE            even ranks' CPU costs: `fusionflow bench --json` output\n"
          "                            (measure with --threads 1: its mean) or a text file of\n"
          "                            per-sample costs, one 'cost_ms [size]' per line\n"
          "  --cpu-ms-per-sample MS    instead of --profile: the even ranks' mean cost (assumed)\n"
          "  --odd-profile FILE        odd ranks' costs, the same formats (default: as the even)\n"
          "  --odd-cpu-ms-per-sample MS  instead of --odd-profile\n"
          "  --cpu-cv V                spread of a mean-only cost, log-normal (default 0: every\n"
          "                            sample costs the mean)\n"
          "scenarios and output:\n"
          "  --scenario NAME           hungry, lockstep, one-stalled, changing, standin, or all\n"
          "                            (default all; bench/node.py's scenarios)\n"
          "  --seed N                  seed of the sample costs (default 0)\n"
          "  --json                    one JSON object on stdout (bench/node.py --json's layout)\n"
          "  -h, --help                show this help\n"
          "\n"
          "The report goes to stderr; --json prints one JSON object on stdout instead.\n"
          "Exit status: 0 success, 1 runtime error, 2 usage.\n");
}

/* One rank's costs from a profile or a given mean; *source says which,
 * *mean_ms is their mean. */
static int load_costs(const char *path, double ms, double cv, ff__sim_node_rank *r, ff__sim_profile *prof,
                      const char **source, double *mean_ms) {
  if (path) {
    ff__error err = {0};
    if (ff__sim_profile_load(path, prof, &err)) {
      fprintf(stderr, "fusionflow sim: %s\n", err.msg);
      return 0;
    }
    *r = (ff__sim_node_rank){.cpu_s = prof->cpu_s, .cpu_cv = prof->cpu_list ? 0 : cv, .cpu_list = prof->cpu_list,
                             .list_len = prof->list_len};
    *source = prof->cpu_list ? "measured (per-sample list)" : "measured (profile mean)";
    *mean_ms = prof->cpu_s * 1e3;
  } else {
    *r = (ff__sim_node_rank){.cpu_s = ms * 1e-3, .cpu_cv = cv};
    *source = "given";
    *mean_ms = ms;
  }
  return 1;
}

static void json_string(const char *s) {
  putchar('"');
  for (; s && *s; s++) {
    if (*s == '"' || *s == '\\') putchar('\\');
    if ((unsigned char)*s >= 0x20) putchar(*s);
  }
  putchar('"');
}

static void json_mode(const ff__sim_node_config *c, const ff__sim_node_result *r) {
  printf("{\"members\": [");
  for (int i = 0; i < c->ranks; i++)
    printf("%s{\"images_per_s\": %.1f, \"stall\": %.4f, \"threads\": %.2f, \"spares\": %.2f, \"cpu_s\": %.3f, "
           "\"batches\": %ld}",
           i ? ", " : "", r->trainer[i].images_per_s, r->trainer[i].stall, r->trainer[i].threads, r->trainer[i].spares,
           r->trainer[i].cpu_s, r->trainer[i].batches);
  if (c->standin) printf(", {\"steps_per_s\": %.4f}", r->standin_rate);
  printf("], \"cpu_use\": %.4f, \"machine_busy\": %.4f, \"threads_each\": %d}", r->cpu_use, r->busy, r->threads_each);
}

/* bench/node.py's print_scenario, with the busy column the model's (the stand-in included). */
static void print_scenario(const char *name, const ff__sim_node_config *c, const ff__sim_node_result *r) {
  fprintf(stderr, "\n%s\n", name);
  fprintf(stderr, "  %-7s %8s %6s %6s %6s  %s\n", "mode", "node/s", "cpu", "busy", "thr",
          "per trainer: images/s (stall, threads)");
  for (int m = 0; m < FF__SIM_NODE_NMODES; m++) {
    fprintf(stderr, "  %-7s %8.0f %5.0f%% %5.0f%% %6d ", ff__sim_node_mode_name((ff__sim_node_mode)m),
            r[m].node_images_per_s, 100 * r[m].cpu_use, 100 * r[m].busy, r[m].threads_each);
    for (int i = 0; i < c->ranks; i++)
      fprintf(stderr, " %.0f (%.2f, %.1f)", r[m].trainer[i].images_per_s, r[m].trainer[i].stall,
              r[m].trainer[i].threads);
    if (c->standin) fprintf(stderr, "  stand-in %.3fx alone", r[m].standin_rate);
    fputc('\n', stderr);
  }
  const ff__sim_node_result *co = &r[FF__SIM_NODE_COORD], *off = &r[FF__SIM_NODE_OFF], *st = &r[FF__SIM_NODE_STATIC];
  double worst_off = INFINITY, worst_static = INFINITY;
  for (int i = 0; i < c->ranks; i++) {
    double a = co->trainer[i].images_per_s / fmax(off->trainer[i].images_per_s, 1e-9);
    double b = co->trainer[i].images_per_s / fmax(st->trainer[i].images_per_s, 1e-9);
    worst_off = fmin(worst_off, a), worst_static = fmin(worst_static, b);
  }
  fprintf(stderr, "  coord/off: node %.3fx, worst trainer %.3fx; coord/static: node %.3fx, worst trainer %.3fx\n",
          co->node_images_per_s / fmax(off->node_images_per_s, 1e-9), worst_off,
          co->node_images_per_s / fmax(st->node_images_per_s, 1e-9), worst_static);
}

int ff__cli_sim_node(int argc, char **argv) {
  enum { O_RANKS = 256, O_CORES, O_BUDGET, O_TRAINER, O_BATCH, O_PREFETCH, O_SECONDS, O_WARMUP, O_PROFILE, O_CPU, O_ODDPROF, O_ODDCPU, O_CV,
         O_SCENARIO, O_SEED, O_JSON };
  static const struct option opts[] = {
      {"ranks", required_argument, 0, O_RANKS},
      {"cores", required_argument, 0, O_CORES},
      {"budget", required_argument, 0, O_BUDGET},
      {"trainer-cores", required_argument, 0, O_TRAINER},
      {"batch-size", required_argument, 0, O_BATCH},
      {"prefetch", required_argument, 0, O_PREFETCH},
      {"seconds", required_argument, 0, O_SECONDS},
      {"warmup", required_argument, 0, O_WARMUP},
      {"profile", required_argument, 0, O_PROFILE},
      {"cpu-ms-per-sample", required_argument, 0, O_CPU},
      {"odd-profile", required_argument, 0, O_ODDPROF},
      {"odd-cpu-ms-per-sample", required_argument, 0, O_ODDCPU},
      {"cpu-cv", required_argument, 0, O_CV},
      {"scenario", required_argument, 0, O_SCENARIO},
      {"seed", required_argument, 0, O_SEED},
      {"json", no_argument, 0, O_JSON},
      {"help", no_argument, 0, 'h'},
      {0, 0, 0, 0}};
  ff__sim_node_config cfg;
  ff__sim_node_config_init(&cfg);
  const char *even_path = NULL, *odd_path = NULL, *scenario = "all";
  double even_ms = -1, odd_ms = -1, cv = 0;
  int json = 0, c, li = 0, cv_given = 0;
  long v;
  optind = 1;
  const char *help = "fusionflow sim --ranks N"; /* its own help: `fusionflow sim --help` is the one-node simulator's */
  while ((c = ff__cli_getopt(argc, argv, opts, &li, help)) != -1) {
    const char *name = opts[li].name;
    switch (c) {
    case O_RANKS:
      if (!strcmp(optarg, "--help") || !strcmp(optarg, "-h")) return usage(stdout), 0; /* `sim --ranks --help` */
      if (!ff__cli_parse_long("sim", name, optarg, 1, FF__SIM_NODE_MAX_RANKS, &v)) return 2;
      cfg.ranks = (int)v;
      break;
    case O_CORES: if (!ff__cli_parse_long("sim", name, optarg, 1, 4096, &v)) return 2; cfg.cores = (int)v; break;
    case O_BUDGET: if (!ff__cli_parse_long("sim", name, optarg, 1, 4096, &v)) return 2; cfg.budget = (int)v; break;
    case O_TRAINER:
      if (!strcasecmp(optarg, "auto")) {
        cfg.trainer_cores = FF__COORD_TRAINER_AUTO;
        break;
      }
      if (!ff__cli_parse_long("sim", name, optarg, 0, 4096, &v)) {
        fprintf(stderr, "fusionflow sim: --trainer-cores also takes auto (the default)\n");
        return 2;
      }
      cfg.trainer_cores = (int)v;
      break;
    case O_BATCH: if (!ff__cli_parse_long("sim", name, optarg, 1, 1 << 16, &v)) return 2; cfg.batch_size = (int)v; break;
    case O_PREFETCH: if (!ff__cli_parse_long("sim", name, optarg, 1, 64, &v)) return 2; cfg.prefetch = (int)v; break;
    case O_SECONDS: if (!ff__cli_parse_double("sim", name, optarg, 1e-3, 1e5, &cfg.seconds)) return 2; break;
    case O_WARMUP: if (!ff__cli_parse_double("sim", name, optarg, 0, 1e5, &cfg.warmup_s)) return 2; break;
    case O_PROFILE: even_path = optarg; break;
    case O_CPU: if (!ff__cli_parse_double("sim", name, optarg, 1e-6, 1e6, &even_ms)) return 2; break;
    case O_ODDPROF: odd_path = optarg; break;
    case O_ODDCPU: if (!ff__cli_parse_double("sim", name, optarg, 1e-6, 1e6, &odd_ms)) return 2; break;
    case O_CV: if (!ff__cli_parse_double("sim", name, optarg, 0, 100, &cv)) return 2; cv_given = 1; break;
    case O_SCENARIO: scenario = optarg; break;
    case O_SEED: if (!ff__cli_parse_long("sim", name, optarg, 0, LONG_MAX, &v)) return 2; cfg.seed = (uint64_t)v; break;
    case O_JSON: json = 1; break;
    case 'h': usage(stdout); return 0;
    default: return 2;
    }
  }
  if (optind < argc) return ff__cli_usage_error("fusionflow sim", help, "unexpected argument '%s'", argv[optind]);
  if ((even_ms < 0) == !even_path)
    return ff__cli_usage_error("fusionflow sim", help, "give exactly one of --cpu-ms-per-sample and --profile");
  if (odd_path && odd_ms >= 0) {
    fprintf(stderr, "fusionflow sim: give at most one of --odd-cpu-ms-per-sample and --odd-profile\n");
    return 2;
  }
  if (cfg.warmup_s >= cfg.seconds) {
    fprintf(stderr, "fusionflow sim: --warmup (%g s) must be shorter than --seconds (%g s)\n", cfg.warmup_s,
            cfg.seconds);
    return 2;
  }
  int all = !strcmp(scenario, "all"), known = all;
  for (int i = 0; ff__sim_node_scenarios[i]; i++)
    known |= !strcmp(scenario, ff__sim_node_scenarios[i]);
  if (!known) {
    fprintf(stderr, "fusionflow sim: --scenario expects hungry, lockstep, one-stalled, changing, standin or all, "
            "got '%s'\n", scenario);
    return 2;
  }

  ff__sim_profile even_prof = {0}, odd_prof = {0};
  ff__sim_node_rank even, odd, ranks[FF__SIM_NODE_MAX_RANKS];
  const char *even_src, *odd_src;
  double even_mean, odd_mean;
  int rc = 0;
  if (!load_costs(even_path, even_ms, cv, &even, &even_prof, &even_src, &even_mean)) return 1;
  if (odd_path || odd_ms >= 0) {
    if (!load_costs(odd_path, odd_ms, cv, &odd, &odd_prof, &odd_src, &odd_mean)) {
      ff__sim_profile_free(&even_prof);
      return 1;
    }
  } else {
    odd = even, odd_src = even_src, odd_mean = even_mean;
    odd_path = even_path;
  }
  const char *cv_src = even.cpu_list && odd.cpu_list ? "unused (per-sample lists)" : cv_given ? "given" : "assumed";
  char tc[16]; /* trainer_cores as JSON: "auto" or the number */
  if (cfg.trainer_cores == FF__COORD_TRAINER_AUTO)
    snprintf(tc, sizeof tc, "\"auto\"");
  else
    snprintf(tc, sizeof tc, "%d", cfg.trainer_cores);

  if (json) {
    printf("{\"simulated\": true, \"inputs\": {\"even_cpu_ms_per_sample\": {\"value\": %.6g, \"source\": \"%s\", "
           "\"file\": ", even_mean, even_src);
    json_string(even_path);
    printf("}, \"odd_cpu_ms_per_sample\": {\"value\": %.6g, \"source\": \"%s\", \"file\": ",
           odd_mean, odd_src);
    json_string(odd_path);
    printf("}, \"cpu_cv\": {\"value\": %g, \"source\": \"%s\"}, \"scheduler\": \"assumed: ideal processor "
           "sharing, SCHED_IDLE spares on the cores normal-priority threads leave\", \"step\": \"assumed: a sleep, "
           "no CPU\"}, \"config\": {\"cores\": %d, \"loaders\": %d, \"seconds\": %g, \"warmup_s\": %g, "
           "\"batch_size\": %d, \"prefetch\": %d, \"seed\": %llu, \"budget\": %d, \"trainer_cores\": %s, "
           "\"standin_alone_steps_per_s\": 1.0}, \"scenarios\": {",
           cv, cv_src, cfg.cores, cfg.ranks, cfg.seconds, cfg.warmup_s, cfg.batch_size, cfg.prefetch,
           (unsigned long long)cfg.seed, cfg.budget > 0 ? cfg.budget : cfg.cores, tc);
  } else {
    fprintf(stderr, "fusionflow sim: SIMULATED node, %d trainers, %d cores (the coordinator's budget %d, trainer "
            "cores %s), batch %d, prefetch %d, %g s per run (measured from %g s)\n", cfg.ranks, cfg.cores,
            cfg.budget > 0 ? cfg.budget : cfg.cores, cfg.trainer_cores == FF__COORD_TRAINER_AUTO ? "auto" : tc,
            cfg.batch_size, cfg.prefetch, cfg.seconds,
            cfg.warmup_s);
    fprintf(stderr, "  even ranks: %.3f ms/sample, %s%s%s\n", even_mean, even_src, even_path ? ", " : "",
            even_path ? even_path : "");
    fprintf(stderr, "  odd ranks:  %.3f ms/sample, %s%s%s\n", odd_mean, odd_src, odd_path ? ", " : "",
            odd_path ? odd_path : "");
    fprintf(stderr, "  spread of a mean-only cost: cv %g (%s)\n", cv, cv_src);
    fprintf(stderr, "  assumed: ideal processor sharing of the cores, SCHED_IDLE spares only on cores the "
            "normal-priority threads leave, the trainer's step a sleep, the coordinator's other parameters its "
            "defaults\n");
    fprintf(stderr, "  busy: the node's busy share with the stand-in; stand-in: its speed over its speed alone\n");
  }
  int printed = 0;
  for (int s = 0; ff__sim_node_scenarios[s] && !rc; s++) {
    const char *name = ff__sim_node_scenarios[s];
    if (!all && strcmp(name, scenario)) continue;
    ff__error err = {0};
    ff__sim_node_result r[FF__SIM_NODE_NMODES];
    ff_status st = ff__sim_node_scenario(name, &even, &odd, &cfg, ranks, &err);
    for (int m = 0; !st && m < FF__SIM_NODE_NMODES; m++)
      st = ff__sim_node_run(&cfg, (ff__sim_node_mode)m, &r[m], &err);
    if (st) {
      fprintf(stderr, "fusionflow sim: %s\n", err.msg);
      rc = st == FF_EINVAL ? 2 : 1;
      break;
    }
    if (json) {
      printf("%s\"%s\": {", printed++ ? ", " : "", name);
      for (int m = 0; m < FF__SIM_NODE_NMODES; m++) {
        printf("%s\"%s\": ", m ? ", " : "", ff__sim_node_mode_name((ff__sim_node_mode)m));
        json_mode(&cfg, &r[m]);
      }
      printf("}");
    } else {
      print_scenario(name, &cfg, r);
    }
  }
  if (json && !rc) printf("}}\n");
  ff__sim_profile_free(&even_prof);
  ff__sim_profile_free(&odd_prof);
  return rc;
}
