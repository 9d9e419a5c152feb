/* coord.h — the node coordinator: the loaders of the training processes on
 * one node (one per GPU, as torchrun starts them) share a table in POSIX
 * shared memory, report their stall once per batch and get back how many
 * CPU worker threads to run, so that threads move from loaders with slack to
 * loaders that stall while the node's total stays within its budget.
 * coord.c opens with the design; the rebalancing is also exposed as pure
 * functions over the member table (ff__coord_targets, ff__coord_step) so
 * that it can be tested and simulated without shared memory.
 *
 * Thread-safety: one ff__coord handle is used by one thread at a time (the
 * loader's consumer thread); any number of handles, in any number of
 * processes, may share a group. A forked child must not use its parent's
 * handle (it is refused: FF_EINVAL). */
#ifndef FF_SCHED_COORD_H
#define FF_SCHED_COORD_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

#define FF__COORD_MAX_MEMBERS 64
#define FF__COORD_TRAINER_AUTO (-1) /* trainer_cores: the adaptive reserve (FF_NODE_TRAINER_CORES=auto) */
#define FF__COORD_WINDOW_MS 250     /* the adaptive reserve's measuring window, at least */
#define FF__COORD_RESERVE_HOLD 4    /* windows the adaptive reserve holds before it drops */
#define FF__COORD_RESERVE_FREE 0.25 /* cores of the others' use that reserve nothing (see below) */
#define FF__COORD_LIVE_MS 50        /* the shortest span a member's live cores are measured over */
#define FF__COORD_LIVE_SAMPLES 8    /* ... and its mean sample CPU times this many, at least */

/* The adaptive trainer reserve (trainer_cores FF__COORD_TRAINER_AUTO): state
 * the coordinator keeps beside the settings, not a setting (a joiner's own
 * values are never used; the segment starts it at zero). Every window of at
 * least FF__COORD_WINDOW_MS, the member whose report closes it measures the
 * node's CPU demand that is not its loaders' worker threads:
 *   others = (node busy CPU - the members' worker-thread CPU) / window
 * in cores (a trainer's main thread, in the loader's process or another, a
 * GPU's launches, any other process on the budget's CPUs), smooths it and
 * keeps that many cores out of the allotments and the bursts
 * (ff__coord_reserve_decide). */
typedef struct ff__coord_reserve {
  double others_cores;    /* smoothed others: half of each window's measure, half the previous (a
                             measure errs both ways: near 0 it may be negative) */
  double others_last;     /* the last window's measure (cores, -budget_threads..budget_threads) */
  int32_t cores;          /* the reserve in force: cores kept off the allotments, node-wide */
  int32_t hold;           /* windows left before the reserve may drop */
  int32_t windows;        /* windows measured */
  int32_t changes;        /* times the reserve changed */
  uint64_t start_ns;      /* CLOCK_MONOTONIC at the window's start (0: none open) */
  uint64_t node_busy_ns;  /* the node's busy CPU time (ff__coord_node_busy_ns) at the start */
  uint64_t departed_ns;   /* worker CPU of members that left or were reclaimed within the window */
} ff__coord_reserve;

#define FF__COORD_GROUP_MAX 128 /* bytes of a group name, NUL included */

/* Node-wide settings. The member that (re)initialises a segment writes its
 * own; later members run with the segment's (ff__coord_snapshot shows them). */
typedef struct ff__coord_params {
  int budget_threads;       /* worker threads for the whole node; default: the cores this process
                               may use (ff__coord_node_cores) */
  int min_threads;          /* every member keeps at least this many in its allotment (default 1; a joiner
                               makes it 0 when the budget less the trainers' cores has less than that
                               for each expected member: then the loaders run on spares) */
  int trainer_cores;        /* cores kept for the trainers' own threads (a Python training loop's main
                               thread, the GPU's launches), so that the loaders' normal-priority threads
                               never take them. FF__COORD_TRAINER_AUTO (the default): the adaptive
                               reserve, as many cores as the node's CPU use beside the loaders' workers
                               measures (ff__coord_reserve); N >= 0: N fixed per member, the allotments
                               share the budget less N x max(members, expected_members) (a reserved core
                               its trainer leaves idle is lent to no one) */
  int expected_members;     /* the fair share divides by max(members, this): with torchrun,
                               LOCAL_WORLD_SIZE, so the first rank does not take the whole
                               budget (default 1) */
  double stall_threshold;   /* a member stalls when its smoothed stall share exceeds this (0.05) */
  double ring_full;         /* its ring counts as full at this smoothed fill, 0..1 (0.75) */
  double idle_threshold;    /* it has slack when its smoothed idle share (1 - busy) exceeds this (0.25) */
  double alpha;             /* weight of a new report in the smoothed signals, (0, 1] (0.25), per
                               100 ms of the member's interval: a report after dt weighs
                               max(alpha, 1 - (1 - alpha)^(dt / 100 ms)) */
  int heartbeat_timeout_ms; /* a member silent this long is reclaimed (5000) */
  int lock_timeout_ms;      /* a report waits at most this long for the table, then the next
                               ones only try it until they get it (200) */
  int init_timeout_ms;      /* how long a joiner waits for another process to create the segment (1000) */
  int quiet_ms;             /* a member silent longer than this and than 4 of its own batch intervals
                               is quiet: its trainer stopped consuming (or the process is stopped),
                               so its workers park and its cores count as idle (50); one that has not
                               reported yet is when its workers published that they parked, or its
                               live cores (ff__coord_live) are below its threads x (1 -
                               idle_threshold), whatever its silence: its workers make its trainer's
                               first batches, or filled its ring and parked */
  ff__coord_reserve reserve; /* state, not a setting: the adaptive reserve (trainer_cores auto) */
} ff__coord_params;

