/* device.c — the device object around an opened backend and the calls
 * every backend shares: the budgeted pool wired to the backend's raw
 * memory, and thin checked wrappers over its streams, copies, events and
 * launches. Names are resolved to backends in exec/backends.c, which hands
 * the opened backend to ff__device_wrap; this file knows no backend.
 *
 * The pool's limit is min(user limit, free memory at open - headroom), the
 * headroom defaulting to the backend's (CUDA keeps max(1 GiB, 10%) free for
 * the trainer). Every backend call is bracketed by the backend's enter and
 * leave, so the device is current only for the call and the calling
 * thread's own current device and stream capture mode are left exactly as
 * they were: the trainer's thread keeps its GPU, the feeder thread its.
 * The decoder is the backend's own (emu), or on a backend with native
 * streams (cuda) nvJPEG, loaded at open with allocators that draw on the
 * pool (exec/nvjpeg.h); when it does not load, the reason is kept and the
 * device has no decoder. */
#include "exec/device.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/device_impl.h"
#include "exec/nvjpeg.h"

/* A block the caller's allocator gets back once `after` has completed. */
typedef struct retired {
  void *ptr;
  size_t size_bytes;
  ff__devent *after;
} retired;

struct ff__device {
  ff__device_opened o;
  ff__pool pool;
  pthread_mutex_t retire_mu; /* guards the blocks retired to the caller's allocator */
  retired *retired;
  size_t num_retired, cap_retired;
  ff__nvjpeg *nvjpeg;     /* cuda: the decoder, when libnvjpeg loads */
  char nvjpeg_why[FF__ERRMSG_MAX];  /* why it did not */
  int (*alloc_hook)(void *ctx, size_t size_bytes, void *stream, void **out);
  void (*free_hook)(void *ctx, void *ptr, size_t size_bytes, void *stream);
  void *hook_ctx;
  int refs;               /* handles: ff__device_retain adds one, ff__device_close drops one */
};

void ff__device_options_init(ff__device_options *opt) {
  *opt = (ff__device_options){.headroom_bytes = -1, .refresh_every = 64};
}

static void open_nvjpeg(ff__device *d);

/* The bracket around a backend call: `GUARDED(d, err, expr)` returns expr's
 * status, or enter's. */
#define GUARDED(d, err, expr)                                                                                \
  do {                                                                                                       \
    ff__dguard g_;                                                                                           \
    ff_status st_ = (d)->o.be->enter((d)->o.impl, &g_, (err));                                               \
    if (!st_) {                                                                                              \
      st_ = (expr);                                                                                          \
      (d)->o.be->leave((d)->o.impl, &g_);                                                                    \
    }                                                                                                        \
    return st_;                                                                                              \
  } while (0)

#define GUARDED_VOID(d, stmt)                                                                                \
  do {                                                                                                       \
    ff__dguard g_;                                                                                           \
    if ((d)->o.be->enter((d)->o.impl, &g_, NULL)) return;                                                    \
    stmt;                                                                                                    \
    (d)->o.be->leave((d)->o.impl, &g_);                                                                      \
  } while (0)

/* The pool calls these from inside a bracketed ff__device_* call. */
/* With the caller's allocator, a refusal is a budget refusal (the work goes
 * to the CPU); its memory must be usable on any stream when it returns (the
 * stream argument is NULL), and goes back once none of our work uses it. */
/* Hands the caller's allocator the retired blocks whose work has
 * completed (all of them with wait: close). Inside a bracket. */
static void free_retired(ff__device *d, int wait) {
  if (!d->alloc_hook) return;
  pthread_mutex_lock(&d->retire_mu);
  size_t kept = 0;
  for (size_t i = 0; i < d->num_retired; i++) {
    retired r = d->retired[i];
    int done = 1;
    if (wait)
      d->o.be->event_wait(d->o.impl, r.after, NULL);
    else if (d->o.be->event_query(d->o.impl, r.after, &done, NULL) == FF_OK && !done) {
      d->retired[kept++] = r;
      continue;
    }
    d->free_hook(d->hook_ctx, r.ptr, r.size_bytes, NULL);
    d->o.be->event_destroy(d->o.impl, r.after);
  }
  d->num_retired = kept;
  pthread_mutex_unlock(&d->retire_mu);
}

