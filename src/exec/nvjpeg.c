/* nvjpeg.c — nvJPEG loaded at run time (see nvjpeg.h): dlopen, the entry
 * points looked up by name (the pre-allocation and scale-factor calls are
 * optional: a library without them decodes without), a handle with our
 * allocators, the per-image support check and the batched decode, one
 * state per slot. nvJPEG's statuses are mapped onto ours: a bad or
 * incomplete stream is input data (FF_EDATA), an allocator failure is the
 * budget (FF_EBUDGET), anything else the device (FF_EDEVICE); the message
 * keeps nvJPEG's name for it. */
#include "exec/nvjpeg.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- nvJPEG's C ABI: the part used here (nvjpeg.h of nvJPEG 12/13) ---- */

typedef int nv_status;       /* nvjpegStatus_t */
enum {
  NV_SUCCESS = 0, NV_NOT_INITIALIZED = 1, NV_INVALID_PARAMETER = 2, NV_BAD_JPEG = 3, NV_JPEG_NOT_SUPPORTED = 4,
  NV_ALLOCATOR_FAILURE = 5, NV_EXECUTION_FAILED = 6, NV_ARCH_MISMATCH = 7, NV_INTERNAL_ERROR = 8,
  NV_IMPLEMENTATION_NOT_SUPPORTED = 9, NV_INCOMPLETE_BITSTREAM = 10
};
enum { NV_BACKEND_GPU_HYBRID = 2, NV_BACKEND_HARDWARE = 3 };      /* nvjpegBackend_t */
enum { NV_OUTPUT_RGBI = 5 };                                     /* nvjpegOutputFormat_t */
enum { NV_CSS_444 = 0, NV_CSS_UNKNOWN = -1 };                    /* nvjpegChromaSubsampling_t */
enum { NV_ENCODING_PROGRESSIVE = 0xc2 };                         /* nvjpegJpegEncoding_t */
#define NV_MAX_COMPONENT 4

typedef struct nv_image {    /* nvjpegImage_t */
  unsigned char *channel[NV_MAX_COMPONENT];
  size_t pitch[NV_MAX_COMPONENT];
} nv_image;

typedef struct nv_dev_allocator { /* nvjpegDevAllocatorV2_t */
  int (*dev_malloc)(void *ctx, void **ptr, size_t size, void *stream);
  int (*dev_free)(void *ctx, void *ptr, size_t size, void *stream);
  void *dev_ctx;
} nv_dev_allocator;

typedef struct nv_pinned_allocator { /* nvjpegPinnedAllocatorV2_t */
  int (*pinned_malloc)(void *ctx, void **ptr, size_t size, void *stream);
  int (*pinned_free)(void *ctx, void *ptr, size_t size, void *stream);
  void *pinned_ctx;
} nv_pinned_allocator;

typedef void *nv_handle, *nv_state, *nv_stream, *nv_params; /* opaque handles */

typedef struct nv_api {
  nv_status (*CreateExV2)(int backend, nv_dev_allocator *dev, nv_pinned_allocator *pinned, unsigned flags,
                          nv_handle *out);
  nv_status (*Destroy)(nv_handle h);
  nv_status (*JpegStateCreate)(nv_handle h, nv_state *out);
  nv_status (*JpegStateDestroy)(nv_state s);
  nv_status (*JpegStreamCreate)(nv_handle h, nv_stream *out);
  nv_status (*JpegStreamDestroy)(nv_stream s);
  nv_status (*JpegStreamParseHeader)(nv_handle h, const unsigned char *data, size_t length, nv_stream s);
  nv_status (*JpegStreamGetJpegEncoding)(nv_stream s, int *encoding);
  nv_status (*JpegStreamGetComponentsNum)(nv_stream s, unsigned *components);
  nv_status (*JpegStreamGetChromaSubsampling)(nv_stream s, int *subsampling);
  nv_status (*DecodeParamsCreate)(nv_handle h, nv_params *out);
  nv_status (*DecodeParamsDestroy)(nv_params p);
  nv_status (*DecodeParamsSetOutputFormat)(nv_params p, int format);
  nv_status (*DecodeParamsSetROI)(nv_params p, int x, int y, int width, int height);
  nv_status (*DecodeBatchedSupportedEx)(nv_handle h, nv_stream s, nv_params p, int *is_supported);
  nv_status (*DecodeBatchedInitialize)(nv_handle h, nv_state s, int batch_size, int max_cpu_threads, int format);
  nv_status (*DecodeBatched)(nv_handle h, nv_state s, const unsigned char *const *data, const size_t *lengths,
                             nv_image *dst, void *stream);
  nv_status (*DecodeBatchedEx)(nv_handle h, nv_state s, const unsigned char *const *data, const size_t *lengths,
                               nv_image *dst, nv_params *params, void *stream);
  /* optional (NULL where the library lacks them) */
  nv_status (*DecodeBatchedPreAllocate)(nv_handle h, nv_state s, int batch_size, int width, int height,
                                        int chroma_subsampling, int format);
  nv_status (*DecodeParamsSetScaleFactor)(nv_params p, int scale_factor);
} nv_api;

