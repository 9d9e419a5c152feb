/* policy.c — the offload decision (see policy.h for the rules and their
 * source). Pure: everything it knows comes in through ff__sched_obs, so the
 * loader's runtime and the simulator reach the same decisions from the same
 * observations. */
#include "sched/policy.h"

#include <stdlib.h>

void ff__sched_params_init(ff__sched_params *p, int prefetch) {
  p->alpha = 0.2;
  p->stall_threshold = 0.05;
  p->raise_gain = 0.5;
  p->decay = 0.02;
  p->ring_gain = 0.25;
  p->max_device_share = 1.0;
  p->max_device_time = 0.3;
  p->prefetch = prefetch > 0 ? prefetch : 1;
}

void ff__sched_state_init(ff__sched_state *s) {
  *s = (ff__sched_state){0};
}

/* A moving average that starts at its first observation (old == 0: none yet). */
static double ewma(double old, double x, double a, long n) {
  return n <= 1 || old == 0 ? x : old + a * (x - old);
}

static double clamp(double x, double lo, double hi) { return x < lo ? lo : x > hi ? hi : x; }

/* The share that exactly covers the deficit 1 - C/D (0 when the CPU pool
 * keeps up). */
static double deficit(const ff__sched_state *s) {
  if (s->demand_sps <= 0 || s->cpu_capacity_sps <= 0) return 0;
  return clamp(1.0 - s->cpu_capacity_sps / s->demand_sps, 0, 1);
}

/* The share at which the device, at its measured cost per sample, would
 * take as long as the CPU pool with the rest: beyond it the device is the
 * bottleneck and more offload only slows the batch down (1 while the
 * device's cost is unknown). */
static double balance(const ff__sched_state *s, int cpu_threads) {
  if (s->device_cost_s <= 0 || s->cpu_cost_s <= 0 || cpu_threads <= 0) return 1;
  double cpu = s->cpu_cost_s / cpu_threads;
  return cpu / (cpu + s->device_cost_s);
}

void ff__sched_update(const ff__sched_params *p, ff__sched_state *s, const ff__sched_obs *o) {
  long n = ++s->batches;
  double a = p->alpha;
  /* The consumer's own rate: its step time is the interval less its wait. */
  double step_s = o->interval_s - o->wait_s;
  if (o->batch_size > 0 && step_s > 1e-9) s->demand_sps = ewma(s->demand_sps, o->batch_size / step_s, a, n);
  if (o->cpu_samples > 0 && o->cpu_busy_s > 0) {
    s->cpu_cost_s = ewma(s->cpu_cost_s, o->cpu_busy_s / o->cpu_samples, a, n);
    s->cpu_capacity_sps = o->cpu_threads / s->cpu_cost_s;
  }
  if (o->device_samples > 0 && o->device_busy_s > 0)
    s->device_cost_s = ewma(s->device_cost_s, o->device_busy_s / o->device_samples, a, n);
  if (o->interval_s > 0) s->device_time_share = ewma(s->device_time_share, o->device_busy_s / o->interval_s, a, n);

  s->stalled = o->wait_s > p->stall_threshold * o->interval_s || o->ring_ready == 0;
  if (!o->device_ok) {
    s->share = 0;
    return;
  }
  double cap = balance(s, o->cpu_threads);
  if (cap > p->max_device_share) cap = p->max_device_share;
  s->share = ff__sched_share_step(p, s->share, deficit(s), cap, s->stalled, o->ring_ready);
  /* Interference cap: the trainer is not waiting, so keep the device's
   * preprocessing within its share of wall time. */
  if (!s->stalled && s->device_time_share > p->max_device_time) s->share *= p->max_device_time / s->device_time_share;
  s->share = clamp(s->share, 0, cap);
}

double ff__sched_share_step(const ff__sched_params *p, double share, double deficit, double cap, int stalled,
                            int ring_ready) {
  if (stalled) {
    /* Rise toward the deficit plus what the ring lacks. */
    double missing = (double)(p->prefetch - ring_ready) / p->prefetch;
    double target = clamp(deficit + p->ring_gain * clamp(missing, 0, 1), 0, cap);
    if (target > share) share += p->raise_gain * (target - share);
    return share;
  }
  double floor = clamp(deficit, 0, cap);
  if (ring_ready >= p->prefetch) {
    /* No stall and a full ring: give the work back slowly, but not below
     * the deficit, which would only bring the stall back (hysteresis). */
    if (share > floor) share = share - p->decay > floor ? share - p->decay : floor;
  } else if (floor > share) {
    /* No stall yet but the ring is not full: below the deficit the ring
     * would only drain, so close half the gap to it per batch before the
     * trainer waits. */
    share += p->raise_gain * (floor - share);
  }
  return share;
}

int ff__sched_device_count(const ff__sched_state *s, int n) {
  int k = (int)(s->share * n + 0.5);
  return k < 0 ? 0 : k > n ? n : k;
}

/* Sorts idx by (cost, index) descending: a heap sort, no allocation, no
 * global comparator state. */
static int before(const double *cost, int i, int j) {
  return cost[i] > cost[j] || (cost[i] == cost[j] && i > j);
}

static void sift(const double *cost, int *idx, int root, int n) {
  for (;;) {
    int child = 2 * root + 1;
    if (child >= n) return;
    /* a min-heap on "before": the root is the element that sorts last */
    if (child + 1 < n && before(cost, idx[child], idx[child + 1])) child++;
    if (!before(cost, idx[root], idx[child])) return;
    int t = idx[root];
    idx[root] = idx[child], idx[child] = t;
    root = child;
  }
}

void ff__sched_pick_costliest(const double *cost, int n, int k, unsigned char *to_device) {
  for (int i = 0; i < n; i++) to_device[i] = 0;
  if (k <= 0 || n <= 0) return;
  if (k >= n) {
    for (int i = 0; i < n; i++) to_device[i] = 1;
    return;
  }
  int small[1024];
  int *idx = n <= 1024 ? small : malloc((size_t)n * sizeof *idx);
  if (!idx) { /* no memory for the order: the first k, still deterministic */
    for (int i = 0; i < k; i++) to_device[i] = 1;
    return;
  }
  for (int i = 0; i < n; i++) idx[i] = i;
  for (int i = n / 2 - 1; i >= 0; i--) sift(cost, idx, i, n);
  for (int end = n - 1; end > 0; end--) {
    int t = idx[0];
    idx[0] = idx[end], idx[end] = t;
    sift(cost, idx, 0, end);
  }
  for (int i = 0; i < k; i++) to_device[idx[i]] = 1;
  if (idx != small) free(idx);
}
