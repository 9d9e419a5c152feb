/* sim.h — `fusionflow sim`: a deterministic discrete-event model of one
 * node (C CPU cores, G GPUs, one trainer process per GPU) whose loaders run
 * the cooperative offload policy of src/sched/policy.h — the same functions
 * the runtime calls — against cost models instead of images. It answers
 * "how many CPU cores per GPU does this pipeline need?" before anyone buys
 * hardware, and compares the policy with CPU-only, GPU-only and the paper's
 * static size-sorted split. The model is described at the top of sim.c. */
#ifndef FF_SIM_SIM_H
#define FF_SIM_SIM_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "core/philox.h"

typedef enum ff__sim_strategy {
  FF__SIM_CPU_ONLY = 0, /* every sample on the CPU pool */
  FF__SIM_GPU_ONLY,     /* every sample on the trainer's GPU */
  FF__SIM_STATIC,       /* a fixed share of each batch, its largest files, on the GPU (the paper's baseline) */
  FF__SIM_OURS,         /* the adaptive policy (ff__sched_update) */
  FF__SIM_NSTRATEGIES
} ff__sim_strategy;

/* The name used on the command line and in JSON ("cpu-only", "gpu-only",
 * "static", "ours"). */
const char *ff__sim_strategy_name(ff__sim_strategy s);

typedef struct ff__sim_config {
  int cores;              /* CPU cores of the node, shared out evenly among the trainers' loaders */
  int gpus;               /* GPUs = trainers */
  double step_s;          /* a trainer's step per batch without interference, seconds */
  int batch_size;         /* samples per batch (per trainer) */
  long batches;           /* batches each trainer consumes */
  long warmup;            /* batches left out of the measurement (< 0: batches / 5) */
  int prefetch;           /* the ring's depth in batches (the loader's --prefetch) */
  double cpu_s;           /* mean CPU cost per sample, seconds on one core */
  double cpu_cv;          /* its coefficient of variation (log-normal; 0 = every sample costs cpu_s) */
  const double *cpu_list; /* empirical CPU costs per sample (seconds), drawn uniformly; overrides cpu_s and cpu_cv; NULL = none */
  const double *size_list;/* file sizes matching cpu_list (any unit), or NULL: sizes then come from size_noise */
  size_t list_len;        /* entries of cpu_list (and size_list) */
  double size_noise;      /* file size = cost * exp(size_noise * N(0,1)): how well size predicts cost (0 = exactly) */
  double gpu_s;           /* mean GPU time per sample, seconds; a sample's GPU time scales with its CPU cost */
  double launch_s;        /* GPU time per microbatch (launches, copies), seconds */
  double gpu_decode_s;    /* placement `device`: GPU time of a sample's decode, seconds (scaled as gpu_s);
                           * 0 = the ops only (placement `split`, or a pipeline decoding elsewhere) */
  int decode_engines;     /* 1: the decode runs on the GPU's JPEG engines, a queue of its own that does not
                           * pause the training step; 0: on the SMs like the ops (nvJPEG hybrid) */
  int micro_batch;        /* device samples per microbatch; 0 = the device part of a batch is one microbatch */
  double device_cpu_frac; /* share of a device sample's CPU cost that stays on the CPU (read and decode
                           * in this project's device executor; 0 = the paper's all-GPU pipeline) */
  int sync;               /* 1: trainers step in lockstep (data parallel: all-reduce each step); 0: independent */
  uint64_t seed;
  /* Remote workers (src/sched/remote.h; 0 CPUs = none): one-CPU workers on
   * other machines, shared out evenly among the trainers' loaders like the
   * cores, that take what the local CPU threads and the device leave. */
  int remote_cpus;           /* remote CPUs of the node (one worker each) */
  double remote_cpu_factor;  /* a remote sample's CPU time on its worker / its local CPU cost */
  double remote_host_factor; /* the loader's CPU time to take a remote sample back / its local CPU cost */
  double remote_latency_s;   /* one-way network latency, seconds */
  double remote_bandwidth;   /* bytes/s of the node's link, shared evenly by the trainers; 0 = unlimited */
  double remote_bytes;       /* bytes on the wire per remote sample, both ways */
  int remote_micro_batch;    /* samples per microbatch (the Loader's microbatch_size) */
  int remote_in_flight;      /* microbatches in flight per worker (max_in_flight_per_worker) */
} ff__sim_config;

/* Defaults: 1 core, 1 GPU, step 100 ms, batch 64, 200 batches, warm-up
 * batches/5, prefetch 2, no costs (set cpu_s or cpu_list and gpu_s),
 * size_noise 0.1, one microbatch per batch, device_cpu_frac 0, sync 1,
 * seed 0; no remote CPUs (factors 1 and 0, no latency, unlimited
 * bandwidth, 0 bytes, microbatches of 16, 2 in flight per worker). */
void ff__sim_config_init(ff__sim_config *c);

