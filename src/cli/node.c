/* node.c — `fusionflow node status GROUP`: what the node coordinator
 * (src/sched/coord.h) does right now for the loaders of one node: each
 * member's process, its allotment (guaranteed threads) and burst (threads
 * it runs on cores nobody else uses), its fair share and target, and the
 * signals they come from (stall share, ring fill, busy share, time since
 * its last report), refreshed every --interval with --watch. It reads the
 * group's shared memory without joining it. GROUP auto is resolved from the
 * environment as a trainer started by torchrun resolves FF_NODE_GROUP=auto
 * (ff__coord_torchrun_group). Text on stdout, or one JSON
 * object per refresh with --json. */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "core/clock.h"
#include "sched/coord_segment.h"

static void node_usage(FILE *f) {
  fprintf(f,
          "usage: fusionflow node status GROUP [--watch] [--interval MS] [--count N] [--json]\n"
          "\n"
          "Shows the node coordinator's table of GROUP (FF_NODE_GROUP of the trainers, or auto:\n"
          "the group trainers started by torchrun with FF_NODE_GROUP=auto join, resolved as\n"
          "they do from this environment: torchelastic-<TORCHELASTIC_RUN_ID>, else\n"
          "port-<MASTER_PORT>): per member its pid, state\n"
          "(gone: its process exited or stopped reporting, its slot freed at the next report;\n"
          "stalled: its trainer waits; slack: its ring is full and its workers idle; quiet: no\n"
          "batch asked for lately, or the process is stopped; neutral), threads it runs =\n"
          "allotment + burst at normal priority (cores nobody else uses, or that loaders with\n"
          "slack use now and then; the budget less the cores kept for the trainers' own threads:\n"
          "the rest of a loader's threads are spares in SCHED_IDLE),\n"
          "fair share, target, and the smoothed signals: stall share, ring fill, busy share\n"
          "(worker CPU time / threads x interval), batch interval and the time since its last\n"
          "report, its workers' cores (the CPU they published after each sample, over the\n"
          "last %d ms or more up to the group's last report where its own reports come further\n"
          "apart, else smoothed over its reports; - before its second report) and whether its\n"
          "workers are parked now (every one waits for work: its ring is full). With\n"
          "FF_NODE_TRAINER_CORES=auto (the default) it shows the CPU the node uses beside the\n"
          "loaders' workers (the others': trainers, other processes), smoothed, and the cores\n"
          "kept for them; else the fixed cores per trainer. Reads the table without joining.\n"
          "\n"
          "  --watch         refresh until interrupted (Ctrl-C) or the group ends (its last\n"
          "                  member left, or every member exited: said, exit status 0)\n"
          "  --interval MS   time between refreshes with --watch (10..3600000, default 1000)\n"
          "  --count N       refresh N times, then stop (implies --watch)\n"
          "  --json          one JSON object per refresh\n",
          FF__COORD_LIVE_MS);
}

static volatile sig_atomic_t interrupted;
static void on_interrupt(int sig) { (void)sig, interrupted = 1; }

/* Copies the members not gone (the coordinator frees their slots at the
 * next report) into out; returns their count. */
static int live_members(const ff__coord_params *p, const ff__coord_member *m, int n, uint64_t now,
                        ff__coord_member *out) {
  int k = 0;
  for (int i = 0; i < n; i++)
    if (strcmp(ff__coord_member_state(p, &m[i], now), "gone")) out[k++] = m[i];
  return k;
}

/* Its workers' cores: the live measure where one was taken (its reports far
 * apart), else the smoothed one of its reports; negative before either. */
static double worker_cores(const ff__coord_member *e) {
  if (e->live_span_ns) return e->live_cores;
  return e->reports >= 2 ? e->worker_cores : -1;
}

