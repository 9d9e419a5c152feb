/* test_formats.c — hostile and broken WebP, TIFF, PBM/PGM/PPM and BMP
 * files, encoded here (libwebp, libtiff, or byte by byte): every truncation
 * of a valid file ends in FF_OK or an error naming the file, headers over
 * the pixel limit are refused before any pixel memory is taken, and each
 * malformed header gets its own message; a header of a few bytes that
 * declares rows or pixels of gigabytes is refused before the memory is
 * asked for (checked under an address-space limit). The pixels themselves are checked
 * against Pillow in tests/golden/test_formats_golden.py. */
#include <setjmp.h> /* cmocka.h needs these four first */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <tiffio.h>
#include <webp/encode.h>

#include "codec/codec.h"
#include "fixtures.h"

#define NAME "set/img_0007.x"

typedef struct blob {
  uint8_t *data;
  size_t size;
} blob;

static ff_status decode(const uint8_t *data, size_t size, uint64_t max_pixels, ff__image *img,
                        ff__error *err) {
  static ff__buf pixels; /* freed by the last test */
  ff__decode_req req = {.max_pixels = max_pixels};
  return ff__codec_decode(data, size, NAME, &req, &pixels, img, err);
}

static void pattern(uint8_t *px, size_t n) {
  for (size_t i = 0; i < n; i++)
    px[i] = (uint8_t)(i * 7 + i / 13);
}

static blob webp_file(int lossless) {
  uint8_t px[12 * 9 * 3];
  pattern(px, sizeof px);
  blob b;
  b.size =
      lossless ? WebPEncodeLosslessRGB(px, 12, 9, 36, &b.data) : WebPEncodeRGB(px, 12, 9, 36, 80, &b.data);
  assert_true(b.size > 0);
  return b;
}

static blob tiff_file(uint16_t compression) {
  char path[512];
  snprintf(path, sizeof path, "%s/t.tif", ff_test_dir("formats-tiff"));
  TIFF *t = TIFFOpen(path, "w");
  assert_non_null(t);
  TIFFSetField(t, TIFFTAG_IMAGEWIDTH, 12);
  TIFFSetField(t, TIFFTAG_IMAGELENGTH, 9);
  TIFFSetField(t, TIFFTAG_BITSPERSAMPLE, 8);
  TIFFSetField(t, TIFFTAG_SAMPLESPERPIXEL, 3);
  TIFFSetField(t, TIFFTAG_PHOTOMETRIC, PHOTOMETRIC_RGB);
  TIFFSetField(t, TIFFTAG_PLANARCONFIG, PLANARCONFIG_CONTIG);
  TIFFSetField(t, TIFFTAG_COMPRESSION, compression);
  TIFFSetField(t, TIFFTAG_ROWSPERSTRIP, 4);
  uint8_t row[36];
  for (uint32_t y = 0; y < 9; y++) {
    pattern(row, sizeof row);
    row[0] = (uint8_t)y;
    assert_int_equal(TIFFWriteScanline(t, row, y, 0), 1);
  }
  TIFFClose(t);
  blob b;
  b.data = ff_test_read(path, &b.size);
  return b;
}

static blob copy(const char *bytes, size_t n) {
  blob b = {malloc(n), n};
  memcpy(b.data, bytes, n);
  return b;
}

static blob bmp_file(void) {
  /* 3x2, 24 bits, bottom-up, rows padded to 12 bytes */
  static const char f[] =
      "BM\x4e\0\0\0\0\0\0\0\x36\0\0\0"
      "\x28\0\0\0\x03\0\0\0\x02\0\0\0\x01\0\x18\0\0\0\0\0\x18\0\0\0\x13\x0b\0\0\x13\x0b\0\0\0\0\0\0\0\0\0\0"
      "\x01\x02\x03\x04\x05\x06\x07\x08\x09\0\0\0"
      "\x0a\x0b\x0c\x0d\x0e\x0f\x10\x11\x12\0\0\0";
  return copy(f, sizeof f - 1);
}

static void free_blob(blob *b) {
  free(b->data);
  *b = (blob){0};
}

