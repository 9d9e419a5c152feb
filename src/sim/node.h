/* node.h — `fusionflow sim --ranks N`: a deterministic model of one node
 * whose N trainers (one per GPU, as torchrun starts them) each run a
 * CPU-only loader, and of how the node's cores are shared among those
 * loaders: by the node coordinator (the real rebalancing of
 * src/sched/coord_policy.c, ff__coord_rebalance, fed the reports the loader
 * makes, with its trainer-core reserve and its SCHED_IDLE spares), by the
 * operating system alone (`off`: every loader runs all its threads and the
 * cores are processor-shared among the runnable ones) or by a static equal
 * split. It is bench/node.py in simulated time, for
 * nodes this machine is not: docs/node-coordinator.md describes the model. */
#ifndef FF_SIM_NODE_H
#define FF_SIM_NODE_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

#define FF__SIM_NODE_MAX_RANKS 64 /* the coordinator's table (FF__COORD_MAX_MEMBERS) */
#define FF__SIM_NODE_MAX_SEGMENTS 8

typedef enum ff__sim_node_mode {
  FF__SIM_NODE_OFF = 0, /* each loader runs --cores threads, the OS shares the cores */
  FF__SIM_NODE_STATIC,  /* each loader runs max(1, cores / ranks) threads */
  FF__SIM_NODE_COORD,   /* each loader owns budget threads and runs what the coordinator allots it */
  FF__SIM_NODE_NMODES
} ff__sim_node_mode;

/* "off", "static", "coord" (bench/node.py's names). */
const char *ff__sim_node_mode_name(ff__sim_node_mode m);

/* From from_s (simulated seconds since the start) on, the trainer sleeps
 * step_s per batch after taking it: 0 is a trainer that always waits
 * (hungry), INFINITY one that stops asking for batches. */
typedef struct ff__sim_node_segment {
  double from_s;
  double step_s;
} ff__sim_node_segment;

typedef struct ff__sim_node_rank {
  double cpu_s;           /* mean CPU cost of a sample, seconds on one core */
  double cpu_cv;          /* its coefficient of variation (log-normal; 0: every sample costs cpu_s) */
  const double *cpu_list; /* per-sample costs (seconds) drawn uniformly instead, or NULL */
  size_t list_len;
  int segments;           /* 1..FF__SIM_NODE_MAX_SEGMENTS, from_s ascending, the first at 0 */
  ff__sim_node_segment seg[FF__SIM_NODE_MAX_SEGMENTS];
} ff__sim_node_rank;

typedef struct ff__sim_node_config {
  int cores;                    /* the node's cores */
  int budget;                   /* the coordinator's thread budget (FF_NODE_THREADS; 0: cores), and
                                   the threads each coordinated loader owns */
  int trainer_cores;            /* the coordinator's cores kept per rank for its trainer
                                   (FF_NODE_TRAINER_CORES, 0..4096, or FF__COORD_TRAINER_AUTO: the
                                   adaptive reserve; default: the coordinator's, auto) */
  int ranks;                    /* trainers, 1..FF__SIM_NODE_MAX_RANKS */
  const ff__sim_node_rank *rank;/* ranks entries */
  int batch_size;               /* samples per batch */
  int prefetch;                 /* batches prepared ahead (the ring holds prefetch + 1) */
  double seconds;               /* simulated run length */
  double warmup_s;              /* the figures count from this time on (0: the whole run, as
                                   bench/node.py measures; < seconds) */
  int lockstep;                 /* 1: after every step the trainers wait for each other (DDP's all-reduce) */
  int standin;                  /* 1: a CPU trainer stand-in runs beside the loaders (one thread that
                                   is always runnable) */
  uint64_t seed;                /* of the sample costs: every mode sees the same samples */
  /* Called at every batch handed out (NULL: none): rank, its batch number
   * (from 0), the simulated time and the threads its loader runs from then
   * on. */
  void (*on_handout)(void *ctx, int rank, long batch, double t_s, int threads);
  void *ctx;
} ff__sim_node_config;

/* Defaults: 16 cores, 8 ranks, batch 32, prefetch 2, 10 s measured from
 * the start, independent, no stand-in, trainer_cores as
 * ff__coord_params_init sets it, seed 0; rank must be set. */
void ff__sim_node_config_init(ff__sim_node_config *c);

/* Every figure is measured from warmup_s to the end of the run. */
typedef struct ff__sim_node_trainer {
  double images_per_s; /* samples handed out / the measured time */
  double stall;        /* share of the measured time its trainer waited for batches (not at the barrier) */
  double threads;      /* worker threads its loader ran at normal priority, averaged over its batches */
  double spares;       /* spare threads it ran in SCHED_IDLE (coord only), averaged likewise */
  double cpu_s;        /* CPU seconds its workers spent on the samples they finished */
  long batches;        /* handed out */
} ff__sim_node_trainer;

typedef struct ff__sim_node_result {
  ff__sim_node_trainer trainer[FF__SIM_NODE_MAX_RANKS];
  double node_images_per_s; /* the trainers' sum */
  double cpu_use;           /* the loaders' CPU seconds / (measured time x cores), 0..1 */
  double busy;              /* with the stand-in's: the node's busy share */
  double standin_rate;      /* the stand-in's speed relative to alone (a core of its own): its CPU seconds
                               / the measured time; 0 without one */
  int threads_each;         /* threads each loader owns: cores (off), the budget (coord) or
                               cores / ranks (static) */
} ff__sim_node_result;

/* Checks c; FF_EINVAL with the field named in err. */
ff_status ff__sim_node_check(const ff__sim_node_config *c, ff__error *err);

/* Runs the node in mode m. Deterministic. FF_OK, FF_EINVAL (bad config) or
 * FF_ENOMEM, the message in err. */
ff_status ff__sim_node_run(const ff__sim_node_config *c, ff__sim_node_mode m, ff__sim_node_result *out,
                           ff__error *err);

/* bench/node.py's scenarios, by name: "hungry", "lockstep", "one-stalled",
 * "changing", "standin" (NULL-terminated list). */
extern const char *const ff__sim_node_scenarios[];

/* Fills ranks[0..c->ranks) and c->lockstep, c->standin for scenario name
 * as bench/node.py runs it, with c->cores, c->ranks, c->batch_size and
 * c->seconds already set: even ranks cost like *even, odd ones like *odd
 * (only their costs are read); a trainer with slack consumes 1/(4N) of what
 * the node's cores make of its pipeline (cores / its mean cost); in
 * "changing" rank 0 has slack for the first half and waits in the second,
 * rank 1 the other way round. Sets c->rank = ranks. FF_OK, or FF_EINVAL
 * (unknown name). */
ff_status ff__sim_node_scenario(const char *name, const ff__sim_node_rank *even, const ff__sim_node_rank *odd,
                                ff__sim_node_config *c, ff__sim_node_rank *ranks, ff__error *err);

#endif
