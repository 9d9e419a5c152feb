/* sim.c — the node simulator behind `fusionflow sim`: G trainers, one per
 * GPU, each fed by its own loader, in simulated time. Each loader's offload
 * decisions come from src/sched/policy.c (ff__sched_update,
 * ff__sched_device_count, ff__sched_pick_costliest) fed the same
 * observations the runtime measures, so what the simulator shows is what
 * that code does.
 *
 * The model. A sample has a CPU cost (seconds on one core): log-normal with
 * the given mean and coefficient of variation, or drawn uniformly from an
 * empirical list of per-sample costs (a profile). Its file size, which is
 * what the loader sees before it decodes, is the cost times
 * exp(size_noise * N(0,1)) (or the profile's size): correlated with the
 * cost, not equal to it. On the GPU the sample takes gpu_s * cost / mean
 * cost (larger images cost more there too), and each microbatch of device
 * samples adds launch_s; with placement `device` the decode adds
 * gpu_decode_s scaled the same way, either on the SMs before the ops
 * (nvJPEG hybrid: it pauses the step like them) or, with decode_engines, on
 * the JPEG engines, a queue of their own that the step does not wait for
 * (the ops of a microbatch start once its decodes are done). Each trainer's loader gets C/G of the node's
 * cores: ceil(C/G) worker threads that time-share them, so each runs at
 * (C/G) / ceil(C/G) of a core's speed. The workers take the CPU samples in
 * order, each the next one as soon as it is free, and fill a ring of
 * `prefetch` batches: batch k may start when the consumer asks for batch
 * k - prefetch (the loader's ring has prefetch + 1 entries and the trainer
 * holds one while it steps). When batch k starts, the strategy decides how
 * many of its samples go to the device and ff__sched_pick_costliest picks
 * the largest files. Device samples first spend device_cpu_frac of their
 * CPU cost on a worker (read and decode stay on the CPU in this project's
 * device executor; 0 for a pipeline that decodes on the GPU), then run on
 * the trainer's GPU as microbatches, in order. A batch is ready when its
 * last sample is. The GPU gives preprocessing priority: a training step
 * (step_s of GPU work) is paused while a microbatch runs, so the step is
 * slowed by exactly the device time that falls inside it — the
 * interference that makes gpu-only slow when the GPU is the bottleneck —
 * while preprocessing that runs while the trainer waits costs it nothing.
 * A trainer asks for batch j when its previous step ends, waits until the
 * batch is ready and steps; with sync (data parallel training) the step
 * ends for everyone when the slowest trainer's ends (the all-reduce).
 * At each hand-out the loader gives the policy what the runtime measures
 * over one batch interval: the interval, the wait, the batches ready when
 * the consumer asked, the batch's CPU samples and the worker time they
 * took (including the CPU part of device samples: with that attribution
 * the policy's deficit 1 - C/D is exact), the worker count, the device
 * samples and their device time, and device_ok. The new share applies to
 * the batches started after that. Randomness comes from Philox streams
 * (seed, trainer), so every strategy sees the same samples and a run is
 * deterministic. Not modelled: reading from storage, host-to-device copies
 * beyond launch_s, the device memory budget (device_ok is always 1), and a
 * node coordinator moving threads between loaders.
 *
 * Remote workers (remote_cpus > 0): each loader gets remote_cpus / G
 * one-CPU workers (ceil of it, time-sharing as the local ones) and decides
 * with src/sched/remote.c (ff__remote_update at each hand-out with the same
 * observations, ff__remote_learn for each microbatch back by then,
 * ff__remote_count when a batch starts, with the batches it is ahead times
 * the measured interval, the ready batches and the free microbatch slots);
 * the remote samples are the batch's last CPU samples, in microbatches of
 * remote_micro_batch, at most remote_in_flight per worker at once. A
 * microbatch reaches a worker after the latency, waits for the first free
 * one, costs remote_cpu_factor times its samples' local CPU cost there,
 * then crosses the loader's share of the node's link (bandwidth / G, one
 * transfer at a time) and the latency back. Taking it back costs
 * remote_host_factor times the cost on a local worker, charged when the
 * microbatch is sent (the capacity is right, its timing approximate) and
 * left out of the CPU time the policies see, as the runtime keeps it
 * apart. The batch is ready when its last microbatch is back and taken. */
#include "sim/sim.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/philox.h"
#include "sched/policy.h"
#include "sched/remote.h"

#define SIM_DOMAIN 0x53494d31u /* "SIM1": the simulator's own Philox streams */

const char *ff__sim_strategy_name(ff__sim_strategy s) {
  static const char *names[] = {"cpu-only", "gpu-only", "static", "ours"};
  return s >= 0 && s < FF__SIM_NSTRATEGIES ? names[s] : "?";
}

