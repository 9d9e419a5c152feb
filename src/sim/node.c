/* node.c — several trainers on one node in simulated time (node.h): how
 * the node's cores are shared among their CPU-only loaders with the node
 * coordinator (its own ff__coord_take_report over a member table of the
 * ranks), without it, and split statically. The model — the OS as an ideal
 * fair scheduler of two priority classes, each loader as loader.c works,
 * what is assumed and what is not modelled — is in docs/node-coordinator.md
 * ("Simulating it"). Costs come from a Philox stream per rank in sample
 * order, so every mode sees the same samples and a run is deterministic. */
#include "sim/node.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/philox.h"
#include "sched/coord_policy.h"
#include "sim/sim.h"

#define NODE_DOMAIN 0x4e4f4445u /* "NODE": the node simulator's Philox streams */
#define MIN_INTERVAL_S 1e-6     /* a batch taken at once still takes the consumer this long */

const char *const ff__sim_node_scenarios[] = {"hungry", "lockstep", "one-stalled", "changing", "standin", NULL};

const char *ff__sim_node_mode_name(ff__sim_node_mode m) {
  static const char *names[] = {"off", "static", "coord"};
  return m >= 0 && m < FF__SIM_NODE_NMODES ? names[m] : "?";
}

void ff__sim_node_config_init(ff__sim_node_config *c) {
  ff__coord_params p;
  ff__coord_params_init(&p);
  *c = (ff__sim_node_config){.cores = 16, .ranks = 8, .batch_size = 32, .prefetch = 2, .seconds = 10,
                             .trainer_cores = p.trainer_cores};
}

ff_status ff__sim_node_check(const ff__sim_node_config *c, ff__error *err) {
  if (c->cores < 1 || c->cores > 4096) return ff__error_set(err, FF_EINVAL, "cores must be in 1..4096 (got %d)", c->cores);
  if (c->budget < 0 || c->budget > 4096)
    return ff__error_set(err, FF_EINVAL, "the budget must be in 0..4096 (got %d)", c->budget);
  if ((c->trainer_cores < 0 && c->trainer_cores != FF__COORD_TRAINER_AUTO) || c->trainer_cores > 4096)
    return ff__error_set(err, FF_EINVAL, "trainer cores must be auto or in 0..4096 (got %d)", c->trainer_cores);
  if (c->ranks < 1 || c->ranks > FF__SIM_NODE_MAX_RANKS)
    return ff__error_set(err, FF_EINVAL, "ranks must be in 1..%d (got %d)", FF__SIM_NODE_MAX_RANKS, c->ranks);
  if (c->batch_size < 1) return ff__error_set(err, FF_EINVAL, "batch size must be >= 1 (got %d)", c->batch_size);
  if (c->prefetch < 1) return ff__error_set(err, FF_EINVAL, "prefetch must be >= 1 (got %d)", c->prefetch);
  if (!(c->seconds > 0 && c->seconds <= 1e6))
    return ff__error_set(err, FF_EINVAL, "the run length must be in (0, 1e6] s (got %g)", c->seconds);
  if (!(c->warmup_s >= 0 && c->warmup_s < c->seconds))
    return ff__error_set(err, FF_EINVAL, "the warm-up must be in [0, %g) s (got %g)", c->seconds, c->warmup_s);
  if (!c->rank) return ff__error_set(err, FF_EINVAL, "no ranks given");
  for (int i = 0; i < c->ranks; i++) {
    const ff__sim_node_rank *r = &c->rank[i];
    if (r->cpu_list) {
      if (!r->list_len) return ff__error_set(err, FF_EINVAL, "rank %d: the list of CPU costs is empty", i);
      for (size_t k = 0; k < r->list_len; k++)
        if (!(r->cpu_list[k] > 0 && r->cpu_list[k] < 1e6))
          return ff__error_set(err, FF_EINVAL, "rank %d: CPU cost %zu of the list is not in (0, 1e6) s", i, k);
    } else if (!(r->cpu_s > 0 && r->cpu_s < 1e6) || !(r->cpu_cv >= 0 && r->cpu_cv <= 100)) {
      return ff__error_set(err, FF_EINVAL, "rank %d: the CPU cost must be in (0, 1e6) s and its cv in [0, 100] "
                           "(got %g s, cv %g)", i, r->cpu_s, r->cpu_cv);
    }
    if (r->segments < 1 || r->segments > FF__SIM_NODE_MAX_SEGMENTS || r->seg[0].from_s != 0)
      return ff__error_set(err, FF_EINVAL, "rank %d: 1..%d step segments, the first from 0 s (got %d)", i,
                           FF__SIM_NODE_MAX_SEGMENTS, r->segments);
    for (int s = 0; s < r->segments; s++) {
      if (!(r->seg[s].step_s >= 0)) return ff__error_set(err, FF_EINVAL, "rank %d: step %d is not >= 0", i, s);
      if (s && !(r->seg[s].from_s > r->seg[s - 1].from_s))
        return ff__error_set(err, FF_EINVAL, "rank %d: step segments must start in ascending order", i);
    }
  }
  return FF_OK;
}