/* Fills the defaults above (no environment is read; budget from
 * ff__coord_node_cores). */
void ff__coord_params_init(ff__coord_params *p);

/* What a join does to the parameters it is given: out-of-range values to
 * their defaults or bounds (a negative trainer_cores to
 * FF__COORD_TRAINER_AUTO) and the reserve's state to zero. The simulator
 * applies it as a join would. */
void ff__coord_params_normalise(ff__coord_params *p);

/* The cores this process may use: its CPU affinity (sched_getaffinity),
 * lowered to the cgroup v2 quota (cpu.max "QUOTA PERIOD", rounded up) of
 * its cgroup and every parent (/proc/self/cgroup under /sys/fs/cgroup), at
 * least 1. Online processors are not the node's budget: a container or a
 * job scheduler may give the trainers fewer. */
int ff__coord_node_cores(void);

/* The tightest cgroup v2 quota (ff__coord_cpu_max_cores) of the cgroup
 * that proc_cgroup (a /proc/PID/cgroup file: its "0::PATH" line) names and
 * of every parent, their cpu.max files under root (/sys/fs/cgroup):
 * cores, or 0 (no quota, no v2 entry, nothing readable). The directory of
 * the cgroup whose quota it is goes to dir_out (cap bytes) when dir_out is
 * not NULL and there is one. ff__coord_node_cores and the reserve's busy
 * source read /proc/self/cgroup under /sys/fs/cgroup; tests give a tree. */
int ff__coord_cgroup_quota(const char *proc_cgroup, const char *root, char *dir_out, size_t cap);

/* The cores a cgroup v2 cpu.max text allows: ceil(QUOTA / PERIOD), or 0 for
 * "max" (no quota) and text that is not "QUOTA PERIOD". */
int ff__coord_cpu_max_cores(const char *text);

/* What a loader observed over its last batch interval (between two calls of
 * ff_loader_next). Values outside 0..1 are clamped. */
typedef struct ff__coord_report_data {
  double stall_share; /* consumer wait / interval: the share of the interval the trainer waited */
  double ring_fill;   /* ready batches / prefetch when the consumer asked */
  double busy_share;  /* worker CPU time / (active threads × interval): the cores it kept busy */
  uint64_t worker_cpu_ns; /* its worker threads' CPU time on samples since the loader started (normal,
                             burst and spare threads; CLOCK_THREAD_CPUTIME_ID): what the adaptive
                             reserve does not count as the trainers' */
  uint64_t worker_samples; /* the samples those threads finished since the loader started */
} ff__coord_report_data;