/* The entry points by name, in nv_api's order. */
static const char *const symbols[] = {
    "nvjpegCreateExV2",         "nvjpegDestroy",
    "nvjpegJpegStateCreate",    "nvjpegJpegStateDestroy",
    "nvjpegJpegStreamCreate",   "nvjpegJpegStreamDestroy",
    "nvjpegJpegStreamParseHeader", "nvjpegJpegStreamGetJpegEncoding",
    "nvjpegJpegStreamGetComponentsNum", "nvjpegJpegStreamGetChromaSubsampling",
    "nvjpegDecodeParamsCreate", "nvjpegDecodeParamsDestroy",
    "nvjpegDecodeParamsSetOutputFormat", "nvjpegDecodeParamsSetROI",
    "nvjpegDecodeBatchedSupportedEx", "nvjpegDecodeBatchedInitialize",
    "nvjpegDecodeBatched",      "nvjpegDecodeBatchedEx",
    "nvjpegDecodeBatchedPreAllocate", "nvjpegDecodeParamsSetScaleFactor",
};
#define NUM_REQUIRED 18 /* the symbols before these are required */

/* A microbatch's decoder state and what its batched call passes. */
typedef struct slot {
  nv_state state;
  nv_params *params; /* per image (hardware: its ROI and scale) */
  int num_params;
  const unsigned char **data;
  size_t *lengths;
  nv_image *dst;
  int cap;
  int preallocated;
} slot;

struct ff__nvjpeg {
  void *lib;
  nv_api api;
  nv_dev_allocator dev;
  nv_pinned_allocator pinned;
  nv_handle handle;
  pthread_mutex_t parse_mu; /* the support check, called from the workers */
  nv_stream parse; /* the support check's parsed stream */
  nv_params check; /* the support check's parameters (RGBI, the region and scale asked about) */
  slot *slots;
  int num_slots;
  int hardware;
};

static const char *status_name(nv_status s) {
  static const char *const names[] = {"SUCCESS", "NOT_INITIALIZED", "INVALID_PARAMETER", "BAD_JPEG",
                                      "JPEG_NOT_SUPPORTED", "ALLOCATOR_FAILURE", "EXECUTION_FAILED",
                                      "ARCH_MISMATCH", "INTERNAL_ERROR", "IMPLEMENTATION_NOT_SUPPORTED",
                                      "INCOMPLETE_BITSTREAM"};
  return s >= 0 && s <= NV_INCOMPLETE_BITSTREAM ? names[s] : "unknown status";
}

/* nvJPEG's status as ours, with a message naming the call. */
static ff_status fail(ff__error *err, const char *call, nv_status s) {
  ff_status st = s == NV_BAD_JPEG || s == NV_INCOMPLETE_BITSTREAM ? FF_EDATA
                 : s == NV_ALLOCATOR_FAILURE                      ? FF_EBUDGET
                                                                  : FF_EDEVICE;
  return ff__error_set(err, st, "nvjpeg: %s: NVJPEG_STATUS_%s", call, status_name(s));
}

