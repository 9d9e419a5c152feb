/* cuda.cu — the CUDA backend of the device interface (`cuda:N`).
 *
 * One kernel runs every stage kind: a launch covers one stage index of a
 * microbatch's stage table, blockIdx.y picking the sample and each thread
 * one element, computed by ff__dstage_elem (kernels/stage.h) — the function
 * the emulator loops over and whose arithmetic is the CPU ops' own. Built
 * with --fmad=false, so nothing is contracted beyond the explicit
 * ff__fma_f32 (__fmaf_rn). Memory comes from cudaMalloc through the pool;
 * streams are non-blocking (never serialised with the trainer's default
 * stream); nothing here synchronises the whole device, which the trainer
 * shares. Every CUDA call's result is checked; a failure names the call. */
#include <cuda_runtime.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

extern "C" {
#include "exec/device_impl.h"
}
#include "kernels/stage.h"

#define BLOCK 256

__global__ void ff_stage_kernel(const ff__dstage *__restrict__ table, int stride, int k) {
  const ff__dstage *st = table + (size_t)blockIdx.y * stride + k;
  uint32_t e = blockIdx.x * BLOCK + threadIdx.x;
  if (e < st->count) ff__dstage_elem(st, e);
}

/* Our streams, so that waiting for our work never waits for the trainer's. */
typedef struct stream_node {
  cudaStream_t s;
  struct stream_node *next;
} stream_node;

typedef struct cuda_dev {
  int ordinal;
  pthread_mutex_t lock;
  stream_node *streams;
} cuda_dev;

static ff_status fail(ff__error *err, const cuda_dev *d, const char *what, cudaError_t e) {
  return ff__error_set(err, FF_EDEVICE, "cuda:%d: %s: %s", d->ordinal, what, cudaGetErrorString(e));
}

/* Every entry point makes the device current on the calling thread. */
static ff_status use(const cuda_dev *d, ff__error *err) {
  cudaError_t e = cudaSetDevice(d->ordinal);
  return e == cudaSuccess ? FF_OK : fail(err, d, "cudaSetDevice", e);
}

static void cu_synchronize(void *impl) {
  cuda_dev *d = (cuda_dev *)impl;
  if (use(d, NULL)) return;
  pthread_mutex_lock(&d->lock);
  for (stream_node *n = d->streams; n; n = n->next)
    cudaStreamSynchronize(n->s);
  pthread_mutex_unlock(&d->lock);
}

static void cu_close(void *impl) {
  cuda_dev *d = (cuda_dev *)impl;
  pthread_mutex_destroy(&d->lock);
  free(d);
}

static ff_status cu_mem_alloc(void *impl, size_t size_bytes, void **out) {
  cuda_dev *d = (cuda_dev *)impl;
  if (use(d, NULL)) return FF_EDEVICE;
  if (cudaMalloc(out, size_bytes) == cudaSuccess) return FF_OK;
  cudaGetLastError(); /* out of memory is not sticky: clear it */
  return FF_EDEVICE;
}

static void cu_mem_free(void *impl, void *ptr) {
  cuda_dev *d = (cuda_dev *)impl;
  if (!use(d, NULL)) cudaFree(ptr);
}

static ff_status cu_mem_info(void *impl, size_t *free_bytes, size_t *total_bytes) {
  cuda_dev *d = (cuda_dev *)impl;
  if (use(d, NULL)) return FF_EDEVICE;
  return cudaMemGetInfo(free_bytes, total_bytes) == cudaSuccess ? FF_OK : FF_EDEVICE;
}

static ff_status cu_host_alloc(void *impl, size_t size_bytes, void **out, ff__error *err) {
  cuda_dev *d = (cuda_dev *)impl;
  ff_status st = use(d, err);
  if (st) return st;
  cudaError_t e = cudaHostAlloc(out, size_bytes, cudaHostAllocDefault);
  if (e == cudaSuccess) return FF_OK;
  cudaGetLastError();
  return ff__error_set(err, FF_ENOMEM, "cuda:%d: no %zu bytes of pinned host memory: %s", d->ordinal,
                       size_bytes, cudaGetErrorString(e));
}

