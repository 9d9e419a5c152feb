/* test_numa.c — finding a rank's GPU's NUMA node and cores (sched/numa.c)
 * in a sysfs tree built by the test: two NVIDIA GPUs on nodes 1 and 0, an
 * NVIDIA audio function and a network card that must not count; and the
 * real tree, where without a GPU nothing is pinned. */
#include <setjmp.h> /* cmocka.h needs these four first */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixtures.h"
#include "sched/numa.h"

static char root[4200];

static void put(const char *rel, const char *text) {
  char path[4400], dir[4400];
  snprintf(path, sizeof path, "%s/%s", root, rel);
  snprintf(dir, sizeof dir, "%s", path);
  *strrchr(dir, '/') = 0;
  ff_test_mkdir(dir);
  ff_test_write(path, text, strlen(text));
}

static void device(const char *bdf, const char *vendor, const char *cls, const char *node) {
  char rel[256];
  snprintf(rel, sizeof rel, "bus/pci/devices/%s/vendor", bdf);
  put(rel, vendor);
  snprintf(rel, sizeof rel, "bus/pci/devices/%s/class", bdf);
  put(rel, cls);
  snprintf(rel, sizeof rel, "bus/pci/devices/%s/numa_node", bdf);
  put(rel, node);
}

static int setup(void **state) {
  (void)state;
  snprintf(root, sizeof root, "%s", ff_test_dir("numa-sysfs"));
  device("0000:c1:00.0", "0x10de\n", "0x030200\n", "1\n"); /* GPU 1 in bus order */
  device("0000:41:00.0", "0x10de\n", "0x030000\n", "0\n"); /* GPU 0 */
  device("0000:41:00.1", "0x10de\n", "0x040300\n", "0\n"); /* its audio function */
  device("0000:21:00.0", "0x15b3\n", "0x020000\n", "0\n"); /* a network card */
  put("devices/system/node/node0/cpulist", "0-3,8-11\n");
  put("devices/system/node/node1/cpulist", "4-7,12-15\n");
  return 0;
}

static void cpulists_parse_ranges_and_single_cpus(void **state) {
  (void)state;
  cpu_set_t s;
  assert_int_equal(ff__numa_parse_cpulist("0-3,8,10-11\n", &s), 7);
  assert_true(CPU_ISSET(0, &s) && CPU_ISSET(3, &s) && CPU_ISSET(8, &s) && CPU_ISSET(11, &s));
  assert_false(CPU_ISSET(4, &s) || CPU_ISSET(9, &s));
  assert_int_equal(ff__numa_parse_cpulist("5", &s), 1);
  assert_int_equal(ff__numa_parse_cpulist("3-1", &s), -1);
  assert_int_equal(ff__numa_parse_cpulist("x", &s), -1);
  assert_int_equal(ff__numa_parse_cpulist("1,,2", &s), -1);
}

static void a_gpu_s_node_and_cores_come_from_its_pci_function(void **state) {
  (void)state;
  unsetenv("CUDA_VISIBLE_DEVICES");
  cpu_set_t s;
  int node = -1;
  assert_int_equal(ff__numa_gpu_cpus(root, 0, &s, &node), 1);
  assert_int_equal(node, 0);
  assert_int_equal(CPU_COUNT(&s), 8);
  assert_true(CPU_ISSET(8, &s) && !CPU_ISSET(4, &s));
  assert_int_equal(ff__numa_gpu_cpus(root, 1, &s, &node), 1);
  assert_int_equal(node, 1);
  assert_true(CPU_ISSET(12, &s) && !CPU_ISSET(0, &s));
  assert_int_equal(ff__numa_gpu_cpus(root, 2, &s, &node), 0); /* two GPUs only: the audio function is none */

  setenv("CUDA_VISIBLE_DEVICES", "1", 1); /* device 0 of this process is the physical GPU 1 */
  assert_int_equal(ff__numa_gpu_cpus(root, 0, &s, &node), 1);
  assert_int_equal(node, 1);
  setenv("CUDA_VISIBLE_DEVICES", "GPU-5f1c0e2a", 1); /* a UUID: not mapped, not guessed */
  assert_int_equal(ff__numa_gpu_cpus(root, 0, &s, &node), 0);
  unsetenv("CUDA_VISIBLE_DEVICES");
}

static void the_rank_s_gpu_is_the_device_s_or_the_local_rank_s(void **state) {
  (void)state;
  setenv("LOCAL_RANK", "3", 1);
  assert_int_equal(ff__numa_rank_gpu("cuda:1"), 1);
  assert_int_equal(ff__numa_rank_gpu("cpu"), 3);
  assert_int_equal(ff__numa_rank_gpu("cuda"), 0); /* device 0, as the device layer reads the name */
  assert_int_equal(ff__numa_rank_gpu("auto"), 3);
  assert_int_equal(ff__numa_rank_gpu("cuda:x"), 3); /* not a device name */
  unsetenv("LOCAL_RANK");
  assert_int_equal(ff__numa_rank_gpu("emu:0"), 0);
}

/* Only FF_NODE_NUMA=auto pins; where the machine has no NVIDIA GPU (or its
 * node is unknown) it pins nothing and says so by returning -1. A value
 * that is neither auto nor off pins nothing either. */
static void pinning_is_opt_in_and_skips_without_a_gpu(void **state) {
  (void)state;
  pthread_t self = pthread_self();
  unsetenv("FF_NODE_NUMA");
  assert_int_equal(ff__numa_wanted(), 0);
  assert_int_equal(ff__numa_pin_workers(&self, 1, 0), -1);
  const char *values[] = {"off", "OFF", "", "auto", "Auto", "on", "1", "bogus"};
  const int wanted[] = {0, 0, 0, 1, 1, -1, -1, -1};
  for (int i = 0; i < 8; i++) {
    setenv("FF_NODE_NUMA", values[i], 1);
    assert_int_equal(ff__numa_wanted(), wanted[i]);
  }
  setenv("FF_NODE_NUMA", "on", 1);
  assert_int_equal(ff__numa_pin_workers(&self, 1, 0), -1);
  cpu_set_t s;
  if (ff__numa_gpu_cpus("/sys", 0, &s, NULL)) {
    skip(); /* a GPU with a known node here: pinning is exercised by the device check */
  }
  setenv("FF_NODE_NUMA", "auto", 1);
  assert_int_equal(ff__numa_pin_workers(&self, 1, 0), -1);
  unsetenv("FF_NODE_NUMA");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(cpulists_parse_ranges_and_single_cpus),
      cmocka_unit_test(a_gpu_s_node_and_cores_come_from_its_pci_function),
      cmocka_unit_test(the_rank_s_gpu_is_the_device_s_or_the_local_rank_s),
      cmocka_unit_test(pinning_is_opt_in_and_skips_without_a_gpu),
  };
  return cmocka_run_group_tests(tests, setup, NULL);
}
