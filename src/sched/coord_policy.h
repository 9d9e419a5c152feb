/* coord_policy.h — the node coordinator's decisions as pure functions over
 * the member table (coord_policy.c, coord_reserve.c, coord_classes.c): the
 * settings, one member's slot, the rebalancing one report runs and the
 * adaptive trainer reserve. No shared memory and no clock: the runtime
 * (coord.c) runs them under the table's lock, `fusionflow sim` and the tests
 * on a table of their own. docs/node-coordinator.md gives the policy in
 * prose; each function here says exactly what it computes. */
#ifndef FF_SCHED_COORD_POLICY_H
#define FF_SCHED_COORD_POLICY_H

#include <stdint.h>

#include "sched/coord.h"

#define FF__COORD_MAX_MEMBERS 64
#define FF__COORD_TRAINER_AUTO (-1) /* trainer_cores: the adaptive reserve (FF_NODE_TRAINER_CORES=auto) */
#define FF__COORD_WINDOW_MS 250     /* the adaptive reserve's measuring window, at least */
#define FF__COORD_RESERVE_HOLD 4    /* windows the adaptive reserve holds before it drops */
#define FF__COORD_RESERVE_FREE 0.25 /* cores of the others' use that reserve nothing */
#define FF__COORD_LIVE_MS 50        /* the shortest span a member's live cores are measured over */
#define FF__COORD_LIVE_SAMPLES 8    /* ... and its mean sample CPU times this many, at least */

/* The adaptive trainer reserve's state, kept beside the settings (a
 * joiner's values are never used; the segment starts it at zero). */
typedef struct ff__coord_reserve {
  double others_cores;   /* the others' cores, smoothed: half each window's measure, half the previous */
  double others_last;    /* the last window's measure (cores, -budget_threads..budget_threads) */
  int32_t cores;         /* the reserve in force: cores kept off the allotments, node-wide */
  int32_t hold;          /* windows left before the reserve may drop */
  int32_t windows;       /* windows measured */
  int32_t changes;       /* times the reserve changed */
  uint64_t start_ns;     /* CLOCK_MONOTONIC at the window's start (0: none open) */
  uint64_t node_busy_ns; /* the node's busy CPU time (ff__coord_node_busy_ns) at the start */
  uint64_t departed_ns;  /* worker CPU of members that left or were reclaimed within the window */
} ff__coord_reserve;

/* Node-wide settings. The member that (re)initialises a segment writes its
 * own; later members run with the segment's. */
typedef struct ff__coord_params {
  int budget_threads;       /* worker threads for the whole node (default: ff__coord_node_cores) */
  int min_threads;          /* every member keeps at least this many in its allotment (1); none where the
                               trainers' reserve leaves less than that per member */
  int trainer_cores;        /* cores kept for the trainers' own threads: FF__COORD_TRAINER_AUTO (the
                               default), the adaptive reserve; N >= 0: N per max(members, expected) */
  int expected_members;     /* the fair share divides by max(members, this): LOCAL_WORLD_SIZE (1) */
  double stall_threshold;   /* a member stalls when its smoothed stall share exceeds this (0.05) */
  double ring_full;         /* its ring counts as full at this smoothed fill, 0..1 (0.75) */
  double idle_threshold;    /* it has slack when its smoothed idle share (1 - busy) exceeds this (0.25) */
  double alpha;             /* weight of a report in the smoothed signals, (0, 1] (0.25), per 100 ms of
                               the member's interval: a report after dt weighs
                               max(alpha, 1 - (1 - alpha)^(dt / 100 ms)) */
  int heartbeat_timeout_ms; /* a member silent this long is reclaimed (5000) */
  int lock_timeout_ms;      /* a report waits at most this long for the table (200) */
  int init_timeout_ms;      /* a joiner waits this long for another process to create the segment (1000) */
  int quiet_ms;             /* a member silent longer than this and 4 of its batch intervals is quiet (50);
                               before its first report, when its workers parked or its live cores are
                               below its threads x (1 - idle_threshold) */
  ff__coord_reserve reserve; /* state, not a setting: the adaptive reserve (trainer_cores auto) */
} ff__coord_params;

