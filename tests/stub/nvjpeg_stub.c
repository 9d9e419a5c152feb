/* nvjpeg_stub.c — a test double of libnvjpeg: the entry points fusionflow
 * loads (exec/nvjpeg.c), with nvJPEG's C ABI, decoding on the host with
 * libjpeg-turbo into the "device" buffers it is given (host memory in the
 * tests: malloc, or the emulated device's). It is loaded through the same
 * dlopen path (FF_NVJPEG_LIBRARY) so that the support checks, the
 * fallbacks and the error mapping run without a GPU:
 *   - the hardware backend is refused (NVJPEG_STATUS_ARCH_MISMATCH) unless
 *     FF_STUB_NVJPEG_HARDWARE=1, so both backends can be reached;
 *   - nvjpegDecodeBatchedSupportedEx answers on the hardware backend only
 *     (the hybrid one says NVJPEG_STATUS_IMPLEMENTATION_NOT_SUPPORTED, as
 *     libnvjpeg 13 does) and refuses progressive and 4:1:1 files and a
 *     region outside the image;
 *   - a header libjpeg cannot read is NVJPEG_STATUS_BAD_JPEG at parse time,
 *     a stream whose entropy data is corrupt fails the batch with it;
 *   - the scale factor (nvjpegDecodeParamsSetScaleFactor) reduces the
 *     decode as libjpeg's DCT scaling does, the region's size rounded up;
 *   - failures are injected from FF_STUB_NVJPEG_FAIL: "batch" fails every
 *     batched decode (NVJPEG_STATUS_EXECUTION_FAILED), "width:W" fails a
 *     batch that holds an image W pixels wide (NVJPEG_STATUS_JPEG_NOT_SUPPORTED),
 *     as a batched decode has one status for the batch;
 *   - scratch memory (4 KiB per handle, the batch's decode buffer) comes
 *     through the caller's device allocator, and a refusal there is
 *     NVJPEG_STATUS_ALLOCATOR_FAILURE;
 *   - counters for the tests: nvjpegStubDeviceAllocs() (device allocations
 *     asked for), nvjpegStubBatches() (batched decode calls),
 *     nvjpegStubSmallHybridBatches() (hybrid calls of 50 images or fewer,
 *     which libnvjpeg would decode on the calling thread),
 *     nvjpegStubPreAllocations() (nvjpegDecodeBatchedPreAllocate calls). */
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jerror.h>
#include <jpeglib.h>

typedef int (*dev_malloc_fn)(void *ctx, void **ptr, size_t size, void *stream);
typedef int (*dev_free_fn)(void *ctx, void *ptr, size_t size, void *stream);
typedef struct allocator {
  dev_malloc_fn malloc_fn;
  dev_free_fn free_fn;
  void *ctx;
} allocator;

typedef struct nvjpegImage_t {
  unsigned char *channel[4];
  size_t pitch[4];
} nvjpegImage_t;

enum {
  OK = 0, INVALID = 2, BAD_JPEG = 3, NOT_SUPPORTED = 4, ALLOCATOR_FAILURE = 5, EXECUTION_FAILED = 6,
  ARCH_MISMATCH = 7, IMPLEMENTATION_NOT_SUPPORTED = 9
};
enum { HARDWARE = 3, RGBI = 5 };

typedef struct handle {
  int backend;
  allocator dev, pinned;
  void *scratch;
} handle;

typedef struct stream {
  int ok, progressive, components, h_samp, v_samp, chroma_1x1, width, height;
} stream;

typedef struct params {
  int format, x, y, w, h, scale; /* scale: log2 of the reduction */
} params;

static long device_allocs, batches, small_hybrid_batches, preallocations;

long nvjpegStubDeviceAllocs(void) { return device_allocs; }
long nvjpegStubBatches(void) { return batches; }
long nvjpegStubSmallHybridBatches(void) { return small_hybrid_batches; }
long nvjpegStubPreAllocations(void) { return preallocations; }

static int dev_alloc(handle *h, void **p, size_t n) {
  device_allocs++;
  return h->dev.malloc_fn(h->dev.ctx, p, n, NULL) ? ALLOCATOR_FAILURE : OK;
}

int nvjpegCreateExV2(int backend, allocator *dev, allocator *pinned, unsigned flags, handle **out) {
  (void)flags;
  const char *hw = getenv("FF_STUB_NVJPEG_HARDWARE");
  if (backend == HARDWARE && !(hw && !strcmp(hw, "1"))) return ARCH_MISMATCH;
  handle *h = calloc(1, sizeof *h);
  h->backend = backend, h->dev = *dev, h->pinned = *pinned;
  if (dev_alloc(h, &h->scratch, 4096)) {
    free(h);
    return ALLOCATOR_FAILURE;
  }
  *out = h;
  return OK;
}

