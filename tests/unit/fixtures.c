/* fixtures.c — scratch folders and files for the unit tests, and generated
 * JPEG images and ImageFolder trees for the loader tests. */
#include "fixtures.h"

#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h> /* jpeglib.h needs FILE */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jpeglib.h>

ff_test_guarded ff_test_guarded_image(int w, int h, size_t stride, uint32_t *rng) {
  size_t page = (size_t)sysconf(_SC_PAGESIZE), bytes = (size_t)(h - 1) * stride + (size_t)w * 3;
  size_t body = (bytes + page - 1) / page * page;
  ff_test_guarded g = {0};
  g.map_size = body + page;
  void *m = mmap(NULL, g.map_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED || mprotect((uint8_t *)m + body, page, PROT_NONE) != 0) {
    fprintf(stderr, "cannot map a guarded %dx%d image: %s\n", w, h, strerror(errno));
    abort();
  }
  g.map = m;
  g.data = g.map + body - bytes;
  for (int y = 0; y < h; y++)
    for (size_t i = 0; i < (size_t)w * 3; i++) {
      uint32_t r = ff_test_rand(rng);
      g.data[(size_t)y * stride + i] = r % 5 == 0 ? (uint8_t)(r >> 8 & 1 ? 255 : 0) : (uint8_t)(r >> 8);
    }
  return g;
}

void ff_test_guarded_free(ff_test_guarded *g) {
  if (munmap(g->map, g->map_size) != 0) abort();
  *g = (ff_test_guarded){0};
}

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

