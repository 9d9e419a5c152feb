/* fixtures.h — helpers shared by the unit tests: scratch folders and files,
 * and generated test images and datasets. */
#ifndef FF_TEST_FIXTURES_H
#define FF_TEST_FIXTURES_H

#include <stddef.h>
#include <stdint.h>

/* A fresh empty folder $FF_TEST_TMP/<name> (or /tmp/ff-test/<name>); returns
 * its path in a static buffer of the caller's test. */
const char *ff_test_dir(const char *name);
/* Writes size_bytes bytes to path; aborts the test on failure. */
void ff_test_write(const char *path, const void *data, size_t size_bytes);
/* Reads a whole file into malloc'd memory; *size_bytes gets its length. */
uint8_t *ff_test_read(const char *path, size_t *size_bytes);
/* mkdir -p path; aborts on failure. */
void ff_test_mkdir(const char *path);

/* Makes SIGALRM (a test's alarm(seconds) against a hang) end the process
 * with exit status 1 after writing "the loader stopped making batches: ",
 * what and a newline to stderr; what must stay valid until the alarm. */
void ff_test_stop_on_alarm(const char *what);

/* Runs f(arg) with stderr going to a file; returns what was written (up to
 * 1023 bytes, in a static buffer); aborts if no file can be made. */
const char *ff_test_stderr_of(void (*f)(void *), void *arg);

/* Runs the shell command cmd (popen) and reads what it prints on stdout
 * into out (up to cap - 1 bytes, NUL-terminated); returns its exit status,
 * -1 when it did not exit, or -2 when it could not be started. */
int ff_test_run(const char *cmd, char *out, size_t cap);

/* A small deterministic generator (xorshift32) for sizes and pixels; *state
 * must not be 0 (0 is replaced by a constant). */
uint32_t ff_test_rand(uint32_t *state);

/* A w x h RGB uint8 image of `stride`-byte rows (stride >= 3w) filled with
 * noise from *rng (a fifth of the bytes 0 or 255: the values where
 * filters clip), placed so that its last pixel's last byte is the last
 * readable byte: the page after it is PROT_NONE, so a kernel that reads
 * past the image faults. Free with ff_test_guarded_free. */
typedef struct ff_test_guarded {
  uint8_t *map, *data; /* the mapping; the image's first byte */
  size_t map_size;
} ff_test_guarded;
ff_test_guarded ff_test_guarded_image(int w, int h, size_t stride, uint32_t *rng);
void ff_test_guarded_free(ff_test_guarded *g);

/* Encodes a width x height JPEG (libjpeg's compress API, 4:2:0 for colour)
 * of a smooth gradient plus noise, the same bytes for the same arguments.
 * gray: one-channel JPEG. Aborts on failure. */
void ff_test_write_jpeg(const char *path, int width, int height, int quality, int gray, unsigned seed);

/* What ff_test_write_jpeg_as writes: colour (0 RGB, 1 gray, 2 CMYK), the
 * luma sampling factors (2x2: 4:2:0, 4x1: 4:1:1, 1x1: 4:4:4; 0: libjpeg's
 * default) and a progressive scan. */
typedef struct ff_test_jpeg_kind {
  int color, h_samp, v_samp, progressive;
} ff_test_jpeg_kind;

/* ff_test_write_jpeg's picture encoded as kind says. */
void ff_test_write_jpeg_as(const char *path, int width, int height, int quality, const ff_test_jpeg_kind *kind,
                           unsigned seed);

/* Writes an ImageFolder tree: root/c<k>/img_<i>.jpg for k < classes and
 * i < per_class (zero-padded, so that the sorted order is the generation
 * order: sample index = k * per_class + i, label = k). Side lengths are
 * drawn from [min_side, max_side] with `seed`. Creates root if needed. */
void ff_test_make_imagefolder(const char *root, int classes, int per_class, int min_side, int max_side,
                              unsigned seed);

/* The path ff_test_make_imagefolder gives to image i of class k, in buf. */
const char *ff_test_imagefolder_path(const char *root, int k, int i, char *buf, size_t cap);

/* The counter `name` of the stub libnvjpeg at $FF_NVJPEG_STUB
 * (tests/stub/nvjpeg_stub.c): the stub is the library's while a loader or
 * device has it loaded, so its counters are the library's calls. */
long ff_test_nvjpeg_stub_count(const char *name);

#endif