/* Keeps ptr for the caller's allocator until the work queued on our streams
 * so far is done (a retire event). 0 when there is no event for it. */
static int retire(ff__device *d, void *ptr, size_t size_bytes) {
  pthread_mutex_lock(&d->retire_mu);
  if (d->num_retired == d->cap_retired) {
    size_t cap = d->cap_retired ? 2 * d->cap_retired : 16;
    retired *r = realloc(d->retired, cap * sizeof *r);
    if (r) d->retired = r, d->cap_retired = cap;
  }
  ff__devent *after = NULL;
  int ok = d->num_retired < d->cap_retired && !d->o.be->event_create(d->o.impl, (void **)&after, NULL);
  if (ok && !(ok = !d->o.be->retire_record(d->o.impl, after, NULL))) d->o.be->event_destroy(d->o.impl, after);
  if (ok) d->retired[d->num_retired++] = (retired){ptr, size_bytes, after};
  pthread_mutex_unlock(&d->retire_mu);
  return ok;
}

static ff_status pool_alloc(void *ctx, size_t size_bytes, void **out, ff__error *err) {
  ff__device *d = ctx;
  if (!d->alloc_hook) return d->o.be->mem_alloc(d->o.impl, size_bytes, out, err);
  free_retired(d, 0);
  void *p = NULL;
  if (d->alloc_hook(d->hook_ctx, size_bytes, NULL, &p) || !p)
    return ff__error_set(err, FF__EBUDGET, "%s: the caller's allocator refused %zu bytes", d->o.name,
                         size_bytes);
  *out = p;
  return FF_OK;
}

/* To the caller's allocator once the work queued on our streams so far is
 * done (a retire event), never waiting for it here: our streams may wait
 * for the trainer's stream (a released output batch), and this runs on
 * whatever thread shrinks the budget — the trainer's own in next(). */
static void pool_free(void *ctx, void *ptr, size_t size_bytes) {
  ff__device *d = ctx;
  if (!d->alloc_hook) {
    d->o.be->mem_free(d->o.impl, ptr);
    return;
  }
  free_retired(d, 0);
  if (retire(d, ptr, size_bytes)) return;
  d->o.be->synchronize(d->o.impl); /* no event for it: wait for our streams, as a last resort */
  d->free_hook(d->hook_ctx, ptr, size_bytes, NULL);
}

static ff_status pool_mem_info(void *ctx, size_t *free_bytes, size_t *total_bytes) {
  ff__device *d = ctx;
  return d->o.be->mem_info(d->o.impl, free_bytes, total_bytes);
}

static void pool_trim(void *ctx) {
  ff__device *d = ctx;
  free_retired(d, 0);
  if (d->o.be->mem_trim && !d->alloc_hook) d->o.be->mem_trim(d->o.impl);
}

int ff__device_parse_name(const char *name, size_t *kind_len, int *ordinal, const char **query) {
  const char *colon = strchr(name, ':'), *q = strchr(name, '?');
  *query = q ? q + 1 : "";
  size_t end = q ? (size_t)(q - name) : strlen(name);
  if (!colon || colon > name + end) {
    *kind_len = end, *ordinal = 0;
    return 1;
  }
  *kind_len = (size_t)(colon - name);
  char *stop;
  long n = strtol(colon + 1, &stop, 10);
  if (stop == colon + 1 || stop != name + end || n < 0 || n > 1024) return 0;
  *ordinal = (int)n;
  return 1;
}

void *ff__device_impl(ff__device *d, const ff__device_backend *be) {
  return d && d->o.be == be ? d->o.impl : NULL;
}