static void print_text(const char *group, const ff__coord_params *p, const ff__coord_member *m, int n,
                       uint64_t now) {
  ff__coord_member alive[FF__COORD_MAX_MEMBERS];
  int k = live_members(p, m, n, now, alive), allotted = 0, running = 0;
  for (int i = 0; i < k; i++) allotted += alive[i].threads, running += alive[i].threads + alive[i].burst;
  int reserved = ff__coord_reserved(p, alive, k), guaranteed = ff__coord_guaranteed_budget(p, alive, k);
  printf("group %s: %d member%s", group, k, k == 1 ? "" : "s");
  if (k < n) printf(" (and %d gone)", n - k);
  printf(", budget %d thread%s, %d guaranteed%s after %d core%s kept for the trainers (%d allotted, %d running; "
         "the rest spares in SCHED_IDLE), expected members %d%s\n", p->budget_threads,
         p->budget_threads == 1 ? "" : "s", guaranteed,
         guaranteed > 0 && guaranteed > p->budget_threads - reserved ? " (a thread each: over the budget)" : "",
         reserved, reserved == 1 ? "" : "s", allotted, running, p->expected_members,
         p->expected_members < k ? " (LOCAL_WORLD_SIZE; the members beyond count as they come)" : "");
  if (p->trainer_cores == FF__COORD_TRAINER_AUTO)
    printf("trainers' reserve: auto, others' CPU %.2f cores (last window %.2f, %d windows), %d kept, %d change%s\n",
           p->reserve.others_cores, p->reserve.others_last, p->reserve.windows, p->reserve.cores, p->reserve.changes,
           p->reserve.changes == 1 ? "" : "s");
  else
    printf("trainers' reserve: %d core%s per trainer (FF_NODE_TRAINER_CORES)\n", p->trainer_cores,
           p->trainer_cores == 1 ? "" : "s");
  printf("%8s  %-8s %5s %5s %5s %5s %6s  %6s %5s %5s %9s %9s %6s %6s\n", "pid", "state", "run", "allot", "burst",
         "fair", "target", "stall", "ring", "busy", "interval", "last", "cores", "parked");
  for (int i = 0; i < n; i++) {
    const ff__coord_member *e = &m[i];
    double age_ms = now > e->heartbeat_ns ? (double)(now - e->heartbeat_ns) * 1e-6 : 0;
    char live[16] = "-";
    if (worker_cores(e) >= 0) snprintf(live, sizeof live, "%.2f", worker_cores(e));
    printf("%8d  %-8s %5d %5d %5d %5d %6d  %6.2f %5.2f %5.2f %7.1fms %7.0fms %6s %6s\n", (int)e->pid,
           ff__coord_member_state(p, e, now), e->threads + e->burst, e->threads, e->burst, e->fair, e->target,
           e->stall_share, e->ring_fill, e->busy_share, (double)e->interval_ns * 1e-6, age_ms, live,
           e->parked ? "yes" : "no");
  }
}

static void print_json(const char *group, const ff__coord_params *p, const ff__coord_member *m, int n,
                       uint64_t now) {
  ff__coord_member alive[FF__COORD_MAX_MEMBERS];
  int k = live_members(p, m, n, now, alive);
  printf("{\"group\": \"");
  for (const char *c = group; *c; c++)
    if (*c == '"' || *c == '\\') printf("\\%c", *c);
    else if ((unsigned char)*c >= 0x20) putchar(*c);
  printf("\", \"budget_threads\": %d, \"trainer_cores\": ", p->budget_threads);
  if (p->trainer_cores == FF__COORD_TRAINER_AUTO)
    printf("\"auto\"");
  else
    printf("%d", p->trainer_cores);
  printf(", \"reserve_cores\": %d, \"others_cores\": %.4f, \"others_last_cores\": %.4f, \"reserve_windows\": %d, "
         "\"reserve_changes\": %d, \"guaranteed_threads\": %d, \"expected_members\": %d, \"members\": [",
         ff__coord_reserved(p, alive, k), p->reserve.others_cores, p->reserve.others_last, p->reserve.windows,
         p->reserve.changes, ff__coord_guaranteed_budget(p, alive, k), p->expected_members);
  for (int i = 0; i < n; i++) {
    const ff__coord_member *e = &m[i];
    char live[32] = "null", cores[32] = "null";
    if (e->live_span_ns) snprintf(live, sizeof live, "%.4f", e->live_cores);
    if (worker_cores(e) >= 0) snprintf(cores, sizeof cores, "%.4f", worker_cores(e));
    printf(
        "%s{\"pid\": %d, \"state\": \"%s\", \"threads\": %d, \"allotment\": %d, \"burst\": %d, \"fair\": %d, "
        "\"target\": %d, \"max_threads\": %d, \"stall_share\": %.4f, \"ring_fill\": %.4f, "
        "\"busy_share\": %.4f, \"interval_ms\": %.2f, \"last_report_ms\": %.1f, \"reports\": %d, "
        "\"worker_cores\": %s, \"live_cores\": %s, \"parked\": %s}",
        i ? ", " : "", (int)e->pid, ff__coord_member_state(p, e, now), e->threads + e->burst, e->threads,
        e->burst, e->fair, e->target, e->max_threads, e->stall_share, e->ring_fill, e->busy_share,
        (double)e->interval_ns * 1e-6, now > e->heartbeat_ns ? (double)(now - e->heartbeat_ns) * 1e-6 : 0.0,
        e->reports, cores, live, e->parked ? "true" : "false");
  }
  printf("]}\n");
}

