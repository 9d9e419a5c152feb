/* fixtures.c — scratch folders and files for the unit tests. */
#include "fixtures.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *ff_test_dir(const char *name) {
  static char path[4096];
  const char *root = getenv("FF_TEST_TMP");
  if (!root || !*root) root = "/tmp/ff-test";
  snprintf(path, sizeof path, "%s/%s", root, name);
  char cmd[8400];
  snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", path, path);
  if (system(cmd) != 0) {
    fprintf(stderr, "cannot create %s\n", path);
    abort();
  }
  return path;
}

void ff_test_write(const char *path, const void *data, size_t size_bytes) {
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(data, 1, size_bytes, f) != size_bytes || fclose(f) != 0) {
    fprintf(stderr, "cannot write %s\n", path);
    abort();
  }
}

uint8_t *ff_test_read(const char *path, size_t *size_bytes) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  uint8_t *p = malloc(n > 0 ? (size_t)n : 1);
  if (p && fread(p, 1, (size_t)n, f) != (size_t)n) {
    free(p);
    p = NULL;
  }
  fclose(f);
  if (p) *size_bytes = (size_t)n;
  return p;
}