ff_status ff__device_wrap(const ff__device_opened *opened, const ff__device_options *opt, ff__device **out,
                          ff__error *err) {
  ff__device_opened o = *opened;
  ff_status st;
  ff__device *d = calloc(1, sizeof *d);
  if (!d) {
    o.be->close(o.impl);
    return ff__error_set(err, FF_ENOMEM, "%s: out of memory", o.name);
  }
  d->o = o;
  d->refs = 1;
  pthread_mutex_init(&d->retire_mu, NULL);
  if (opt->alloc_hook && opt->free_hook)
    d->alloc_hook = opt->alloc_hook, d->free_hook = opt->free_hook, d->hook_ctx = opt->hook_ctx;
  ff__pool_backend pb = {d, pool_alloc, pool_free, pool_mem_info, pool_trim};
  ff__pool_config pc = {opt->limit_bytes,
                        opt->headroom_bytes >= 0 ? (size_t)opt->headroom_bytes : o.default_headroom_bytes,
                        opt->refresh_every};
  ff__dguard g;
  st = o.be->enter(o.impl, &g, err);
  if (!st) {
    st = ff__pool_init(&d->pool, &pb, &pc, err);
    o.be->leave(o.impl, &g);
  }
  if (st) {
    o.be->close(o.impl);
    pthread_mutex_destroy(&d->retire_mu);
    free(d);
    return st;
  }
  if (opt->decoder && !o.be->enter(o.impl, &g, NULL)) { /* nvJPEG's handle is made on the device's context */
    open_nvjpeg(d);
    o.be->leave(o.impl, &g);
  }
  *out = d;
  return FF_OK;
}

ff__device *ff__device_retain(ff__device *d) {
  if (d) __atomic_add_fetch(&d->refs, 1, __ATOMIC_RELAXED);
  return d;
}

int ff__device_is(const ff__device *d, const char *name) {
  size_t kind_len, own_len;
  int ordinal, own;
  const char *query, *own_query;
  if (!d || !name || !strcmp(name, "auto") || !ff__device_parse_name(name, &kind_len, &ordinal, &query)) return 0;
  if (!ff__device_parse_name(d->o.name, &own_len, &own, &own_query)) { /* "cuda:0 (NVIDIA H200)": up to the space */
    char head[32];
    snprintf(head, sizeof head, "%.*s", (int)strcspn(d->o.name, " "), d->o.name);
    if (!ff__device_parse_name(head, &own_len, &own, &own_query)) return 0;
  }
  return kind_len == own_len && !strncmp(name, d->o.name, kind_len) && ordinal == own;
}

void ff__device_close(ff__device *d) {
  if (!d || __atomic_sub_fetch(&d->refs, 1, __ATOMIC_ACQ_REL)) return;
  ff__dguard g;
  if (!d->o.be->enter(d->o.impl, &g, NULL)) {
    d->o.be->synchronize(d->o.impl); /* no queued work may still use pool memory */
    ff__nvjpeg_close(d->nvjpeg);    /* its scratch goes back to the pool */
    ff__pool_destroy(&d->pool);
    free_retired(d, 1);
    free(d->retired);
    d->o.be->leave(d->o.impl, &g);
  }
  d->o.be->close(d->o.impl);
  pthread_mutex_destroy(&d->retire_mu);
  free(d);
}

ff_status ff__device_query(ff__device *d, ff__device_info *out, ff__error *err) {
  ff__device_info info = {0};
  memcpy(info.name, d->o.name, sizeof info.name);
  ff__dguard g;
  ff_status st = d->o.be->enter(d->o.impl, &g, err);
  if (st) return st;
  st = d->o.be->mem_info(d->o.impl, &info.free_bytes, &info.total_bytes);
  d->o.be->leave(d->o.impl, &g);
  if (st) return ff__error_set(err, FF_EDEVICE, "%s: memory query failed", d->o.name);
  ff__pool_stats_get(&d->pool, &info.pool);
  *out = info;
  return FF_OK;
}

ff_status ff__device_refresh(ff__device *d, ff__pool_stats *pool_out, ff__error *err) {
  ff__dguard g;
  ff_status st = d->o.be->enter(d->o.impl, &g, err);
  if (st) return st;
  st = ff__pool_refresh(&d->pool, err);
  free_retired(d, 0); /* the caller's allocator gets back what our work is done with */
  d->o.be->leave(d->o.impl, &g);
  if (!st && pool_out) ff__pool_stats_get(&d->pool, pool_out);
  return st;
}

ff_status ff__device_set_free(ff__device *d, int64_t free_bytes, ff__error *err) {
  GUARDED(d, err, ff__pool_set_free(&d->pool, free_bytes, err));
}