/* dlopen of the first library that opens; the reasons of all that did not. */
static void *load(char *why, size_t cap) {
  const char *env = getenv("FF_NVJPEG_LIBRARY");
  const char *names[] = {"libnvjpeg.so.13", "libnvjpeg.so.12", "libnvjpeg.so"};
  size_t n = env && *env ? 1 : 3, used = 0;
  why[0] = 0;
  for (size_t i = 0; i < n; i++) {
    const char *name = env && *env ? env : names[i];
    void *lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (lib) return lib;
    const char *e = dlerror();
    used += (size_t)snprintf(why + used, used < cap ? cap - used : 0, "%s%s", used ? "; " : "",
                             e ? e : name);
    if (used >= cap) break;
  }
  return NULL;
}

/* Slot k, made at its first use: its state, arrays for count images and
 * their parameters. */
static ff_status slot_for(ff__nvjpeg *n, int k, int count, slot **out, ff__error *err) {
  if (k < 0) return ff__error_set(err, FF_EINVAL, "nvjpeg: slot %d", k);
  if (k >= n->num_slots) {
    slot *s = realloc(n->slots, (size_t)(k + 1) * sizeof *s);
    if (!s) return ff__error_set(err, FF_ENOMEM, "nvjpeg: out of memory");
    memset(s + n->num_slots, 0, (size_t)(k + 1 - n->num_slots) * sizeof *s);
    n->slots = s, n->num_slots = k + 1;
  }
  slot *s = &n->slots[k];
  nv_status ns;
  if (!s->state && (ns = n->api.JpegStateCreate(n->handle, &s->state)) != NV_SUCCESS)
    return fail(err, "nvjpegJpegStateCreate", ns);
  if (count > s->cap) {
    int cap = count > 2 * s->cap ? count : 2 * s->cap;
    const unsigned char **data = realloc(s->data, (size_t)cap * sizeof *data);
    if (data) s->data = data;
    size_t *lengths = realloc(s->lengths, (size_t)cap * sizeof *lengths);
    if (lengths) s->lengths = lengths;
    nv_image *dst = realloc(s->dst, (size_t)cap * sizeof *dst);
    if (dst) s->dst = dst;
    nv_params *params = realloc(s->params, (size_t)cap * sizeof *params);
    if (params) s->params = params;
    if (!data || !lengths || !dst || !params) return ff__error_set(err, FF_ENOMEM, "nvjpeg: out of memory");
    s->cap = cap;
  }
  for (; s->num_params < count; s->num_params++) {
    ns = n->api.DecodeParamsCreate(n->handle, &s->params[s->num_params]);
    if (ns == NV_SUCCESS) ns = n->api.DecodeParamsSetOutputFormat(s->params[s->num_params], NV_OUTPUT_RGBI);
    if (ns != NV_SUCCESS) return fail(err, "nvjpegDecodeParamsCreate", ns);
  }
  *out = s;
  return FF_OK;
}

static void slot_free(ff__nvjpeg *n, slot *s) {
  for (int i = 0; i < s->num_params; i++) n->api.DecodeParamsDestroy(s->params[i]);
  if (s->state) n->api.JpegStateDestroy(s->state);
  free(s->params), free(s->data), free(s->lengths), free(s->dst);
}