int nvjpegDestroy(handle *h) {
  h->dev.free_fn(h->dev.ctx, h->scratch, 4096, NULL);
  free(h);
  return OK;
}

typedef struct state {
  int batch; /* from nvjpegDecodeBatchedInitialize */
} state;

int nvjpegJpegStateCreate(handle *h, state **out) {
  (void)h;
  *out = calloc(1, sizeof **out);
  return OK;
}

int nvjpegJpegStateDestroy(state *s) {
  free(s);
  return OK;
}

int nvjpegJpegStreamCreate(handle *h, stream **out) {
  (void)h;
  *out = calloc(1, sizeof **out);
  return OK;
}

int nvjpegJpegStreamDestroy(stream *s) {
  free(s);
  return OK;
}

typedef struct failure {
  struct jpeg_error_mgr mgr;
  jmp_buf jump;
} failure;

static void fail_exit(j_common_ptr c) { longjmp(((failure *)c->err)->jump, 1); }

/* Any warning is a failure: a stricter decoder than fusionflow's. */
static void fail_warning(j_common_ptr c, int level) {
  if (level < 0) longjmp(((failure *)c->err)->jump, 1);
}

int nvjpegJpegStreamParseHeader(handle *h, const unsigned char *data, size_t length, stream *s) {
  (void)h;
  struct jpeg_decompress_struct c;
  failure f;
  c.err = jpeg_std_error(&f.mgr);
  f.mgr.error_exit = fail_exit;
  memset(s, 0, sizeof *s);
  if (setjmp(f.jump)) {
    jpeg_destroy_decompress(&c);
    return BAD_JPEG;
  }
  jpeg_create_decompress(&c);
  jpeg_mem_src(&c, data, (unsigned long)length);
  jpeg_read_header(&c, TRUE);
  *s = (stream){1, c.progressive_mode != 0, c.num_components, c.comp_info[0].h_samp_factor,
                c.comp_info[0].v_samp_factor, 1, (int)c.image_width, (int)c.image_height};
  for (int i = 1; i < c.num_components; i++)
    s->chroma_1x1 &= c.comp_info[i].h_samp_factor == 1 && c.comp_info[i].v_samp_factor == 1;
  jpeg_destroy_decompress(&c);
  return OK;
}

int nvjpegJpegStreamGetJpegEncoding(stream *s, int *encoding) {
  *encoding = s->progressive ? 0xc2 : 0xc0;
  return s->ok ? OK : INVALID;
}

int nvjpegJpegStreamGetComponentsNum(stream *s, unsigned *n) {
  *n = (unsigned)s->components;
  return s->ok ? OK : INVALID;
}

int nvjpegJpegStreamGetChromaSubsampling(stream *s, int *css) {
  static const int table[5][3] = {{-1, -1, -1}, {-1, 0, 3}, {-1, 1, 2}, {-1, -1, -1}, {-1, 4, -1}};
  if (s->components == 1) *css = 6; /* gray */
  else if (s->components != 3 || !s->chroma_1x1 || s->h_samp > 4 || s->v_samp > 2) *css = -1;
  else *css = table[s->h_samp][s->v_samp];
  return s->ok ? OK : INVALID;
}

int nvjpegDecodeParamsCreate(handle *h, params **out) {
  (void)h;
  *out = calloc(1, sizeof **out);
  (*out)->w = (*out)->h = -1;
  return OK;
}

int nvjpegDecodeParamsDestroy(params *p) {
  free(p);
  return OK;
}

int nvjpegDecodeParamsSetOutputFormat(params *p, int format) {
  p->format = format;
  return OK;
}

int nvjpegDecodeParamsSetROI(params *p, int x, int y, int w, int h) {
  p->x = x, p->y = y, p->w = w, p->h = h;
  return OK;
}

int nvjpegDecodeParamsSetScaleFactor(params *p, int scale) {
  if (scale < 0 || scale > 3) return INVALID;
  p->scale = scale;
  return OK;
}

int nvjpegDecodeBatchedSupportedEx(handle *h, stream *s, params *p, int *unsupported) {
  if (h->backend != HARDWARE) return IMPLEMENTATION_NOT_SUPPORTED; /* "not supported for the selected backend" */
  int outside = p->w > 0 && (p->x < 0 || p->y < 0 || p->x + p->w > s->width || p->y + p->h > s->height);
  *unsupported = !s->ok || s->progressive || (s->components == 3 && s->h_samp == 4 && s->v_samp == 1) || outside;
  return OK;
}