/* ---- the runnable samples of a priority class: a min-heap on its virtual finish time ---- */

typedef struct job {
  double vf;  /* virtual time at which it is done */
  double cost;
  long batch;
  int rank;
} job;

static void job_sift_down(job *h, int n, int i) {
  for (;;) {
    int l = 2 * i + 1, m = i;
    if (l < n && h[l].vf < h[m].vf) m = l;
    if (l + 1 < n && h[l + 1].vf < h[m].vf) m = l + 1;
    if (m == i) return;
    job x = h[i];
    h[i] = h[m], h[m] = x;
    i = m;
  }
}

static void job_push(job *h, int *n, job j) {
  int i = (*n)++;
  h[i] = j;
  while (i > 0 && h[(i - 1) / 2].vf > h[i].vf) {
    job x = h[i];
    h[i] = h[(i - 1) / 2], h[(i - 1) / 2] = x;
    i = (i - 1) / 2;
  }
}

static job job_pop(job *h, int *n) {
  job top = h[0];
  h[0] = h[--*n];
  job_sift_down(h, *n, 0);
  return top;
}

/* ---- one rank: its loader and its trainer ---- */

enum { ASKING, STEPPING, AT_BARRIER, STOPPED };

enum { NORMAL, IDLE, NCLASSES }; /* the workers' priority classes: normal, and the spares' SCHED_IDLE */

typedef struct pclass {
  job *heap;
  int n;
  double vnow, speed; /* its virtual time, and the share of a core each of its runnable threads gets */
} pclass;

typedef struct loader {
  const ff__sim_node_rank *cfg;
  ff__philox rng;
  int active, spares;     /* workers at normal priority, spares in SCHED_IDLE */
  int busy[NCLASSES];     /* of each class, in the middle of a sample */
  long next_item, consumed; /* samples taken, batches handed out */
  int *left;                /* per ring entry (batch % ring): its samples not yet done */
  double worker_cpu, reported_cpu;
  long worker_samples; /* samples its workers and spares finished */
  int state;
  double ask_t, step_end, last_out, next_step;
  int has_out, ring_ready;
  double wait_s, thread_sum, spare_sum, cpu_s; /* measured (from the warm-up on) */
  long batches;
} loader;

typedef struct sim {
  const ff__sim_node_config *c;
  ff__sim_node_mode mode;
  int ring;
  loader *l;
  pclass cls[NCLASSES];
  int at_barrier;
  double now;
  double busy_cpu; /* the node's busy CPU seconds so far: the workers', the spares' and the stand-in's */
  ff__coord_params params;
  ff__coord_member member[FF__SIM_NODE_MAX_RANKS];
} sim;

static double step_at(const ff__sim_node_rank *r, double t) {
  int s = 0;
  while (s + 1 < r->segments && t >= r->seg[s + 1].from_s)
    s++;
  return r->seg[s].step_s;
}

static int batch_ready(const sim *S, const loader *L, long b) {
  long B = S->c->batch_size;
  return L->next_item >= (b + 1) * B && L->left[b % S->ring] == 0;
}

/* Active workers, then active spares, take samples while the ring has
 * room for their batch; with the coordinator the loader publishes whether
 * its workers are parked (none has a sample, the ring has no room), as
 * worker.c's do. */