void ff__sim_config_init(ff__sim_config *c) {
  *c = (ff__sim_config){0};
  c->cores = 1;
  c->gpus = 1;
  c->step_s = 0.1;
  c->batch_size = 64;
  c->batches = 200;
  c->warmup = -1;
  c->prefetch = 2;
  c->size_noise = 0.1;
  c->sync = 1;
  c->remote_cpu_factor = 1;
  c->remote_micro_batch = 16;
  c->remote_in_flight = 2;
}

ff_status ff__sim_config_check(const ff__sim_config *c, ff__error *err) {
  if (c->cores < 1) return ff__error_set(err, FF_EINVAL, "cores must be >= 1 (got %d)", c->cores);
  if (c->gpus < 1) return ff__error_set(err, FF_EINVAL, "gpus must be >= 1 (got %d)", c->gpus);
  if (!(c->step_s > 0)) return ff__error_set(err, FF_EINVAL, "the step time must be > 0 (got %g s)", c->step_s);
  if (c->batch_size < 1) return ff__error_set(err, FF_EINVAL, "batch size must be >= 1 (got %d)", c->batch_size);
  if (c->batches < 1) return ff__error_set(err, FF_EINVAL, "batches must be >= 1 (got %ld)", c->batches);
  if (c->warmup >= c->batches)
    return ff__error_set(err, FF_EINVAL, "the warm-up (%ld) must leave batches to measure (of %ld)", c->warmup,
                         c->batches);
  if (c->prefetch < 1) return ff__error_set(err, FF_EINVAL, "prefetch must be >= 1 (got %d)", c->prefetch);
  if (c->cpu_list) {
    if (!c->list_len) return ff__error_set(err, FF_EINVAL, "the list of CPU costs is empty");
    for (size_t i = 0; i < c->list_len; i++)
      if (!(c->cpu_list[i] > 0)) return ff__error_set(err, FF_EINVAL, "CPU cost %zu of the list is not > 0", i);
  } else {
    if (!(c->cpu_s > 0)) return ff__error_set(err, FF_EINVAL, "the CPU cost per sample must be > 0 (got %g s)", c->cpu_s);
    if (!(c->cpu_cv >= 0)) return ff__error_set(err, FF_EINVAL, "the CPU cost's CV must be >= 0 (got %g)", c->cpu_cv);
  }
  if (!(c->gpu_s >= 0) || !(c->launch_s >= 0) || !(c->gpu_decode_s >= 0))
    return ff__error_set(err, FF_EINVAL, "GPU costs must be >= 0 (got %g s per sample, %g s per launch)", c->gpu_s,
                         c->launch_s);
  if (!(c->size_noise >= 0)) return ff__error_set(err, FF_EINVAL, "size noise must be >= 0 (got %g)", c->size_noise);
  if (c->micro_batch < 0) return ff__error_set(err, FF_EINVAL, "micro batch must be >= 0 (got %d)", c->micro_batch);
  if (!(c->device_cpu_frac >= 0 && c->device_cpu_frac <= 1))
    return ff__error_set(err, FF_EINVAL, "device CPU fraction must be in [0, 1] (got %g)", c->device_cpu_frac);
  if (c->remote_cpus < 0) return ff__error_set(err, FF_EINVAL, "remote CPUs must be >= 0 (got %d)", c->remote_cpus);
  if (!(c->remote_cpu_factor > 0 && c->remote_cpu_factor <= 1e6) || !(c->remote_host_factor >= 0 && c->remote_host_factor <= 1e6))
    return ff__error_set(err, FF_EINVAL, "the remote CPU factors must be in (0, 1e6] and [0, 1e6] (got %g, %g)",
                         c->remote_cpu_factor, c->remote_host_factor);
  if (!(c->remote_latency_s >= 0 && c->remote_latency_s <= 1e6) || !(c->remote_bandwidth >= 0) ||
      !(c->remote_bytes >= 0 && c->remote_bytes <= 1e15))
    return ff__error_set(err, FF_EINVAL, "the remote latency, bandwidth and bytes must be finite and >= 0 (got %g s, "
                         "%g bytes/s, %g bytes)", c->remote_latency_s, c->remote_bandwidth, c->remote_bytes);
  if (c->remote_micro_batch < 1 || c->remote_in_flight < 1)
    return ff__error_set(err, FF_EINVAL, "the remote microbatch and microbatches in flight must be >= 1 (got %d, %d)",
                         c->remote_micro_batch, c->remote_in_flight);
  return FF_OK;
}

/* ---- random draws ---- */

static double uniform01(ff__philox *r) { /* 53 bits, in (0, 1) */
  uint32_t a = ff__philox_u32(r) >> 5, b = ff__philox_u32(r) >> 6;
  return ((double)a * 67108864.0 + (double)b + 0.5) / 9007199254740992.0;
}