ff_status ff__device_alloc(ff__device *d, size_t size_bytes, void **d_out, ff__error *err) {
  GUARDED(d, err, ff__pool_alloc(&d->pool, size_bytes, d_out, err));
}

void ff__device_free(ff__device *d, void *d_ptr) {
  if (d_ptr) GUARDED_VOID(d, ff__pool_free(&d->pool, d_ptr));
}

ff_status ff__device_host_alloc(ff__device *d, size_t size_bytes, void **out, ff__error *err) {
  GUARDED(d, err, d->o.be->host_alloc(d->o.impl, size_bytes ? size_bytes : 1, out, err));
}

void ff__device_host_free(ff__device *d, void *ptr) {
  if (ptr) GUARDED_VOID(d, d->o.be->host_free(d->o.impl, ptr));
}

ff_status ff__device_stream_create(ff__device *d, ff__dstream **out, ff__error *err) {
  GUARDED(d, err, d->o.be->stream_create(d->o.impl, (void **)out, err));
}

void ff__device_stream_destroy(ff__device *d, ff__dstream *s) {
  if (s) GUARDED_VOID(d, d->o.be->stream_destroy(d->o.impl, s));
}

ff_status ff__device_stream_wait(ff__device *d, ff__dstream *s, ff__devent *e, ff__error *err) {
  GUARDED(d, err, d->o.be->stream_wait(d->o.impl, s, e, err));
}

ff_status ff__device_upload(ff__device *d, ff__dstream *s, void *d_dst, const void *src, size_t size_bytes,
                            ff__error *err) {
  if (!size_bytes) return FF_OK;
  GUARDED(d, err, d->o.be->copy(d->o.impl, s, d_dst, src, size_bytes, FF__COPY_H2D, err));
}

ff_status ff__device_download(ff__device *d, ff__dstream *s, void *dst, const void *d_src, size_t size_bytes,
                              ff__error *err) {
  if (!size_bytes) return FF_OK;
  GUARDED(d, err, d->o.be->copy(d->o.impl, s, dst, d_src, size_bytes, FF__COPY_D2H, err));
}

ff_status ff__device_copy(ff__device *d, ff__dstream *s, void *d_dst, const void *d_src, size_t size_bytes,
                          ff__error *err) {
  if (!size_bytes) return FF_OK;
  GUARDED(d, err, d->o.be->copy(d->o.impl, s, d_dst, d_src, size_bytes, FF__COPY_D2D, err));
}

ff_status ff__device_download_batch(ff__device *d, ff__dstream *s, int n, void *const *dsts,
                                    const void *const *d_srcs, const size_t *sizes, ff__error *err) {
  if (n <= 0) return FF_OK;
  if (n == 1) return ff__device_download(d, s, dsts[0], d_srcs[0], sizes[0], err);
  GUARDED(d, err, d->o.be->download_batch(d->o.impl, s, n, dsts, d_srcs, sizes, err));
}

void *ff__device_stream_handle(ff__device *d, ff__dstream *s) { return d->o.be->stream_handle(d->o.impl, s); }

ff_status ff__device_foreign_wait(ff__device *d, void *handle, ff__devent *e, ff__error *err) {
  GUARDED(d, err, d->o.be->foreign_wait(d->o.impl, handle, e, err));
}

ff_status ff__device_foreign_record(ff__device *d, ff__devent *e, void *handle, ff__error *err) {
  GUARDED(d, err, d->o.be->foreign_record(d->o.impl, e, handle, err));
}

ff_status ff__device_event_create(ff__device *d, ff__devent **out, ff__error *err) {
  GUARDED(d, err, d->o.be->event_create(d->o.impl, (void **)out, err));
}

void ff__device_event_destroy(ff__device *d, ff__devent *e) {
  if (e) GUARDED_VOID(d, d->o.be->event_destroy(d->o.impl, e));
}

ff_status ff__device_event_record(ff__device *d, ff__devent *e, ff__dstream *s, ff__error *err) {
  GUARDED(d, err, d->o.be->event_record(d->o.impl, e, s, err));
}

ff_status ff__device_event_query(ff__device *d, ff__devent *e, int *done, ff__error *err) {
  GUARDED(d, err, d->o.be->event_query(d->o.impl, e, done, err));
}