static void refill(sim *S, int r) {
  loader *L = &S->l[r];
  long B = S->c->batch_size;
  for (int k = NORMAL; k < NCLASSES; k++) {
    pclass *P = &S->cls[k];
    while (L->busy[k] < (k == NORMAL ? L->active : L->spares) && L->next_item / B < L->consumed + S->ring) {
      long b = L->next_item / B;
      if (L->next_item % B == 0) L->left[b % S->ring] = (int)B;
      const ff__sim_node_rank *q = L->cfg;
      double cost = ff__sim_cost_draw(&L->rng, q->cpu_s, q->cpu_cv, q->cpu_list, q->list_len, NULL);
      job_push(P->heap, &P->n, (job){P->vnow + cost, cost, b, r});
      L->next_item++;
      L->busy[k]++;
    }
  }
  if (S->mode == FF__SIM_NODE_COORD)
    S->member[r].parked = !L->busy[NORMAL] && !L->busy[IDLE] && L->next_item / B >= L->consumed + S->ring;
}

static void ask(sim *S, loader *L) {
  L->state = ASKING;
  L->ask_t = S->now;
  L->next_step = step_at(L->cfg, S->now);
  L->ring_ready = 0;
  for (long b = L->consumed; b < L->consumed + S->ring; b++)
    L->ring_ready += batch_ready(S, L, b);
}

/* The node's busy CPU as modelled (ff__coord_busy_fn). */
static int busy_ns(void *ctx, uint64_t *out) {
  *out = (uint64_t)llround(((sim *)ctx)->busy_cpu * 1e9);
  return 0;
}

/* Batch L->consumed goes out now: the report, the coordinator's answer,
 * then the trainer's step. */
static void hand_out(sim *S, int r) {
  const ff__sim_node_config *c = S->c;
  loader *L = &S->l[r];
  double wait = S->now - L->ask_t, warm = c->warmup_s;
  if (L->has_out) {
    double interval = S->now - L->last_out;
    if (interval < MIN_INTERVAL_S) interval = MIN_INTERVAL_S;
    ff__coord_report_data rep = {wait / interval, (double)L->ring_ready / c->prefetch,
                                 (L->worker_cpu - L->reported_cpu) /
                                     ((L->active > 0 ? L->active : 1) * interval),
                                 (uint64_t)llround(L->worker_cpu * 1e9), (uint64_t)L->worker_samples};
    L->reported_cpu = L->worker_cpu;
    if (S->mode == FF__SIM_NODE_COORD) {
      uint64_t now_ns = (uint64_t)llround(S->now * 1e9);
      L->active = ff__coord_take_report(&S->params, S->member, c->ranks, r, &rep, now_ns, busy_ns, S);
      L->spares = ff__coord_member_spares(S->member[r].max_threads, L->active);
    }
  } else {
    L->reported_cpu = L->worker_cpu; /* the first batch: the next report's busy share is of its interval */
  }
  L->has_out = 1;
  L->last_out = S->now;
  if (S->now >= warm) {
    L->wait_s += S->now - (L->ask_t > warm ? L->ask_t : warm);
    L->thread_sum += L->active;
    L->spare_sum += L->spares;
    L->batches++;
  }
  if (c->on_handout) c->on_handout(c->ctx, r, L->consumed, S->now, L->active);
  L->consumed++;
  if (isinf(L->next_step)) {
    L->state = STOPPED;
  } else {
    L->state = STEPPING;
    L->step_end = S->now + L->next_step;
  }
}

/* Moves every trainer as far as it can at S->now and lets the workers take
 * what the ring has room for. */
static void settle(sim *S) {
  const ff__sim_node_config *c = S->c;
  for (int changed = 1; changed;) {
    changed = 0;
    for (int r = 0; r < c->ranks; r++) {
      loader *L = &S->l[r];
      if (L->state == STEPPING && L->step_end <= S->now) {
        if (c->lockstep) {
          L->state = AT_BARRIER;
          S->at_barrier++;
        } else {
          ask(S, L);
        }
        changed = 1;
      }
      if (L->state == ASKING && batch_ready(S, L, L->consumed)) {
        hand_out(S, r);
        changed = 1;
      }
    }
    if (c->lockstep && S->at_barrier == c->ranks) {
      S->at_barrier = 0;
      for (int r = 0; r < c->ranks; r++)
        ask(S, &S->l[r]);
      changed = 1;
    }
  }
  for (int r = 0; r < c->ranks; r++)
    refill(S, r);
}