/* Every prefix of a valid file: FF_OK or FF_EDATA naming the file, never a crash. */
static void check_truncations(blob b) {
  ff__image img;
  ff__error err;
  assert_int_equal(decode(b.data, b.size, 0, &img, &err), FF_OK);
  int failed = 0;
  for (size_t n = 1; n < b.size; n++) {
    uint8_t *cut = malloc(n); /* its own allocation, so that ASan sees a read past it */
    memcpy(cut, b.data, n);
    ff_status st = decode(cut, n, 0, &img, &err);
    free(cut);
    if (st == FF_OK) continue;
    assert_int_equal(st, FF_EDATA);
    assert_non_null(strstr(err.msg, NAME));
    failed++;
  }
  assert_true(failed >= (int)b.size / 2); /* most prefixes cannot be images */
}

static void test_truncated_webp_fails_cleanly(void **state) {
  (void)state;
  for (int lossless = 0; lossless < 2; lossless++) {
    blob b = webp_file(lossless);
    check_truncations(b);
    WebPFree(b.data);
  }
}

static void test_truncated_tiff_fails_cleanly(void **state) {
  (void)state;
  uint16_t kinds[] = {COMPRESSION_NONE, COMPRESSION_LZW, COMPRESSION_ADOBE_DEFLATE, COMPRESSION_PACKBITS};
  for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++) {
    blob b = tiff_file(kinds[i]);
    check_truncations(b);
    free_blob(&b);
  }
}

static void test_truncated_netpbm_and_bmp_fail_cleanly(void **state) {
  (void)state;
  static const char p6[] =
      "P6\n# c\n3 2\n255\n\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f\x10\x11\x12";
  static const char p3[] = "P3 2 1 1000 0 1 2 999 1000 7\n";
  static const char p4[] = "P4 9 2\n\xff\x80\x01\x00";
  const char *files[] = {p6, p3, p4};
  size_t sizes[] = {sizeof p6 - 1, sizeof p3 - 1, sizeof p4 - 1};
  for (size_t i = 0; i < 3; i++) {
    blob b = copy(files[i], sizes[i]);
    check_truncations(b);
    free_blob(&b);
  }
  blob b = bmp_file();
  check_truncations(b);
  free_blob(&b);
}

/* The decode fails with want and words; the probe, which reads the header only, fails the same way or
 * (for pixel data that is wrong) passes. */
static void expect(const char *bytes, size_t n, uint64_t max_pixels, ff_status want, const char *words) {
  ff__image img;
  ff__image_info info;
  ff__error err = {0}, probe_err = {0};
  blob b = copy(bytes, n);
  ff_status st = decode(b.data, b.size, max_pixels, &img, &err);
  ff_status probed = ff__codec_probe(b.data, b.size, NAME, max_pixels, &info, &probe_err);
  free_blob(&b);
  if (st != want || !strstr(err.msg, NAME) || !strstr(err.msg, words))
    fail_msg("got %d '%s', wanted %d with '%s'", st, err.msg, want, words);
  if (probed && (probed != st || strcmp(probe_err.msg, err.msg)))
    fail_msg("the probe said %d '%s', the decode %d '%s'", probed, probe_err.msg, st, err.msg);
}
#define EXPECT(lit, max_pixels, want, words) expect(lit, sizeof lit - 1, max_pixels, want, words)

/* The probe reads the size from the header and checks the pixel limit, as the decode does. */
static void test_netpbm_and_bmp_probes_read_the_header(void **state) {
  (void)state;
  blob bmp = bmp_file(), pgm = copy("P5 5 4 255\n", 11); /* a header without its pixels */
  const blob files[] = {bmp, pgm};
  const ff__image_info want[] = {{FF__FORMAT_BMP, 3, 2, 0}, {FF__FORMAT_PNM, 5, 4, 0}};
  for (int i = 0; i < 2; i++) {
    ff__image_info info = {0};
    ff__error err = {0};
    uint64_t pixels = (uint64_t)want[i].width * (uint64_t)want[i].height;
    assert_int_equal(ff__codec_probe(files[i].data, files[i].size, NAME, pixels, &info, &err), FF_OK);
    assert_int_equal(info.format, want[i].format);
    assert_int_equal(info.width, want[i].width);
    assert_int_equal(info.height, want[i].height);
    assert_int_equal(ff__codec_probe(files[i].data, files[i].size, NAME, 5, &info, &err), FF_ETOOBIG);
    assert_non_null(strstr(err.msg, NAME));
    assert_non_null(strstr(err.msg, "max_image_pixels"));
  }
  free_blob(&bmp);
  free_blob(&pgm);
}

