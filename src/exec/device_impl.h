/* device_impl.h — what a device backend provides (CUDA in exec/cuda.cu, the
 * emulator in exec/emu.c) and the device object around it. Internal to
 * exec/: callers use exec/device.h. Streams and events are the backend's
 * own pointers behind the opaque ff__dstream / ff__devent. */
#ifndef FF_EXEC_DEVICE_IMPL_H
#define FF_EXEC_DEVICE_IMPL_H

#include "exec/device.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ff__device_backend {
  void (*synchronize)(void *impl); /* waits for all queued work */
  void (*close)(void *impl);
  ff_status (*mem_alloc)(void *impl, size_t size_bytes, void **out);
  void (*mem_free)(void *impl, void *ptr);
  ff_status (*mem_info)(void *impl, size_t *free_bytes, size_t *total_bytes);
  ff_status (*host_alloc)(void *impl, size_t size_bytes, void **out, ff__error *err);
  void (*host_free)(void *impl, void *ptr);
  ff_status (*stream_create)(void *impl, void **out, ff__error *err);
  void (*stream_destroy)(void *impl, void *stream);
  ff_status (*copy)(void *impl, void *stream, void *dst, const void *src, size_t size_bytes, int to_device,
                    ff__error *err);
  ff_status (*event_create)(void *impl, void **out, ff__error *err);
  void (*event_destroy)(void *impl, void *event);
  ff_status (*event_record)(void *impl, void *event, void *stream, ff__error *err);
  ff_status (*event_query)(void *impl, void *event, int *done, ff__error *err);
  ff_status (*event_wait)(void *impl, void *event, ff__error *err);
  ff_status (*event_elapsed_ms)(void *impl, void *start, void *end, float *ms, ff__error *err);
  ff_status (*launch)(void *impl, void *stream, const void *d_table, int n, int stride, int k,
                      uint32_t max_count, ff__error *err);
  /* The backend's own decoder (exec/device.h; emu); decoder NULL or
   * returning NULL: none. */
  const char *(*decoder)(void *impl, const char **why);
  int (*decode_takes)(void *impl, const ff__image_info *info, const char **why);
  ff_status (*decode)(void *impl, void *stream, ff__device_decode_job *job, ff__error *err);
  /* The backend's native stream of one of ours (cuda: the cudaStream_t), for
   * libraries that take it (nvJPEG); NULL: the backend has none. */
  void *(*native_stream)(void *impl, void *stream);
} ff__device_backend;

/* What opening a backend gives back. */
typedef struct ff__device_opened {
  const ff__device_backend *be;
  void *impl;
  size_t default_headroom_bytes;
  char name[160];
} ff__device_opened;

/* Opens device `ordinal` of a backend; `query` is what follows '?' in the
 * name (emu: "mem=256M"), or "". */
ff_status ff__emu_open(int ordinal, const char *query, const ff__device_options *opt, ff__device_opened *out,
                       ff__error *err);
ff_status ff__cuda_open(int ordinal, const ff__device_options *opt, ff__device_opened *out, ff__error *err);

#ifdef __cplusplus
}
#endif

#endif
