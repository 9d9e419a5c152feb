/* replay.c — the main of a fuzz target where libFuzzer is absent (gcc, or
 * any build without FF_FUZZ): runs LLVMFuzzerTestOneInput once on every file
 * named, or on every file in each folder named (not recursing), so that the
 * seed corpus and any saved crash replay under the sanitizers of the build.
 * Exits 1 if an argument cannot be read (the sanitizers abort on a fault). */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "replay: cannot open %s\n", path);
    return 1;
  }
  uint8_t *data = NULL;
  size_t size = 0, cap = 0, n;
  do {
    if (size == cap) {
      uint8_t *grown = realloc(data, cap = cap ? cap * 2 : 4096);
      if (!grown) {
        free(data);
        fclose(f);
        fprintf(stderr, "replay: out of memory reading %s\n", path);
        return 1;
      }
      data = grown;
    }
    n = fread(data + size, 1, cap - size, f);
    size += n;
  } while (n);
  fclose(f);
  LLVMFuzzerTestOneInput(data, size);
  free(data);
  return 0;
}

int main(int argc, char **argv) {
  int failed = 0, files = 0;
  for (int i = 1; i < argc; i++) {
    struct stat st;
    if (stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode)) {
      DIR *d = opendir(argv[i]);
      struct dirent *e;
      while (d && (e = readdir(d))) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", argv[i], e->d_name);
        if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) continue;
        failed |= run_file(path);
        files++;
      }
      if (d)
        closedir(d);
      else
        failed = 1;
    } else {
      failed |= run_file(argv[i]);
      files++;
    }
  }
  printf("replay: %d inputs\n", files);
  return failed;
}