static void test_netpbm_bad_headers_are_named(void **state) {
  (void)state;
  EXPECT("P6 100000 100000 255\n", 89478485, FF_ETOOBIG, "max_image_pixels");
  EXPECT("P5 3 2 0\n\x01\x02\x03\x04\x05\x06", 0, FF_EDATA, "maxval 0");
  EXPECT("P5 3 2 70000\n\x01\x02\x03\x04\x05\x06", 0, FF_EDATA, "maxval 70000");
  EXPECT("P5 0 2 255\n\x01\x02", 0, FF_EDATA, "0x2");
  EXPECT("P5 12345678901 2 255\n", 0, FF_EDATA, "bad width");
  EXPECT("P5 3x 2 255\n", 0, FF_EDATA, "bad width");
  EXPECT("P2 2 1 10 3 11\n", 0, FF_EDATA, "over maxval");
  EXPECT("P2 2 1 10 3 x\n", 0, FF_EDATA, "not a number");
  EXPECT("P1 2 1 0 2\n", 0, FF_EDATA, "not 0 or 1");
  EXPECT("Pf 2 1 -1.0\n", 0, FF_EDATA, "PFM");
  EXPECT("P7\nWIDTH 1\n", 0, FF_EDATA, "not an image");
  EXPECT("P6 2 2 255\n\x01\x02\x03", 0, FF_EDATA, "truncated");
}

static void test_bmp_bad_headers_are_named(void **state) {
  (void)state;
  blob good = bmp_file();
  struct {
    size_t at;
    uint32_t value;
    size_t width; /* bytes to write */
    ff_status want;
    const char *words;
  } cases[] = {
      {18, 100000, 4, FF_ETOOBIG, "max_image_pixels"}, /* width: 100000 x 2 over a limit of 1000 */
      {18, 0, 4, FF_EDATA, "0x2"},                     /* width 0 */
      {22, 0x80000000u, 4, FF_EDATA, "BMP image of"},  /* height INT32_MIN */
      {28, 7, 2, FF_EDATA, "pixel depth 7"},           /* bits */
      {30, 1, 4, FF_EDATA, "RLE"},                     /* RLE8 */
      {30, 9, 4, FF_EDATA, "compression 9"},           /* unknown */
      {14, 20, 4, FF_EDATA, "header size 20"},         /* header */
      {10, 0xFFFFFFF0u, 4, FF_EDATA, "truncated"},     /* pixel offset past the end */
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    blob b = copy((const char *)good.data, good.size);
    for (size_t k = 0; k < cases[i].width; k++)
      b.data[cases[i].at + k] = (uint8_t)(cases[i].value >> (8 * k));
    expect((const char *)b.data, b.size, 1000, cases[i].want, cases[i].words);
    free_blob(&b);
  }
  /* a palette that claims more colours than the file holds */
  blob b = copy((const char *)good.data, good.size);
  b.data[28] = 8, b.data[46] = 0xFF, b.data[47] = 0xFF, b.data[48] = 0x0F;
  expect((const char *)b.data, b.size, 0, FF_EDATA, "palette");
  free_blob(&b);
  free_blob(&good);
}

static void test_webp_and_tiff_over_the_pixel_limit_are_refused(void **state) {
  (void)state;
  /* a lossless WebP header declaring 16384 x 16384 */
  static const char vp8l[] = "RIFF\x1a\0\0\0WEBPVP8L\x0d\0\0\0\x2f\xff\xff\xff\x0f\0\0\0\0\0\0\0\0\0";
  EXPECT(vp8l, 89478485, FF_ETOOBIG, "16384x16384");
  blob t = tiff_file(COMPRESSION_NONE);
  ff__image img;
  ff__error err = {0};
  assert_int_equal(decode(t.data, t.size, 100, &img, &err), FF_ETOOBIG);
  assert_non_null(strstr(err.msg, "12x9"));
  free_blob(&t);
  EXPECT("II*\0\x08\0\0\0\0\0", 0, FF_EDATA, "TIFF");
  EXPECT("RIFF\x04\0\0\0WEBPVP8 ", 0, FF_EDATA, "WebP");
}

static void test_foreign_bytes_name_every_format(void **state) {
  (void)state;
  EXPECT("GIF89a....", 0, FF_EDATA, "JPEG, PNG, WebP, TIFF, PBM/PGM/PPM or BMP");
}