static void setup_threads(sim *S) {
  const ff__sim_node_config *c = S->c;
  int each = S->mode == FF__SIM_NODE_STATIC ? (c->cores / c->ranks > 1 ? c->cores / c->ranks : 1) : c->cores;
  for (int r = 0; r < c->ranks; r++)
    S->l[r].active = each;
  if (S->mode != FF__SIM_NODE_COORD) return;
  int budget = c->budget > 0 ? c->budget : c->cores;
  ff__coord_params_init(&S->params);
  S->params.budget_threads = budget;
  S->params.expected_members = c->ranks;
  S->params.trainer_cores = c->trainer_cores;
  ff__coord_params_normalise(&S->params);
  for (int r = 0; r < c->ranks; r++)
    S->member[r] = (ff__coord_member){.pid = r + 1, .max_threads = budget, .ticket = (uint64_t)r + 1};
  ff__coord_targets(&S->params, S->member, c->ranks);
  for (int r = 0; r < c->ranks; r++) {
    S->l[r].active = S->member[r].threads = S->member[r].target;
    S->l[r].spares = ff__coord_member_spares(budget, S->l[r].active);
  }
}

/* The share of a core each runnable thread of a class gets: normal
 * priority (the workers and the stand-in) first, the spares on what is
 * left. */
static void share_cores(sim *S) {
  int cores = S->c->cores, normal = S->cls[NORMAL].n + (S->c->standin ? 1 : 0), idle = S->cls[IDLE].n;
  double left = normal < cores ? cores - normal : 0;
  S->cls[NORMAL].speed = normal > cores ? (double)cores / normal : 1.0;
  S->cls[IDLE].speed = idle > left ? left / idle : 1.0;
}

static void simulate(sim *S, ff__sim_node_result *out) {
  const ff__sim_node_config *c = S->c;
  double T = c->seconds, W = c->warmup_s, loader_cpu = 0, standin_cpu = 0;
  for (int r = 0; r < c->ranks; r++)
    ask(S, &S->l[r]);
  for (;;) {
    settle(S);
    share_cores(S);
    double t_job[NCLASSES], t_next = S->now < W ? W : T;
    for (int k = NORMAL; k < NCLASSES; k++) {
      const pclass *P = &S->cls[k];
      t_job[k] = P->n && P->speed > 0 ? S->now + (P->heap[0].vf - P->vnow) / P->speed : INFINITY;
      if (t_job[k] < t_next) t_next = t_job[k];
    }
    for (int r = 0; r < c->ranks; r++)
      if (S->l[r].state == STEPPING && S->l[r].step_end < t_next) t_next = S->l[r].step_end;
    double dt = t_next > S->now ? t_next - S->now : 0;
    for (int k = NORMAL; k < NCLASSES; k++)
      S->busy_cpu += S->cls[k].speed * S->cls[k].n * dt;
    if (c->standin) S->busy_cpu += S->cls[NORMAL].speed * dt;
    if (S->now >= W) {
      for (int k = NORMAL; k < NCLASSES; k++)
        loader_cpu += S->cls[k].speed * S->cls[k].n * dt;
      if (c->standin) standin_cpu += S->cls[NORMAL].speed * dt;
    }
    for (int k = NORMAL; k < NCLASSES; k++) {
      pclass *P = &S->cls[k];
      P->vnow = t_next == t_job[k] ? P->heap[0].vf : P->vnow + P->speed * dt;
    }
    S->now = t_next;
    if (S->now >= T) break;
    for (int k = NORMAL; k < NCLASSES; k++) {
      pclass *P = &S->cls[k];
      while (P->n && P->heap[0].vf <= P->vnow) {
        job j = job_pop(P->heap, &P->n);
        loader *L = &S->l[j.rank];
        L->left[j.batch % S->ring]--;
        L->worker_cpu += j.cost, L->worker_samples++;
        if (S->mode == FF__SIM_NODE_COORD) /* published, as a worker does after each sample */
          S->member[j.rank].cpu_now_ns = (uint64_t)llround(L->worker_cpu * 1e9);
        if (S->now >= W) L->cpu_s += j.cost;
        L->busy[k]--;
      }
    }
  }
  *out = (ff__sim_node_result){0};
  double span = T - W;
  for (int r = 0; r < c->ranks; r++) {
    loader *L = &S->l[r];
    if (L->state == ASKING) L->wait_s += T - (L->ask_t > W ? L->ask_t : W); /* still waiting at the end */
    ff__sim_node_trainer *t = &out->trainer[r];
    t->images_per_s = (double)L->batches * c->batch_size / span;
    t->stall = L->wait_s / span;
    t->threads = L->batches ? L->thread_sum / L->batches : L->active;
    t->spares = L->batches ? L->spare_sum / L->batches : L->spares;
    t->cpu_s = L->cpu_s;
    t->batches = L->batches;
    out->node_images_per_s += t->images_per_s;
  }
  out->cpu_use = loader_cpu / (span * c->cores);
  out->busy = (loader_cpu + standin_cpu) / (span * c->cores);
  out->standin_rate = standin_cpu / span;
  out->threads_each = S->mode == FF__SIM_NODE_STATIC ? S->l[0].active
                      : S->mode == FF__SIM_NODE_COORD && c->budget > 0 ? c->budget
                                                                        : c->cores;
}

