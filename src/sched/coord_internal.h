/* coord_internal.h — what the node coordinator's own files share and no
 * one else uses: the member handle, small pure helpers, and the functions
 * one room calls in another. The rooms, from the bottom: coord_node.c
 * (measurements), coord_classes.c (members' and threads' classes),
 * coord_reserve.c, coord_policy.c, coord_segment.c (the shared table and
 * its lock), coord_lifetime.c (creating, closing, sweeping), coord.c (the
 * handle). Each calls only rooms below it. */
#ifndef FF_SCHED_COORD_INTERNAL_H
#define FF_SCHED_COORD_INTERNAL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "sched/coord.h"
#include "sched/coord_node.h"
#include "sched/coord_policy.h"
#include "sched/coord_segment.h"

#define COORD_NAME_CAP (FF__COORD_GROUP_MAX + 64)
#define COORD_ABANDONED_MS 600000ull /* silent this long, a member is gone to other groups */
#define COORD_REMOVE_IT "remove it when no trainer runs"

typedef ff__coord_segment coord_shm;

struct ff__coord {
  coord_shm *shm;
  int stuck; /* the last report timed out on the lock: only try it until it is had again */
  int alone; /* left a damaged segment: runs on all its threads from now on */
  ino_t ino; /* identifies the segment behind the name */
  pid_t pid;
  int slot;
  uint64_t ticket;
  uint64_t pidns;
  int max_threads;
  int threads;
  int spares;
  int reserve_cores;          /* ff__coord_reserved as of the last join or report */
  pthread_mutex_t pub_mu;     /* held by a report or the leave (they may remap shm or move slot) and by
                                 ff__coord_publish_cpu, which only tries it */
  ff__coord_busy_source busy; /* where the adaptive reserve reads the node's busy CPU */
  ff__coord_params params;    /* this member's wishes, used when it (re)initialises a segment */
  char name[COORD_NAME_CAP];
  char group[FF__COORD_GROUP_MAX]; /* the group's name as the member gave it (auto resolved) */
};

/* ---- small pure helpers ---- */

static inline int clampi(int x, int lo, int hi) { return x < lo ? lo : x > hi ? hi : x; }
static inline double clamp01(double x) { return x > 0 ? (x < 1 ? x : 1) : 0; } /* NaN -> 0 */
static inline int in01(double x) { return x >= 0 && x <= 1; }                  /* NaN fails */

static inline int member_cap(const ff__coord_member *m) { return m->max_threads > 1 ? m->max_threads : 1; }

static inline int member_min(const ff__coord_params *p, const ff__coord_member *m) {
  int mn = p->min_threads > 0 ? p->min_threads : 0;
  return mn < member_cap(m) ? mn : member_cap(m);
}

/* The threads allotted to the live members of the table. */
static inline int allotted(const ff__coord_member *m, int n) {
  int sum = 0;
  for (int i = 0; i < n; i++)
    if (m[i].pid) sum += m[i].threads;
  return sum;
}

/* max(members, expected_members): what the fair shares divide by. */
static inline int member_shares(const ff__coord_params *p, const ff__coord_member *m, int n) {
  int live = 0;
  for (int i = 0; i < n; i++)
    live += m[i].pid != 0;
  return live > p->expected_members ? live : p->expected_members;
}

/* ---- coord_classes.c ---- */

enum { COORD_NEUTRAL, COORD_STALLED, COORD_SLACK };
enum { SLACK_REPORTS = 2 }; /* reports in a row that had slack: see ff__coord_burst_class */

/* Whether each of a member's last SLACK_REPORTS reports had slack. */
static inline int slack_lately(const ff__coord_member *e) { return e->slack_reports >= SLACK_REPORTS; }

/* Whether signals (smoothed, or one report's) say a member has slack: its
 * trainer does not wait, its ring is full and its workers idle. */