static void cu_host_free(void *impl, void *ptr) {
  (void)impl;
  cudaFreeHost(ptr);
}

static ff_status cu_stream_create(void *impl, void **out, ff__error *err) {
  cuda_dev *d = (cuda_dev *)impl;
  ff_status st = use(d, err);
  if (st) return st;
  stream_node *n = (stream_node *)malloc(sizeof *n);
  if (!n) return ff__error_set(err, FF_ENOMEM, "cuda:%d: out of memory", d->ordinal);
  cudaError_t e = cudaStreamCreateWithFlags(&n->s, cudaStreamNonBlocking);
  if (e != cudaSuccess) {
    free(n);
    return fail(err, d, "cudaStreamCreateWithFlags", e);
  }
  pthread_mutex_lock(&d->lock);
  n->next = d->streams, d->streams = n;
  pthread_mutex_unlock(&d->lock);
  *out = n;
  return FF_OK;
}

static void cu_stream_destroy(void *impl, void *stream) {
  cuda_dev *d = (cuda_dev *)impl;
  stream_node *n = (stream_node *)stream;
  pthread_mutex_lock(&d->lock);
  for (stream_node **p = &d->streams; *p; p = &(*p)->next)
    if (*p == n) {
      *p = n->next;
      break;
    }
  pthread_mutex_unlock(&d->lock);
  if (!use(d, NULL)) cudaStreamDestroy(n->s);
  free(n);
}

static ff_status cu_copy(void *impl, void *stream, void *dst, const void *src, size_t size_bytes,
                         int to_device, ff__error *err) {
  cuda_dev *d = (cuda_dev *)impl;
  ff_status st = use(d, err);
  if (st) return st;
  cudaError_t e =
      cudaMemcpyAsync(dst, src, size_bytes, to_device ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost,
                      ((stream_node *)stream)->s);
  return e == cudaSuccess ? FF_OK : fail(err, d, "cudaMemcpyAsync", e);
}

static ff_status cu_event_create(void *impl, void **out, ff__error *err) {
  cuda_dev *d = (cuda_dev *)impl;
  ff_status st = use(d, err);
  if (st) return st;
  cudaEvent_t ev;
  cudaError_t e = cudaEventCreate(&ev);
  if (e != cudaSuccess) return fail(err, d, "cudaEventCreate", e);
  *out = (void *)ev;
  return FF_OK;
}

static void cu_event_destroy(void *impl, void *event) {
  cuda_dev *d = (cuda_dev *)impl;
  if (!use(d, NULL)) cudaEventDestroy((cudaEvent_t)event);
}

static ff_status cu_event_record(void *impl, void *event, void *stream, ff__error *err) {
  cuda_dev *d = (cuda_dev *)impl;
  ff_status st = use(d, err);
  if (st) return st;
  cudaError_t e = cudaEventRecord((cudaEvent_t)event, ((stream_node *)stream)->s);
  return e == cudaSuccess ? FF_OK : fail(err, d, "cudaEventRecord", e);
}

static ff_status cu_event_query(void *impl, void *event, int *done, ff__error *err) {
  cuda_dev *d = (cuda_dev *)impl;
  ff_status st = use(d, err);
  if (st) return st;
  cudaError_t e = cudaEventQuery((cudaEvent_t)event);
  *done = e != cudaErrorNotReady;
  if (e == cudaSuccess || e == cudaErrorNotReady) return FF_OK;
  return fail(err, d, "queued work failed (cudaEventQuery)", e);
}

static ff_status cu_event_wait(void *impl, void *event, ff__error *err) {
  cuda_dev *d = (cuda_dev *)impl;
  ff_status st = use(d, err);
  if (st) return st;
  cudaError_t e = cudaEventSynchronize((cudaEvent_t)event);
  return e == cudaSuccess ? FF_OK : fail(err, d, "queued work failed (cudaEventSynchronize)", e);
}

