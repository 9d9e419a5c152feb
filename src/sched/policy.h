/* policy.h — the cooperative offload policy as pure functions: state and
 * observations in, decision out, no I/O and no clock. The loader's runtime
 * and `fusionflow sim` run the same code.
 *
 * The paper's idea (FusionFlow, PVLDB 17(4), 2023, sections 4–5), made
 * precise:
 *   - demand D (samples/s the consumer takes) and CPU capacity C (samples/s
 *     the CPU pool prepares) are tracked as moving averages;
 *   - nothing is offloaded while the consumer does not wait and the ring is
 *     full: the GPU belongs to training;
 *   - when the consumer waits or the ring drains, the device share rises
 *     toward the deficit 1 - C/D plus a correction for the missing ring
 *     batches; while the ring is below full but the consumer does not wait
 *     yet, it rises toward the deficit only (without that, a share decayed
 *     to 0 would wait for the next stall: with trainers in lockstep, one of
 *     eight is nearly always the late one); it decays when the stall is
 *     gone, never below the deficit (hysteresis, no oscillation);
 *   - the share never passes the balance point where the device, at its
 *     measured cost per sample, would finish after the CPU pool (beyond it
 *     the device is the bottleneck);
 *   - within a batch the costliest samples go to the device;
 *   - device time spent on preprocessing is capped as a share of wall time
 *     unless the trainer is stalled anyway. */
#ifndef FF_SCHED_POLICY_H
#define FF_SCHED_POLICY_H

#include <stddef.h>

typedef struct ff__sched_params {
  double alpha;              /* weight of a new observation in the moving averages (0..1] */
  double stall_threshold;    /* the consumer "waits" when it waited more than this share of a batch interval */
  double raise_gain;         /* how much of the gap to the target share is closed per batch while stalled */
  double decay;              /* share removed per batch while not stalled and the ring is full */
  double ring_gain;          /* extra share per missing ring batch (of prefetch) */
  double max_device_share;   /* upper bound of the share, 0..1 */
  double max_device_time;    /* device preprocessing time as a share of wall time, unless stalled */
  int prefetch;              /* the ring's target depth in batches */
} ff__sched_params;

/* Fills the defaults (used by the runtime and the simulator alike). */
void ff__sched_params_init(ff__sched_params *p, int prefetch);

/* What the runtime measured over one batch interval (between two calls of
 * ff_loader_next, or one simulated batch). */
typedef struct ff__sched_obs {
  double interval_s;       /* time since the previous batch was handed out */
  double wait_s;           /* of which the consumer waited for this batch */
  int ring_ready;          /* batches ready in the ring when the consumer asked (0..prefetch+1) */
  int batch_size;          /* samples in the batch */
  int cpu_samples;         /* of which the CPU prepared */
  double cpu_busy_s;       /* CPU worker time spent on those samples (summed over threads) */
  int cpu_threads;         /* worker threads in use */
  int device_samples;      /* of which the device prepared */
  double device_busy_s;    /* device time spent on them (events) */
  int device_ok;           /* the device is open, healthy and its pool admitted work */
} ff__sched_obs;

typedef struct ff__sched_state {
  double share;            /* the decision: share of the next batch's samples for the device, 0..1 */
  double demand_sps;       /* moving average of the consumer's rate */
  double cpu_capacity_sps; /* moving average of the CPU pool's rate when busy */
  double cpu_cost_s;       /* moving average CPU time per sample */
  double device_cost_s;    /* moving average device time per sample */
  double device_time_share;/* moving average device busy time / wall time */
  int stalled;             /* the last observation counted as a stall */
  long batches;            /* observations so far */
} ff__sched_state;

void ff__sched_state_init(ff__sched_state *s);

/* Folds one observation into the state and sets s->share for the next
 * batch. */
void ff__sched_update(const ff__sched_params *p, ff__sched_state *s, const ff__sched_obs *obs);

/* One batch's move of a placement's share (the device's here, the remote
 * workers' in sched/remote.c): toward deficit plus the ring's missing
 * batches while stalled, down toward deficit while the ring is full, up
 * toward it while the ring drains without a stall; within [0, cap] as far
 * as those targets go (the caller clamps). */
double ff__sched_share_step(const ff__sched_params *p, double share, double deficit, double cap, int stalled,
                            int ring_ready);

/* How many of a batch of n samples go to the device at the current share. */
int ff__sched_device_count(const ff__sched_state *s, int n);

/* Marks the k costliest of n samples (predicted cost, any unit) for the
 * device: to_device[i] = 1 for them, 0 for the rest. Ties go to the later
 * index, so the choice is deterministic. */
void ff__sched_pick_costliest(const double *cost, int n, int k, unsigned char *to_device);

#endif
