/* fuzz_policy.c — the bytes of a policy file (docs/policy-file.md: JSON of
 * sub-policies or layers) through its loader, as policy_file(path=...)
 * reads it: a memfd named /proc/self/fd/N. Any input must load into a table
 * within its bounds or fail with a reason naming the file; nothing may
 * crash, leak or read out of bounds. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "pipeline/policy_file.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static int fd = -1;
  static ff__policy_table table; /* large: off the stack */
  if (fd < 0 && (fd = memfd_create("fuzz-policy", 0)) < 0) return 0;
  if (ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != (ssize_t)size) return 0;
  char path[64], why[1024];
  snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  if (ff__policy_file_load(path, &table, why, sizeof why) != FF_OK) return 0;
  if (table.num_groups < 1 || table.num_groups > FF__POLICY_MAX_GROUPS) abort();
  for (int g = 0; g < table.num_groups; g++)
    if (table.start[g] > table.start[g + 1] || table.start[g + 1] > FF__POLICY_MAX_ENTRIES) abort();
  return 0;
}
