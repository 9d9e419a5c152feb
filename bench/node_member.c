/* node_member: one trainer of bench/node.py, a process as torchrun starts
 * one per GPU, either with a loader or as a CPU trainer stand-in.
 *
 *   node_member --source SRC --pipeline TEXT --seconds S [--threads N]
 *               [--batch-size B] [--steps MS[@FROM_S],...] [--lockstep FILE:N]
 *               [--seed K]
 *   node_member --standin-work N --seconds S
 *
 * With a loader it consumes batches for S seconds (after a start it waits
 * for on stdin: one line, so that every member of a run starts together),
 * sleeping after each batch for its current step: --steps "200,0@5" steps
 * 200 ms per batch from the start and 0 ms (a trainer that always waits)
 * from second 5 on. --lockstep FILE:N makes N members wait for each other
 * after every batch, as DDP's all-reduce does (a barrier in the shared
 * file FILE, made zero-filled by the caller). It prints one JSON object:
 * images/s over the run and per step segment, the share of the time it
 * waited for batches ("stall"), its CPU seconds (getrusage) and the worker
 * threads it ran on average (the node coordinator's allotment).
 *
 * The stand-in does a fixed amount of single-threaded work per step (N
 * rounds of an integer hash: a Python training loop's main thread) and
 * prints its steps/s, its CPU seconds, its steps in each whole second of
 * the run, and (from_1s, in runs of 2 s or more) its steps/s and CPU
 * seconds from the end of its first step 1 s or more into the run: the
 * steady state, the start-up left out. Environment: FF_NODE_GROUP and FF_NODE_THREADS as
 * for any loader. */
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "fusionflow/fusionflow.h"

#define MAX_SEGMENTS 16
#define MAX_SECONDS 3600 /* the stand-in counts its steps in each second of the run up to this */

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void sleep_s(double s) {
  if (s <= 0) return;
  struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
  while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {
  }
}

