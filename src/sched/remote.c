/* remote.c — the remote placement's decision (see remote.h for the rules).
 * Pure: state and observations in, decision out, so the runtime and the
 * simulator reach the same decisions from the same measurements. */
#include "sched/remote.h"

void ff__remote_state_init(ff__remote_state *s) { *s = (ff__remote_state){0}; }

/* A moving average that starts at its first observation. */
static double ewma(double old, double x, double a) { return old == 0 ? x : old + a * (x - old); }

static double clamp(double x, double lo, double hi) { return x < lo ? lo : x > hi ? hi : x; }

/* The share at which the remote pool, at its measured rate, finishes its
 * part as the local placements finish theirs (1 while it is unknown). */
static double balance(const ff__remote_state *s) {
  if (s->remote_sps <= 0 || s->local_sps <= 0) return 1;
  return s->remote_sps / (s->remote_sps + s->local_sps);
}

void ff__remote_update(const ff__sched_params *p, ff__remote_state *s, const ff__remote_obs *o) {
  double a = p->alpha;
  s->batches++;
  double step_s = o->interval_s - o->wait_s;
  if (o->batch_size > 0 && step_s > 1e-9) s->demand_sps = ewma(s->demand_sps, o->batch_size / step_s, a);
  if (o->interval_s > 0) s->interval_s = ewma(s->interval_s, o->interval_s, a);
  if (o->cpu_samples > 0 && o->cpu_busy_s > 0) s->cpu_cost_s = ewma(s->cpu_cost_s, o->cpu_busy_s / o->cpu_samples, a);
  double device_sps = o->interval_s > 0 ? o->device_samples / o->interval_s : 0;
  if (s->cpu_cost_s > 0 && o->cpu_threads > 0) s->local_sps = o->cpu_threads / s->cpu_cost_s + device_sps;
  if (!o->remote_ok) {
    s->share = 0;
    return;
  }
  double deficit = s->demand_sps > 0 && s->local_sps > 0 ? clamp(1 - s->local_sps / s->demand_sps, 0, 1) : 0;
  double cap = balance(s);
  int stalled = o->wait_s > p->stall_threshold * o->interval_s || o->ring_ready == 0;
  s->share = clamp(ff__sched_share_step(p, s->share, deficit, cap, stalled, o->ring_ready), 0, cap);
}

void ff__remote_learn(const ff__sched_params *p, ff__remote_state *s, int n, double rtt_s, uint64_t bytes,
                      int max_in_flight) {
  if (n <= 0 || rtt_s <= 0) return;
  s->microbatches++;
  s->rtt_s = ewma(s->rtt_s, rtt_s, p->alpha);
  s->remote_sps = ewma(s->remote_sps, n / rtt_s * (max_in_flight > 0 ? max_in_flight : 1), p->alpha);
  s->bytes_per_s = ewma(s->bytes_per_s, (double)bytes / rtt_s, p->alpha);
}

int ff__remote_count(const ff__remote_state *s, int n, int n_cpu, int room, double ahead_s, int ring_ready,
                     int prefetch) {
  if (ring_ready >= prefetch || ahead_s < s->rtt_s || ahead_s <= 0) return 0;
  int k = (int)(s->share * n + 0.5);
  if (k > n_cpu) k = n_cpu;
  if (k > room) k = room;
  return k < 0 ? 0 : k;
}