ff_status ff__device_event_wait(ff__device *d, ff__devent *e, ff__error *err) {
  GUARDED(d, err, d->o.be->event_wait(d->o.impl, e, err));
}

ff_status ff__device_event_elapsed_ms(ff__device *d, ff__devent *start, ff__devent *end, float *ms,
                                      ff__error *err) {
  GUARDED(d, err, d->o.be->event_elapsed_ms(d->o.impl, start, end, ms, err));
}

void ff__device_synchronize(ff__device *d) { GUARDED_VOID(d, d->o.be->synchronize(d->o.impl)); }

/* ---- the decoder: nvJPEG on cuda, the backend's own on emu ---- */

/* nvJPEG's allocators: device memory from the pool (so its scratch counts
 * against the budget), pinned host memory from the backend. 0: success. */
static int nv_dev_malloc(void *ctx, void **ptr, size_t size, void *stream) {
  (void)stream;
  ff__device *d = ctx;
  return ff__pool_alloc(&d->pool, size ? size : 1, ptr, NULL) != FF_OK;
}

static int nv_dev_free(void *ctx, void *ptr, size_t size, void *stream) {
  (void)size, (void)stream;
  ff__pool_free(&((ff__device *)ctx)->pool, ptr);
  return 0;
}

static int nv_pinned_malloc(void *ctx, void **ptr, size_t size, void *stream) {
  (void)stream;
  ff__device *d = ctx;
  return d->o.be->host_alloc(d->o.impl, size ? size : 1, ptr, NULL) != FF_OK;
}

static int nv_pinned_free(void *ctx, void *ptr, size_t size, void *stream) {
  (void)size, (void)stream;
  ff__device *d = ctx;
  d->o.be->host_free(d->o.impl, ptr);
  return 0;
}

/* A backend with native streams (cuda) decodes with nvJPEG where it loads
 * (emu when asked, with the tests' stub); where not, d->nvjpeg_why says why. */
static void open_nvjpeg(ff__device *d) {
  const ff__device_backend *be = d->o.be;
  if (be->loads_nvjpeg ? !be->loads_nvjpeg(d->o.impl) : !be->native_stream) return;
  ff__nvjpeg_alloc a = {d, nv_dev_malloc, nv_dev_free, nv_pinned_malloc, nv_pinned_free};
  ff__error err;
  if (ff__nvjpeg_open(&a, &d->nvjpeg, &err)) snprintf(d->nvjpeg_why, sizeof d->nvjpeg_why, "%s", err.msg);
}

const char *ff__device_decoder(ff__device *d, const char **why) {
  if (d->nvjpeg) return ff__nvjpeg_backend(d->nvjpeg);
  const char *none = d->nvjpeg_why[0] ? d->nvjpeg_why : "the device has no decoder";
  const char *name = d->o.be->decoder ? d->o.be->decoder(d->o.impl, &none) : NULL;
  if (!name && why) *why = none;
  return name;
}

int ff__device_decoder_beside_kernels(ff__device *d) { return d->nvjpeg && ff__nvjpeg_decodes_region(d->nvjpeg); }

int ff__device_decode_min_batch(ff__device *d) { return d->nvjpeg ? ff__nvjpeg_min_batch(d->nvjpeg) : 1; }

/* What the decoder decodes of req's region of an image with header info,
 * as nvJPEG is asked for it (the bytes and destination left to the
 * caller), and the decoded image's place in the destination: the region
 * alone (hardware; reduced by the scale factor only when the plan chose a
 * DCT scale, since the reduction changes the pixels), or the whole image
 * with the region as a view (hybrid). */