/* One slot of the member table. pid 0 marks a free slot. */
typedef struct ff__coord_member {
  int32_t pid;           /* the member's process */
  int32_t max_threads;   /* its ceiling: the worker threads it owns */
  int32_t fair;          /* its fair share, set by ff__coord_targets */
  int32_t target;        /* where its allotment is heading, set by ff__coord_targets */
  int32_t threads;       /* its allotment: the threads it is guaranteed at normal priority, within the
                            budget less the trainers' cores; the rest of its max_threads run as spare
                            threads in SCHED_IDLE, on the cores no normal-priority thread wants */
  int32_t reports;       /* reports since it joined */
  int32_t burst;         /* threads beyond its allotment it may run while the node has idle cores,
                            set by ff__coord_burst: it runs threads + burst */
  int32_t quiet;         /* 1: silent past quiet_ms and 4 of its intervals (set when others report) */
  uint64_t ticket;       /* unique per join: tells a re-used slot from its previous owner */
  uint64_t pidns;        /* inode of its pid namespace (0: unknown), as pids only compare within one */
  uint64_t heartbeat_ns; /* CLOCK_MONOTONIC of its last report (or join) */
  uint64_t interval_ns;  /* smoothed time between its reports: its batch interval (after its first
                            report only, the time from its join to that report) */
  double stall_share;    /* smoothed signals of ff__coord_report_data */
  double ring_fill;
  double busy_share;
  double stall_now; /* its last report's stall share as reported (clamped to 0..1): whether its
                       trainer waits now, for the bursts */
  double fill_now;  /* its last report's ring fill as reported (clamped to 0..1): 0, no batch was
                       ready when its trainer asked, for the bursts */
  uint64_t worker_cpu_ns; /* its report's worker_cpu_ns, as of heartbeat_ns */
  uint64_t worker_samples; /* its report's worker_samples: worker_cpu_ns / worker_samples is its mean
                              sample CPU */
  uint64_t window_cpu_ns; /* its worker CPU (estimated) when the reserve's window opened */
  double worker_cores;    /* smoothed worker CPU per second of its reports: its workers' cores, to
                             estimate its worker CPU between reports */
  uint64_t cpu_now_ns;    /* its workers' CPU as they published it (ff__coord_publish_cpu), read at
                             every report; 0: none published (the estimate instead) */
  int32_t parked;         /* 1: as its workers published at every report's read, each waits for work
                             (its ring is full): it uses no core now, before a live span can say so */
  int32_t in_window;      /* 1: it had reported twice when the window opened (its CPU is known) */
  int32_t slack_reports;  /* its last reports in a row that alone had slack (stall <= stall_threshold,
                             ring fill >= ring_full, idle > idle_threshold): for the bursts */
  uint64_t live_cpu_ns;   /* its published worker CPU (cpu_now_ns) when live_cores was last measured */
  uint64_t live_at_ns;    /* when (0: not yet) */
  uint64_t live_span_ns;  /* the span live_cores covers (0: none measured yet) */
  double live_cores;      /* its workers' cores over that span, from what they published: whether they
                             run now, at any member's report, not as of its own last one */
  int32_t running;        /* the threads its last report answered (allotment + burst): what it runs
                             until its next one, whatever the others' reports write in burst */
  double busy_speed;      /* smoothed, as busy_share: the speed (ff__coord_speed) at its reports, the
                             share of a core each competing thread got while its busy share was
                             measured (0: none yet, taken as 1) */
  double live_speed;      /* the speed when live_cores was measured */
} ff__coord_member;

/* The cores kept off the allotments and bursts for the trainers:
 * trainer_cores x max(members, expected_members) for a fixed reserve, the
 * adaptive reserve's cores (p->reserve.cores) for FF__COORD_TRAINER_AUTO. */
int ff__coord_reserved(const ff__coord_params *p, const ff__coord_member *m, int n);

/* The budget the allotments share: budget_threads less
 * ff__coord_reserved, at least 0, raised to the live members' minimums when
 * they do not fit. Where the reserve leaves less than min_threads per
 * max(members, expected_members), the minimum is 0: under an adaptive
 * reserve so is this budget (every member runs on its spares); a fixed one
 * shares what it leaves, and a member given no thread runs on its spares. */
int ff__coord_guaranteed_budget(const ff__coord_params *p, const ff__coord_member *m, int n);

/* The adaptive reserve's decision, pure: folds one window's measure of the
 * others' CPU (cores; clamped to -budget_threads..budget_threads: a
 * window's estimate errs both ways, and the smoothing averages the errors)
 * into r->others_cores (half the window's, half the previous; the first
 * window's alone), and sets r->cores to
 * ceil(others_cores - FF__COORD_RESERVE_FREE): the consumer threads of
 * the loaders' own processes and the kernel's work use a tenth of a core
 * or so, which is no trainer starved, while a CPU-bound trainer beside
 * hungry loaders gets 1 / (runnable threads per core) of a core, a third
 * or more as the coordinator runs them. Capped at budget_threads - 1 so
 * that the loaders always keep a thread. A rise takes
 * effect at once; a drop only after FF__COORD_RESERVE_HOLD windows in a row
 * that want less (a trainer pausing between steps keeps its core). Counts
 * the window and the changes. */
void ff__coord_reserve_decide(const ff__coord_params *p, ff__coord_reserve *r, double others_cores);

