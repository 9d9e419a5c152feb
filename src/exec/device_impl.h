/* device_impl.h — what a device backend provides (CUDA in exec/cuda.cu, the
 * emulator in exec/emu.c) and the device object around it (exec/device.c);
 * exec/backends.c opens a backend by name. Internal to exec/: callers use
 * exec/device.h. Streams and events are the backend's
 * own pointers behind the opaque ff__dstream / ff__devent. */
#ifndef FF_EXEC_DEVICE_IMPL_H
#define FF_EXEC_DEVICE_IMPL_H

#include "exec/device.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What a backend saves on entry and puts back on leaving: the calling
 * thread's current context (CUDA) or emulated device, and its stream
 * capture mode. */
/* The direction of a backend copy. */
typedef enum ff__copy_kind { FF__COPY_D2H = 0, FF__COPY_H2D = 1, FF__COPY_D2D = 2 } ff__copy_kind;

typedef struct ff__dguard {
  void *prev_ctx;
  int prev_device;
  int prev_capture_mode;
} ff__dguard;

/* device.c brackets every other call (and the pool's calls into mem_*)
 * with enter/leave: enter makes the device current on the calling thread
 * and its stream capture mode thread-local (relaxed), so a trainer's graph
 * capture on another thread is not invalidated; leave restores both
 * exactly. The calling thread's current device is never changed beyond the
 * bracket. close makes its own bracket. */
typedef struct ff__device_backend {
  ff_status (*enter)(void *impl, ff__dguard *g, ff__error *err);
  void (*leave)(void *impl, const ff__dguard *g);
  void (*synchronize)(void *impl); /* waits for all queued work */
  void (*close)(void *impl);
  /* FF_OK; FF__EBUDGET when the device is out of memory; FF_EDEVICE for any
   * other failure (message in err). */
  ff_status (*mem_alloc)(void *impl, size_t size_bytes, void **out, ff__error *err);
  void (*mem_free)(void *impl, void *ptr);
  ff_status (*mem_info)(void *impl, size_t *free_bytes, size_t *total_bytes);
  void (*mem_trim)(void *impl); /* released memory back to the device now; may be NULL */
  ff_status (*host_alloc)(void *impl, size_t size_bytes, void **out, ff__error *err);
  void (*host_free)(void *impl, void *ptr);
  ff_status (*stream_create)(void *impl, void **out, ff__error *err);
  void (*stream_destroy)(void *impl, void *stream);
  /* Work queued on stream after this waits for event's last record. */
  ff_status (*stream_wait)(void *impl, void *stream, void *event, ff__error *err);
  /* The handle a consumer sees for one of our streams (cuda: the
   * cudaStream_t; emu: the stream itself), and the same two calls on a
   * consumer's stream given by such a handle. */
  void *(*stream_handle)(void *impl, void *stream);
  ff_status (*foreign_wait)(void *impl, void *handle, void *event, ff__error *err);
  ff_status (*foreign_record)(void *impl, void *event, void *handle, ff__error *err);
  /* Records event so that it completes once the work queued on every one of
   * our streams so far has (a consumer's streams not included). Waits for
   * nothing itself. */
  ff_status (*retire_record)(void *impl, void *event, ff__error *err);
  /* An asynchronous copy; kind is an ff__copy_kind. */
  ff_status (*copy)(void *impl, void *stream, void *dst, const void *src, size_t size_bytes, int kind,
                    ff__error *err);
  /* n device-to-host copies queued by one call (cuda: cudaMemcpyBatchAsync). */
  ff_status (*download_batch)(void *impl, void *stream, int n, void *const *dsts, const void *const *srcs,
                              const size_t *sizes, ff__error *err);
  ff_status (*event_create)(void *impl, void **out, ff__error *err);
  void (*event_destroy)(void *impl, void *event);
  ff_status (*event_record)(void *impl, void *event, void *stream, ff__error *err);
  ff_status (*event_query)(void *impl, void *event, int *done, ff__error *err);
  ff_status (*event_wait)(void *impl, void *event, ff__error *err);
  ff_status (*event_elapsed_ms)(void *impl, void *start, void *end, float *ms, ff__error *err);
  ff_status (*launch)(void *impl, void *stream, const void *d_table, int n, int kind, uint32_t max_count,
                      ff__error *err);
  /* The backend's own decoder (exec/device.h; emu); decoder NULL or
   * returning NULL: none. decode queues n jobs on stream as one batch; the
   * device layer has set each job's width, height, offset and pitch (the
   * region the CPU's decode gives, ff__jpeg_dct_scale), and the jobs stay
   * untouched until work queued after them has completed. */
  const char *(*decoder)(void *impl, const char **why);
  int (*decode_takes)(void *impl, const ff__image_info *info, const char **why);
  ff_status (*decode)(void *impl, void *stream, ff__device_decode_job *jobs, int n, ff__error *err);
  /* The backend's native stream of one of ours (cuda: the cudaStream_t), for
   * libraries that take it (nvJPEG); NULL: the backend has none. */
  void *(*native_stream)(void *impl, void *stream);
  /* Whether the device layer loads libnvjpeg as the device's decoder; NULL:
   * where the backend has native streams (cuda). emu: `?decode=libnvjpeg`. */
  int (*loads_nvjpeg)(void *impl);
  /* A named range on the calling thread for profilers (cuda: NVTX), and its
   * end; may be NULL. */
  void (*range_push)(const char *name);
  void (*range_pop)(void);
} ff__device_backend;