static void nvjpeg_geometry(const ff__device *d, const ff__image_info *info, const ff__decode_req *req,
                            ff__nvjpeg_image *im, ff__device_decode_job *geo) {
  int cw = req->crop_width, x = cw ? req->crop_x : 0, y = cw ? req->crop_y : 0;
  int w = cw ? cw : info->width, h = cw ? req->crop_height : info->height;
  *im = (ff__nvjpeg_image){.image_width = info->width, .image_height = info->height};
  if (!ff__nvjpeg_decodes_region(d->nvjpeg)) { /* the whole image; the region is a view */
    geo->width = w, geo->height = h, geo->pitch_bytes = (size_t)info->width * 3;
    geo->offset_bytes = ((size_t)y * (size_t)info->width + (size_t)x) * 3;
    return;
  }
  int r[4], n = ff__jpeg_dct_scale(req, info->width, info->height, r), shift = 0;
  if (n < 8 && ff__nvjpeg_scales(d->nvjpeg)) { /* the plan's DCT scale: its grid's region at full scale */
    shift = n == 4 ? 1 : n == 2 ? 2 : 3;
    int f = 1 << shift;
    x = r[0] * f, y = r[1] * f, w = r[2] * f, h = r[3] * f;
    if (x + w > info->width) w = info->width - x;
    if (y + h > info->height) h = info->height - y;
    geo->width = r[2], geo->height = r[3];
  } else {
    geo->width = w, geo->height = h;
  }
  int whole = x == 0 && y == 0 && w == info->width && h == info->height;
  im->x = whole ? 0 : x, im->y = whole ? 0 : y, im->width = whole ? 0 : w, im->height = whole ? 0 : h;
  im->scale_shift = shift;
  geo->pitch_bytes = (size_t)geo->width * 3, geo->offset_bytes = 0;
}

int ff__device_decode_takes(ff__device *d, const ff__image_info *info, const uint8_t *data, size_t size_bytes,
                            const ff__decode_req *req, const char **why) {
  if (!ff__device_decoder(d, why)) return 0;
  if (!d->nvjpeg) return d->o.be->decode_takes(d->o.impl, info, why);
  if (info->format != FF__FORMAT_JPEG) return *why = "not a JPEG", 0;
  /* nvJPEG has no scan limit (max_jpeg_scans): progressive files go to the CPU decoder */
  if (info->progressive) return *why = "progressive (the scan limit is the CPU decoder's)", 0;
  if (!data) return 1;
  ff__nvjpeg_image im;
  ff__device_decode_job geo;
  nvjpeg_geometry(d, info, req, &im, &geo);
  im.data = data, im.size_bytes = size_bytes;
  ff__dguard g; /* nvJPEG calls run on the device's context */
  if (d->o.be->enter(d->o.impl, &g, NULL)) return *why = "the device's context cannot be made current", 0;
  int takes = ff__nvjpeg_takes(d->nvjpeg, &im, why);
  d->o.be->leave(d->o.impl, &g);
  return takes;
}

size_t ff__device_decode_bytes(ff__device *d, const ff__image_info *info, const ff__decode_req *req) {
  int whole = !req->crop_width || (d->nvjpeg && !ff__nvjpeg_decodes_region(d->nvjpeg));
  size_t w = (size_t)(whole ? info->width : req->crop_width), h = (size_t)(whole ? info->height : req->crop_height);
  return (w + 2) * (h + 2) * 3; /* a scaled region's edges round outward by up to a pixel each */
}

/* Waits for the work queued on s (bracketed): a state is initialised again
 * only when its last batch has completed. */
static ff_status drain(ff__device *d, ff__dstream *s, ff__error *err) {
  void *e;
  ff_status st = d->o.be->event_create(d->o.impl, &e, err);
  if (st) return st;
  st = d->o.be->event_record(d->o.impl, e, s, err);
  if (!st) st = d->o.be->event_wait(d->o.impl, e, err);
  d->o.be->event_destroy(d->o.impl, e);
  return st;
}

/* One batched call over im[0..n); when it fails, its halves apart, until
 * each image that fails is alone — or, on a decoder that takes no batch
 * below min (nvJPEG hybrid), in the smallest batch it takes: the batched
 * call has one status for the batch. An allocator refusal is not bisected
 * (it is the budget, not an image). Sets the jobs' statuses; *calls_failed
 * counts the calls that failed; *queued says work was queued on s before (a
 * state is initialised again only after it has completed). Bracketed. */