ff_status ff__sim_node_run(const ff__sim_node_config *c, ff__sim_node_mode m, ff__sim_node_result *out,
                           ff__error *err) {
  ff_status st = ff__sim_node_check(c, err);
  if (st) return st;
  if (m < 0 || m >= FF__SIM_NODE_NMODES) return ff__error_set(err, FF_EINVAL, "unknown mode %d", (int)m);
  sim S = {.c = c, .mode = m, .ring = c->prefetch + 1};
  S.l = calloc((size_t)c->ranks, sizeof *S.l);
  int most = c->budget > c->cores ? c->budget : c->cores; /* threads a loader may run */
  for (int k = NORMAL; k < NCLASSES; k++)
    S.cls[k].heap = malloc((size_t)c->ranks * (size_t)most * sizeof *S.cls[k].heap);
  int ok = S.l && S.cls[NORMAL].heap && S.cls[IDLE].heap;
  for (int r = 0; ok && r < c->ranks; r++) {
    S.l[r].cfg = &c->rank[r];
    ff__philox_init(&S.l[r].rng, c->seed, NODE_DOMAIN, (uint64_t)r, 0);
    ok = (S.l[r].left = calloc((size_t)S.ring, sizeof(int))) != NULL;
  }
  if (ok) {
    setup_threads(&S);
    simulate(&S, out);
  } else {
    st = ff__error_set(err, FF_ENOMEM, "out of memory for %d ranks of %d threads", c->ranks, c->cores);
  }
  for (int r = 0; S.l && r < c->ranks; r++)
    free(S.l[r].left);
  free(S.l), free(S.cls[NORMAL].heap), free(S.cls[IDLE].heap);
  return st;
}

static double mean_cost(const ff__sim_node_rank *r) {
  if (!r->cpu_list) return r->cpu_s;
  double sum = 0;
  for (size_t k = 0; k < r->list_len; k++)
    sum += r->cpu_list[k];
  return r->list_len ? sum / (double)r->list_len : 0;
}

ff_status ff__sim_node_scenario(const char *name, const ff__sim_node_rank *even, const ff__sim_node_rank *odd,
                                ff__sim_node_config *c, ff__sim_node_rank *ranks, ff__error *err) {
  int known = 0;
  for (int i = 0; ff__sim_node_scenarios[i]; i++)
    known |= !strcmp(name, ff__sim_node_scenarios[i]);
  if (!known)
    return ff__error_set(err, FF_EINVAL, "unknown scenario '%s' (known: hungry, lockstep, one-stalled, changing, "
                         "standin)", name);
  int n = c->ranks;
  double half = c->seconds / 2;
  c->lockstep = !strcmp(name, "lockstep");
  c->standin = !strcmp(name, "standin");
  for (int i = 0; i < n; i++) {
    const ff__sim_node_rank *cost = i % 2 ? odd : even;
    ff__sim_node_rank *r = &ranks[i];
    *r = (ff__sim_node_rank){.cpu_s = cost->cpu_s, .cpu_cv = cost->cpu_cv, .cpu_list = cost->cpu_list,
                             .list_len = cost->list_len, .segments = 1};
    double m = mean_cost(cost);
    /* a trainer with slack takes 1/(4N) of what the node's cores make of its pipeline */
    double slack = m > 0 ? c->batch_size / (c->cores / m / (4.0 * n)) : 0;
    if (!strcmp(name, "one-stalled")) {
      r->seg[0].step_s = i == 0 ? 0 : slack;
    } else if (!strcmp(name, "changing")) {
      if (i < 2) {
        r->segments = 2;
        r->seg[0].step_s = i == 0 ? slack : 0;
        r->seg[1] = (ff__sim_node_segment){half, i == 0 ? 0 : slack};
      } else {
        r->seg[0].step_s = slack;
      }
    }
  }
  c->rank = ranks;
  return FF_OK;
}