static ff_status cu_event_elapsed_ms(void *impl, void *start, void *end, float *ms, ff__error *err) {
  cuda_dev *d = (cuda_dev *)impl;
  ff_status st = use(d, err);
  if (st) return st;
  cudaError_t e = cudaEventElapsedTime(ms, (cudaEvent_t)start, (cudaEvent_t)end);
  return e == cudaSuccess ? FF_OK : fail(err, d, "cudaEventElapsedTime", e);
}

static ff_status cu_launch(void *impl, void *stream, const void *d_table, int n, int stride, int k,
                           uint32_t max_count, ff__error *err) {
  cuda_dev *d = (cuda_dev *)impl;
  if (n > 65535)
    return ff__error_set(err, FF_EINVAL, "cuda:%d: microbatch of %d samples (at most 65535)", d->ordinal, n);
  ff_status st = use(d, err);
  if (st) return st;
  dim3 grid((max_count + BLOCK - 1) / BLOCK, (unsigned)n);
  ff_stage_kernel<<<grid, BLOCK, 0, ((stream_node *)stream)->s>>>((const ff__dstage *)d_table, stride, k);
  cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? FF_OK : fail(err, d, "stage kernel launch", e);
}

/* The cudaStream_t, with the device made current for the caller's next calls (nvJPEG's). */
static void *cu_native_stream(void *impl, void *stream) {
  use((cuda_dev *)impl, NULL);
  return ((stream_node *)stream)->s;
}

static const ff__device_backend cuda_backend = {
    cu_synchronize,      cu_close,         cu_mem_alloc,     cu_mem_free,       cu_mem_info,
    cu_host_alloc,       cu_host_free,     cu_stream_create, cu_stream_destroy, cu_copy,
    cu_event_create,     cu_event_destroy, cu_event_record,  cu_event_query,    cu_event_wait,
    cu_event_elapsed_ms, cu_launch,
    NULL, NULL, NULL, cu_native_stream, /* the decoder is nvJPEG's, wired in device.c */
};

extern "C" ff_status ff__cuda_open(int ordinal, const ff__device_options *opt, ff__device_opened *out,
                                   ff__error *err) {
  (void)opt;
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return ff__error_set(err, FF_EDEVICE,
                         "cuda:%d: no usable GPU or NVIDIA driver here (the CUDA runtime says: %s); "
                         "use emu:0 or cpu", ordinal,
                         cudaGetErrorString(e));
  }
  if (ordinal >= count)
    return ff__error_set(err, FF_EDEVICE, "cuda:%d: no such device (%d CUDA device%s); use emu:0 or cpu",
                         ordinal, count, count == 1 ? "" : "s");
  cudaDeviceProp prop;
  size_t free_bytes = 0, total_bytes = 0;
  if ((e = cudaSetDevice(ordinal)) != cudaSuccess ||
      (e = cudaGetDeviceProperties(&prop, ordinal)) != cudaSuccess ||
      (e = cudaMemGetInfo(&free_bytes, &total_bytes)) != cudaSuccess)
    return ff__error_set(err, FF_EDEVICE, "cuda:%d: cannot open: %s; use emu:0 or cpu", ordinal,
                         cudaGetErrorString(e));
  cuda_dev *d = (cuda_dev *)calloc(1, sizeof *d);
  if (!d) return ff__error_set(err, FF_ENOMEM, "cuda:%d: out of memory", ordinal);
  d->ordinal = ordinal;
  pthread_mutex_init(&d->lock, NULL);
  size_t tenth = total_bytes / 10, gib = (size_t)1 << 30;
  out->be = &cuda_backend, out->impl = d;
  out->default_headroom_bytes = tenth > gib ? tenth : gib;
  snprintf(out->name, sizeof out->name, "cuda:%d (%.100s)", ordinal, prop.name);
  return FF_OK;
}
