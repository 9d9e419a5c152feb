/* coord_node.c — what the node coordinator measures of the node: the cores
 * this process may use (CPU affinity within the cgroup v2 quota), and the
 * node's busy CPU time for the adaptive reserve (the quota's cgroup
 * cpu.stat, else the affinity's CPUs in /proc/stat, steal left out). The
 * one file of the coordinator that reads the system's CPU accounting. */
#include "sched/coord_node.h"

#include <ctype.h>
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int ff__coord_cpu_max_cores(const char *text) {
  char *end;
  errno = 0;
  long long quota = strtoll(text, &end, 10);
  if (end == text || errno || quota <= 0 || *end != ' ') return 0; /* "max", or not a quota */
  const char *q = end + 1;
  long long period = strtoll(q, &end, 10);
  if (end == q || errno || period <= 0 || (*end && *end != '\n')) return 0;
  long long cores = (quota + period - 1) / period;
  return cores > 4096 ? 4096 : (int)cores;
}

int ff__coord_cgroup_quota(const char *proc_cgroup, const char *root, char *dir_out, size_t cap) {
  char line[4096], path[4200];
  FILE *f = fopen(proc_cgroup, "r");
  if (!f) return 0;
  int found = 0;
  while (fgets(line, sizeof line, f))
    if (!strncmp(line, "0::", 3)) { /* the v2 hierarchy's entry */
      found = 1;
      break;
    }
  fclose(f);
  if (!found) return 0;
  line[strcspn(line, "\n")] = 0;
  char *dir = line + 3;
  int best = 0;
  for (;;) {
    snprintf(path, sizeof path, "%s%s/cpu.max", root, dir);
    char text[128];
    FILE *m = fopen(path, "r");
    if (m) {
      if (fgets(text, sizeof text, m)) {
        int n = ff__coord_cpu_max_cores(text);
        if (n > 0 && (!best || n < best)) {
          best = n;
          if (dir_out) snprintf(dir_out, cap, "%s%s", root, dir);
        }
      }
      fclose(m);
    }
    char *slash = strrchr(dir, '/');
    if (!slash || (slash == dir && !dir[1])) break;
    if (slash == dir)
      dir[1] = 0; /* the root: "/" */
    else
      *slash = 0;
  }
  return best;
}

/* The tightest quota of this process's cgroup and its parents. */
static int cgroup_cores(char *dir_out, size_t cap) {
  return ff__coord_cgroup_quota("/proc/self/cgroup", "/sys/fs/cgroup", dir_out, cap);
}

static int affinity_cores(void) {
  cpu_set_t set;
  int n = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 0;
  if (n <= 0) {
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    n = online > 0 ? (int)(online > 4096 ? 4096 : online) : 1;
  }
  return n;
}

int ff__coord_node_cores(void) {
  int n = affinity_cores(), quota = cgroup_cores(NULL, 0);
  return quota > 0 && quota < n ? quota : n;
}

void ff__coord_busy_source_init(ff__coord_busy_source *src) {
  char dir[4200];
  int quota = cgroup_cores(dir, sizeof dir);
  src->cpu_stat[0] = 0;
  if (quota > 0 && quota < affinity_cores()) snprintf(src->cpu_stat, sizeof src->cpu_stat, "%s/cpu.stat", dir);
}

int ff__coord_proc_stat_busy_ns(const char *path, uint64_t *out) {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return -1;
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  char line[512];
  long hz = sysconf(_SC_CLK_TCK);
  unsigned long long ticks = 0;
  int cpus = 0;
  while (fgets(line, sizeof line, f)) {
    unsigned cpu;
    unsigned long long v[7] = {0}; /* user nice system idle iowait irq softirq */
    /* per-CPU lines only: %u would read the total line's "cpu  <user ticks>" as a CPU number */
    if (strncmp(line, "cpu", 3) || !isdigit((unsigned char)line[3]) ||
        sscanf(line, "cpu%u %llu %llu %llu %llu %llu %llu %llu", &cpu, &v[0], &v[1], &v[2], &v[3], &v[4],
               &v[5], &v[6]) < 8 ||
        cpu >= CPU_SETSIZE || !CPU_ISSET(cpu, &set))
      continue;
    ticks += v[0] + v[1] + v[2] + v[5] + v[6];
    cpus++;
  }
  fclose(f);
  if (!cpus || hz <= 0) return -1;
  *out = (uint64_t)(ticks * (1000000000ull / (unsigned long long)hz));
  return 0;
}

/* The busy CPU of the cgroup whose quota makes the budget (cpu.stat
 * usage_usec), or of the affinity's CPUs in /proc/stat: the measurement of
 * the adaptive reserve, the one place it reads the system. */
int ff__coord_node_busy_ns(const ff__coord_busy_source *src, uint64_t *out) {
  if (src->cpu_stat[0]) {
    char line[512];
    FILE *f = fopen(src->cpu_stat, "r");
    unsigned long long usec = 0;
    int found = 0;
    if (f) {
      while (!found && fgets(line, sizeof line, f))
        found = sscanf(line, "usage_usec %llu", &usec) == 1;
      fclose(f);
    }
    if (found) {
      *out = (uint64_t)usec * 1000u;
      return 0;
    }
  }
  return ff__coord_proc_stat_busy_ns("/proc/stat", out);
}