/* What opening a backend gives back. */
typedef struct ff__device_opened {
  const ff__device_backend *be;
  void *impl;
  size_t default_headroom_bytes;
  char name[160];
} ff__device_opened;

/* The device object around an opened backend (device.c): the pool and, with
 * opt->decoder, nvJPEG. Takes o's backend: closes it on failure. opt not
 * NULL. FF_OK, FF_ENOMEM, or the pool's error. exec/backends.c calls it
 * after opening a backend by name. */
ff_status ff__device_wrap(const ff__device_opened *o, const ff__device_options *opt, ff__device **out,
                          ff__error *err);

/* "kind:N[?query]" or "kind[?query]" (ordinal 0) → kind's length, the
 * ordinal (0..1024) and what follows '?' ("" if nothing); 0 when malformed. */
int ff__device_parse_name(const char *name, size_t *kind_len, int *ordinal, const char **query);

/* Opens device `ordinal` of a backend; `query` is what follows '?' in the
 * name (emu: "mem=256M"), or "". exec/backends.c lists them by kind. */
ff_status ff__emu_open(int ordinal, const char *query, const ff__device_options *opt, ff__device_opened *out,
                       ff__error *err);
ff_status ff__cuda_open(int ordinal, const ff__device_options *opt, ff__device_opened *out, ff__error *err);

/* What `auto` needs to know of the process's CUDA state: the number of
 * visible devices, and the calling thread's current device when its
 * primary context is active (the process has initialised CUDA there), else
 * -1. Initialises no context. FF_EDEVICE when there is no driver or GPU. */
ff_status ff__cuda_probe(int *count, int *current, ff__error *err);

/* The backend's own object when d runs on backend be, else NULL. */
void *ff__device_impl(ff__device *d, const ff__device_backend *be);

/* The emulator's records, for tests. misplaced_calls: backend calls made
 * while the device was not current on the calling thread (0 when the device
 * layer brackets every call); device_switches: times a bracket made it
 * current. */
typedef struct ff__emu_counts {
  unsigned long misplaced_calls, device_switches;
  /* copy calls queued, by ff__copy_kind (a batched download is one call), and their bytes */
  unsigned long copy_calls[3];
  unsigned long long copy_bytes[3];
  unsigned long trims; /* mem_trim calls (the pool gave memory back to a shrinking budget) */
  unsigned long shape_launches[4]; /* launches by shape (kernels/stage_block.h's ff__dshape) */
  unsigned long launches, decodes; /* launches queued; decode calls queued (a batch is one) */
} ff__emu_counts;
ff_status ff__emu_probe(ff__device *d, ff__emu_counts *out); /* FF_EINVAL when d is not emu */
/* Whether ptr is a live allocation of d's host allocator (d emu). */
int ff__emu_host_owns(ff__device *d, const void *ptr);
/* How many waits of stream s on event e were queued. */
int ff__emu_waited(ff__device *d, const ff__dstream *s, const ff__devent *e);
/* A gate a test opens by hand: after hold, work queued behind a wait on e
 * (ff__device_stream_wait, ff__device_foreign_wait) does not run, and e
 * does not complete, until signal — as if e were recorded on a stream that
 * has not got there yet (a trainer's, busy). */
void ff__emu_event_hold(ff__device *d, ff__devent *e);
void ff__emu_event_signal(ff__device *d, ff__devent *e);
/* The calling thread's current emulated device (-1: none), and setting it
 * (as a program that made a device current would). */
int ff__emu_current_device(void);
void ff__emu_set_current_device(int ordinal);

#ifdef __cplusplus
}
#endif

#endif