static int node_status(int argc, char **argv) {
  enum { O_WATCH = 1, O_INTERVAL, O_COUNT, O_JSON };
  static const struct option opts[] = {{"watch", no_argument, 0, O_WATCH},
                                       {"interval", required_argument, 0, O_INTERVAL},
                                       {"count", required_argument, 0, O_COUNT},
                                       {"json", no_argument, 0, O_JSON},
                                       {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};
  int watch = 0, json = 0, c, li;
  long interval_ms = 1000, count = 0;
  while ((c = ff__cli_getopt(argc, argv, opts, &li, NULL)) != -1) {
    switch (c) {
    case O_WATCH: watch = 1; break;
    case O_INTERVAL:
      if (!ff__cli_parse_long("node status", "interval", optarg, 10, 3600000, &interval_ms)) return 2;
      break;
    case O_COUNT:
      if (!ff__cli_parse_long("node status", "count", optarg, 1, 1000000000, &count)) return 2;
      watch = 1;
      break;
    case O_JSON: json = 1; break;
    case 'h': node_usage(stdout); return 0;
    default: return 2;
    }
  }
  if (optind + 1 != argc)
    return ff__cli_usage_error(argv[0], NULL, "expects one GROUP%s", optind < argc ? " (and nothing after it)" : "");
  const char *group = argv[optind];
  char resolved[FF__COORD_GROUP_MAX];
  if (ff__coord_group_auto(group)) {
    if (!ff__coord_torchrun_group(resolved, sizeof resolved)) {
      fprintf(stderr,
              "%s: auto: no torchrun job in this environment (set TORCHELASTIC_RUN_ID or MASTER_PORT as "
              "the trainers have them, or name the GROUP)\n",
              argv[0]);
      return 1;
    }
    group = resolved;
  }
  signal(SIGINT, on_interrupt);
  for (long round = 0; !interrupted; round++) {
    ff__coord_member m[FF__COORD_MAX_MEMBERS];
    ff__coord_params p;
    int n = 0;
    ff__error err = {0};
    ff_status st = ff__coord_peek(group, m, &n, &p, &err);
    if (st == FF_EEMPTY && round > 0) { /* it was there: its last member left */
      fprintf(json ? stderr : stdout, "group %s ended: its last member left\n", group);
      return 0;
    }
    if (st != FF_OK) {
      fprintf(stderr, "%s: %s\n", argv[0], err.msg);
      return 1;
    }
    uint64_t now = ff__now_ns();
    int over = 0; /* stopped members (Ctrl-Z, a debugger) go silent, and come back */
    for (int i = 0; i < n; i++) over += ff__coord_member_over(&m[i], now);
    if (watch && round > 0 && n && over == n) { /* died without leaving */
      fprintf(json ? stderr : stdout, "group %s ended: its members exited without leaving (a join of any group on "
              "this node removes its shared memory once they were silent %d ms)\n", group,
              p.heartbeat_timeout_ms);
      return 0;
    }
    if (json)
      print_json(group, &p, m, n, now);
    else
      print_text(group, &p, m, n, now);
    fflush(stdout);
    if (!watch || (count && round + 1 >= count)) break;
    if (!json) putchar('\n');
    struct timespec ts = {interval_ms / 1000, (interval_ms % 1000) * 1000000L};
    nanosleep(&ts, NULL); /* Ctrl-C ends the sleep and the loop */
  }
  return 0;
}

int ff__cli_node(int argc, char **argv) {
  if (argc < 2) return ff__cli_usage_error("fusionflow node", NULL, "expects a subcommand: status GROUP");
  if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) return node_usage(stdout), 0;
  if (strcmp(argv[1], "status"))
    return ff__cli_usage_error("fusionflow node", NULL, "unknown subcommand '%s' (the one there is: status)", argv[1]);
  argv[1] = "fusionflow node status";
  return node_status(argc - 1, argv + 1);
}
