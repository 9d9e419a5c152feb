/* images.c — the device check's image set, written where it runs instead of
 * carried (tests/device/run.sh):
 *
 *   make_images DIR COUNT [SEED]
 *
 * COUNT baseline JPEGs in DIR/cNN/img_NNNN.jpg (8 classes, an ImageFolder),
 * the same bytes for the same COUNT and SEED on any machine (libjpeg-turbo's
 * encoder is deterministic; the pixels come from a fixed xorshift stream).
 * Sized and made like ImageNet photographs: 333..640 x 250..500 px (one in
 * four portrait), a smooth colour field (a coarse grid of random colours,
 * interpolated) with a few hard-edged shapes and +-4..24 of noise (texture), quality
 * 80..95, chroma 4:2:0 (one in eight 4:4:4) — what nvJPEG's hardware
 * engine and its hybrid backend both take. Prints the count, the bytes and
 * the mean pixels per image. Exit 0, 1 when a file cannot be written, 2 on
 * bad arguments. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jpeglib.h>

#define CLASSES 8
#define GRID 6

static uint32_t next(uint32_t *s) {
  *s ^= *s << 13, *s ^= *s >> 17, *s ^= *s << 5;
  return *s;
}

static int between(uint32_t *s, int lo, int hi) { return lo + (int)(next(s) % (uint32_t)(hi - lo + 1)); }

static void paint(uint8_t *px, int w, int h, uint32_t *s) {
  int grid[GRID][GRID][3];
  for (int gy = 0; gy < GRID; gy++)
    for (int gx = 0; gx < GRID; gx++)
      for (int c = 0; c < 3; c++) grid[gy][gx][c] = between(s, 20, 235);
  for (int y = 0; y < h; y++) {
    int fy = y * (GRID - 1) * 256 / h, gy = fy >> 8, ty = fy & 255;
    for (int x = 0; x < w; x++) {
      int fx = x * (GRID - 1) * 256 / w, gx = fx >> 8, tx = fx & 255;
      for (int c = 0; c < 3; c++) {
        int top = grid[gy][gx][c] * (256 - tx) + grid[gy][gx + 1][c] * tx;
        int bottom = grid[gy + 1][gx][c] * (256 - tx) + grid[gy + 1][gx + 1][c] * tx;
        px[((size_t)y * w + x) * 3 + c] = (uint8_t)((top * (256 - ty) + bottom * ty) >> 16);
      }
    }
  }
  int shapes = between(s, 2, 6);
  for (int k = 0; k < shapes; k++) { /* rectangles and ellipses with hard edges */
    int cx = between(s, 0, w - 1), cy = between(s, 0, h - 1), rx = between(s, 8, w / 3), ry = between(s, 8, h / 3);
    int ellipse = next(s) & 1, col[3] = {between(s, 0, 255), between(s, 0, 255), between(s, 0, 255)};
    for (int y = cy - ry < 0 ? 0 : cy - ry; y < h && y <= cy + ry; y++)
      for (int x = cx - rx < 0 ? 0 : cx - rx; x < w && x <= cx + rx; x++) {
        long dx = x - cx, dy = y - cy;
        if (ellipse && dx * dx * ry * ry + dy * dy * rx * rx > (long)rx * rx * ry * ry) continue;
        memcpy(px + ((size_t)y * w + x) * 3, (uint8_t[3]){(uint8_t)col[0], (uint8_t)col[1], (uint8_t)col[2]}, 3);
      }
  }
  int amp = between(s, 4, 24); /* texture: photographs' bytes per pixel */
  for (size_t i = 0; i < (size_t)w * h * 3; i++) {
    int v = px[i] + (int)(next(s) % (uint32_t)(2 * amp + 1)) - amp;
    px[i] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
  }
}

static int write_jpeg(const char *path, const uint8_t *px, int w, int h, int quality, int full_chroma) {
  FILE *f = fopen(path, "wb");
  if (!f) return -1;
  struct jpeg_compress_struct ci;
  struct jpeg_error_mgr jerr;
  ci.err = jpeg_std_error(&jerr); /* an encoder error exits: nothing to recover here */
  jpeg_create_compress(&ci);
  jpeg_stdio_dest(&ci, f);
  ci.image_width = (JDIMENSION)w, ci.image_height = (JDIMENSION)h;
  ci.input_components = 3, ci.in_color_space = JCS_RGB;
  jpeg_set_defaults(&ci);
  jpeg_set_quality(&ci, quality, TRUE);
  if (full_chroma) ci.comp_info[0].h_samp_factor = ci.comp_info[0].v_samp_factor = 1;
  jpeg_start_compress(&ci, TRUE);
  for (int y = 0; y < h; y++) {
    JSAMPROW row = (JSAMPROW)(px + (size_t)y * w * 3);
    jpeg_write_scanlines(&ci, &row, 1);
  }
  jpeg_finish_compress(&ci);
  jpeg_destroy_compress(&ci);
  return fclose(f);
}

static int make_dir(const char *path) { return mkdir(path, 0755) == 0 || errno == EEXIST ? 0 : -1; }

int main(int argc, char **argv) {
  char *end = NULL;
  long count = argc > 2 ? strtol(argv[2], &end, 10) : 0;
  unsigned long seed = argc > 3 ? strtoul(argv[3], NULL, 10) : 1;
  if (argc < 3 || argc > 4 || !end || *end || count < 1 || count > 1000000) {
    fprintf(stderr, "usage: make_images DIR COUNT [SEED]\n");
    return 2;
  }
  const char *dir = argv[1];
  char path[4096] = "";
  if (make_dir(dir)) goto fail_dir;
  for (int k = 0; k < CLASSES; k++) {
    snprintf(path, sizeof path, "%s/c%02d", dir, k);
    if (make_dir(path)) goto fail_dir;
  }
  uint8_t *px = malloc((size_t)640 * 640 * 3);
  if (!px) return 1;
  unsigned long long bytes = 0, pixels = 0;
  for (long i = 0; i < count; i++) {
    uint32_t s = (uint32_t)(seed * 2654435761u + (unsigned long)i * 40503u + 1u);
    for (int warm = 0; warm < 4; warm++) next(&s);
    int w = between(&s, 333, 640), h = between(&s, 250, 500);
    if (next(&s) % 4 == 0) { /* portrait */
      int t = w;
      w = h, h = t;
    }
    paint(px, w, h, &s);
    snprintf(path, sizeof path, "%s/c%02ld/img_%06ld.jpg", dir, i % CLASSES, i);
    if (write_jpeg(path, px, w, h, between(&s, 80, 95), next(&s) % 8 == 0)) {
      fprintf(stderr, "make_images: cannot write %s: %s\n", path, strerror(errno));
      free(px);
      return 1;
    }
    struct stat st;
    if (stat(path, &st) == 0) bytes += (unsigned long long)st.st_size;
    pixels += (unsigned long long)w * h;
  }
  free(px);
  printf("make_images: %ld JPEGs in %s, %.1f MiB, %.0f pixels per image on average (seed %lu)\n", count, dir,
         bytes / 1048576.0, (double)pixels / (double)count, seed);
  return 0;
fail_dir:
  fprintf(stderr, "make_images: cannot create %s: %s\n", path[0] ? path : dir, strerror(errno));
  return 1;
}