static double cpu_s(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)ru.ru_utime.tv_sec + (double)ru.ru_stime.tv_sec + (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

/* A barrier of n processes in a shared page: arrivals count up, the last
 * resets the count and bumps the generation the others sleep on (futex). */
typedef struct barrier {
  _Atomic uint32_t count, gen, stop;
} barrier;

/* Returns 1 once the run is over: the last to arrive decides (last_done),
 * so that every member leaves after the same step. */
static int barrier_wait(barrier *b, uint32_t n, int last_done) {
  uint32_t gen = atomic_load(&b->gen);
  if (atomic_fetch_add(&b->count, 1) + 1 == n) {
    atomic_store(&b->count, 0);
    if (last_done) atomic_store(&b->stop, 1);
    atomic_fetch_add(&b->gen, 1);
    syscall(SYS_futex, &b->gen, FUTEX_WAKE, INT32_MAX, NULL, NULL, 0);
    return last_done;
  }
  double give_up = now_s() + 60; /* a member that died must not hang the rest */
  while (atomic_load(&b->gen) == gen && now_s() < give_up) {
    struct timespec ts = {0, 200000000L};
    syscall(SYS_futex, &b->gen, FUTEX_WAIT, gen, &ts, NULL, 0);
  }
  return atomic_load(&b->gen) == gen || atomic_load(&b->stop);
}

static barrier *barrier_open(const char *spec, uint32_t *n) {
  const char *colon = strrchr(spec, ':');
  if (!colon) return NULL;
  char path[4096];
  snprintf(path, sizeof path, "%.*s", (int)(colon - spec), spec);
  *n = (uint32_t)atoi(colon + 1);
  int fd = open(path, O_RDWR);
  if (fd < 0 || *n < 1) return NULL;
  barrier *b = mmap(NULL, sizeof *b, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  return b == MAP_FAILED ? NULL : b;
}

/* Returns 0 when the caller went away before the start. */
static int wait_for_start(void) {
  char line[16];
  return fgets(line, sizeof line, stdin) != NULL;
}

static uint64_t work(uint64_t rounds, uint64_t x) {
  for (uint64_t i = 0; i < rounds; i++) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 29;
  }
  return x;
}

static int standin(uint64_t rounds, double seconds) {
  if (!wait_for_start()) return 1;
  double t0 = now_s(), c0 = cpu_s();
  double mark_t = 0, mark_cpu = 0; /* at the end of the first step that ended 1 s or more into the run */
  uint64_t x = 1;
  long steps = 0, mark_steps = 0, each_second[MAX_SECONDS] = {0};
  while (now_s() - t0 < seconds) {
    x = work(rounds, x);
    steps++;
    double t = now_s() - t0;
    if ((int)t < MAX_SECONDS) each_second[(int)t]++;
    if (t >= 1 && !mark_steps) mark_t = t, mark_cpu = cpu_s() - c0, mark_steps = steps;
  }
  double wall = now_s() - t0, cpu = cpu_s() - c0;
  printf("{\"steps_per_s\": %.3f, \"steps\": %ld, \"seconds\": %.3f, \"cpu_s\": %.3f, \"check\": %llu, "
         "\"steps_each_second\": [",
         steps / wall, steps, wall, cpu, (unsigned long long)(x & 0xffff));
  for (int i = 0; i < (int)seconds && i < MAX_SECONDS; i++) printf("%s%ld", i ? ", " : "", each_second[i]);
  printf("]");
  if (mark_steps && seconds >= 2) /* the steady state, the start-up left out (a second of it at least) */
    printf(", \"from_1s\": {\"steps_per_s\": %.3f, \"seconds\": %.3f, \"cpu_s\": %.3f}",
           (steps - mark_steps) / (wall - mark_t), wall - mark_t, cpu - mark_cpu);
  printf("}\n");
  return 0;
}

int main(int argc, char **argv) {
  const char *source = NULL, *pipeline = NULL, *steps = "0", *lockstep = NULL;
  double seconds = 5;
  int threads = 0, batch = 32;
  long long work_rounds = -1;
  uint64_t seed = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    const char *k = argv[i], *v = argv[i + 1];
    if (!strcmp(k, "--source")) source = v;
    else if (!strcmp(k, "--pipeline")) pipeline = v;
    else if (!strcmp(k, "--seconds")) seconds = atof(v);
    else if (!strcmp(k, "--threads")) threads = atoi(v);
    else if (!strcmp(k, "--batch-size")) batch = atoi(v);
    else if (!strcmp(k, "--steps")) steps = v;
    else if (!strcmp(k, "--lockstep")) lockstep = v;
    else if (!strcmp(k, "--seed")) seed = strtoull(v, NULL, 10);
    else if (!strcmp(k, "--standin-work")) work_rounds = atoll(v);
    else {
      fprintf(stderr, "node_member: unknown option %s\n", k);
      return 2;
    }
  }
  if (work_rounds >= 0) return standin((uint64_t)work_rounds, seconds);
  if (!source || !pipeline) {
    fprintf(stderr, "node_member: --source and --pipeline are required (or --standin-work)\n");
    return 2;
  }
  double seg_from[MAX_SEGMENTS], seg_step[MAX_SEGMENTS];
  int segs = 0;
  for (const char *p = steps; *p && segs < MAX_SEGMENTS;) {
    char *end;
    seg_step[segs] = strtod(p, &end) * 1e-3;
    seg_from[segs] = *end == '@' ? strtod(end + 1, &end) : 0;
    segs++;
    p = *end == ',' ? end + 1 : end;
    if (*end && *end != ',') {
      fprintf(stderr, "node_member: --steps expects MS[@FROM_S],..., got '%s'\n", steps);
      return 2;
    }
  }
  uint32_t members = 0;
  barrier *bar = lockstep ? barrier_open(lockstep, &members) : NULL;
  if (lockstep && !bar) {
    fprintf(stderr, "node_member: --lockstep %s: cannot open (FILE:N)\n", lockstep);
    return 2;
  }

  ff_config c;
  ff_config_init(&c);
  c.source = source;
  c.pipeline = pipeline;
  c.batch_size = batch;
  c.seed = seed;
  if (threads > 0) c.num_threads = threads;
  ff_loader *l = NULL;
  if (ff_loader_open(&c, &l) != FF_OK) {
    fprintf(stderr, "node_member: %s\n", ff_loader_errmsg(l));
    return 1;
  }
  if (!wait_for_start()) {
    ff_loader_close(l); /* leaves the node's group: its shared memory goes with the last member */
    return 1;
  }
  double t0 = now_s(), c0 = cpu_s(), wait = 0, thread_sum = 0;
  long batches = 0, seg_samples[MAX_SEGMENTS] = {0};
  unsigned long long samples = 0;
  uint64_t epoch = 0;
  for (;;) {
    double t = now_s() - t0;
    if (!bar && t >= seconds) break;
    int seg = 0;
    while (seg + 1 < segs && t >= seg_from[seg + 1])
      seg++;
    double w0 = now_s();
    ff_batch *b;
    ff_status st = ff_loader_next(l, &b);
    wait += now_s() - w0;
    if (st == FF_END) {
      ff_loader_set_epoch(l, ++epoch);
      continue;
    }
    if (st) {
      fprintf(stderr, "node_member: %s\n", ff_loader_errmsg(l));
      ff_loader_close(l);
      return 1;
    }
    size_t n = ff_batch_size(b);
    ff_batch_release(b);
    samples += n;
    seg_samples[seg] += (long)n;
    ff_stats s;
    ff_loader_stats(l, &s);
    thread_sum += s.num_threads;
    batches++;
    sleep_s(seg_step[seg]);
    if (bar && barrier_wait(bar, members, now_s() - t0 >= seconds)) break;
  }
  double wall = now_s() - t0, cpu = cpu_s() - c0;
  /* Closed before the output: a caller that went away (SIGPIPE on the
   * write) must not keep the loader from leaving the node's group. */
  ff_loader_close(l);
  printf("{\"images_per_s\": %.1f, \"samples\": %llu, \"seconds\": %.3f, \"stall\": %.4f, \"cpu_s\": %.3f, "
         "\"threads\": %.2f, \"segments\": [",
         samples / wall, samples, wall, wait / wall, cpu, batches ? thread_sum / batches : 0);
  for (int i = 0; i < segs; i++) {
    double from = seg_from[i], to = i + 1 < segs ? seg_from[i + 1] : wall;
    if (to > wall) to = wall;
    printf("%s{\"from_s\": %.2f, \"step_ms\": %g, \"images_per_s\": %.1f}", i ? ", " : "", from, seg_step[i] * 1e3,
           to > from ? seg_samples[i] / (to - from) : 0.0);
  }
  printf("]}\n");
  fflush(stdout);
  return 0;
}