ff_status ff__nvjpeg_open(const ff__nvjpeg_alloc *alloc, ff__nvjpeg **out, ff__error *err) {
  char why[1024];
  void *lib = load(why, sizeof why);
  if (!lib) return ff__error_set(err, FF_EDEVICE, "nvjpeg not available: %s", why);
  ff__nvjpeg *n = calloc(1, sizeof *n);
  if (!n) {
    dlclose(lib);
    return ff__error_set(err, FF_ENOMEM, "nvjpeg: out of memory");
  }
  n->lib = lib;
  pthread_mutex_init(&n->parse_mu, NULL);
  _Static_assert(sizeof n->api == sizeof symbols / sizeof *symbols * sizeof(void (*)(void)), "one symbol a slot");
  for (size_t i = 0; i < sizeof symbols / sizeof *symbols; i++) {
    void *sym = dlsym(lib, symbols[i]); /* POSIX: a function's address fits a void * */
    memcpy((char *)&n->api + i * sizeof(void (*)(void)), &sym, sizeof sym);
    if (!sym && i < NUM_REQUIRED) {
      ff__error_set(err, FF_EDEVICE, "nvjpeg not available: the library has no %s (nvJPEG 12 or later needed)",
                    symbols[i]);
      ff__nvjpeg_close(n);
      return FF_EDEVICE;
    }
  }
  n->dev = (nv_dev_allocator){alloc->dev_malloc, alloc->dev_free, alloc->ctx};
  n->pinned = (nv_pinned_allocator){alloc->pinned_malloc, alloc->pinned_free, alloc->ctx};
  /* the JPEG engines where the GPU has them, else the GPU hybrid backend
   * (FF_NVJPEG_BACKEND=hardware|hybrid forces one, for measurements) */
  const char *want = getenv("FF_NVJPEG_BACKEND");
  int hybrid_only = want && !strcmp(want, "hybrid"), hardware_only = want && !strcmp(want, "hardware");
  nv_status s = hybrid_only ? NV_ARCH_MISMATCH
                            : n->api.CreateExV2(NV_BACKEND_HARDWARE, &n->dev, &n->pinned, 0, &n->handle);
  n->hardware = s == NV_SUCCESS;
  if (s != NV_SUCCESS && !hardware_only)
    s = n->api.CreateExV2(NV_BACKEND_GPU_HYBRID, &n->dev, &n->pinned, 0, &n->handle);
  const char *call = "nvjpegCreateExV2";
  if (s == NV_SUCCESS) s = n->api.JpegStreamCreate(n->handle, &n->parse), call = "nvjpegJpegStreamCreate";
  if (s == NV_SUCCESS) s = n->api.DecodeParamsCreate(n->handle, &n->check), call = "nvjpegDecodeParamsCreate";
  if (s == NV_SUCCESS) s = n->api.DecodeParamsSetOutputFormat(n->check, NV_OUTPUT_RGBI);
  if (s != NV_SUCCESS) {
    ff_status st = fail(err, call, s);
    ff__nvjpeg_close(n);
    return st == FF_EDATA ? FF_EDEVICE : st;
  }
  *out = n;
  return FF_OK;
}

void ff__nvjpeg_close(ff__nvjpeg *n) {
  if (!n) return;
  for (int i = 0; i < n->num_slots; i++) slot_free(n, &n->slots[i]);
  if (n->check) n->api.DecodeParamsDestroy(n->check);
  if (n->parse) n->api.JpegStreamDestroy(n->parse);
  if (n->handle) n->api.Destroy(n->handle);
  dlclose(n->lib);
  pthread_mutex_destroy(&n->parse_mu);
  free(n->slots);
  free(n);
}

const char *ff__nvjpeg_backend(const ff__nvjpeg *n) { return n->hardware ? "nvjpeg-hardware" : "nvjpeg-hybrid"; }

int ff__nvjpeg_decodes_region(const ff__nvjpeg *n) { return n->hardware; }

int ff__nvjpeg_scales(const ff__nvjpeg *n) { return n->hardware && n->api.DecodeParamsSetScaleFactor; }

int ff__nvjpeg_min_batch(const ff__nvjpeg *n) { return n->hardware ? 1 : 51; }

/* im's region and reduction on params p (hardware; the whole image
 * otherwise). */
static nv_status set_region(ff__nvjpeg *n, nv_params p, const ff__nvjpeg_image *im) {
  if (!n->hardware) return NV_SUCCESS;
  int whole = !im->width;
  nv_status s = n->api.DecodeParamsSetROI(p, whole ? 0 : im->x, whole ? 0 : im->y, whole ? -1 : im->width,
                                          whole ? -1 : im->height);
  if (s == NV_SUCCESS && n->api.DecodeParamsSetScaleFactor)
    s = n->api.DecodeParamsSetScaleFactor(p, im->scale_shift); /* nvjpegScaleFactor_t: NONE, 1/2, 1/4, 1/8 */
  return s;
}

static int check_stream(ff__nvjpeg *n, const ff__nvjpeg_image *im, const char **why);