/* Whether a report at now_ns should measure (ff__coord_node_busy_ns, then
 * ff__coord_measure): trainer_cores is FF__COORD_TRAINER_AUTO and no window
 * is open, or the open one is void (a member had not reported twice when it
 * opened) and every member has now, or it is FF__COORD_WINDOW_MS old and
 * two batch intervals of every member that is not quiet (over the n slots
 * of m). */
int ff__coord_window_due(const ff__coord_params *p, const ff__coord_member *m, int n, uint64_t now_ns);

/* Closes the adaptive reserve's window at now_ns and opens the next, pure
 * (the simulator runs it with the CPU it models): node_busy_ns is the
 * node's cumulative busy CPU time now. The members' worker CPU at now is
 * what their workers published (cpu_now_ns, which the caller reads in
 * first), else their last report's plus worker_cores x the time since
 * (nothing for a quiet member: its workers park): that estimate misses a
 * member whose workers got more of the cores after its last report (a
 * peer's parked), by up to a core or more a window, and a reserve rises on
 * one window; with that of members that left within
 * the window (p->reserve.departed_ns), others = (busy CPU in the window -
 * the workers' in it) / the window, fed to ff__coord_reserve_decide. A
 * window is only measured while every live member had reported twice when
 * it opened (a joiner's CPU before its reports is unknown). */
void ff__coord_measure(ff__coord_params *p, ff__coord_member *m, int n, uint64_t now_ns, uint64_t node_busy_ns);

/* Member e leaves the table (it left, or was reclaimed) within the reserve's
 * window: its worker CPU in the window is kept in p->reserve.departed_ns,
 * so that the members' sum does not drop and count as the others'. */
void ff__coord_depart(ff__coord_params *p, const ff__coord_member *e);

/* Where the node's busy CPU is read (ff__coord_busy_source_init decides it
 * once, at join, as the budget is: the cgroup walk reads a file per level). */
typedef struct ff__coord_busy_source {
  char cpu_stat[4300]; /* the quota's cgroup's cpu.stat, or "" for /proc/stat */
} ff__coord_busy_source;

/* Where the budget comes from a cgroup v2 cpu.max quota (it is below the
 * affinity's cores), that cgroup's cpu.stat; else /proc/stat. */
void ff__coord_busy_source_init(ff__coord_busy_source *src);

/* The node's busy CPU time so far, the adaptive reserve's measure, into
 * *out (ns): from src's cpu.stat, its usage_usec (every process the quota
 * covers); else (or when it cannot be read) ff__coord_proc_stat_busy_ns of
 * /proc/stat. Returns 0, or -1 if neither can be read. */
int ff__coord_node_busy_ns(const ff__coord_busy_source *src, uint64_t *out);

/* The time the CPUs in the calling thread's affinity mask ran something
 * (user, nice, system, irq, softirq) in the per-CPU lines of a file in
 * /proc/stat's format at path (USER_HZ ticks), into *out (ns). Not steal:
 * on a virtual machine that is the time the host ran others while a vCPU
 * wanted to run, no trainer's work, and counting it would keep cores
 * off the loaders for nobody (the members' CPU times leave it out too).
 * Returns 0, or -1 if the file cannot be read or has no such line. */
int ff__coord_proc_stat_busy_ns(const char *path, uint64_t *out);

/* The pure rebalancing, over the n slots of m (free slots skipped).
 * Sets fair and target of every member (budget: ff__coord_guaranteed_budget):
 *   - fair: the budget divided by max(members, expected_members), the
 *     remainder to as many shares in turn, from place reserve.windows
 *     modulo the shares on (it moves each window of the adaptive reserve,
 *     and stays at the lowest slots under a fixed one; a place without a
 *     live member leaves its thread to the free budget), clamped to
 *     [min, max_threads];
 *   - a member stalls when stall_share > stall_threshold, unless its last
 *     two reports each had slack (slack_reports: it asks for no more while
 *     its smoothed stall share falls); it has slack when
 *     it does not stall, ring_fill >= ring_full and 1 - busy_share >
 *     idle_threshold, or when it is quiet (then it keeps only its minimum);
 *     otherwise it is neutral;
 *   - supply = budget not in fair shares + what members with slack can
 *     spare (fair - the threads that keep their busy share at most
 *     1 - idle_threshold, at least min);
 *   - neutral members above their fair share (former borrowers) may keep
 *     what they hold first (hysteresis), the rest of the supply goes to the
 *     stalled members in proportion to their stall share (up to their
 *     max_threads); members with slack lend only what was granted beyond the
 *     free budget, in proportion to what they can spare.
 * The targets sum to at most max(budget, the members' minimums). */
