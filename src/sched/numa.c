/* numa.c — the NUMA node of a rank's GPU from sysfs, and pinning the
 * loader's workers to its cores (numa.h has the rules). Only reads files:
 * the tree's root is a parameter so that tests can build one. */
#include "sched/numa.h"

#include "exec/device.h"

#include <dirent.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int ff__numa_parse_cpulist(const char *text, cpu_set_t *set) {
  CPU_ZERO(set);
  const char *p = text;
  int count = 0;
  while (*p && *p != '\n') {
    char *end;
    long lo = strtol(p, &end, 10), hi = lo;
    if (end == p || lo < 0) return -1;
    if (*end == '-') {
      p = end + 1;
      hi = strtol(p, &end, 10);
      if (end == p || hi < lo) return -1;
    }
    for (long c = lo; c <= hi && c < CPU_SETSIZE; c++)
      if (!CPU_ISSET((int)c, set)) CPU_SET((int)c, set), count++;
    p = end;
    if (*p == ',') p++;
    else if (*p && *p != '\n') return -1;
  }
  return count;
}

static int read_line(const char *path, char *buf, size_t cap) {
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  int ok = fgets(buf, (int)cap, f) != NULL;
  fclose(f);
  return ok;
}

static int cmp_names(const void *a, const void *b) { return strcmp((const char *)a, (const char *)b); }

/* CUDA_VISIBLE_DEVICES=2,3 makes device 0 the physical GPU 2; UUIDs
 * (GPU-...) or MIG names cannot be mapped from sysfs: -1. */
static int physical_ordinal(int ordinal) {
  const char *v = getenv("CUDA_VISIBLE_DEVICES");
  if (!v || !*v) return ordinal;
  for (int i = 0; *v; i++) {
    char *end;
    long g = strtol(v, &end, 10);
    if (end == v || g < 0) return -1;
    if (i == ordinal) return (int)g;
    v = *end == ',' ? end + 1 : end;
    if (*end && *end != ',') return -1;
  }
  return -1;
}

int ff__numa_gpu_cpus(const char *root, int ordinal, cpu_set_t *set, int *node_out) {
  int phys = ordinal >= 0 ? physical_ordinal(ordinal) : -1;
  if (phys < 0) return 0;
  char dir[4096], path[4400], line[256];
  snprintf(dir, sizeof dir, "%s/bus/pci/devices", root);
  DIR *d = opendir(dir);
  if (!d) return 0;
  enum { MAX_GPUS = 64 };
  char gpus[MAX_GPUS][64];
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) && n < MAX_GPUS) {
    if (e->d_name[0] == '.' || strlen(e->d_name) >= sizeof gpus[0]) continue;
    snprintf(path, sizeof path, "%s/%s/vendor", dir, e->d_name);
    if (!read_line(path, line, sizeof line) || strtol(line, NULL, 16) != 0x10de) continue;
    snprintf(path, sizeof path, "%s/%s/class", dir, e->d_name);
    if (!read_line(path, line, sizeof line) || (strtol(line, NULL, 16) >> 16) != 0x03) continue;
    snprintf(gpus[n++], sizeof gpus[0], "%s", e->d_name);
  }
  closedir(d);
  if (phys >= n) return 0;
  qsort(gpus, (size_t)n, sizeof gpus[0], cmp_names); /* PCI addresses sort as the bus order */
  snprintf(path, sizeof path, "%s/%s/numa_node", dir, gpus[phys]);
  if (!read_line(path, line, sizeof line)) return 0;
  int node = atoi(line);
  if (node < 0) return 0; /* -1: the platform does not say */
  snprintf(path, sizeof path, "%s/devices/system/node/node%d/cpulist", root, node);
  char list[4096];
  if (!read_line(path, list, sizeof list) || ff__numa_parse_cpulist(list, set) <= 0) return 0;
  if (node_out) *node_out = node;
  return 1;
}

int ff__numa_rank_gpu(const char *device) {
  if (ff__device_name_kind(device) == FF__DEVICE_KIND_CUDA) return ff__device_name_ordinal(device);
  const char *r = getenv("LOCAL_RANK");
  return r && *r ? atoi(r) : 0;
}

int ff__numa_wanted(void) {
  const char *mode = getenv("FF_NODE_NUMA");
  if (!mode || !*mode || !strcasecmp(mode, "off")) return 0;
  return strcasecmp(mode, "auto") ? -1 : 1;
}

int ff__numa_pin_workers(const pthread_t *threads, int n, int ordinal) {
  int wanted = ff__numa_wanted();
  if (wanted < 0) {
    static atomic_int told;
    if (!atomic_exchange(&told, 1))
      fprintf(stderr, "fusionflow: FF_NODE_NUMA='%s' is neither auto nor off: the workers are not pinned\n",
              getenv("FF_NODE_NUMA"));
  }
  if (wanted <= 0) return -1;
  cpu_set_t near, mine;
  int node;
  if (!ff__numa_gpu_cpus("/sys", ordinal, &near, &node) || sched_getaffinity(0, sizeof mine, &mine)) return -1;
  CPU_AND(&near, &near, &mine);
  if (!CPU_COUNT(&near)) return -1;
  int here = sched_getcpu();
  if (here >= 0 && CPU_ISSET(here, &near) && CPU_COUNT(&near) > 1) CPU_CLR(here, &near);
  for (int i = 0; i < n; i++)
    pthread_setaffinity_np(threads[i], sizeof near, &near);
  return node;
}
