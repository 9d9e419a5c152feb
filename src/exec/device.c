/* device.c — opening a device by name and the calls every backend shares:
 * the budgeted pool wired to the backend's raw memory, and thin checked
 * wrappers over its streams, copies, events and launches.
 *
 * `cuda:N` goes to exec/cuda.cu when the library was built with CUDA
 * (FF_HAVE_CUDA), `emu:N` to the emulator (exec/emu.c), `auto` to the CUDA
 * device a trainer on this thread would use (ff__device_auto_pick). The
 * pool's limit is min(user limit, free memory at open - headroom), the
 * headroom defaulting to the backend's (CUDA keeps max(1 GiB, 10%) free for
 * the trainer). Every backend call is bracketed by the backend's enter and
 * leave, so the device is current only for the call and the calling
 * thread's own current device and stream capture mode are left exactly as
 * they were: the trainer's thread keeps its GPU, the feeder thread its. */
#include "exec/device.h"

#include <stdlib.h>
#include <string.h>

#include "exec/device_impl.h"

struct ff__device {
  ff__device_opened o;
  ff__pool pool;
  int (*alloc_hook)(void *ctx, size_t size_bytes, void *stream, void **out);
  void (*free_hook)(void *ctx, void *ptr, size_t size_bytes, void *stream);
  void *hook_ctx;
};

void ff__device_options_init(ff__device_options *opt) {
  *opt = (ff__device_options){.headroom_bytes = -1, .refresh_every = 64};
}

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
static ff_status pool_alloc(void *ctx, size_t size_bytes, void **out, ff__error *err) {
  ff__device *d = ctx;
  if (!d->alloc_hook) return d->o.be->mem_alloc(d->o.impl, size_bytes, out, err);
  void *p = NULL;
  if (d->alloc_hook(d->hook_ctx, size_bytes, NULL, &p) || !p)
    return ff__error_set(err, FF__EBUDGET, "%s: the caller's allocator refused %zu bytes", d->o.name,
                         size_bytes);
  *out = p;
  return FF_OK;
}

static void pool_free(void *ctx, void *ptr, size_t size_bytes) {
  ff__device *d = ctx;
  if (!d->alloc_hook) {
    d->o.be->mem_free(d->o.impl, ptr);
    return;
  }
  d->o.be->synchronize(d->o.impl); /* our streams only: raw frees are rare (trim, a shrinking budget) */
  d->free_hook(d->hook_ctx, ptr, size_bytes, NULL);
}

static ff_status pool_mem_info(void *ctx, size_t *free_bytes, size_t *total_bytes) {
  ff__device *d = ctx;
  return d->o.be->mem_info(d->o.impl, free_bytes, total_bytes);
}

/* "kind:N[?query]" → kind length, ordinal, query. */
static int parse_name(const char *name, size_t *kind_len, int *ordinal, const char **query) {
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

int ff__device_auto_pick(int current, const char *local_rank, int count) {
  if (count <= 0) return 0;
  if (current >= 0 && current < count) return current;
  char *stop;
  long rank = local_rank ? strtol(local_rank, &stop, 10) : 0;
  if (!local_rank || stop == local_rank || *stop || rank < 0) rank = 0;
  return (int)(rank % count);
}

void *ff__device_impl(ff__device *d, const ff__device_backend *be) {
  return d && d->o.be == be ? d->o.impl : NULL;
}

static ff_status open_backend(const char *name, const ff__device_options *opt, ff__device_opened *o,
                              ff__error *err) {
  if (!strcmp(name, "auto")) {
#ifdef FF_HAVE_CUDA
    int count = 0, current = -1;
    ff_status st = ff__cuda_probe(&count, &current, err);
    return st ? st : ff__cuda_open(ff__device_auto_pick(current, getenv("LOCAL_RANK"), count), opt, o, err);
#else
    return ff__error_set(err, FF_EDEVICE, "auto: fusionflow was built without CUDA; use emu:0 or cpu");
#endif
  }
  size_t kind_len;
  int ordinal;
  const char *query;
  if (!parse_name(name, &kind_len, &ordinal, &query))
    return ff__error_set(err, FF_EINVAL, "device '%s': expected cuda:N or emu:N", name);
  if (kind_len == 3 && !strncmp(name, "emu", 3)) return ff__emu_open(ordinal, query, opt, o, err);
  if (kind_len == 4 && !strncmp(name, "cuda", 4)) {
#ifdef FF_HAVE_CUDA
    return *query ? ff__error_set(err, FF_EINVAL, "device '%s': cuda takes no options", name)
                  : ff__cuda_open(ordinal, opt, o, err);
#else
    return ff__error_set(err, FF_EDEVICE, "cuda:%d: fusionflow was built without CUDA; use emu:0 or cpu",
                         ordinal);
#endif
  }
  return ff__error_set(err, FF_EINVAL, "device '%s': unknown kind (cuda:N, emu:N, auto)", name);
}

ff_status ff__device_open(const char *name, const ff__device_options *opt, ff__device **out, ff__error *err) {
  ff__device_options defaults;
  ff__device_options_init(&defaults);
  if (!opt) opt = &defaults;
  if (!name || !out) return ff__error_set(err, FF_EINVAL, "device: no name");
  ff__device_opened o = {0};
  ff_status st = open_backend(name, opt, &o, err);
  if (st) return st;
  ff__device *d = calloc(1, sizeof *d);
  if (!d) {
    o.be->close(o.impl);
    return ff__error_set(err, FF_ENOMEM, "%s: out of memory", o.name);
  }
  d->o = o;
  if (opt->alloc_hook && opt->free_hook)
    d->alloc_hook = opt->alloc_hook, d->free_hook = opt->free_hook, d->hook_ctx = opt->hook_ctx;
  ff__pool_backend pb = {d, pool_alloc, pool_free, pool_mem_info};
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
    free(d);
    return st;
  }
  *out = d;
  return FF_OK;
}

void ff__device_close(ff__device *d) {
  if (!d) return;
  ff__dguard g;
  if (!d->o.be->enter(d->o.impl, &g, NULL)) {
    d->o.be->synchronize(d->o.impl); /* no queued work may still use pool memory */
    ff__pool_destroy(&d->pool);
    d->o.be->leave(d->o.impl, &g);
  }
  d->o.be->close(d->o.impl);
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
  d->o.be->leave(d->o.impl, &g);
  if (!st && pool_out) ff__pool_stats_get(&d->pool, pool_out);
  return st;
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
  GUARDED(d, err, d->o.be->copy(d->o.impl, s, d_dst, src, size_bytes, 1, err));
}

ff_status ff__device_download(ff__device *d, ff__dstream *s, void *dst, const void *d_src, size_t size_bytes,
                              ff__error *err) {
  if (!size_bytes) return FF_OK;
  GUARDED(d, err, d->o.be->copy(d->o.impl, s, dst, d_src, size_bytes, 0, err));
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

ff_status ff__device_launch_stages(ff__device *d, ff__dstream *s, const void *d_table, int n, int stride,
                                   int k, uint32_t max_count, ff__error *err) {
  if (n <= 0 || !max_count) return FF_OK;
  GUARDED(d, err, d->o.be->launch(d->o.impl, s, d_table, n, stride, k, max_count, err));
}