void ff__coord_targets(const ff__coord_params *p, ff__coord_member *m, int n);

/* Moves member `self`'s allotment one thread toward its target (call after
 * ff__coord_targets): down by one, or by the whole excess while the table
 * holds more than the budget; up by one only from the free pool (budget less
 * the allotments). Other members' allotments never change here: a member's
 * threads only shrink when it is told so, which keeps the threads actually
 * running within the budget. Returns the new allotment. */
int ff__coord_step(const ff__coord_params *p, ff__coord_member *m, int n, int self);

/* Measures every member's live cores (call at every report, after
 * reading in what the workers published, cpu_now_ns): once its last
 * measure is FF__COORD_LIVE_MS and FF__COORD_LIVE_SAMPLES of its mean
 * sample CPU old or more, the published worker CPU since / the time since,
 * at most its max_threads, into live_cores and live_span_ns. A sample's CPU
 * is published when it ends, so each thread's share is off by up to one
 * sample in the span: an eighth of a core at most, below the idle threshold,
 * and a member whose samples take long is measured over a longer span
 * (before it reported a sample, over FF__COORD_LIVE_MS: its workers make
 * its first batches, or filled its ring and parked, before its first
 * report says which). A member that has published nothing is skipped; its
 * first publication, one that went back (a re-used slot),
 * and its own report (ff__coord_rebalance: a measure is of the time since
 * its report) start a span. A measure keeps the speed (ff__coord_speed) of
 * the table as it stands, in live_speed. */
void ff__coord_live(const ff__coord_params *p, ff__coord_member *m, int n, uint64_t now_ns);

/* The share of a core each thread that competes for the budget gets:
 * budget_threads / the threads that compete, those the members run
 * (running, before a member's first report its threads and burst; not
 * those of members with slack, see ff__coord_burst) and the others' cores
 * (measured under the adaptive reserve, the reserved ones under a fixed
 * reserve), when those are more; else 1. A thread that shares a core uses
 * that share of the CPU time it would use alone. */
double ff__coord_speed(const ff__coord_params *p, const ff__coord_member *m, int n);

/* Work conservation (call after ff__coord_step): the allotments are what
 * each member is guaranteed, but a core that no member uses is handed out
 * at once, not a thread per report. The cores in use are, per member, what
 * it keeps busy: none while its workers are parked (they published so as
 * the last of them found its ring full, ff__coord_publish_cpu: known at
 * once, where a live span takes FF__COORD_LIVE_MS or more), else its live
 * cores / live_speed where they were measured over a
 * span that began at or after its last report (ff__coord_live: a member whose trainer stopped waiting fills
 * its ring and parks its workers at once, its reports say so a batch or
 * two later, and until then its cores idled while a stalled peer was
 * capped), else (threads + burst) × busy_share / busy_speed; at most its
 * allotment (the measured CPU time, not its class, which a member reporting
 * once a second updates slowly; all of it before its first report unless
 * its live cores are known). Each measure is divided by the speed
 * (ff__coord_speed) it was taken at: a thread that shared a core read busy
 * below what it would use, and a measure taken under a burst that has
 * ended since would read the cores the burst took as idle and call the
 * next burst;
 * nothing if it is quiet or has slack, smoothed or in each of its last two
 * reports (its smoothed stall share takes a second or more to fall; one
 * report is not enough, as a trainer that waits now and then has slack
 * between its waits): a member with slack uses its cores now and then,
 * and a burst sized to its average use would leave them idle whenever it
 * does not (its threads keep normal priority, so when it works the OS
 * shares those cores, as without the coordinator, and its slack absorbs
 * it). The idle rest of the guaranteed budget (the trainers' cores
 * are never handed out), rounded to whole threads (half up:
 * like the OS's sharing, a thread that finds half a core is worth running),
 * goes first to neutral members that held a burst (hysteresis, as for
 * allotments), then to stalled members whose last report stalled too
 * (stall_now > stall_threshold: a trainer that stopped waiting needs no
 * burst, though its smoothed stall share takes a second to fall), or that
 * hold a burst and found no batch ready at their last report (fill_now 0:
 * a hungry trainer whose batch was nearly done waited less than that), in
 * proportion to their stall share, each up to max_threads - threads;
 * while neutral members leave part of their threads idle (cheaper ranks
 * waiting for their peers at a DDP barrier) and the rest is less than a
 * thread for each of those stalled members, each of them gets one thread
 * instead, unless cores are kept for the trainers (it would share theirs):
 * the OS lets it run in those idle moments, and a thread for one rank
 * alone would leave the others setting the pace of a lockstep;
 * everybody else's burst is 0. A neutral member whose trainer did not wait
 * at its last report counts its measure as it is, not divided by the
 * speed: the sharing slows its workers without raising what it needs.
 * A member whose workers are parked, or whose live cores / live_speed are
 * below the threads it runs (running: its last report's answer) × (1 -
 * idle_threshold), holds and gets none: its threads wait for work. Bursts are
 * not counted in the budget: when a lender needs its cores back, the
 * borrower's next report sees them in use and its burst shrinks, so the node
 * is oversubscribed (shared by the OS, as without the coordinator) for at
 * most one of the borrower's batches. Sets burst of every member. The
 * cores beyond (the trainers' when they leave them idle, a lender's before
 * the next report) its spare threads take at once, in SCHED_IDLE. */
