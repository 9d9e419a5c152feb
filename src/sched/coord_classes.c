/* coord_classes.c — what each member of the node coordinator's table is and
 * what its threads are. A member is gone (its process exited, or it is
 * silent past the heartbeat timeout), quiet (its trainer stopped asking),
 * stalled, slack or neutral; its threads are guaranteed (its allotment, at
 * normal priority, within the budget less the trainers' reserve), burst
 * (cores others leave idle, recomputed at every report) or spares (in
 * SCHED_IDLE, run only while it has no guaranteed thread). Pure but for
 * kill(pid, 0) and the pid namespace's inode, which say whether a process is
 * gone. */
#include "sched/coord_internal.h"

#include <errno.h>
#include <signal.h>
#include <sys/stat.h>

int ff__coord_reserved(const ff__coord_params *p, const ff__coord_member *m, int n) {
  if (n > FF__COORD_MAX_MEMBERS) n = FF__COORD_MAX_MEMBERS;
  if (p->trainer_cores == FF__COORD_TRAINER_AUTO) return p->reserve.cores > 0 ? p->reserve.cores : 0;
  long long fixed = (long long)(p->trainer_cores > 0 ? p->trainer_cores : 0) * member_shares(p, m, n);
  return fixed < INT32_MAX ? (int)fixed : INT32_MAX;
}

/* Whether the adaptive reserve leaves less than min_threads (at least one)
 * per share. */
static int reserve_starves(const ff__coord_params *p, const ff__coord_member *m, int n) {
  long long each = p->min_threads > 1 ? p->min_threads : 1;
  return p->trainer_cores == FF__COORD_TRAINER_AUTO && p->reserve.cores > 0 &&
         (long long)p->budget_threads - p->reserve.cores < each * member_shares(p, m, n);
}

/* The parameters the rebalancing runs by: those of the segment, with no
 * minimum while the trainers' cores leave less than min_threads per share
 * (the loaders run on spares; a fixed reserve counts the members live now,
 * who may outnumber the expected ones). Without a reserve the minimum stays,
 * even where the members outnumber the budget: a loader with no
 * normal-priority thread beside hungry peers would get nothing from its
 * SCHED_IDLE spares. */
ff__coord_params ff__coord_effective(const ff__coord_params *p, const ff__coord_member *m, int n) {
  ff__coord_params q = *p;
  if (reserve_starves(p, m, n) ||
      (p->trainer_cores > 0 && (long long)p->budget_threads - ff__coord_reserved(p, m, n) <
                                   (long long)p->min_threads * member_shares(p, m, n)))
    q.min_threads = 0;
  return q;
}

int ff__coord_guaranteed_budget(const ff__coord_params *p, const ff__coord_member *m, int n) {
  if (n > FF__COORD_MAX_MEMBERS) n = FF__COORD_MAX_MEMBERS;
  /* Too little for a thread each: every member runs on its spares, which
   * share the cores the trainers leave fairly (a thread to some members
   * and none to the others would starve those behind the trainers). */
  if (reserve_starves(p, m, n)) return 0;
  ff__coord_params q = ff__coord_effective(p, m, n);
  int mins = 0;
  for (int i = 0; i < n; i++)
    if (m[i].pid) mins += member_min(&q, &m[i]);
  long long left = (long long)q.budget_threads - ff__coord_reserved(&q, m, n);
  int budget = left > 0 ? (int)left : 0;
  return budget > mins ? budget : mins;
}

/* Whether signals (smoothed, or one report's) say a member has slack: its
 * trainer does not wait, its ring is full and its workers idle. */
int ff__coord_has_slack(const ff__coord_params *p, double stall, double fill, double busy) {
  return stall <= p->stall_threshold && fill >= p->ring_full && 1.0 - busy > p->idle_threshold;
}

int ff__coord_member_class(const ff__coord_params *p, const ff__coord_member *e) {
  if (e->quiet) return COORD_SLACK;
  if (e->reports > 0 && e->stall_share > p->stall_threshold) return COORD_STALLED;
  if (e->reports > 0 && ff__coord_has_slack(p, e->stall_share, e->ring_fill, e->busy_share)) return COORD_SLACK;
  return COORD_NEUTRAL;
}

