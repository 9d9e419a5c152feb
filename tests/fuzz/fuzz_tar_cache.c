/* fuzz_tar_cache.c — the text of a tar shard's index cache file through the
 * parser a second open reads it with (ff__tar_cache_parse), for a shard of
 * fixed path and stat: once as it comes, and once with the checksum line
 * the library would write appended, so that the fuzzer reaches the sample
 * lines behind it. Whatever the bytes, the parse must take a cache that
 * holds together (every sample inside the file, in order, with a label a
 * class count fits) or none, reading nothing out of bounds, leaking nothing. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "source/tar.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The shard the seeds were written for (make-seeds.py writes the same). */
#define SHARD "/data/train-000.tar"

static void check(const char *text, size_t n, const struct stat *sb) {
  ff__tar_shard sc;
  if (!ff__tar_cache_parse(text, n, SHARD, sb, &sc)) return;
  uint64_t end = 0;
  for (size_t i = 0; i < sc.n; i++) {
    const ff__tar_sample *t = &sc.s[i];
    if (t->offset < end || t->offset % 512 || t->size > (uint64_t)sb->st_size ||
        t->offset > (uint64_t)sb->st_size - t->size || t->label < 0 || t->label == INT64_MAX || !t->key_len)
      abort(); /* a cache the parser should have refused */
    end = t->offset + t->size;
  }
  ff__tar_shard_free(&sc);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct stat sb;
  memset(&sb, 0, sizeof sb);
  sb.st_size = 1 << 20, sb.st_ino = 1234, sb.st_dev = 2049;
  sb.st_mtim.tv_sec = 1700000000, sb.st_mtim.tv_nsec = 5;
  sb.st_ctim.tv_sec = 1700000001, sb.st_ctim.tv_nsec = 7;
  check((const char *)data, size, &sb);
  char *signed_text = malloc(size + 32);
  if (!signed_text) return 0;
  memcpy(signed_text, data, size);
  uint64_t h = 1469598103934665603ull; /* FNV-1a, as the library's writer */
  for (size_t i = 0; i < size; i++) h = (h ^ data[i]) * 1099511628211ull;
  int n = snprintf(signed_text + size, 32, "end %016llx\n", (unsigned long long)h);
  check(signed_text, size + (size_t)n, &sb);
  free(signed_text);
  return 0;
}