void ff__coord_burst(const ff__coord_params *p, ff__coord_member *m, int n);

/* Folds a report into member `self`'s smoothed signals (the first report is
 * taken as it is), keeps its stall share and ring fill as stall_now and
 * fill_now and counts it in
 * slack_reports (reset to 0 by a report without slack). */
void ff__coord_observe(const ff__coord_params *p, ff__coord_member *m, const ff__coord_report_data *r);

/* What ff__coord_report does with the table once dead members are
 * reclaimed, without shared memory or a clock (the simulator runs it):
 * member `self` reports r at now_ns (CLOCK_MONOTONIC, or simulated time) —
 * its heartbeat, its smoothed batch interval and its signals (a report
 * weighs as its interval, see alpha) — every other live member is marked
 * quiet or not at now_ns, then ff__coord_targets, ff__coord_step for self,
 * ff__coord_live and ff__coord_burst. Also records r->worker_cpu_ns and
 * r->worker_samples in self's slot, starts its live span, and
 * folds its rate into worker_cores (the adaptive reserve's measure is
 * ff__coord_take_report's). Returns the threads self should run: its allotment
 * plus its burst, 1..max_threads, also kept as its running. */
int ff__coord_rebalance(const ff__coord_params *p, ff__coord_member *m, int n, int self,
                        const ff__coord_report_data *r, uint64_t now_ns);

/* Reads the node's cumulative busy CPU time into *out (ns): 0, or -1 when
 * it cannot be read (ff__coord_node_busy_ns; the simulator's modelled one). */
typedef int (*ff__coord_busy_fn)(void *ctx, uint64_t *out);

/* A report of member self at now_ns, as ff__coord_report runs it under the
 * lock and the simulator without one: the adaptive reserve's window is
 * measured when due (ff__coord_window_due, ff__coord_measure with busy(ctx)'s
 * reading), so that the reserve it sets applies to this report's answer; then
 * ff__coord_rebalance; then ff__coord_window_due is asked again, so that a
 * window this report made measurable opens now (a void window waits for
 * every member's second report: the one that brings the last opens it now,
 * not at the next report, which comes a batch later); a window that is due
 * only because this report shortened its member's batch interval is measured
 * there too, its reserve applying from the next report. Returns
 * ff__coord_rebalance's threads. */
int ff__coord_take_report(ff__coord_params *p, ff__coord_member *m, int n, int self,
                          const ff__coord_report_data *r, uint64_t now_ns, ff__coord_busy_fn busy, void *ctx);

/* The shared segment's layout (coord.c writes and checks it; visible so that
 * tests can damage one). A member that finds it damaged (a field out of its
 * range) leaves the group and runs alone, with a one-line warning on stderr. */
typedef struct ff__coord_segment {
  uint32_t magic;
  uint32_t version;
  uint64_t size_bytes;    /* sizeof(ff__coord_segment) of the creator's build */
  _Atomic unsigned ready; /* set (release) once everything else is initialised */
  uint32_t closed;        /* the last member left: the name is (being) unlinked */
  pthread_mutex_t lock;   /* process-shared, robust */
  int32_t members;        /* live slots */
  int32_t unused;
  uint64_t next_ticket;
  ff__coord_params params; /* the node-wide settings */
  ff__coord_member slot[FF__COORD_MAX_MEMBERS];
  /* each slot's worker CPU (ns) as of its member's last finished sample,
   * stored by that member's workers without the lock, relaxed (0 until
   * then: a slot taken or freed clears it) */
  _Atomic uint64_t worker_cpu_now[FF__COORD_MAX_MEMBERS];
  _Atomic uint32_t workers_parked[FF__COORD_MAX_MEMBERS]; /* likewise, each slot's parked (0 or 1) */
} ff__coord_segment;

typedef struct ff__coord ff__coord;

