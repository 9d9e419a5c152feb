/* coord_node.h — what the node coordinator measures of the node
 * (coord_node.c): the cores this process may use, which make the default
 * budget, and the node's busy CPU time, the adaptive reserve's measure. */
#ifndef FF_SCHED_COORD_NODE_H
#define FF_SCHED_COORD_NODE_H

#include <stddef.h>
#include <stdint.h>

/* The cores this process may use: its CPU affinity, lowered to the tightest
 * cgroup v2 quota of its cgroup and every parent (/proc/self/cgroup under
 * /sys/fs/cgroup), at least 1. */
int ff__coord_node_cores(void);

/* The tightest cgroup v2 quota (ff__coord_cpu_max_cores) of the cgroup
 * that proc_cgroup (a /proc/PID/cgroup file: its "0::PATH" line) names and
 * of every parent, their cpu.max files under root: cores, or 0 (no quota,
 * no v2 entry, nothing readable). The quota's cgroup directory goes to
 * dir_out (cap bytes) when dir_out is not NULL and there is one. */
int ff__coord_cgroup_quota(const char *proc_cgroup, const char *root, char *dir_out, size_t cap);

/* The cores a cgroup v2 cpu.max text allows: ceil(QUOTA / PERIOD), or 0 for
 * "max" (no quota) and text that is not "QUOTA PERIOD". */
int ff__coord_cpu_max_cores(const char *text);

/* Where the node's busy CPU is read, decided once at join. */
typedef struct ff__coord_busy_source {
  char cpu_stat[4300]; /* the quota's cgroup's cpu.stat, or "" for /proc/stat */
} ff__coord_busy_source;

/* The cpu.stat of the cgroup whose cpu.max quota makes the budget (it is
 * below the affinity's cores); else /proc/stat. */
void ff__coord_busy_source_init(ff__coord_busy_source *src);

/* The node's busy CPU time so far into *out (ns): src's cpu.stat
 * usage_usec, else (or when it cannot be read) ff__coord_proc_stat_busy_ns
 * of /proc/stat. Returns 0, or -1 if neither can be read. */
int ff__coord_node_busy_ns(const ff__coord_busy_source *src, uint64_t *out);

/* The time the CPUs in the calling thread's affinity mask ran something
 * (user, nice, system, irq, softirq; not steal, the time a virtual
 * machine's host ran others) in the per-CPU lines of a file in /proc/stat's
 * format at path, into *out (ns). Returns 0, or -1 if the file cannot be
 * read or has no such line. */
int ff__coord_proc_stat_busy_ns(const char *path, uint64_t *out);

#endif