/* One slot of the member table. pid 0 marks a free slot. */
typedef struct ff__coord_member {
  int32_t pid;           /* the member's process */
  int32_t max_threads;   /* its ceiling: the worker threads it owns */
  int32_t fair;          /* its fair share, set by ff__coord_targets */
  int32_t target;        /* where its allotment is heading, set by ff__coord_targets */
  int32_t threads;       /* its allotment: threads guaranteed at normal priority */
  int32_t reports;       /* reports since it joined */
  int32_t burst;         /* threads beyond its allotment while the node has idle cores (ff__coord_burst) */
  int32_t quiet;         /* 1: quiet (set when others report) */
  uint64_t ticket;       /* unique per join: tells a re-used slot from its previous owner */
  uint64_t pidns;        /* inode of its pid namespace (0: unknown): pids compare only within one */
  uint64_t heartbeat_ns; /* CLOCK_MONOTONIC of its last report (or join) */
  uint64_t interval_ns;  /* smoothed time between its reports (first report: since its join) */
  double stall_share;    /* smoothed signals of ff__coord_report_data */
  double ring_fill;
  double busy_share;
  double stall_now;        /* its last report's stall share, clamped: whether its trainer waits now */
  double fill_now;         /* its last report's ring fill, clamped: 0, no batch was ready */
  uint64_t worker_cpu_ns;  /* its report's worker_cpu_ns, as of heartbeat_ns */
  uint64_t worker_samples; /* its report's worker_samples (worker_cpu_ns / this: its mean sample CPU) */
  uint64_t window_cpu_ns;  /* its worker CPU (estimated) when the reserve's window opened */
  double worker_cores;     /* smoothed worker CPU per second between its reports */
  uint64_t cpu_now_ns;     /* its workers' CPU as they published it, read at every report (0: none) */
  int32_t parked;          /* 1: its workers published that each waits for work (its ring is full) */
  int32_t in_window;       /* 1: it had reported twice when the window opened (its CPU is known) */
  int32_t slack_reports;   /* its last reports in a row that alone had slack (ff__coord_has_slack) */
  uint64_t live_cpu_ns;    /* its published worker CPU when live_cores was last measured */
  uint64_t live_at_ns;     /* when (0: not yet) */
  uint64_t live_span_ns;   /* the span live_cores covers (0: none measured yet) */
  double live_cores;       /* its workers' cores over that span, from what they published */
  int32_t running;         /* the threads its last report answered (allotment + burst) */
  double busy_speed;       /* smoothed speed (ff__coord_speed) while its busy share was measured (0: 1) */
  double live_speed;       /* the speed when live_cores was measured */
} ff__coord_member;

/* ---- settings ---- */

/* Fills the defaults above (no environment is read; the budget is
 * ff__coord_node_cores). */
void ff__coord_params_init(ff__coord_params *p);

/* What a join does to the settings it is given: out-of-range values to
 * their defaults or bounds (a negative trainer_cores to
 * FF__COORD_TRAINER_AUTO), the reserve's state to zero. */
void ff__coord_params_normalise(ff__coord_params *p);

/* ---- thread classes (coord_classes.c) ---- */

/* The cores kept off the allotments and bursts for the trainers:
 * trainer_cores x max(members, expected_members), or the adaptive
 * reserve's cores under FF__COORD_TRAINER_AUTO. */
int ff__coord_reserved(const ff__coord_params *p, const ff__coord_member *m, int n);

/* The budget the allotments share: budget_threads less ff__coord_reserved,
 * at least the live members' minimums; 0 where an adaptive reserve leaves
 * less than min_threads (at least one) per share (every member runs on its
 * spares). */
int ff__coord_guaranteed_budget(const ff__coord_params *p, const ff__coord_member *m, int n);

/* The spares in SCHED_IDLE of a member owning cap threads that runs
 * `running` at normal priority: cap when running is 0, else 0. */
int ff__coord_member_spares(int cap, int running);

/* ---- one report (coord_policy.c) ---- */

/* Folds report r into member m's smoothed signals (the first is taken as
 * it is), keeps its stall share and ring fill as stall_now and fill_now and
 * counts it in slack_reports (0 after a report without slack). */
void ff__coord_observe(const ff__coord_params *p, ff__coord_member *m, const ff__coord_report_data *r);

/* Sets fair and target of every live member of m[0..n) (budget:
 * ff__coord_guaranteed_budget):
 *   - fair: budget / max(members, expected_members), the remainder one
 *     each to as many shares, starting at place reserve.windows modulo the
 *     shares; clamped to [min, max_threads];
 *   - stalled: stall_share > stall_threshold, unless its last two reports
 *     had slack; slack: not stalled, ring_fill >= ring_full and
 *     1 - busy_share > idle_threshold, or quiet; else neutral;
 *   - supply: the budget not in fair shares plus what slack members spare
 *     (fair less the threads that keep their busy share at most
 *     1 - idle_threshold, at least min; a quiet one keeps only min);
 *   - neutral members above their fair share keep what they hold first,
 *     the rest goes to stalled members in proportion to their stall share
 *     (up to max_threads); slack members lend only what was granted beyond
 *     the free budget, in proportion to what they spare.
 * The targets sum to at most max(budget, the members' minimums). */
void ff__coord_targets(const ff__coord_params *p, ff__coord_member *m, int n);