int ff__coord_has_slack(const ff__coord_params *p, double stall, double fill, double busy);
/* COORD_STALLED, COORD_SLACK (or quiet) or COORD_NEUTRAL, by its smoothed signals. */
int ff__coord_member_class(const ff__coord_params *p, const ff__coord_member *e);
/* The class for the bursts: slack when its last SLACK_REPORTS reports had slack. */
int ff__coord_burst_class(const ff__coord_params *p, const ff__coord_member *e);
/* The parameters the rebalancing runs by: p, with no minimum while the
 * trainers' cores leave less than min_threads per share. */
ff__coord_params ff__coord_effective(const ff__coord_params *p, const ff__coord_member *m, int n);
/* Whether member e stopped asking for batches, as of now_ns. */
int ff__coord_is_quiet(const ff__coord_params *p, const ff__coord_member *e, uint64_t now_ns);
/* Marks the members other than self that stopped asking for batches. */
void ff__coord_mark_quiet(const ff__coord_params *p, ff__coord_member *m, int n, int self, uint64_t now_ns);
/* The inode of this process's pid namespace (0: unknown). */
uint64_t ff__coord_pid_namespace(void);
/* Whether e's process exited (seen from pidns) or it is silent past COORD_ABANDONED_MS. */
int ff__coord_over(const ff__coord_member *e, uint64_t pidns, uint64_t now_ns);
/* Whether e's process exited (seen from pidns) or it is silent past the heartbeat timeout. */
int ff__coord_member_gone(const ff__coord_params *p, const ff__coord_member *e, uint64_t pidns, uint64_t now_ns);

/* ---- coord_segment.c (under the lock unless said) ---- */

/* Initialises a new segment's header, settings and lock, then marks it
 * ready (release). Returns 0 or the pthread error. */
int ff__coord_segment_init(coord_shm *s, const ff__coord_params *p);
/* Locks the table within timeout_ms (0: one try); recovers it from a dead
 * holder. Returns 0, ETIMEDOUT or ENOTRECOVERABLE. */
int ff__coord_lock(coord_shm *s, int timeout_ms);
void ff__coord_unlock(coord_shm *s);
/* shm_open that never blocks (a FIFO under the name would hang it). */
int ff__coord_open_shm(const char *name, int flags, mode_t mode);
/* What makes the object behind st no segment of this user's, into why (0: it is one). */
int ff__coord_foreign(const struct stat *st, char *why, size_t cap);
/* What makes s another build's segment, into why (0: none). Without the lock. */
int ff__coord_header_damage(const coord_shm *s, char *why, size_t cap);
/* What field of s is out of the range a member writes, into why (0: none). */
int ff__coord_table_damage(const coord_shm *s, uint64_t now_ns, char *why, size_t cap);
/* c runs alone on all its threads from now on; the message goes to err, or
 * to stderr when err is NULL (a member already in the group). Returns FF_EIO. */
ff_status ff__coord_go_alone(ff__coord *c, const char *why, const char *advice, ff__error *err);
/* Slot i's published worker CPU and parked into its member. */
void ff__coord_read_published(coord_shm *s, int i);
/* Frees slot i, its worker CPU in the window kept for the reserve. */
void ff__coord_free_slot(coord_shm *s, int i);
/* Frees the slots of gone members but `self` and recounts them. */
void ff__coord_reclaim(coord_shm *s, int self, uint64_t pidns, uint64_t now_ns);
/* Takes a free slot for c with its first allotment; the slot or -1 (full). */
int ff__coord_take_slot(coord_shm *s, ff__coord *c, uint64_t now_ns);
/* Whether c's slot is still its own (not reclaimed and re-used). Without the lock. */
int ff__coord_owns_slot(const ff__coord *c);
/* Unmaps c's segment. */
void ff__coord_detach(ff__coord *c);

/* ---- coord_lifetime.c ---- */

/* Opens (or creates) the segment of c->name and takes a slot. */
ff_status ff__coord_attach(ff__coord *c, ff__error *err);
/* Unlinks name only while it still names segment ino. */
void ff__coord_unlink_if_same(const char *name, ino_t ino);
/* Removes this user's segments (but own) of groups whose members all died. */
void ff__coord_sweep_abandoned(const char *own, uint64_t pidns);

#endif