int ff__nvjpeg_takes(ff__nvjpeg *n, const ff__nvjpeg_image *im, const char **why) {
  pthread_mutex_lock(&n->parse_mu); /* workers ask at once; the parse stream is one */
  int takes = check_stream(n, im, why);
  pthread_mutex_unlock(&n->parse_mu);
  return takes;
}

static int check_stream(ff__nvjpeg *n, const ff__nvjpeg_image *im, const char **why) {
  unsigned comps = 0;
  int encoding = 0, css = NV_CSS_UNKNOWN, unsupported = 1;
  if (n->api.JpegStreamParseHeader(n->handle, im->data, im->size_bytes, n->parse) != NV_SUCCESS)
    return *why = "not a JPEG nvjpeg can parse", 0;
  if (n->api.JpegStreamGetComponentsNum(n->parse, &comps) != NV_SUCCESS || comps == 4)
    return *why = "CMYK/YCCK (nvjpeg's conversion is not Adobe's)", 0;
  if (n->api.JpegStreamGetJpegEncoding(n->parse, &encoding) == NV_SUCCESS && encoding == NV_ENCODING_PROGRESSIVE &&
      n->hardware)
    return *why = "progressive (the hardware decoder takes baseline only)", 0;
  if (n->api.JpegStreamGetChromaSubsampling(n->parse, &css) != NV_SUCCESS || css == NV_CSS_UNKNOWN)
    return *why = "unusual chroma subsampling", 0;
  if (!n->hardware) return 1; /* the support call is the hardware backend's */
  if (set_region(n, n->check, im) != NV_SUCCESS ||
      n->api.DecodeBatchedSupportedEx(n->handle, n->parse, n->check, &unsupported) != NV_SUCCESS || unsupported)
    return *why = "not supported by the decoder for this region (nvjpegDecodeBatchedSupportedEx)", 0;
  return 1;
}

/* A hardware state's buffers, once, sized for this batch (a hint nvJPEG
 * grows past when it must; 4:4:4 so that any subsampling reuses them). */
static void preallocate(ff__nvjpeg *n, slot *s, const ff__nvjpeg_image *images, int count) {
  if (s->preallocated || !n->hardware || !n->api.DecodeBatchedPreAllocate) return;
  int w = 1, h = 1;
  for (int i = 0; i < count; i++) {
    if (images[i].image_width > w) w = images[i].image_width;
    if (images[i].image_height > h) h = images[i].image_height;
  }
  s->preallocated = n->api.DecodeBatchedPreAllocate(n->handle, s->state, count, w, h, NV_CSS_444, NV_OUTPUT_RGBI) ==
                    NV_SUCCESS;
}

ff_status ff__nvjpeg_decode(ff__nvjpeg *n, int k, const ff__nvjpeg_image *images, int count, void *stream,
                            ff__error *err) {
  if (count <= 0) return FF_OK;
  slot *s = NULL;
  ff_status st = slot_for(n, k, count, &s, err);
  if (st) return st;
  for (int i = 0; i < count; i++) {
    const ff__nvjpeg_image *im = &images[i];
    s->data[i] = im->data, s->lengths[i] = im->size_bytes;
    memset(&s->dst[i], 0, sizeof s->dst[i]);
    s->dst[i].channel[0] = im->d_dst, s->dst[i].pitch[0] = im->pitch_bytes;
    nv_status ns = set_region(n, s->params[i], im);
    if (ns != NV_SUCCESS) return fail(err, "nvjpegDecodeParamsSetROI", ns);
  }
  preallocate(n, s, images, count);
  nv_status ns = n->api.DecodeBatchedInitialize(n->handle, s->state, count, 1, NV_OUTPUT_RGBI);
  if (ns != NV_SUCCESS) return fail(err, "nvjpegDecodeBatchedInitialize", ns);
  if (n->hardware)
    ns = n->api.DecodeBatchedEx(n->handle, s->state, s->data, s->lengths, s->dst, s->params, stream);
  else
    ns = n->api.DecodeBatched(n->handle, s->state, s->data, s->lengths, s->dst, stream);
  return ns == NV_SUCCESS ? FF_OK : fail(err, n->hardware ? "nvjpegDecodeBatchedEx" : "nvjpegDecodeBatched", ns);
}
