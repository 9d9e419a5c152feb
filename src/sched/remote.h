/* remote.h — the remote placement's policy as pure functions: what the
 * local CPU threads and the device leave of the consumer's demand goes to
 * remote workers, no more, and only where a round trip fits. The loader's
 * runtime (loader/remote.c) and `fusionflow sim` run the same code.
 *
 * Rules (docs/remote.md):
 *   - demand D and the local capacity L (CPU threads / CPU cost per sample,
 *     plus what the device prepared per second) are moving averages; the
 *     remote share of a batch rises toward the deficit 1 - L/D (plus a
 *     correction for missing ring batches) while the consumer waits or the
 *     ring drains, and decays toward the deficit while the ring is full;
 *   - it never passes the balance point R / (R + L), where R is the remote
 *     pool's measured rate: beyond it the remote part finishes after the
 *     local one and holds the batch up;
 *   - a batch gets remote work only when it is at least one measured round
 *     trip ahead of the consumer, never while the ring is full, and never
 *     more than the free microbatch slots hold. */
#ifndef FF_SCHED_REMOTE_H
#define FF_SCHED_REMOTE_H

#include <stdint.h>

#include "sched/policy.h"

/* What the runtime measured over one batch interval. */
typedef struct ff__remote_obs {
  double interval_s;    /* time since the previous batch was handed out */
  double wait_s;        /* of which the consumer waited */
  int ring_ready;       /* batches ready when the consumer asked */
  int batch_size;       /* samples in the batch */
  int cpu_samples;      /* of which the local CPU threads prepared */
  double cpu_busy_s;    /* their CPU time (summed over threads) */
  int cpu_threads;      /* local worker threads in use */
  int device_samples;   /* of which the device prepared */
  int remote_ok;        /* the remote executor takes work */
} ff__remote_obs;

typedef struct ff__remote_state {
  double share;         /* the decision: share of a batch's samples for remote workers, 0..1 */
  double demand_sps;    /* the consumer's rate */
  double cpu_cost_s;    /* local CPU time per sample */
  double local_sps;     /* local capacity: CPU threads / cost + the device's rate */
  double interval_s;    /* time between batches handed out */
  double rtt_s;         /* a microbatch's round trip, submit to complete */
  double remote_sps;    /* the remote pool's rate: samples per round trip times microbatches in flight */
  double bytes_per_s;   /* bytes on the wire (both ways) per second of round trip */
  long batches, microbatches;
} ff__remote_state;

void ff__remote_state_init(ff__remote_state *s);

/* Folds one batch interval into the state and sets s->share. */
void ff__remote_update(const ff__sched_params *p, ff__remote_state *s, const ff__remote_obs *o);

/* Folds one completed microbatch in: n samples back after rtt_s, `bytes`
 * on the wire both ways, with up to max_in_flight microbatches at once. */
void ff__remote_learn(const ff__sched_params *p, ff__remote_state *s, int n, double rtt_s, uint64_t bytes,
                      int max_in_flight);

/* How many of a batch's n_cpu CPU-placed samples (of n) go remote: the
 * share of n, at most n_cpu and `room` (free microbatch slots times their
 * size); 0 when the batch is less than one round trip (ahead_s) ahead of
 * the consumer or the ring holds `prefetch` ready batches. */
int ff__remote_count(const ff__remote_state *s, int n, int n_cpu, int room, double ahead_s, int ring_ready,
                     int prefetch);

#endif