/* Checks c; on failure sets err's message naming the field and returns
 * FF_EINVAL. */
ff_status ff__sim_config_check(const ff__sim_config *c, ff__error *err);

/* Measured over the batches after the warm-up, averaged over trainers. */
typedef struct ff__sim_result {
  double samples_per_s;      /* consumed per trainer (= per GPU) */
  double node_samples_per_s; /* consumed by the node */
  double stall_share;        /* of wall time a trainer does not step: it waits for its batch, or at the
                              * step barrier for a trainer that waited */
  double wait_share;         /* of wall time a trainer waits for its own batch (part of stall_share) */
  double device_share;       /* of samples prepared on the GPU */
  double gpu_prep_share;     /* of wall time the GPU spends on preprocessing */
  double slowdown;           /* mean step time / step_s - 1: the interference of preprocessing */
  double loss;               /* 1 - samples_per_s / (batch_size / step_s): stall and slowdown together */
  double remote_share;       /* of samples prepared by remote workers (-1: no remote workers) */
  double static_share;       /* FF__SIM_STATIC: the share used (others: -1) */
} ff__sim_result;

/* Runs the node for strategy s. static_share (0..1) is used by
 * FF__SIM_STATIC only. Deterministic: the same config gives the same result,
 * and every strategy sees the same samples. Returns FF_OK, FF_EINVAL (bad
 * config, message in err) or FF_ENOMEM. */
ff_status ff__sim_run(const ff__sim_config *c, ff__sim_strategy s, double static_share, ff__sim_result *out,
                      ff__error *err);

/* The paper's baseline tuned offline: FF__SIM_STATIC at shares 0, 0.05, ...,
 * 1, keeping the highest throughput (ties: the smaller share). */
ff_status ff__sim_best_static(const ff__sim_config *c, ff__sim_result *out, ff__error *err);

/* The smallest number of CPU cores per GPU in [1, max_per_gpu] for which
 * strategy s loses less than max_loss of the trainers' full speed (stall
 * and interference together: result.loss < max_loss). c->cores is replaced
 * by cores-per-GPU * c->gpus. *cores_per_gpu gets 0 when none suffices;
 * *at (if not NULL) the result at the answer. */
ff_status ff__sim_cores_needed(const ff__sim_config *c, ff__sim_strategy s, int max_per_gpu, double max_loss,
                               int *cores_per_gpu, ff__sim_result *at, ff__error *err);

/* The smallest number of remote CPUs per GPU in [0, max_per_gpu] beside
 * c->cores local cores for which strategy s (FF__SIM_CPU_ONLY: local CPU
 * then remote; FF__SIM_OURS: local CPU, the device, then remote) loses less
 * than max_loss of full speed. c->remote_cpus is replaced by remote-per-GPU
 * * c->gpus. *remote_per_gpu gets -1 when none suffices; rows (if not NULL,
 * max_per_gpu + 1 entries) get the result at each count tried, *tried how
 * many (the answer's row last). */
ff_status ff__sim_remote_needed(const ff__sim_config *c, ff__sim_strategy s, int max_per_gpu, double max_loss,
                                int *remote_per_gpu, ff__sim_result *rows, int *tried, ff__error *err);

/* One sample's CPU cost (seconds on one core) from r: drawn uniformly from
 * list[0..n) when list is not NULL (*picked, if not NULL, gets the index),
 * else log-normal with mean mean_s and coefficient of variation cv (mean_s
 * itself when cv is 0). */
double ff__sim_cost_draw(ff__philox *r, double mean_s, double cv, const double *list, size_t n, size_t *picked);

/* Per-sample CPU costs read from a profile (see sim.c for the formats). */
typedef struct ff__sim_profile {
  double cpu_s;           /* mean CPU cost per sample, seconds on one core */
  double decode_frac;     /* (read + decode) / (read + decode + ops): what stays on the CPU when only the ops
                           * are offloaded (placement `split`); -1 when the profile does not say */
  double read_frac;       /* read / (read + decode + ops): what stays when the device decodes too
                           * (placement `device`); -1 when the profile does not say */
  double *cpu_list;       /* per-sample costs (seconds), or NULL (a bench summary has only the mean) */
  double *size_list;      /* per-sample sizes, or NULL */
  size_t list_len;
  long samples;           /* samples the profile was measured on */
  int threads;            /* worker threads it was measured with (0 when unknown) */
} ff__sim_profile;

/* Reads path: either the JSON object printed by `fusionflow bench --json`
 * or a text file of per-sample costs. On success fills *out (free it with
 * ff__sim_profile_free) and returns FF_OK; otherwise FF_EIO, FF_EDATA or
 * FF_ENOMEM with the message in err. */
ff_status ff__sim_profile_load(const char *path, ff__sim_profile *out, ff__error *err);
void ff__sim_profile_free(ff__sim_profile *p);

#endif