/* A sample on a spare waits for a core no normal-priority thread wants:
 * beside guaranteed threads it would hold back a batch they could finish,
 * so a member with an allotment grows through bursts only. */
int ff__coord_member_spares(int cap, int running) { return running == 0 ? cap : 0; }

/* A member's class for the bursts: ff__coord_member_class, but one whose last
 * SLACK_REPORTS reports each had slack has it now, though its smoothed
 * signals take a second or more to say so. One report is not enough: a
 * trainer that waits now and then reads slack between its waits. */
int ff__coord_burst_class(const ff__coord_params *p, const ff__coord_member *e) {
  return slack_lately(e) ? COORD_SLACK : ff__coord_member_class(p, e);
}

/* Quiet: its trainer stopped asking for batches (or it is stopped); its
 * workers park once its ring is full, so its cores are idle. */
int ff__coord_is_quiet(const ff__coord_params *p, const ff__coord_member *e, uint64_t now_ns) {
  /* before its first report its trainer may not have asked yet: whether its workers make its
   * first batches or filled its ring and parked, they publish (parked), or its live cores say
   * (ff__coord_live) */
  if (e->reports == 0)
    return e->parked || (e->live_span_ns > 0 &&
                         e->live_cores < clampi(e->threads, 1, member_cap(e)) * (1.0 - p->idle_threshold));
  uint64_t quiet_ns = (uint64_t)p->quiet_ms * 1000000u, silent = now_ns > e->heartbeat_ns ? now_ns - e->heartbeat_ns : 0;
  if (quiet_ns < 4 * e->interval_ns) quiet_ns = 4 * e->interval_ns;
  return silent > quiet_ns;
}

/* Marks the members other than self that stopped asking for batches. */
void ff__coord_mark_quiet(const ff__coord_params *p, ff__coord_member *m, int n, int self, uint64_t now_ns) {
  for (int i = 0; i < n; i++)
    if (m[i].pid) m[i].quiet = i != self && ff__coord_is_quiet(p, &m[i], now_ns);
}

uint64_t ff__coord_pid_namespace(void) {
  struct stat st;
  return stat("/proc/self/ns/pid", &st) == 0 ? (uint64_t)st.st_ino : 0;
}

/* Whether member e's process is gone, as a process of pid namespace pidns
 * sees (pids only mean something within one pid namespace: containers
 * sharing /dev/shm). */
static int exited(const ff__coord_member *e, uint64_t pidns) {
  int same_ns = !pidns || !e->pidns || e->pidns == pidns;
  return same_ns && kill(e->pid, 0) == -1 && errno == ESRCH;
}

/* Whether member e is over: its process exited, or it stayed silent past
 * COORD_ABANDONED_MS (a stopped member only silent past the heartbeat
 * timeout is not). */
int ff__coord_over(const ff__coord_member *e, uint64_t pidns, uint64_t now_ns) {
  return exited(e, pidns) ||
         (now_ns > e->heartbeat_ns && now_ns - e->heartbeat_ns > COORD_ABANDONED_MS * 1000000ull);
}

int ff__coord_member_over(const ff__coord_member *e, uint64_t now_ns) {
  return e && e->pid && ff__coord_over(e, ff__coord_pid_namespace(), now_ns);
}

/* Whether member e's process is gone (seen from pid namespace pidns) or
 * stayed silent past the heartbeat timeout. */
int ff__coord_member_gone(const ff__coord_params *p, const ff__coord_member *e, uint64_t pidns, uint64_t now_ns) {
  uint64_t timeout_ns = (uint64_t)p->heartbeat_timeout_ms * 1000000u;
  if (exited(e, pidns)) return 1;
  return now_ns > e->heartbeat_ns && now_ns - e->heartbeat_ns > timeout_ns;
}

const char *ff__coord_member_state(const ff__coord_params *p, const ff__coord_member *m, uint64_t now_ns) {
  if (ff__coord_member_gone(p, m, ff__coord_pid_namespace(), now_ns)) return "gone";
  if (m->quiet) return "quiet";
  switch (ff__coord_member_class(p, m)) {
  case COORD_STALLED: return "stalled";
  case COORD_SLACK: return "slack";
  default: return "neutral";
  }
}