static double normal(ff__philox *r) { /* Box-Muller, one of the pair */
  double u1 = uniform01(r), u2 = uniform01(r);
  return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* ---- one trainer and its loader ---- */

typedef struct interval {
  double a, b; /* the GPU runs preprocessing in [a, b) */
} interval;

/* A remote microbatch in flight (or back and not yet folded in). */
typedef struct remote_mb {
  double submit, arrive, bytes;
  int n, busy, learned;
} remote_mb;

typedef struct trainer {
  ff__philox rng;
  ff__sched_state st;
  ff__remote_state rst;
  double *rworker_free; /* min-heap of the times the remote workers become free */
  remote_mb *mbs;       /* the microbatch slots */
  double link_free;     /* when this loader's share of the link is free */
  int *rem_n;           /* per batch: samples sent remote */
  long rem_samples;     /* after the warm-up */
  double *worker_free; /* min-heap of the times the workers become free */
  /* per batch */
  double *ready, *cpu_busy, *dev_busy;
  int *cpu_n, *dev_n;
  long started;        /* batches started so far */
  interval *prep;      /* the GPU's preprocessing, in order */
  size_t nprep, capprep, prep_first; /* prep_first: the first that may still overlap a step */
  double prep_free;    /* when the GPU's preprocessing queue drains */
  double engine_free;  /* when the JPEG engines' queue drains (decode_engines) */
  double ask, last_handout;
  double ask_at_warmup;
  /* measured after the warm-up */
  double busy_s, wait_s, dev_s;
  long dev_samples;
} trainer;

typedef struct node {
  const ff__sim_config *c;
  ff__sim_strategy strategy;
  double static_share;
  ff__sched_params params;
  int workers;        /* per loader */
  double speed;       /* of a worker, in cores */
  double mean_cost;   /* of a sample's CPU cost, for the GPU cost's scale */
  int rworkers;       /* remote workers per loader (0: none) */
  double rspeed;      /* of a remote worker, in CPUs */
  int slots;          /* remote microbatches in flight per loader */
  trainer *t;
  /* scratch for one batch */
  double *cost, *size;
  unsigned char *to_dev, *to_rem;
  double *done;
} node;

static void heap_sift(double *h, int n, int i) {
  for (;;) {
    int l = 2 * i + 1, m = i;
    if (l < n && h[l] < h[m]) m = l;
    if (l + 1 < n && h[l + 1] < h[m]) m = l + 1;
    if (m == i) return;
    double x = h[i];
    h[i] = h[m], h[m] = x;
    i = m;
  }
}

static int add_prep(trainer *t, double a, double b) {
  if (t->nprep == t->capprep) {
    size_t cap = t->capprep ? 2 * t->capprep : 256;
    interval *p = realloc(t->prep, cap * sizeof *p);
    if (!p) return 0;
    t->prep = p, t->capprep = cap;
  }
  t->prep[t->nprep++] = (interval){a, b};
  return 1;
}

double ff__sim_cost_draw(ff__philox *r, double mean_s, double cv, const double *list, size_t n, size_t *picked) {
  if (list) {
    size_t k = (size_t)ff__philox_randint(r, 0, (int64_t)n - 1);
    if (picked) *picked = k;
    return list[k];
  }
  if (!(cv > 0)) return mean_s;
  double sig2 = log1p(cv * cv);
  return mean_s * exp(sqrt(sig2) * normal(r) - 0.5 * sig2);
}

static void draw_batch(node *nd, trainer *t) {
  const ff__sim_config *c = nd->c;
  for (int i = 0; i < c->batch_size; i++) {
    size_t k = 0;
    double cost = ff__sim_cost_draw(&t->rng, c->cpu_s, c->cpu_cv, c->cpu_list, c->list_len, &k);
    double size = c->cpu_list && c->size_list ? c->size_list[k] : cost * exp(c->size_noise * normal(&t->rng));
    nd->cost[i] = cost, nd->size[i] = size;
  }
}

/* Folds in the remote microbatches back by `now` (ff__remote_learn). */
static void remote_learn(node *nd, trainer *t, double now) {
  for (int i = 0; i < nd->slots; i++) {
    remote_mb *mb = &t->mbs[i];
    if (!mb->busy || mb->learned || mb->arrive > now) continue;
    ff__remote_learn(&nd->params, &t->rst, mb->n, mb->arrive - mb->submit, (uint64_t)mb->bytes, nd->slots);
    mb->learned = 1;
  }
}

/* Batch k starts at `at` while the consumer asks for batch j: marks the
 * samples ff__remote_count sends remote (the last CPU samples) in
 * nd->to_rem and returns their number. */
static int remote_pick(node *nd, trainer *t, long k, long j, double at, int n, int ndev) {
  memset(nd->to_rem, 0, (size_t)n);
  if (!nd->rworkers) return 0;
  remote_learn(nd, t, at);
  int free_slots = 0;
  for (int i = 0; i < nd->slots; i++) {
    if (t->mbs[i].busy && t->mbs[i].arrive <= at) t->mbs[i].busy = 0;
    free_slots += !t->mbs[i].busy;
  }
  int ring_ready = 0;
  for (long b = j; b < k; b++) ring_ready += t->ready[b] <= at;
  int m = nd->c->remote_micro_batch;
  int nrem = ff__remote_count(&t->rst, n, n - ndev, free_slots * m, (double)(k - j) * t->rst.interval_s, ring_ready,
                              nd->c->prefetch);
  for (int i = n - 1, left = nrem; i >= 0 && left > 0; i--)
    if (!nd->to_dev[i]) nd->to_rem[i] = 1, left--;
  return nrem;
}

/* Sends the marked samples from the last, in microbatches; returns when
 * the last is back and taken (`at` when none) or -1 out of slots (never:
 * remote_pick counted them). */
static double remote_send(node *nd, trainer *t, double at, int n) {
  const ff__sim_config *c = nd->c;
  double ready = at;
  for (int i = n - 1; i >= 0;) {
    int cnt = 0;
    double cost = 0;
    for (; i >= 0 && cnt < c->remote_micro_batch; i--)
      if (nd->to_rem[i]) cost += nd->cost[i], cnt++;
    if (!cnt) break;
    remote_mb *mb = NULL;
    for (int s = 0; s < nd->slots && !mb; s++)
      if (!t->mbs[s].busy) mb = &t->mbs[s];
    if (!mb) return -1;
    double start = t->rworker_free[0] > at + c->remote_latency_s ? t->rworker_free[0] : at + c->remote_latency_s;
    t->rworker_free[0] = start + cost * c->remote_cpu_factor / nd->rspeed;
    double done = t->rworker_free[0];
    heap_sift(t->rworker_free, nd->rworkers, 0);
    double bytes = cnt * c->remote_bytes;
    double tx = c->remote_bandwidth > 0 ? bytes / (c->remote_bandwidth / c->gpus) : 0;
    double ts = done > t->link_free ? done : t->link_free;
    t->link_free = ts + tx;
    *mb = (remote_mb){.submit = at, .arrive = ts + tx + c->remote_latency_s, .bytes = bytes, .n = cnt, .busy = 1};
    double host = cost * c->remote_host_factor / nd->speed, back = mb->arrive;
    if (host > 0) { /* taken back on a local worker */
      double s0 = t->worker_free[0] > at ? t->worker_free[0] : at;
      t->worker_free[0] = s0 + host;
      heap_sift(t->worker_free, nd->workers, 0);
      back = (s0 > back ? s0 : back) + host;
    }
    if (back > ready) ready = back;
  }
  return ready;
}

/* Starts batch k at time `at` (when its ring entry became free, the
 * consumer asking for batch j): decides its split, runs its CPU work on the
 * workers, sends its remote work and queues its device work. */
static int start_batch(node *nd, trainer *t, long k, long j, double at) {
  const ff__sim_config *c = nd->c;
  int n = c->batch_size, ndev;
  draw_batch(nd, t);
  switch (nd->strategy) {
  case FF__SIM_CPU_ONLY: ndev = 0; break;
  case FF__SIM_GPU_ONLY: ndev = n; break;
  case FF__SIM_STATIC: ndev = (int)(nd->static_share * n + 0.5); break;
  default: ndev = ff__sched_device_count(&t->st, n); break;
  }
  ff__sched_pick_costliest(nd->size, n, ndev, nd->to_dev);
  int nrem = remote_pick(nd, t, k, j, at, n, ndev);

  /* CPU: the workers take the samples in order (device samples only for
   * their CPU part, if any; remote samples not at all). */
  double cpu_ready = at, busy = 0;
  for (int i = 0; i < n; i++) {
    double w = nd->to_rem[i] ? 0 : (nd->to_dev[i] ? c->device_cpu_frac : 1.0) * nd->cost[i] / nd->speed;
    nd->done[i] = at;
    if (w <= 0) continue;
    double start = t->worker_free[0] > at ? t->worker_free[0] : at;
    nd->done[i] = start + w;
    t->worker_free[0] = start + w;
    heap_sift(t->worker_free, nd->workers, 0);
    busy += w;
    if (!nd->to_dev[i] && start + w > cpu_ready) cpu_ready = start + w;
  }
  /* GPU: microbatches of the device samples, in order, each once its
   * samples' CPU part is done. */
  double ready = cpu_ready, dev = 0;
  int per = c->micro_batch > 0 ? c->micro_batch : n;
  double submit = at, work = 0; /* of the microbatch being gathered */
  for (int i = 0, in_mb = 0; i < n; i++) {
    if (!nd->to_dev[i]) continue;
    if (in_mb == 0) submit = at, work = c->launch_s;
    double scale = nd->cost[i] / nd->mean_cost, avail = nd->done[i];
    if (c->decode_engines && c->gpu_decode_s > 0) { /* decoded on the engines first, beside the step */
      double e = avail > t->engine_free ? avail : t->engine_free;
      t->engine_free = avail = e + c->gpu_decode_s * scale; /* not the SMs' time: not in dev */
    }
    if (avail > submit) submit = avail;
    work += (c->gpu_s + (c->decode_engines ? 0 : c->gpu_decode_s)) * scale;
    int last = ++in_mb == per;
    if (!last) { /* is it the batch's last device sample? */
      int j = i + 1;
      while (j < n && !nd->to_dev[j]) j++;
      last = j == n;
    }
    if (last) {
      double a = submit > t->prep_free ? submit : t->prep_free;
      t->prep_free = a + work;
      if (work > 0 && !add_prep(t, a, a + work)) return 0;
      if (t->prep_free > ready) ready = t->prep_free;
      dev += work;
      in_mb = 0;
    }
  }
  if (nrem) {
    double back = remote_send(nd, t, at, n);
    if (back < 0) return 0;
    if (back > ready) ready = back;
    t->rem_n[k] = nrem;
  }
  t->ready[k] = ready, t->cpu_busy[k] = busy, t->dev_busy[k] = dev;
  t->cpu_n[k] = n - ndev - nrem, t->dev_n[k] = ndev;
  return 1;
}

/* When a step of step_s GPU work that starts at h ends: it pauses while
 * the GPU runs preprocessing. Every interval that can overlap it is queued
 * by then (batches start when a consumer asks, never during a step). */
static double step_end(trainer *t, double h, double step_s) {
  while (t->prep_first < t->nprep && t->prep[t->prep_first].b <= h) t->prep_first++;
  double now = h, left = step_s;
  for (size_t q = t->prep_first; q < t->nprep; q++) {
    const interval *p = &t->prep[q];
    if (p->a > now) {
      if (p->a - now >= left) break;
      left -= p->a - now;
    }
    now = p->b;
  }
  return now + left;
}

static void trainer_free(trainer *t) {
  free(t->worker_free);
  free(t->ready), free(t->cpu_busy), free(t->dev_busy);
  free(t->cpu_n), free(t->dev_n);
  free(t->prep);
  free(t->rworker_free), free(t->mbs), free(t->rem_n);
}

static ff_status simulate(node *nd, ff__sim_result *out, ff__error *err) {
  const ff__sim_config *c = nd->c;
  long N = c->batches, warm = c->warmup >= 0 ? c->warmup : c->batches / 5;
  int G = c->gpus, P = c->prefetch;
  for (int g = 0; g < G; g++) {
    trainer *t = &nd->t[g];
    ff__philox_init(&t->rng, c->seed, SIM_DOMAIN, (uint64_t)g, 0);
    ff__sched_state_init(&t->st);
    t->worker_free = calloc((size_t)nd->workers, sizeof(double));
    t->ready = malloc((size_t)N * sizeof(double));
    t->cpu_busy = malloc((size_t)N * sizeof(double));
    t->dev_busy = malloc((size_t)N * sizeof(double));
    t->cpu_n = malloc((size_t)N * sizeof(int));
    t->dev_n = malloc((size_t)N * sizeof(int));
    if (!t->worker_free || !t->ready || !t->cpu_busy || !t->dev_busy || !t->cpu_n || !t->dev_n)
      return ff__error_set(err, FF_ENOMEM, "out of memory for %ld simulated batches", N);
    if (nd->rworkers) {
      ff__remote_state_init(&t->rst);
      t->rworker_free = calloc((size_t)nd->rworkers, sizeof(double));
      t->mbs = calloc((size_t)nd->slots, sizeof *t->mbs);
      t->rem_n = calloc((size_t)N, sizeof(int));
      if (!t->rworker_free || !t->mbs || !t->rem_n)
        return ff__error_set(err, FF_ENOMEM, "out of memory for %d remote workers", nd->rworkers);
    }
  }
  for (long j = 0; j < N; j++) {
    double barrier = 0;
    for (int g = 0; g < G; g++) {
      trainer *t = &nd->t[g];
      if (j == warm) t->ask_at_warmup = t->ask;
      /* Asking for batch j frees the entry of batch j - 1: the loader may
       * now run up to batch j + P. */
      while (t->started <= j + P && t->started < N) {
        if (!start_batch(nd, t, t->started, j, t->ask))
          return ff__error_set(err, FF_ENOMEM, "out of memory for the simulated GPU queue");
        t->started++;
      }
      double h = t->ready[j] > t->ask ? t->ready[j] : t->ask;
      int ring_ready = 0;
      for (long k = j; k < t->started; k++) ring_ready += t->ready[k] <= t->ask;
      if (nd->strategy == FF__SIM_OURS) {
        ff__sched_obs o = {h - t->last_handout, h - t->ask, ring_ready, c->batch_size, t->cpu_n[j],
                           t->cpu_busy[j], nd->workers, t->dev_n[j], t->dev_busy[j], 1};
        ff__sched_update(&nd->params, &t->st, &o);
      }
      if (nd->rworkers) {
        remote_learn(nd, t, h);
        ff__remote_obs o = {h - t->last_handout, h - t->ask, ring_ready, c->batch_size, t->cpu_n[j],
                            t->cpu_busy[j], nd->workers, t->dev_n[j], 1};
        ff__remote_update(&nd->params, &t->rst, &o);
      }
      double e = step_end(t, h, c->step_s);
      if (j >= warm) {
        t->busy_s += e - h;
        t->wait_s += h - t->ask;
        t->dev_s += t->dev_busy[j];
        t->dev_samples += t->dev_n[j];
        if (nd->rworkers) t->rem_samples += t->rem_n[j];
      }
      t->last_handout = h;
      t->ask = e;
      if (e > barrier) barrier = e;
    }
    if (c->sync)
      for (int g = 0; g < G; g++) nd->t[g].ask = barrier;
  }

  double n = (double)(N - warm), sps = 0, stall = 0, wait = 0, devs = 0, gpu = 0, slow = 0, rem = 0;
  for (int g = 0; g < G; g++) {
    trainer *t = &nd->t[g];
    double wall = t->ask - t->ask_at_warmup;
    sps += n * c->batch_size / wall;
    stall += 1 - t->busy_s / wall;
    wait += t->wait_s / wall;
    devs += t->dev_samples / (n * c->batch_size);
    rem += t->rem_samples / (n * c->batch_size);
    gpu += t->dev_s / wall;
    slow += t->busy_s / (n * c->step_s) - 1;
  }
  *out = (ff__sim_result){
      .samples_per_s = sps / G,
      .node_samples_per_s = sps,
      .stall_share = stall / G,
      .wait_share = wait / G,
      .device_share = devs / G,
      .gpu_prep_share = gpu / G,
      .slowdown = slow / G,
      .loss = 1 - (sps / G) / (c->batch_size / c->step_s),
      .remote_share = nd->rworkers ? rem / G : -1,
      .static_share = nd->strategy == FF__SIM_STATIC ? nd->static_share : -1,
  };
  /* Sums of equal times leave rounding residue: show it as 0, not -0.0%. */
  double *fields[] = {&out->stall_share, &out->wait_share, &out->gpu_prep_share, &out->slowdown, &out->loss};
  for (size_t i = 0; i < sizeof fields / sizeof *fields; i++)
    if (fabs(*fields[i]) < 1e-9) *fields[i] = 0;
  return FF_OK;
}

ff_status ff__sim_run(const ff__sim_config *c, ff__sim_strategy s, double static_share, ff__sim_result *out,
                      ff__error *err) {
  ff_status st = ff__sim_config_check(c, err);
  if (st) return st;
  if (s < 0 || s >= FF__SIM_NSTRATEGIES) return ff__error_set(err, FF_EINVAL, "unknown strategy %d", (int)s);
  if (s == FF__SIM_STATIC && !(static_share >= 0 && static_share <= 1))
    return ff__error_set(err, FF_EINVAL, "the static share must be in [0, 1] (got %g)", static_share);
  node nd = {.c = c, .strategy = s, .static_share = static_share};
  ff__sched_params_init(&nd.params, c->prefetch);
  double per_loader = (double)c->cores / c->gpus;
  nd.workers = (int)ceil(per_loader);
  nd.speed = per_loader / nd.workers;
  if (c->remote_cpus > 0) {
    double per_remote = (double)c->remote_cpus / c->gpus;
    nd.rworkers = (int)ceil(per_remote);
    nd.rspeed = per_remote / nd.rworkers;
    nd.slots = nd.rworkers * c->remote_in_flight;
  }
  if (c->cpu_list) {
    double sum = 0;
    for (size_t i = 0; i < c->list_len; i++) sum += c->cpu_list[i];
    nd.mean_cost = sum / (double)c->list_len;
  } else {
    nd.mean_cost = c->cpu_s;
  }
  size_t n = (size_t)c->batch_size;
  nd.t = calloc((size_t)c->gpus, sizeof *nd.t);
  nd.cost = malloc(n * sizeof(double));
  nd.size = malloc(n * sizeof(double));
  nd.done = malloc(n * sizeof(double));
  nd.to_dev = malloc(n);
  nd.to_rem = calloc(n, 1);
  if (!nd.t || !nd.cost || !nd.size || !nd.done || !nd.to_dev || !nd.to_rem) {
    st = ff__error_set(err, FF_ENOMEM, "out of memory for a batch of %d", c->batch_size);
  } else {
    ff__sim_result r;
    st = simulate(&nd, &r, err);
    if (!st) *out = r;
  }
  for (int g = 0; nd.t && g < c->gpus; g++) trainer_free(&nd.t[g]);
  free(nd.t), free(nd.cost), free(nd.size), free(nd.done), free(nd.to_dev), free(nd.to_rem);
  return st;
}

ff_status ff__sim_best_static(const ff__sim_config *c, ff__sim_result *out, ff__error *err) {
  ff__sim_result best = {0}, r;
  for (int i = 0; i <= 20; i++) {
    ff_status st = ff__sim_run(c, FF__SIM_STATIC, i / 20.0, &r, err);
    if (st) return st;
    if (i == 0 || r.samples_per_s > best.samples_per_s * (1 + 1e-9)) best = r;
  }
  *out = best;
  return FF_OK;
}

ff_status ff__sim_cores_needed(const ff__sim_config *c, ff__sim_strategy s, int max_per_gpu, double max_loss,
                               int *cores_per_gpu, ff__sim_result *at, ff__error *err) {
  ff__sim_config k = *c;
  ff__sim_result r = {0};
  for (int per = 1; per <= max_per_gpu; per++) {
    k.cores = per * c->gpus;
    ff_status st = s == FF__SIM_STATIC ? ff__sim_best_static(&k, &r, err) : ff__sim_run(&k, s, 0, &r, err);
    if (st) return st;
    if (r.loss < max_loss) {
      *cores_per_gpu = per;
      if (at) *at = r;
      return FF_OK;
    }
  }
  *cores_per_gpu = 0;
  return FF_OK;
}

ff_status ff__sim_remote_needed(const ff__sim_config *c, ff__sim_strategy s, int max_per_gpu, double max_loss,
                                int *remote_per_gpu, ff__sim_result *rows, int *tried, ff__error *err) {
  ff__sim_config k = *c;
  ff__sim_result r = {0};
  *remote_per_gpu = -1;
  if (tried) *tried = 0;
  for (int per = 0; per <= max_per_gpu; per++) {
    k.remote_cpus = per * c->gpus;
    ff_status st = ff__sim_run(&k, s, 0, &r, err);
    if (st) return st;
    if (r.remote_share < 0) r.remote_share = 0; /* none at 0 */
    if (rows) rows[per] = r;
    if (tried) *tried = per + 1;
    if (r.loss < max_loss) {
      *remote_per_gpu = per;
      return FF_OK;
    }
  }
  return FF_OK;
}

/* ---- profiles ----
 *
 * Two formats, told apart by the first character that is not blank:
 *   '{'  the object `fusionflow bench --json` prints. Its read_s, decode_s
 *        and ops_s are worker time summed over the threads, so the mean CPU
 *        cost of a sample on one core is (read_s + decode_s + ops_s) /
 *        samples whatever the thread count (as long as the threads had a
 *        core each: measure with --threads at most the cores). decode_frac
 *        = (read_s + decode_s) / that sum, read_frac = read_s / that sum. `threads` is kept for the report.
 *   else a text file, one sample per line: its CPU cost in milliseconds,
 *        optionally followed by its file size; '#' starts a comment. Either
 *        every line has a size or none has. */

static int json_number(const char *text, const char *key, double *out) {
  char pat[64];
  snprintf(pat, sizeof pat, "\"%s\"", key);
  const char *p = strstr(text, pat);
  if (!p) return 0;
  p += strlen(pat);
  while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
  if (*p++ != ':') return 0;
  char *end;
  double v = strtod(p, &end);
  if (end == p) return 0;
  *out = v;
  return 1;
}

static ff_status load_json(const char *path, const char *text, ff__sim_profile *out, ff__error *err) {
  double samples, read_s, decode_s, ops_s, threads = 0;
  if (strstr(text, "\"error\""))
    return ff__error_set(err, FF_EDATA, "%s: the profile records a failed run", path);
  if (!json_number(text, "samples", &samples) || !json_number(text, "read_s", &read_s) ||
      !json_number(text, "decode_s", &decode_s) || !json_number(text, "ops_s", &ops_s))
    return ff__error_set(err, FF_EDATA, "%s: not a `fusionflow bench --json` summary (needs samples, read_s, "
                         "decode_s, ops_s)", path);
  json_number(text, "threads", &threads);
  double total = read_s + decode_s + ops_s;
  if (!(samples >= 1) || !(total > 0))
    return ff__error_set(err, FF_EDATA, "%s: the profile has no measured samples", path);
  if (!(samples < 1e15 && total / samples <= 1e6)) /* no inf, no NaN: at most 1e6 s a sample */
    return ff__error_set(err, FF_EDATA, "%s: the profile's times are not finite", path);
  *out = (ff__sim_profile){.cpu_s = total / samples, .decode_frac = (read_s + decode_s) / total,
                           .read_frac = read_s / total, .samples = (long)samples, .threads = (int)threads};
  return FF_OK;
}

static ff_status load_list(const char *path, char *text, ff__sim_profile *out, ff__error *err) {
  size_t cap = 0, n = 0;
  double *cost = NULL, *size = NULL, sum = 0;
  int with_size = -1;
  ff_status st = FF_OK;
  long line = 0;
  for (char *s = text, *next; s && *s; s = next) {
    line++;
    next = strchr(s, '\n');
    if (next) *next++ = 0;
    char *hash = strchr(s, '#');
    if (hash) *hash = 0;
    char *end;
    double ms = strtod(s, &end);
    if (end == s) {
      while (*s == ' ' || *s == '\t' || *s == '\r') s++;
      if (!*s) continue; /* blank or comment */
      st = ff__error_set(err, FF_EDATA, "%s:%ld: expected a cost in ms", path, line);
      break;
    }
    char *e2;
    double sz = strtod(end, &e2);
    int has = e2 != end;
    while (*e2 == ' ' || *e2 == '\t' || *e2 == '\r') e2++;
    if (*e2 || !(ms > 0 && ms <= 1e9) || (has && !(sz > 0 && sz <= 1e300))) { /* no inf, no NaN */
      st = ff__error_set(err, FF_EDATA, "%s:%ld: expected 'cost_ms [size]' with positive finite numbers (cost at "
                         "most 1e9 ms)", path, line);
      break;
    }
    if (with_size < 0) with_size = has;
    if (with_size != has) {
      st = ff__error_set(err, FF_EDATA, "%s:%ld: either every line has a size or none has", path, line);
      break;
    }
    if (n == cap) {
      cap = cap ? 2 * cap : 1024;
      double *c2 = realloc(cost, cap * sizeof *c2);
      if (c2) cost = c2;
      double *s2 = c2 ? realloc(size, cap * sizeof *s2) : NULL;
      if (s2) size = s2;
      if (!c2 || !s2) {
        st = ff__error_set(err, FF_ENOMEM, "%s: out of memory", path);
        break;
      }
    }
    cost[n] = ms * 1e-3, size[n] = sz, sum += ms * 1e-3;
    n++;
  }
  if (!st && !n) st = ff__error_set(err, FF_EDATA, "%s: no sample costs", path);
  if (st) {
    free(cost), free(size);
    return st;
  }
  if (!with_size) free(size), size = NULL;
  *out = (ff__sim_profile){.cpu_s = sum / (double)n, .decode_frac = -1, .read_frac = -1, .cpu_list = cost, .size_list = size,
                           .list_len = n, .samples = (long)n};
  return FF_OK;
}

ff_status ff__sim_profile_load(const char *path, ff__sim_profile *out, ff__error *err) {
  FILE *f = fopen(path, "rb");
  if (!f) return ff__error_set(err, FF_EIO, "%s: %s", path, strerror(errno));
  struct stat info;
  if (!fstat(fileno(f), &info) && S_ISDIR(info.st_mode)) { /* fopen opens one; its reads fail */
    fclose(f);
    return ff__error_set(err, FF_EIO, "%s: is a directory, not a profile (bench --json output or a cost list)", path);
  }
  size_t cap = 1 << 16, len = 0;
  char *text = malloc(cap);
  for (;;) {
    if (!text) {
      fclose(f);
      return ff__error_set(err, FF_ENOMEM, "%s: out of memory", path);
    }
    len += fread(text + len, 1, cap - 1 - len, f);
    if (len < cap - 1) break;
    char *t2 = realloc(text, 2 * cap);
    if (!t2) free(text);
    text = t2, cap *= 2;
  }
  int bad = ferror(f);
  fclose(f);
  if (bad) {
    free(text);
    return ff__error_set(err, FF_EIO, "%s: read error", path);
  }
  text[len] = 0;
  const char *p = text;
  while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
  ff_status st = *p == '{' ? load_json(path, text, out, err) : load_list(path, text, out, err);
  free(text);
  return st;
}

void ff__sim_profile_free(ff__sim_profile *p) {
  if (!p) return;
  free(p->cpu_list), free(p->size_list);
  p->cpu_list = p->size_list = NULL;
}
