/* coord.h — the node coordinator: the loaders of one node's training
 * processes (one per GPU) share its cores through a table in POSIX shared
 * memory. What it promises a loader:
 *   - the threads it is told to run at normal priority (ff__coord_threads)
 *     and those of its peers stay within the node's budget less the cores
 *     kept for the trainers, but for bursts on cores nobody uses, which end
 *     at the borrower's next report;
 *   - a loader whose trainer waits gets the cores the others leave idle, and
 *     a member that dies, stops or leaves gives its cores back;
 *   - it never fails the loader: a group it cannot join or a damaged table
 *     is one line of error, and the loader runs on its own threads.
 * How to use it: ff__coord_join once; per batch ff__coord_report, then run
 * ff__coord_threads workers at normal priority and ff__coord_spares in
 * SCHED_IDLE; each worker calls ff__coord_publish_cpu after a sample;
 * ff__coord_leave at close. Design: docs/node-coordinator.md; internals:
 * coord_policy.h (the pure rebalancing `fusionflow sim` drives),
 * coord_segment.h (the shared table), coord_node.h (measurements).
 *
 * Thread-safety: a handle is used by one thread at a time (the loader's
 * consumer), but for ff__coord_publish_cpu; a forked child must not use its
 * parent's handle (refused: FF_EINVAL). */
#ifndef FF_SCHED_COORD_H
#define FF_SCHED_COORD_H

#include <stdint.h>

#include "core/error.h"

typedef struct ff__coord ff__coord;

/* What a loader observed over its last batch interval (between two calls of
 * ff_loader_next). Shares outside 0..1 are clamped. */
typedef struct ff__coord_report_data {
  double stall_share;      /* consumer wait / interval: the share of the interval the trainer waited */
  double ring_fill;        /* ready batches / prefetch when the consumer asked */
  double busy_share;       /* worker CPU time / (active threads x interval) */
  uint64_t worker_cpu_ns;  /* its workers' CPU time on samples since the loader started (every class of
                              thread; CLOCK_THREAD_CPUTIME_ID) */
  uint64_t worker_samples; /* the samples those threads finished since the loader started */
} ff__coord_report_data;

/* FF_NODE_GROUP's "off" (NULL, empty or "off" in any case): the loader runs
 * on its own threads and joins nothing. */
int ff__coord_group_off(const char *value);

/* Joins the group named by FF_NODE_GROUP ("auto": the torchrun job's;
 * group NULL) or `group`, with FF_NODE_THREADS (the budget; default the
 * cores this process may use), FF_NODE_TRAINER_CORES ("auto", the default,
 * or 0..4096 per trainer) and LOCAL_WORLD_SIZE (expected members); the
 * member that starts a group sets its settings. max_threads (>= 1): the
 * worker threads this member owns. *out gets the handle. Returns FF_OK,
 * FF_EINVAL (bad argument or variable, no group, 64 members already),
 * FF_ENOMEM, or FF_EIO (shared memory failed, a segment of another build or
 * damaged), the message in err; *out untouched on failure. */
ff_status ff__coord_join(const char *group, int max_threads, ff__coord **out, ff__error *err);

/* Reports the last batch interval and writes the threads to run now at
 * normal priority (allotment + burst, 0..max_threads) to *threads_out.
 * Takes the table's lock for microseconds; a lock held too long by a
 * stopped member answers the previous figure. Returns FF_OK, or FF_EINVAL
 * (NULL argument, handle of another process: *threads_out untouched). */
ff_status ff__coord_report(ff__coord *c, const ff__coord_report_data *r, int *threads_out);

/* The threads to run at normal priority after the last join or report. */
int ff__coord_threads(const ff__coord *c);

/* The spare threads to run in SCHED_IDLE after the last join or report:
 * all max_threads while the member runs none at normal priority, else 0. */
int ff__coord_spares(const ff__coord *c);

/* The cores kept for the trainers as of the last join or report. */
int ff__coord_reserve_cores(const ff__coord *c);

/* From a worker, after each sample and as the last one parks or the first
 * wakes: this member's worker CPU so far (ns, as worker_cpu_ns counts it)
 * and whether every worker waits for work (parked 1). Without the table's
 * lock; skipped while a report of this handle moves its slot. Thread-safe;
 * NULL does nothing. */
void ff__coord_publish_cpu(ff__coord *c, uint64_t worker_cpu_ns, int parked);

/* The group's name, or "" for NULL and a handle that runs alone. */
const char *ff__coord_group(const ff__coord *c);

/* Leaves the group (its threads go back to the pool; the last member
 * removes the segment) and frees c. NULL does nothing. */
void ff__coord_leave(ff__coord *c);

#endif