/* Moves member self's allotment toward its target: down by one (by the
 * whole excess while the table holds more than the budget), up by one only
 * from the free pool. No other member's allotment changes. Returns it. */
int ff__coord_step(const ff__coord_params *p, ff__coord_member *m, int n, int self);

/* Measures every member's live cores from the CPU its workers published
 * (cpu_now_ns, read in first): once its last measure is FF__COORD_LIVE_MS
 * and FF__COORD_LIVE_SAMPLES of its mean sample CPU old, (CPU since) /
 * (time since), at most max_threads, into live_cores and live_span_ns, the
 * speed of the table in live_speed. A first publication, one that went
 * back, and the member's own report start a span. */
void ff__coord_live(const ff__coord_params *p, ff__coord_member *m, int n, uint64_t now_ns);

/* The share of a core each competing thread gets: budget_threads / (the
 * threads members not slack run, plus the trainers' cores) when those are
 * more; else 1. */
double ff__coord_speed(const ff__coord_params *p, const ff__coord_member *m, int n);

/* Sets every member's burst (call after ff__coord_step): the guaranteed
 * budget less the cores in use (per member not slack: none while parked,
 * else its live cores where measured since its last report, else
 * (threads + burst) x busy_share, each over the speed it was measured at
 * and at most its allotment), rounded half up, goes first to neutral
 * members that held a burst, then to stalled members whose trainer waits
 * now (or that hold a burst and found no batch ready), in proportion to
 * their stall share, each up to max_threads - threads; where neutral
 * members leave idle less than a thread for each of those, each gets one
 * (not under a trainers' reserve). A member whose workers are parked or
 * idle below (1 - idle_threshold) of what it runs gets none. Bursts are not
 * counted in the budget. */
void ff__coord_burst(const ff__coord_params *p, ff__coord_member *m, int n);

/* What a report does to the table once the dead are reclaimed: member self
 * reports r at now_ns (its heartbeat, batch interval, weighted signals and
 * worker CPU rate; its live span restarts), every other member is marked
 * quiet or not, then ff__coord_targets, ff__coord_step for self,
 * ff__coord_live and ff__coord_burst. Returns the threads self runs:
 * allotment + burst, also kept as its running. */
int ff__coord_rebalance(const ff__coord_params *p, ff__coord_member *m, int n, int self,
                        const ff__coord_report_data *r, uint64_t now_ns);

/* Reads the node's cumulative busy CPU time into *out (ns): 0, or -1 when
 * it cannot be read (ff__coord_node_busy_ns, or the simulator's model). */
typedef int (*ff__coord_busy_fn)(void *ctx, uint64_t *out);

/* One report as the runtime runs it under the lock: the reserve's window is
 * measured when due (with busy(ctx)), ff__coord_rebalance, then a window
 * this report made due is measured at once. Returns the rebalance's
 * threads. */
int ff__coord_take_report(ff__coord_params *p, ff__coord_member *m, int n, int self,
                          const ff__coord_report_data *r, uint64_t now_ns, ff__coord_busy_fn busy, void *ctx);

/* ---- the adaptive reserve (coord_reserve.c) ---- */

/* Folds one window's measure of the others' cores (clamped to
 * +-budget_threads; NaN is 0) into r->others_cores (half and half; the
 * first alone) and sets r->cores to ceil(others_cores -
 * FF__COORD_RESERVE_FREE), 0..budget_threads - 1: at once when it rises,
 * after FF__COORD_RESERVE_HOLD windows in a row that want less when it
 * drops. Counts the windows and changes. */
void ff__coord_reserve_decide(const ff__coord_params *p, ff__coord_reserve *r, double others_cores);

/* Whether a report at now_ns measures a window: under
 * FF__COORD_TRAINER_AUTO, when none is open, when the open one is void (a
 * member had not reported twice when it opened) and every member has now,
 * or when it is FF__COORD_WINDOW_MS and two batch intervals of every member
 * not quiet old. */
int ff__coord_window_due(const ff__coord_params *p, const ff__coord_member *m, int n, uint64_t now_ns);

/* Closes the window at now_ns and opens the next: others = (node_busy_ns's
 * growth - the members' worker CPU in it (published, else estimated from
 * worker_cores; that of members who departed within it included)) / the
 * window, fed to ff__coord_reserve_decide. Only while every member had
 * reported twice when it opened. */
void ff__coord_measure(ff__coord_params *p, ff__coord_member *m, int n, uint64_t now_ns, uint64_t node_busy_ns);

/* Member e leaves within the window: its worker CPU in it is kept in
 * p->reserve.departed_ns. */
void ff__coord_depart(ff__coord_params *p, const ff__coord_member *e);

#endif