/* The address space this process has mapped now, in bytes (/proc/self/statm). */
static size_t mapped_bytes(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  unsigned long pages = 0;
  if (f) {
    if (fscanf(f, "%lu", &pages) != 1) pages = 0;
    fclose(f);
  }
  return (size_t)pages * (size_t)sysconf(_SC_PAGESIZE);
}

/* Decodes data in a child allowed 128 MiB more address space than it has
 * mapped, and returns the decode's status there (FF_ENOMEM when the decoder
 * asked for more): a decoder that reserves memory for what the file cannot
 * hold fails it. Not under a sanitizer, whose runtime maps terabytes. */
static ff_status decode_in_128_mib(const uint8_t *data, size_t size, uint64_t max_pixels, char *msg, size_t cap) {
  int fds[2];
  assert_int_equal(pipe(fds), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    close(fds[0]);
    struct rlimit lim = {mapped_bytes() + ((size_t)128 << 20), RLIM_INFINITY};
    lim.rlim_max = lim.rlim_cur;
    if (setrlimit(RLIMIT_AS, &lim)) _exit(100);
    ff__image img;
    ff__error err = {0};
    ff_status st = decode(data, size, max_pixels, &img, &err);
    if (write(fds[1], err.msg, strlen(err.msg) + 1) < 0) _exit(101);
    _exit(-st);
  }
  close(fds[1]);
  ssize_t got = read(fds[0], msg, cap - 1);
  msg[got > 0 ? got : 0] = 0;
  close(fds[0]);
  int status;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status) && WEXITSTATUS(status) < 100);
  return (ff_status)-WEXITSTATUS(status);
}

static int sanitized(void) {
  const char *s = getenv("FF_TEST_SANITIZER");
  return s && *s;
}

/* 128 bytes whose first width tag says 589827 pixels and whose samples per
 * pixel say 2322 of 16 bits: rows of 2.7 GB, for 1.8 Mpixels (under the
 * pixel limit). The row buffer was taken before a row was read. */
static void test_a_tiff_declaring_rows_of_gigabytes_is_refused_before_allocating(void **state) {
  (void)state;
  if (sanitized()) skip();
  char path[1024], msg[1024];
  snprintf(path, sizeof path, "%s/hostile/tiff-128-bytes-rows-of-2.7gb.tif", FF_TEST_DATA);
  size_t n;
  uint8_t *tif = ff_test_read(path, &n);
  assert_int_equal(n, 128);
  ff_status st = decode_in_128_mib(tif, n, 89478485, msg, sizeof msg);
  if (st != FF_EDATA || !strstr(msg, "uncompressed rows of") || !strstr(msg, "a file of 128 bytes"))
    fail_msg("got %d '%s'", st, msg);
  free(tif);
}

/* Plain (ASCII) Netpbm headers declaring 9000 x 9000 pixels (81 Mpixels,
 * under the limit) with a handful of samples: the 243 MB of RGB pixels were
 * reserved before the samples were counted. */
static void test_plain_netpbm_pixels_are_reserved_only_for_samples_the_file_holds(void **state) {
  (void)state;
  if (sanitized()) skip();
  static const char *const files[] = {"P1 9000 9000\n0101", "P2 9000 9000 255\n1 2 3", "P3 9000 9000 255\n1 2 3\n"};
  char msg[1024];
  for (size_t i = 0; i < 3; i++) {
    ff_status st = decode_in_128_mib((const uint8_t *)files[i], strlen(files[i]), 89478485, msg, sizeof msg);
    if (st != FF_EDATA || !strstr(msg, "truncated Netpbm image") || !strstr(msg, "9000x9000"))
      fail_msg("%.2s: got %d '%s'", files[i], st, msg);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_truncated_webp_fails_cleanly),
      cmocka_unit_test(test_truncated_tiff_fails_cleanly),
      cmocka_unit_test(test_truncated_netpbm_and_bmp_fail_cleanly),
      cmocka_unit_test(test_netpbm_and_bmp_probes_read_the_header),
      cmocka_unit_test(test_netpbm_bad_headers_are_named),
      cmocka_unit_test(test_bmp_bad_headers_are_named),
      cmocka_unit_test(test_webp_and_tiff_over_the_pixel_limit_are_refused),
      cmocka_unit_test(test_foreign_bytes_name_every_format),
      cmocka_unit_test(test_a_tiff_declaring_rows_of_gigabytes_is_refused_before_allocating),
      cmocka_unit_test(test_plain_netpbm_pixels_are_reserved_only_for_samples_the_file_holds),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
