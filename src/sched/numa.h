/* numa.h — pinning a loader's workers near its rank's GPU (FF_NODE_NUMA=auto).
 * On a multi-socket GPU node each GPU hangs off one socket's PCIe root; a
 * loader whose workers run on the other socket moves every batch across
 * the socket link and competes with the other ranks' loaders for their
 * cores. The GPU's NUMA node comes from sysfs: the NVIDIA PCI functions
 * (vendor 0x10de, display class 0x03) in PCI address order — CUDA's order
 * on nodes of identical GPUs (CUDA_DEVICE_ORDER=PCI_BUS_ID makes it so),
 * through CUDA_VISIBLE_DEVICES when it lists ordinals — then
 * bus/pci/devices/<address>/numa_node and devices/system/node/node<N>/cpulist.
 * Where any of it is missing (no GPU, one NUMA node, a container without
 * sysfs) nothing is pinned. */
#ifndef FF_SCHED_NUMA_H
#define FF_SCHED_NUMA_H

#include <pthread.h>
#include <sched.h>

/* Parses a sysfs cpulist ("0-3,8,10-11\n") into *set (cleared first).
 * Returns the number of CPUs, or -1 if the text is not a cpulist. */
int ff__numa_parse_cpulist(const char *text, cpu_set_t *set);

/* The CPUs of the NUMA node of CUDA device `ordinal` (after
 * CUDA_VISIBLE_DEVICES when it is a list of ordinals), from the sysfs tree
 * at root ("/sys" on a real system). Writes them to *set and the node to
 * *node_out (may be NULL); returns 1, or 0 when the GPU or its node cannot
 * be determined. */
int ff__numa_gpu_cpus(const char *root, int ordinal, cpu_set_t *set, int *node_out);

/* FF_NODE_NUMA: 1 for auto, 0 unset, empty or off, -1 any other value
 * (either word in any case). */
int ff__numa_wanted(void);

/* FF_NODE_NUMA=auto: pins the n worker threads to the CPUs near CUDA device
 * `ordinal` that this process may use, leaving out the CPU the calling
 * thread (the trainer's, which launches the GPU's work) runs on while
 * others remain. Returns the node it pinned to, or -1 when it did nothing
 * (FF_NODE_NUMA unset or off, no GPU, no node, no usable CPU there; any
 * other value it names on stderr once per process). */
int ff__numa_pin_workers(const pthread_t *threads, int n, int ordinal);

/* The CUDA ordinal of this rank's GPU: N of device "cuda:N" (0 for "cuda",
 * as the device layer reads the name), else LOCAL_RANK (torchrun: one GPU
 * per local rank), else 0. */
int ff__numa_rank_gpu(const char *device);

#endif