/* FF_NODE_GROUP's keywords, in any case ("OFF", "Auto"): whether value
 * turns the coordinator off (NULL, empty or "off": the loader runs on its
 * own threads) and whether it is "auto" (the torchrun job's group). A value
 * with white space at either end is neither; ff__coord_join refuses it. */
int ff__coord_group_off(const char *value);
int ff__coord_group_auto(const char *value);

/* The group from the environment, for ranks of one torchrun job to meet:
 * FF_NODE_GROUP (unless "auto" in any case), else "torchelastic-<TORCHELASTIC_RUN_ID>",
 * else "port-<MASTER_PORT>". Writes it to buf; returns 1, or 0 if none is
 * set. */
int ff__coord_default_group(char *buf, size_t cap);

/* The group torchrun's ranks meet in with FF_NODE_GROUP=auto, from the
 * environment: "torchelastic-<TORCHELASTIC_RUN_ID>", else
 * "port-<MASTER_PORT>". Writes it to buf; returns 1, or 0 if neither is
 * set (or it does not fit). */
int ff__coord_torchrun_group(char *buf, size_t cap);

/* The shared memory name of a group, the one mapping of the loaders and of
 * `fusionflow node status`: "/fusionflow-<uid>-<group>" for a group of
 * [A-Za-z0-9._-] only; any other character is replaced by '_' and
 * "~<16 hex digits>" (the 64-bit FNV-1a hash of the exact name) is
 * appended, so that distinct groups ("a/b", "a_b", "a b") get distinct
 * segments. Returns FF_OK or FF_EINVAL (empty group, longer than
 * FF__COORD_GROUP_MAX - 1, or buf too small; FF__COORD_GROUP_MAX + 64
 * bytes hold any name). */
ff_status ff__coord_shm_name(const char *group, char *buf, size_t cap);

/* Joins `group` (NULL: ff__coord_default_group) with defaults for the
 * parameters, overridden by the environment: FF_NODE_THREADS (budget),
 * FF_NODE_TRAINER_CORES (trainer_cores: "auto", the default, or an integer,
 * 0 included) and LOCAL_WORLD_SIZE
 * (expected members). max_threads (>= 1): the worker
 * threads this member owns, the most it can ever be told to run. Creates the
 * segment if it does not exist, reinitialises it if every member in it is
 * dead, and removes the segments of this user's other groups whose members
 * all died without leaving (each process gone, or silent for 10 minutes,
 * and all silent past their group's heartbeat timeout; decided under the
 * segment's lock, which is only tried). *out gets the handle; the allotment to start with is
 * ff__coord_threads(*out). Returns FF_OK, FF_EINVAL (bad argument, no group,
 * a group name of FF__COORD_GROUP_MAX bytes or more, FF_NODE_GROUP with
 * white space at either end, FF_NODE_THREADS or
 * FF_NODE_TRAINER_CORES not "auto" or an integer in range, table full: 64 members) or
 * FF_EIO (shared memory failed, or a segment of another build or damaged),
 * the message (naming the variable or the segment) in err. *out is untouched
 * on failure. A reserve of FF_NODE_TRAINER_CORES that leaves the loaders no
 * thread of the budget is allowed, with one line on stderr. */
ff_status ff__coord_join(const char *group, int max_threads, ff__coord **out, ff__error *err);

/* The same with explicit parameters (NULL: ff__coord_params_init's). */
ff_status ff__coord_join_params(const char *group, int max_threads, const ff__coord_params *params,
                                ff__coord **out, ff__error *err);

/* Leaves the group: frees the slot (its threads return to the pool) and
 * unlinks the segment if this was the last member. Frees c; NULL does
 * nothing. */
void ff__coord_leave(ff__coord *c);

/* Records this member's latest observation, reclaims dead members' slots
 * (process gone, or silent past heartbeat_timeout_ms), marks quiet ones,
 * measures the adaptive reserve's window when it is due and rebalances
 * (ff__coord_take_report, with ff__coord_node_busy_ns) and writes to
 * *threads_out the number of worker threads this member should run now at
 * normal priority: its allotment plus its burst
 * (min_threads..max_threads; 0 when the trainers' cores take the whole
 * budget); ff__coord_spares tells how many spares in SCHED_IDLE beside
 * them. Call it about once per batch. Takes a lock for
 * a few microseconds (tens in the report that measures a window: it reads
 * /proc/stat or cpu.stat under the lock, so that the members' CPU and the
 * node's are read at one moment); if the table stays locked past lock_timeout_ms (a
 * member stopped while holding it), answers the previous allotment without
 * rebalancing, and later reports only try the lock (no wait) until they get
 * it; when they have not got it for the heartbeat timeout, the member
 * leaves the group as from a damaged segment (below). A member whose slot was reclaimed (it was silent too long) joins again
 * transparently. A member that finds the segment damaged leaves it with one
 * line on stderr and answers max_threads from then on. Returns FF_OK, or
 * FF_EINVAL (NULL argument, handle used from another process: then
 * *threads_out is untouched). */
