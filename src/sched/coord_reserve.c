/* coord_reserve.c — the adaptive trainer reserve (FF_NODE_TRAINER_CORES=auto):
 * every window of FF__COORD_WINDOW_MS or more, the node's busy CPU less
 * the members' worker CPU is the CPU of everything else (the trainers), and
 * that many cores, smoothed and held before they drop, stay off the
 * allotments and bursts. Pure: the busy CPU comes in as a number (the
 * runtime reads it with coord_node.c, the simulator models it). */
#include "sched/coord_internal.h"

#include <math.h>

void ff__coord_reserve_decide(const ff__coord_params *p, ff__coord_reserve *r, double others_cores) {
  /* A window's measure errs both ways (a member's CPU between its reports
   * is estimated): negative values are kept, so that the smoothing averages
   * the errors out instead of raising the reserve on them. */
  double budget = p->budget_threads > 0 ? p->budget_threads : 1;
  double x = others_cores != others_cores ? 0 : others_cores > -budget ? (others_cores < budget ? others_cores : budget) : -budget;
  r->others_last = x;
  r->others_cores = r->windows > 0 ? 0.5 * (r->others_cores + x) : x;
  if (r->windows < INT32_MAX) r->windows++;
  int want = (int)ceil(r->others_cores - FF__COORD_RESERVE_FREE);
  int cap = p->budget_threads > 1 ? p->budget_threads - 1 : 0;
  want = clampi(want, 0, cap);
  int was = r->cores;
  if (want >= r->cores) {
    r->cores = want;
    r->hold = FF__COORD_RESERVE_HOLD;
  } else if (r->hold > 1) {
    r->hold--;
  } else {
    r->cores = want;
    r->hold = FF__COORD_RESERVE_HOLD;
  }
  if (r->cores != was && r->changes < INT32_MAX) r->changes++;
}

int ff__coord_window_due(const ff__coord_params *p, const ff__coord_member *m, int n, uint64_t now_ns) {
  if (n > FF__COORD_MAX_MEMBERS) n = FF__COORD_MAX_MEMBERS;
  const ff__coord_reserve *r = &p->reserve;
  if (p->trainer_cores != FF__COORD_TRAINER_AUTO) return 0;
  if (!r->start_ns) return 1;
  /* A window opened before a member had reported twice is void: reopen it
   * as soon as every member has (at start, and after a join). */
  int void_window = 0, known_now = 1;
  for (int i = 0; i < n; i++)
    if (m[i].pid) void_window |= !m[i].in_window, known_now &= m[i].reports >= 2;
  if (void_window && known_now) return 1;
  /* Each member's CPU since its last report is estimated: a window of two
   * of its intervals or more keeps that error a fraction of the window. */
  uint64_t window_ns = FF__COORD_WINDOW_MS * 1000000ull;
  for (int i = 0; i < n; i++)
    if (m[i].pid && !m[i].quiet && 2 * m[i].interval_ns > window_ns) window_ns = 2 * m[i].interval_ns;
  return now_ns > r->start_ns && now_ns - r->start_ns >= window_ns;
}

/* Whether member e's published worker CPU (cpu_now_ns, as last read in)
 * is at least as new as its last report's. */
static int cpu_published(const ff__coord_member *e) {
  return e->cpu_now_ns && e->cpu_now_ns >= e->worker_cpu_ns;
}

/* Member e's worker CPU at now_ns: what its workers published, else its
 * last report's plus its rate since (none while it is quiet: its workers
 * park). */
static uint64_t worker_cpu_at(const ff__coord_params *p, const ff__coord_member *e, uint64_t now_ns) {
  if (cpu_published(e)) return e->cpu_now_ns;
  if (now_ns <= e->heartbeat_ns || ff__coord_is_quiet(p, e, now_ns) || !(e->worker_cores > 0)) return e->worker_cpu_ns;
  return e->worker_cpu_ns + (uint64_t)(e->worker_cores * (double)(now_ns - e->heartbeat_ns));
}

void ff__coord_measure(ff__coord_params *p, ff__coord_member *m, int n, uint64_t now_ns, uint64_t node_busy_ns) {
  if (n > FF__COORD_MAX_MEMBERS) n = FF__COORD_MAX_MEMBERS;
  ff__coord_reserve *r = &p->reserve;
  int known = 1;
  double workers = (double)r->departed_ns;
  for (int i = 0; i < n; i++) {
    if (!m[i].pid) continue;
    known &= m[i].in_window;
    uint64_t cpu = worker_cpu_at(p, &m[i], now_ns);
    workers += cpu > m[i].window_cpu_ns ? (double)(cpu - m[i].window_cpu_ns) : 0;
  }
  if (r->start_ns && known && now_ns > r->start_ns && node_busy_ns >= r->node_busy_ns) {
    double busy = (double)(node_busy_ns - r->node_busy_ns);
    ff__coord_reserve_decide(p, r, (busy - workers) / (double)(now_ns - r->start_ns));
  }
  r->start_ns = now_ns;
  r->node_busy_ns = node_busy_ns;
  r->departed_ns = 0;
  for (int i = 0; i < n; i++)
    if (m[i].pid) {
      m[i].window_cpu_ns = worker_cpu_at(p, &m[i], now_ns);
      m[i].in_window = m[i].reports >= 2;
    }
}

void ff__coord_depart(ff__coord_params *p, const ff__coord_member *e) {
  uint64_t cpu = cpu_published(e) ? e->cpu_now_ns : e->worker_cpu_ns;
  if (e->pid && e->in_window && cpu > e->window_cpu_ns) p->reserve.departed_ns += cpu - e->window_cpu_ns;
}