int nvjpegDecodeBatchedPreAllocate(handle *h, state *st, int batch, int width, int height, int css, int format) {
  (void)h, (void)st, (void)css;
  if (batch <= 0 || width <= 0 || height <= 0 || format != RGBI) return INVALID;
  preallocations++;
  return OK;
}

int nvjpegDecodeBatchedInitialize(handle *h, state *st, int batch, int threads, int format) {
  (void)h, (void)threads;
  st->batch = batch;
  return batch > 0 && format == RGBI ? OK : INVALID;
}

/* One image, whole or its ROI (reduced by its scale), into dst
 * (interleaved RGB); the image's width goes to *width. */
static int decode_one(const unsigned char *data, size_t length, const params *p, nvjpegImage_t *dst, uint8_t *row_buf,
                      int *width) {
  struct jpeg_decompress_struct c;
  failure f;
  c.err = jpeg_std_error(&f.mgr);
  f.mgr.error_exit = fail_exit;
  f.mgr.emit_message = fail_warning;
  if (setjmp(f.jump)) {
    jpeg_destroy_decompress(&c);
    return BAD_JPEG;
  }
  jpeg_create_decompress(&c);
  jpeg_mem_src(&c, data, (unsigned long)length);
  jpeg_read_header(&c, TRUE);
  *width = (int)c.image_width;
  c.out_color_space = JCS_RGB;
  int scale = p ? p->scale : 0, f1 = 1 << scale;
  c.scale_num = 8 >> scale, c.scale_denom = 8;
  jpeg_start_decompress(&c);
  int x = p && p->w > 0 ? p->x / f1 : 0, y = p && p->w > 0 ? p->y / f1 : 0;
  int w = p && p->w > 0 ? (p->w + f1 - 1) / f1 : (int)c.output_width;
  int h = p && p->w > 0 ? (p->h + f1 - 1) / f1 : (int)c.output_height;
  if (x + w > (int)c.output_width || y + h > (int)c.output_height) longjmp(f.jump, 1);
  for (int r = 0; r < (int)c.output_height; r++) {
    JSAMPROW row = row_buf;
    jpeg_read_scanlines(&c, &row, 1);
    if (r >= y && r < y + h) memcpy(dst->channel[0] + (size_t)(r - y) * dst->pitch[0], row_buf + (size_t)x * 3, (size_t)w * 3);
  }
  jpeg_finish_decompress(&c);
  jpeg_destroy_decompress(&c);
  return OK;
}

/* FF_STUB_NVJPEG_FAIL: "batch", or "width:W" (the image width that fails its batch), or none. */
static int injected(int *fail_width) {
  const char *f = getenv("FF_STUB_NVJPEG_FAIL");
  *fail_width = f && !strncmp(f, "width:", 6) ? atoi(f + 6) : -1;
  return f && !strcmp(f, "batch");
}

static int decode_batch(handle *h, const unsigned char *const *data, const size_t *lengths, nvjpegImage_t *dst,
                        params **p, int n) {
  batches++;
  if (h->backend != HARDWARE && n <= 50) small_hybrid_batches++;
  int fail_width, status = injected(&fail_width) ? EXECUTION_FAILED : OK;
  for (int i = 0; i < n && status == OK; i++) {
    void *buf;
    if ((status = dev_alloc(h, &buf, 65536 * 3))) break; /* the row buffer stands in for device scratch */
    int width = 0;
    status = decode_one(data[i], lengths[i], p ? p[i] : NULL, &dst[i], buf, &width);
    if (status == OK && width == fail_width) status = NOT_SUPPORTED;
    h->dev.free_fn(h->dev.ctx, buf, 65536 * 3, NULL);
  }
  return status;
}

int nvjpegDecodeBatched(handle *h, state *st, const unsigned char *const *data, const size_t *lengths,
                        nvjpegImage_t *dst, void *cuda_stream) {
  (void)cuda_stream;
  return decode_batch(h, data, lengths, dst, NULL, st->batch);
}

int nvjpegDecodeBatchedEx(handle *h, state *st, const unsigned char *const *data, const size_t *lengths,
                          nvjpegImage_t *dst, params **p, void *cuda_stream) {
  (void)cuda_stream;
  if (h->backend != HARDWARE) return 9; /* IMPLEMENTATION_NOT_SUPPORTED, as nvJPEG's hybrid backends */
  return decode_batch(h, data, lengths, dst, p, st->batch);
}
