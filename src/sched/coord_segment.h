/* coord_segment.h — the node coordinator's shared table as tools and tests
 * see it: the segment's layout, the names of groups and their shared
 * memory, joining with explicit settings, reading a group's table with or
 * without joining it, and the members' states. */
#ifndef FF_SCHED_COORD_SEGMENT_H
#define FF_SCHED_COORD_SEGMENT_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "sched/coord.h"
#include "sched/coord_policy.h"

#define FF__COORD_GROUP_MAX 128 /* bytes of a group name, NUL included */

/* The shared segment's layout (visible so that tests can damage one). A
 * member that finds a field out of its range leaves the group and runs
 * alone, with one line on stderr. */
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
   * stored by its workers without the lock, relaxed (a slot taken or freed
   * clears it) */
  _Atomic uint64_t worker_cpu_now[FF__COORD_MAX_MEMBERS];
  _Atomic uint32_t workers_parked[FF__COORD_MAX_MEMBERS]; /* likewise, each slot's parked (0 or 1) */
} ff__coord_segment;

/* Whether FF_NODE_GROUP's value is "auto" (in any case): the torchrun job's
 * group. A value with white space at either end is neither auto nor off;
 * ff__coord_join refuses it. */
int ff__coord_group_auto(const char *value);

/* The group from the environment: FF_NODE_GROUP (unless "auto"), else
 * ff__coord_torchrun_group's. Writes it to buf; returns 1, or 0 if none. */
int ff__coord_default_group(char *buf, size_t cap);

/* The group torchrun's ranks meet in: "torchelastic-<TORCHELASTIC_RUN_ID>",
 * else "port-<MASTER_PORT>". Writes it to buf; returns 1, or 0 if neither
 * is set (or it does not fit). */
int ff__coord_torchrun_group(char *buf, size_t cap);

/* The shared memory name of a group: "/fusionflow-<uid>-<group>" for a
 * group of [A-Za-z0-9._-] only; otherwise every other character becomes '_'
 * and "~<16 hex digits>" (the 64-bit FNV-1a hash of the exact name) is
 * appended, so that distinct groups get distinct segments. Returns FF_OK or
 * FF_EINVAL (empty group, longer than FF__COORD_GROUP_MAX - 1, or buf too
 * small; FF__COORD_GROUP_MAX + 64 bytes hold any name). */
ff_status ff__coord_shm_name(const char *group, char *buf, size_t cap);

/* ff__coord_join with explicit settings instead of the environment (NULL:
 * ff__coord_params_init's), normalised as a join does. */
ff_status ff__coord_join_params(const char *group, int max_threads, const ff__coord_params *params,
                                ff__coord **out, ff__error *err);

/* Copies the live members of c's group (compacted, in slot order) into out
 * (room for FF__COORD_MAX_MEMBERS), their count into *n_out and the
 * group's settings into *params_out (each may be NULL). Returns FF_OK,
 * FF_EINVAL or FF_EIO (lock timed out). */
ff_status ff__coord_snapshot(ff__coord *c, ff__coord_member *out, int *n_out, ff__coord_params *params_out);

/* The same for `group` without joining it (`fusionflow node status`),
 * parked and quiet as of now. Returns FF_OK, FF_EINVAL (bad group name),
 * FF_EEMPTY (no such group for this user on this node) or FF_EIO (cannot be
 * opened, another build's or damaged, or locked past lock_timeout_ms), the
 * message in err. */
ff_status ff__coord_peek(const char *group, ff__coord_member *out, int *n_out, ff__coord_params *params_out,
                         ff__error *err);

/* Member m at now_ns (CLOCK_MONOTONIC): "gone" (its process exited, or it
 * is silent past the heartbeat timeout), "quiet", "stalled", "slack" or
 * "neutral". */
const char *ff__coord_member_state(const ff__coord_params *p, const ff__coord_member *m, uint64_t now_ns);

/* Whether member m is over at now_ns: its process exited, or it stayed
 * silent the 10 minutes after which a join of any group removes its
 * segment (a stopped member is not). */
int ff__coord_member_over(const ff__coord_member *m, uint64_t now_ns);

/* For tests only: takes the table's lock and returns holding it. */
void ff__coord_test_hold_lock(ff__coord *c);

#endif
