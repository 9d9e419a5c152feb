/* cost.c — the cost model (see cost.h): moving averages of measured
 * per-byte and per-sample costs, and the batch split that sends the
 * costliest samples to the device within the memory the pool can give.
 * Pure: no clock, no I/O; the runtime measures and calls in. */
#include "sched/cost.h"

#include <stdlib.h>

#include "sched/policy.h"

void ff__cost_init(ff__cost_model *m) {
  *m = (ff__cost_model){.alpha = 0.05, .decode_ns_per_byte = 10, .device_bytes_per_byte = 32};
}

/* The first measurement replaces the default; later ones are averaged in. */
static void ewma(double *v, double x, double a, long *n) { *v = (*n)++ ? *v + a * (x - *v) : x; }

void ff__cost_observe_decode(ff__cost_model *m, uint64_t encoded_bytes, uint64_t ns) {
  if (encoded_bytes) ewma(&m->decode_ns_per_byte, (double)ns / (double)encoded_bytes, m->alpha, &m->decode_obs);
}

void ff__cost_observe_ops(ff__cost_model *m, uint64_t ns) {
  ewma(&m->ops_ns_per_sample, (double)ns, m->alpha, &m->ops_obs);
}

void ff__cost_observe_device(ff__cost_model *m, uint64_t encoded_bytes, size_t device_bytes) {
  /* one observation per microbatch: weigh it more than a single sample */
  double a = m->alpha * 4 < 1 ? m->alpha * 4 : 1;
  if (encoded_bytes)
    ewma(&m->device_bytes_per_byte, (double)device_bytes / (double)encoded_bytes, a, &m->device_obs);
}

double ff__cost_cpu_ns(const ff__cost_model *m, uint64_t encoded_bytes) {
  return m->decode_ns_per_byte * (double)encoded_bytes + m->ops_ns_per_sample;
}

size_t ff__cost_device_bytes(const ff__cost_model *m, uint64_t encoded_bytes) {
  return (size_t)(m->device_bytes_per_byte * (double)encoded_bytes) + 1;
}

int ff__cost_split(const ff__cost_model *m, const uint64_t *size_bytes, int n, int k, size_t free_bytes,
                   unsigned char *to_device) {
  double small[1024];
  double *cost = n <= 1024 ? small : malloc((size_t)n * sizeof *cost);
  if (!cost) k = 0; /* no memory for the costs: no offload for this batch */
  for (int i = 0; i < n && k > 0; i++) cost[i] = ff__cost_cpu_ns(m, size_bytes[i]);
  for (;;) {
    ff__sched_pick_costliest(cost, n, k, to_device);
    if (k <= 0) break;
    size_t need = 0;
    for (int i = 0; i < n; i++)
      if (to_device[i]) need += ff__cost_device_bytes(m, size_bytes[i]);
    if (need <= free_bytes) break;
    /* shrink in proportion, at least by one: a few rounds at most */
    int fit = (int)((double)k * (double)free_bytes / (double)need);
    k = fit < k ? fit : k - 1;
  }
  if (cost != small) free(cost);
  return k > 0 ? k : 0;
}
