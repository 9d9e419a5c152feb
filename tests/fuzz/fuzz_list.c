/* fuzz_list.c — the bytes of a list:FILE source through the index builder.
 * The file is a memfd named /proc/self/fd/N, so relative paths in it name
 * this process's open descriptors ("0", "1", ...): lines can point at files
 * that exist as well as at ones that do not. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#include "source/source.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static int fd = -1;
  if (fd < 0 && (fd = memfd_create("fuzz-list", 0)) < 0) return 0;
  if (ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != (ssize_t)size) return 0;
  char spec[64];
  snprintf(spec, sizeof spec, "list:/proc/self/fd/%d", fd);
  ff__index index = {0};
  ff__error err = {0};
  if (ff__source_open(spec, 0, &index, &err) == FF_OK) ff__index_free(&index);
  return 0;
}