int ff_test_run(const char *cmd, char *out, size_t cap) {
  FILE *p = popen(cmd, "r");
  if (!p) return -2;
  size_t n = fread(out, 1, cap - 1, p);
  out[n] = 0;
  int st = pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

const char *ff_test_stderr_of(void (*f)(void *), void *arg) {
  static char text[1024];
  char path[] = "/tmp/ff-test-stderr-XXXXXX";
  int fd = mkstemp(path);
  if (fd < 0) {
    fprintf(stderr, "cannot create %s: %s\n", path, strerror(errno));
    abort();
  }
  unlink(path);
  fflush(stderr);
  int saved = dup(2);
  dup2(fd, 2);
  f(arg);
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  ssize_t n = pread(fd, text, sizeof text - 1, 0);
  close(fd);
  text[n > 0 ? n : 0] = 0;
  return text;
}

void ff_test_mkdir(const char *path) {
  char buf[4096];
  snprintf(buf, sizeof buf, "%s", path);
  for (char *p = buf + 1; *p; p++) {
    if (*p != '/') continue;
    *p = 0;
    if (mkdir(buf, 0755) != 0 && errno != EEXIST) goto fail;
    *p = '/';
  }
  if (mkdir(buf, 0755) != 0 && errno != EEXIST) goto fail;
  return;
fail:
  fprintf(stderr, "cannot create folder %s\n", path);
  abort();
}

uint32_t ff_test_rand(uint32_t *state) {
  uint32_t x = *state ? *state : 0x9E3779B9u;
  x ^= x << 13;
  x ^= x >> 17;
  x ^= x << 5;
  return *state = x;
}

void ff_test_write_jpeg(const char *path, int width, int height, int quality, int gray, unsigned seed) {
  ff_test_jpeg_kind kind = {gray, 0, 0, 0};
  ff_test_write_jpeg_as(path, width, height, quality, &kind, seed);
}

void ff_test_write_jpeg_as(const char *path, int width, int height, int quality, const ff_test_jpeg_kind *kind,
                           unsigned seed) {
  int gray = kind->color == 1, comps = gray ? 1 : kind->color == 2 ? 4 : 3;
  uint8_t *px = malloc((size_t)width * height * comps);
  if (!px) abort();
  uint32_t rng = seed * 2654435761u + 1;
  /* A gradient whose direction depends on the channel, plus +-16 of noise:
   * smooth enough to compress like a photo, varied enough that any crop,
   * flip or resize changes the pixels. */
  for (int y = 0; y < height; y++)
    for (int x = 0; x < width; x++)
      for (int c = 0; c < comps; c++) {
        int base = c == 0   ? x * 200 / width
                   : c == 1 ? y * 200 / height
                   : c == 2 ? (x + y) * 100 / (width + height) + 60
                            : 40; /* CMYK's K */
        int v = base + (int)(seed % 37) + (int)(ff_test_rand(&rng) % 33) - 16;
        px[((size_t)y * width + x) * comps + c] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
      }

  FILE *f = fopen(path, "wb");
  if (!f) {
    fprintf(stderr, "cannot write %s\n", path);
    abort();
  }
  struct jpeg_compress_struct cinfo;
  struct jpeg_error_mgr jerr;
  cinfo.err = jpeg_std_error(&jerr); /* errors exit the test process: fine here */
  jpeg_create_compress(&cinfo);
  jpeg_stdio_dest(&cinfo, f);
  cinfo.image_width = (JDIMENSION)width;
  cinfo.image_height = (JDIMENSION)height;
  cinfo.input_components = comps;
  cinfo.in_color_space = gray ? JCS_GRAYSCALE : comps == 4 ? JCS_CMYK : JCS_RGB;
  jpeg_set_defaults(&cinfo);
  jpeg_set_quality(&cinfo, quality, TRUE);
  if (kind->h_samp) cinfo.comp_info[0].h_samp_factor = kind->h_samp, cinfo.comp_info[0].v_samp_factor = kind->v_samp;
  if (kind->progressive) jpeg_simple_progression(&cinfo);
  jpeg_start_compress(&cinfo, TRUE);
  for (int y = 0; y < height; y++) {
    JSAMPROW row = px + (size_t)y * width * comps;
    jpeg_write_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_compress(&cinfo);
  jpeg_destroy_compress(&cinfo);
  if (fclose(f) != 0) {
    fprintf(stderr, "cannot write %s\n", path);
    abort();
  }
  free(px);
}

const char *ff_test_imagefolder_path(const char *root, int k, int i, char *buf, size_t cap) {
  snprintf(buf, cap, "%s/c%02d/img_%04d.jpg", root, k, i);
  return buf;
}

void ff_test_make_imagefolder(const char *root, int classes, int per_class, int min_side, int max_side,
                              unsigned seed) {
  uint32_t rng = seed * 747796405u + 12345u;
  char path[4096];
  for (int k = 0; k < classes; k++) {
    snprintf(path, sizeof path, "%s/c%02d", root, k);
    ff_test_mkdir(path);
    for (int i = 0; i < per_class; i++) {
      int span = max_side - min_side + 1;
      int w = min_side + (int)(ff_test_rand(&rng) % (uint32_t)span);
      int h = min_side + (int)(ff_test_rand(&rng) % (uint32_t)span);
      ff_test_write_jpeg(ff_test_imagefolder_path(root, k, i, path, sizeof path), w, h, 90, 0,
                         seed + (unsigned)(k * per_class + i));
    }
  }
}

static const char *alarm_what = "";

static void on_alarm(int sig) {
  (void)sig;
  static const char head[] = "the loader stopped making batches: ";
  if (write(2, head, sizeof head - 1) < 0 || write(2, alarm_what, strlen(alarm_what)) < 0 || write(2, "\n", 1) < 0)
    _exit(1);
  _exit(1);
}

void ff_test_stop_on_alarm(const char *what) {
  alarm_what = what;
  signal(SIGALRM, on_alarm);
}

long ff_test_nvjpeg_stub_count(const char *name) {
  void *lib = dlopen(getenv("FF_NVJPEG_STUB"), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    fprintf(stderr, "cannot load the stub libnvjpeg (FF_NVJPEG_STUB): %s\n", dlerror());
    abort();
  }
  void *sym = dlsym(lib, name);
  long (*fn)(void) = NULL;
  memcpy(&fn, &sym, sizeof fn); /* POSIX: a function's address fits a void * */
  if (!fn) {
    fprintf(stderr, "the stub libnvjpeg has no %s\n", name);
    abort();
  }
  long v = fn();
  dlclose(lib);
  return v;
}