ff_status ff__coord_report(ff__coord *c, const ff__coord_report_data *r, int *threads_out);

/* The threads to run at normal priority after the last join or report
 * (allotment + burst). */
int ff__coord_threads(const ff__coord *c);

/* The name of c's group (FF_NODE_GROUP, auto resolved), or "" for NULL and
 * for a handle that left a damaged segment to run alone. From the thread
 * that reports (no lock: a report may set the latter). */
const char *ff__coord_group(const ff__coord *c);

/* Whether member m is over at now_ns (CLOCK_MONOTONIC): its process exited
 * (as this process's pid namespace sees it), or it stayed silent the
 * 10 minutes after which a join of any group removes its segment. A
 * stopped member (Ctrl-Z, a debugger), silent past the heartbeat timeout
 * only, is not: it reports again once continued. */
int ff__coord_member_over(const ff__coord_member *m, uint64_t now_ns);

/* Publishes this member's worker CPU (its workers' CPU time on samples
 * since the loader started, ns, as ff__coord_report_data.worker_cpu_ns
 * counts it) in its slot for the adaptive reserve's measure and the live
 * cores (ff__coord_live), and whether its workers are parked (1: every one
 * waits for work, its ring being full; 0: one runs a sample), without the
 * segment's lock: a worker calls it after each sample (parked 0), and as it
 * parks the last or wakes the first (the loader's lock orders the calls).
 * Skipped (the next call publishes the sum; a sample's end clears a parked
 * that stayed) while a report of this handle changes its mapping or slot;
 * does nothing for NULL, a handle of another process, one that runs alone
 * or holds no slot. Thread-safe with ff__coord_report. */
void ff__coord_publish_cpu(ff__coord *c, uint64_t worker_cpu_ns, int parked);

/* The cores kept for the trainers (ff__coord_reserved) as of the last join
 * or report. */
int ff__coord_reserve_cores(const ff__coord *c);

/* The spare threads to run in SCHED_IDLE: all max_threads while the
 * member runs no thread at normal priority (the trainers' cores take the
 * budget), else 0 (a sample on a spare waits for a core nothing else
 * wants, and would hold back a batch the normal-priority threads could
 * finish). */
int ff__coord_spares(const ff__coord *c);

/* The rule ff__coord_spares answers by, for a member owning cap threads
 * that runs `running` at normal priority (its allotment plus burst, or its
 * first allotment at join): cap when running is 0, else 0. */
int ff__coord_member_spares(int cap, int running);

/* Copies the live members (compacted, in slot order) into out (room for
 * FF__COORD_MAX_MEMBERS), their count into *n_out and the segment's
 * parameters into *params_out (either may be NULL). For diagnostics and
 * tests. Returns FF_OK, FF_EINVAL or FF_EIO (lock timed out). */
ff_status ff__coord_snapshot(ff__coord *c, ff__coord_member *out, int *n_out, ff__coord_params *params_out);

/* Reads group's table without joining it (for `fusionflow node status`):
 * the live members (compacted, in slot order, room for
 * FF__COORD_MAX_MEMBERS; parked and quiet as of now) into out, their count into *n_out, the parameters
 * into *params_out (either may be NULL). Returns FF_OK, FF_EINVAL (bad
 * group name), FF_EEMPTY (no such group on this node for this user: none
 * joined it, or its last member left) or FF_EIO (its shared memory cannot
 * be opened, a segment of another build or damaged, or its lock held past
 * lock_timeout_ms), the message in err. */
ff_status ff__coord_peek(const char *group, ff__coord_member *out, int *n_out, ff__coord_params *params_out,
                         ff__error *err);

/* What the rebalancing makes of member m at now_ns (ff__now_ns): "gone"
 * (its process has exited, or it stayed silent past the heartbeat timeout:
 * the next member's report frees its slot), "quiet", "stalled", "slack" or
 * "neutral" (the classes of ff__coord_targets). */
const char *ff__coord_member_state(const ff__coord_params *p, const ff__coord_member *m, uint64_t now_ns);

/* For tests only: takes the table's lock and returns holding it, so that a
 * process can die holding it. */
void ff__coord_test_hold_lock(ff__coord *c);

#endif