static void bisect(ff__device *d, ff__dstream *s, int slot, const ff__nvjpeg_image *im, ff__device_decode_job *jobs,
                   int n, int min, int *calls_failed, int *queued) {
  ff__error e = {0};
  ff_status st = *queued ? drain(d, s, &e) : FF_OK;
  if (!st) st = ff__nvjpeg_decode(d->nvjpeg, slot, im, n, d->o.be->native_stream(d->o.impl, s), &e);
  *queued = 1;
  if (st) ++*calls_failed;
  if (st && st != FF_EBUDGET && n >= 2 * min && n > 1) {
    int half = n / 2;
    bisect(d, s, slot, im, jobs, half, min, calls_failed, queued);
    bisect(d, s, slot, im + half, jobs + half, n - half, min, calls_failed, queued);
    return;
  }
  for (int i = 0; i < n; i++) {
    jobs[i].status = jobs[i].result = st;
    if (st) ff__error_set(&jobs[i].err, st, "%s: %s", jobs[i].name, e.msg);
  }
}

/* The jobs through nvJPEG's batched decode (nvjpeg_geometry), bisected when
 * the batch fails. */
static ff_status decode_nvjpeg(ff__device *d, ff__dstream *s, int slot, ff__device_decode_job *jobs, int n,
                               int *calls_failed, ff__error *err) {
  if (n < ff__nvjpeg_min_batch(d->nvjpeg))
    return ff__error_set(err, FF_EINVAL, "%s: %s takes batches of %d or more, not %d", d->o.name,
                         ff__nvjpeg_backend(d->nvjpeg), ff__nvjpeg_min_batch(d->nvjpeg), n);
  ff__nvjpeg_image *im = calloc((size_t)n, sizeof *im);
  if (!im) return ff__error_set(err, FF_ENOMEM, "%s: out of memory", d->o.name);
  for (int i = 0; i < n; i++) {
    ff__device_decode_job *j = &jobs[i];
    nvjpeg_geometry(d, &j->info, &j->req, &im[i], j);
    im[i].data = j->src, im[i].size_bytes = j->size_bytes, im[i].d_dst = j->d_dst, im[i].pitch_bytes = j->pitch_bytes;
  }
  int queued = 0;
  bisect(d, s, slot, im, jobs, n, ff__nvjpeg_min_batch(d->nvjpeg), calls_failed, &queued);
  free(im);
  return FF_OK;
}

/* The backend's own decoder: the CPU's region and DCT scale (what
 * ff__codec_decode returns), packed at the start of the destination. */
static ff_status decode_own(ff__device *d, ff__dstream *s, ff__device_decode_job *jobs, int n, ff__error *err) {
  for (int i = 0; i < n; i++) {
    ff__device_decode_job *j = &jobs[i];
    int r[4];
    ff__jpeg_dct_scale(&j->req, j->info.width, j->info.height, r);
    j->width = r[2], j->height = r[3], j->offset_bytes = 0, j->pitch_bytes = (size_t)r[2] * 3;
    j->status = j->result = FF_OK; /* the backend sets result when it has decoded it */
  }
  return d->o.be->decode(d->o.impl, s, jobs, n, err);
}

ff_status ff__device_decode(ff__device *d, ff__dstream *s, int slot, ff__device_decode_job *jobs, int n,
                            int *calls_failed, ff__error *err) {
  *calls_failed = 0;
  if (!ff__device_decoder(d, NULL)) return ff__error_set(err, FF_EDEVICE, "%s: no decoder", d->o.name);
  if (n <= 0) return FF_OK;
  if (d->nvjpeg) GUARDED(d, err, decode_nvjpeg(d, s, slot, jobs, n, calls_failed, err));
  GUARDED(d, err, decode_own(d, s, jobs, n, err));
}

void ff__device_range_push(ff__device *d, const char *name) {
  if (d && d->o.be->range_push) d->o.be->range_push(name);
}

void ff__device_range_pop(ff__device *d) {
  if (d && d->o.be->range_pop) d->o.be->range_pop();
}

ff_status ff__device_launch_stages(ff__device *d, ff__dstream *s, const void *d_table, int n, int kind,
                                   uint32_t max_count, ff__error *err) {
  if (n <= 0 || !max_count) return FF_OK;
  GUARDED(d, err, d->o.be->launch(d->o.impl, s, d_table, n, kind, max_count, err));
}
