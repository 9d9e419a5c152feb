/* cuda.cu — the CUDA backend of the device interface (`cuda:N`).
 *
 * A kernel per stage kind: a launch covers the records of one kind at one
 * stage index of a microbatch's stage table, blockIdx.y picking the record
 * and each thread one element, computed by ff__dstage_elem_as
 * (kernels/stage.h) with the kind a template constant, so each kernel
 * holds only its kind's arithmetic (and registers: 4 blocks of 256 per SM
 * at least, __launch_bounds__) — the functions the emulator calls, whose
 * arithmetic is the CPU ops' own. Built with --fmad=false, so nothing is
 * contracted beyond the explicit ff__fma_f32 (__fmaf_rn). Histograms and
 * gray and luma sums (equalize, autocontrast's and contrast's tables)
 * accumulate per block in shared memory and add to the sample's totals
 * once per bin (or once per block), instead of one global atomic per
 * pixel: integer sums, so the same totals; a run's tables are built by one
 * block with a thread per entry in shared memory instead of three threads
 * looping over 256 entries in global scratch (kernels/stage_block.h: the
 * emulator runs these shapes too). FF_DEVICE_KERNELS=plain (read at open)
 * turns them off, for measuring the difference with one build. NVTX
 * ranges (nvtx3, header only: nothing to link) name the loader's stages
 * (ff__device_range_push) so a trainer's profile shows them.
 *
 * A good neighbour to the trainer in the same process:
 * - The device's primary context (the one torch uses) is retained at open
 *   and made current only inside each call's bracket (enter/leave): the
 *   calling thread's current context is saved and put back with the driver's
 *   cuCtxGetCurrent/cuCtxSetCurrent (reached through the runtime's driver
 *   entry points, so nothing links libcuda), never cudaSetDevice.
 * - Inside the bracket the thread's stream capture mode is relaxed
 *   (cudaThreadExchangeStreamCaptureMode), so our calls on the feeder thread
 *   cannot invalidate a CUDA graph the trainer captures on its own.
 * - Events are blocking-sync: waiting sleeps instead of spinning a core.
 * - Memory is stream-ordered, from a memory pool of our own, never
 *   cudaFree, which stalls the GPU: frees (cudaFreeAsync) on an internal
 *   stream that first waits for our streams, allocations
 *   (cudaMallocFromPoolAsync) on another that waits for nothing, reusing
 *   only memory whose free has completed, and nothing waits for the frees:
 *   our streams may wait for the trainer's (a released batch), and a wait
 *   behind them would block whichever thread allocates or trims — the
 *   trainer's own in next().
 * - Only cudaErrorMemoryAllocation is "out of memory" (FF__EBUDGET); any
 *   other failure is a device error.
 * - Streams are non-blocking (never serialised with the default stream);
 *   nothing here synchronises the whole device.
 * Every CUDA call's result is checked; a failure names the call. */
#include <cuda.h>
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern "C" {
#include "exec/device_impl.h"
}
#include "kernels/stage_block.h"

#define BLOCK FF__DBLOCK
/* At least 4 blocks of 256 per SM (1024 threads, half of an sm_90 SM's
 * 2048): at most 64 registers a thread. scripts/kernel-occupancy.sh prints
 * what ptxas gave each kernel. */
#define MIN_BLOCKS 4

/* One element per thread, of a stage of kind K: ff__dstage_elem_as with a
 * constant kind keeps only that case, so each kind gets only the registers
 * its own arithmetic needs. blockIdx.y picks the record; records of another
 * kind (FF__DS_NONE placeholders) do nothing. */
template <int K>
__global__ void __launch_bounds__(BLOCK, MIN_BLOCKS) ff_elem_kernel(const ff__dstage *__restrict__ table) {
  const ff__dstage *st = table + blockIdx.y;
  uint32_t e = blockIdx.x * BLOCK + threadIdx.x;
  if (st->kind == K && e < st->count) ff__dstage_elem_as(st, K, e);
}

/* A sum stage: the block's terms added in shared memory, then its total
 * to the sample's once (integers: the per-element path's total). */
template <int K>
__global__ void __launch_bounds__(BLOCK, MIN_BLOCKS) ff_sum_kernel(const ff__dstage *__restrict__ table) {
  __shared__ unsigned long long sum[BLOCK];
  const ff__dstage *st = table + blockIdx.y;
  uint32_t e = blockIdx.x * BLOCK + threadIdx.x;
  if (st->kind != K) return; /* block-uniform: one record per blockIdx.y */
  sum[threadIdx.x] = e < st->count ? ff__dstage_sum_term(st, K, e) : 0;
  __syncthreads();
  for (int half = BLOCK / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) sum[threadIdx.x] += sum[threadIdx.x + half];
    __syncthreads();
  }
  if (!threadIdx.x && sum[0]) atomicAdd(FF__DPTR(unsigned long long, st->a), sum[0]);
}

/* FF__DS_HISTOGRAM: the block's counts in shared memory, then each
 * non-zero bin added to the sample's once. */
__global__ void __launch_bounds__(BLOCK, MIN_BLOCKS) ff_histogram_kernel(const ff__dstage *__restrict__ table) {
  __shared__ uint32_t hist[3 * 256];
  const ff__dstage *st = table + blockIdx.y;
  uint32_t e = blockIdx.x * BLOCK + threadIdx.x;
  if (st->kind != FF__DS_HISTOGRAM) return;
  for (int i = threadIdx.x; i < 3 * 256; i += BLOCK) hist[i] = 0;
  __syncthreads();
  if (e < st->count) {
    const uint8_t *p = ff__dstage_src_px(st, e);
    for (int c = 0; c < 3; c++) atomicAdd(&hist[c * 256 + p[c]], 1u);
  }
  __syncthreads();
  uint32_t *out = FF__DPTR(uint32_t, st->a);
  for (int i = threadIdx.x; i < 3 * 256; i += BLOCK)
    if (hist[i]) atomicAdd(out + i, hist[i]);
}

/* FF__DS_LUT_BUILD by one block per sample: the three channels in turn,
 * one thread per table entry (ff__lut_block_entry), the histogram pushed
 * through the composition with shared-memory atomics, the lowest, highest
 * and total by atomic min/max/add and equalize's counts below each value
 * by a scan — integers, so the tables are ff__lut_run_channel's. */
__global__ void __launch_bounds__(BLOCK, MIN_BLOCKS) ff_lut_build_kernel(const ff__dstage *__restrict__ table) {
  __shared__ uint8_t lut[256], t[256];
  __shared__ unsigned long long now[256], scan[256], total;
  __shared__ int lo, hi;
  const ff__dstage *st = table + blockIdx.y;
  if (st->kind != FF__DS_LUT_BUILD || blockIdx.x) return;
  const ff__aug *ops = FF__DPTR(const ff__aug, st->b);
  const uint32_t *hist = FF__DPTR(const uint32_t, st->a);
  int v = threadIdx.x; /* BLOCK == 256: one thread per entry */
  for (int c = 0; c < 3; c++) {
    lut[v] = (uint8_t)v;
    __syncthreads();
    for (int i = 0; i < st->p.lut.n; i++) {
      if (ff__lut_needs_histogram(ops[i].op)) {
        now[v] = 0;
        if (!v) lo = 256, hi = -1, total = 0;
        __syncthreads();
        atomicAdd(&now[lut[v]], (unsigned long long)hist[c * 256 + v]);
        __syncthreads();
        if (now[v]) atomicMin(&lo, v), atomicMax(&hi, v);
        atomicAdd(&total, now[v]);
        scan[v] = now[v];
        __syncthreads();
        for (int off = 1; off < 256; off *= 2) { /* inclusive scan of now */
          unsigned long long add = v >= off ? scan[v - off] : 0;
          __syncthreads();
          scan[v] += add;
          __syncthreads();
        }
      }
      t[v] = ff__lut_block_entry(&ops[i], v, now, scan, lo, hi, total);
      __syncthreads();
      uint8_t next = t[lut[v]];
      __syncthreads();
      lut[v] = next;
      __syncthreads();
    }
    FF__DPTR(uint8_t, st->p.lut.luts)[c * 256 + v] = lut[v];
    __syncthreads();
  }
}

typedef void (*stage_kernel)(const ff__dstage *);

/* The per-element kernel of each kind, in ff__dstage_kind's order. */
static const stage_kernel elem_kernels[] = {
    ff_elem_kernel<FF__DS_NONE>,         ff_elem_kernel<FF__DS_CROP>,          ff_elem_kernel<FF__DS_FLIP>,
    ff_elem_kernel<FF__DS_RESIZE_H>,     ff_elem_kernel<FF__DS_RESIZE_V>,      ff_elem_kernel<FF__DS_AFFINE>,
    ff_elem_kernel<FF__DS_TRANSLATE>,    ff_elem_kernel<FF__DS_COLOR>,         ff_elem_kernel<FF__DS_SHARPNESS>,
    ff_elem_kernel<FF__DS_GRAY_SUM>,     ff_elem_kernel<FF__DS_CONTRAST>,      ff_elem_kernel<FF__DS_HISTOGRAM>,
    ff_elem_kernel<FF__DS_LUT_BUILD>,    ff_elem_kernel<FF__DS_LUT_APPLY>,     ff_elem_kernel<FF__DS_MIX_SCALE>,
    ff_elem_kernel<FF__DS_MIX_ADD>,      ff_elem_kernel<FF__DS_MIX_TRUNC>,     ff_elem_kernel<FF__DS_BATCH_MIX>,
    ff_elem_kernel<FF__DS_OUT_U8>,       ff_elem_kernel<FF__DS_OUT_F32>,       ff_elem_kernel<FF__DS_OUT_FMT>,
    ff_elem_kernel<FF__DS_PIL_WARP>,     ff_elem_kernel<FF__DS_PIL_COLOR>,     ff_elem_kernel<FF__DS_PIL_SHARPNESS>,
    ff_elem_kernel<FF__DS_PIL_LUMA_SUM>, ff_elem_kernel<FF__DS_PIL_LUT_BUILD>, ff_elem_kernel<FF__DS_PIL_BLEND>,
    ff_elem_kernel<FF__DS_PIL_HUE>,      ff_elem_kernel<FF__DS_PIL_BOX_H>,     ff_elem_kernel<FF__DS_PIL_BOX_V>,
    ff_elem_kernel<FF__DS_HUE>,          ff_elem_kernel<FF__DS_ERASE>,
};
static_assert(sizeof elem_kernels / sizeof *elem_kernels == FF__DS_KINDS, "a kernel per stage kind");
static_assert(FF__DS_GRAY_SUM == 9 && FF__DS_ERASE == 31, "elem_kernels follows ff__dstage_kind");

/* The kernel of a launch of kind, and its blocks along x for records of
 * up to max_count elements. */
static stage_kernel kernel_of(int kind, int tuned, uint32_t max_count, unsigned *blocks) {
  *blocks = (max_count + BLOCK - 1) / BLOCK;
  switch (ff__dstage_shape(kind, tuned)) {
  case FF__SHAPE_SUM: return kind == FF__DS_GRAY_SUM ? ff_sum_kernel<FF__DS_GRAY_SUM> : ff_sum_kernel<FF__DS_PIL_LUMA_SUM>;
  case FF__SHAPE_HISTOGRAM: return ff_histogram_kernel;
  case FF__SHAPE_LUT_BUILD: *blocks = 1; return ff_lut_build_kernel;
  default: return elem_kernels[kind];
  }
}

/* ------------------------------------------------------------ driver entry points */

typedef struct driver_api {
  CUresult (*ctx_get_current)(CUcontext *);
  CUresult (*ctx_set_current)(CUcontext);
  CUresult (*ctx_get_device)(CUdevice *);
  CUresult (*device_get)(CUdevice *, int);
  CUresult (*primary_retain)(CUcontext *, CUdevice);
  CUresult (*primary_release)(CUdevice);
  CUresult (*primary_state)(CUdevice, unsigned *, int *);
} driver_api;

static driver_api drv;
static pthread_once_t drv_once = PTHREAD_ONCE_INIT;
static int drv_ok;

static int entry(const char *sym, void **fn) {
  cudaDriverEntryPointQueryResult q;
  return cudaGetDriverEntryPointByVersion(sym, fn, 12000, cudaEnableDefault, &q) == cudaSuccess &&
         q == cudaDriverEntryPointSuccess && *fn;
}

static void drv_load(void) {
  drv_ok = entry("cuCtxGetCurrent", (void **)&drv.ctx_get_current) &&
           entry("cuCtxSetCurrent", (void **)&drv.ctx_set_current) &&
           entry("cuCtxGetDevice", (void **)&drv.ctx_get_device) &&
           entry("cuDeviceGet", (void **)&drv.device_get) &&
           entry("cuDevicePrimaryCtxRetain", (void **)&drv.primary_retain) &&
           entry("cuDevicePrimaryCtxRelease", (void **)&drv.primary_release) &&
           entry("cuDevicePrimaryCtxGetState", (void **)&drv.primary_state);
  cudaGetLastError();
}

/* ------------------------------------------------------------ the device */

/* Our streams, so that waiting for our work never waits for the trainer's.
 * `done` orders frees after each stream's work. */
typedef struct stream_node {
  cudaStream_t s;
  cudaEvent_t done;
  struct stream_node *next;
} stream_node;

typedef struct cuda_dev {
  int ordinal;
  CUdevice cu_dev;
  CUcontext ctx; /* the primary context, retained */
  pthread_mutex_t lock;
  stream_node *streams;
  cudaMemPool_t mem_pool;
  cudaStream_t mem_stream;   /* frees are ordered on it, after our streams' work */
  cudaStream_t alloc_stream; /* allocations, after nothing: waiting for one never waits for a free */
  cudaEvent_t mem_done, alloc_done; /* blocking-sync */
  int tuned;               /* shared-memory histograms and sums (FF_DEVICE_KERNELS != plain) */
} cuda_dev;

static ff_status fail(ff__error *err, const cuda_dev *d, const char *what, cudaError_t e) {
  return ff__error_set(err, FF_EDEVICE, "cuda:%d: %s: %s", d->ordinal, what, cudaGetErrorString(e));
}

static ff_status cu_enter(void *impl, ff__dguard *g, ff__error *err) {
  cuda_dev *d = (cuda_dev *)impl;
  CUcontext cur = NULL;
  if (drv.ctx_get_current(&cur) != CUDA_SUCCESS ||
      (cur != d->ctx && drv.ctx_set_current(d->ctx) != CUDA_SUCCESS))
    return ff__error_set(err, FF_EDEVICE, "cuda:%d: cannot make the device current (driver)", d->ordinal);
  g->prev_ctx = cur;
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  cudaThreadExchangeStreamCaptureMode(&mode);
  g->prev_capture_mode = (int)mode;
  return FF_OK;
}

static void cu_leave(void *impl, const ff__dguard *g) {
  cuda_dev *d = (cuda_dev *)impl;
  cudaStreamCaptureMode mode = (cudaStreamCaptureMode)g->prev_capture_mode;
  cudaThreadExchangeStreamCaptureMode(&mode);
  if ((CUcontext)g->prev_ctx != d->ctx) drv.ctx_set_current((CUcontext)g->prev_ctx);
}

/* Blocks (sleeping) until the work queued on s so far is done. */
static cudaError_t sync_stream(cudaStream_t s, cudaEvent_t ev) {
  cudaError_t e = cudaEventRecord(ev, s);
  return e == cudaSuccess ? cudaEventSynchronize(ev) : e;
}

static void cu_synchronize(void *impl) {
  cuda_dev *d = (cuda_dev *)impl;
  pthread_mutex_lock(&d->lock);
  for (stream_node *n = d->streams; n; n = n->next)
    sync_stream(n->s, n->done);
  sync_stream(d->mem_stream, d->mem_done);
  sync_stream(d->alloc_stream, d->alloc_done);
  pthread_mutex_unlock(&d->lock);
}

static void release(cuda_dev *d) {
  if (d->alloc_done) cudaEventDestroy(d->alloc_done);
  if (d->alloc_stream) cudaStreamDestroy(d->alloc_stream);
  if (d->mem_done) cudaEventDestroy(d->mem_done);
  if (d->mem_stream) cudaStreamDestroy(d->mem_stream);
  if (d->mem_pool) cudaMemPoolDestroy(d->mem_pool);
  pthread_mutex_destroy(&d->lock);
}

static void cu_close(void *impl) {
  cuda_dev *d = (cuda_dev *)impl;
  ff__dguard g;
  if (!cu_enter(d, &g, NULL)) {
    release(d);
    cu_leave(d, &g);
  }
  drv.primary_release(d->cu_dev);
  free(d);
}

/* On the allocation stream, which waits for nothing: the pool reuses only
 * memory whose free has completed (internal dependencies are off), so the
 * wait for the allocation never waits for a free queued behind our streams'
 * work, which may wait for a consumer's stream — the trainer's, whose
 * thread may be the one allocating or waiting for the pool's lock. */
static ff_status cu_mem_alloc(void *impl, size_t size_bytes, void **out, ff__error *err) {
  cuda_dev *d = (cuda_dev *)impl;
  pthread_mutex_lock(&d->lock);
  cudaError_t e = cudaMallocFromPoolAsync(out, size_bytes, d->mem_pool, d->alloc_stream);
  if (e == cudaSuccess) e = sync_stream(d->alloc_stream, d->alloc_done); /* usable on every stream */
  pthread_mutex_unlock(&d->lock);
  if (e == cudaSuccess) return FF_OK;
  if (e == cudaErrorMemoryAllocation) {
    cudaGetLastError(); /* out of memory is not sticky: clear it */
    return ff__error_set(err, FF__EBUDGET, "cuda:%d: out of memory for %zu bytes", d->ordinal, size_bytes);
  }
  return fail(err, d, "cudaMallocFromPoolAsync", e);
}

/* Makes the memory stream wait for the work queued on each of our streams
 * so far. Under d->lock. */
static void mem_stream_after_ours(cuda_dev *d) {
  for (stream_node *n = d->streams; n; n = n->next)
    if (cudaEventRecord(n->done, n->s) == cudaSuccess) cudaStreamWaitEvent(d->mem_stream, n->done, 0);
}

/* Freed on the memory stream once every one of our streams' work queued so
 * far is done (the pool hands back only blocks nobody uses, but kernels
 * that used them may still be in flight). Waits for nothing. */
static void cu_mem_free(void *impl, void *ptr) {
  cuda_dev *d = (cuda_dev *)impl;
  pthread_mutex_lock(&d->lock);
  mem_stream_after_ours(d);
  cudaFreeAsync(ptr, d->mem_stream);
  pthread_mutex_unlock(&d->lock);
}

static ff_status cu_retire_record(void *impl, void *event, ff__error *err) {
  cuda_dev *d = (cuda_dev *)impl;
  pthread_mutex_lock(&d->lock);
  mem_stream_after_ours(d);
  cudaError_t e = cudaEventRecord((cudaEvent_t)event, d->mem_stream);
  pthread_mutex_unlock(&d->lock);
  return e == cudaSuccess ? FF_OK : fail(err, d, "cudaEventRecord (retire)", e);
}

static ff_status cu_mem_info(void *impl, size_t *free_bytes, size_t *total_bytes) {
  cuda_dev *d = (cuda_dev *)impl;
  cudaMemPoolTrimTo(d->mem_pool, 0); /* what our frees gave back is free for others too */
  return cudaMemGetInfo(free_bytes, total_bytes) == cudaSuccess ? FF_OK : FF_EDEVICE;
}

/* What the completed frees released goes back to the device (a trainer on
 * the same GPU can take it); frees still behind our streams' work go at a
 * later trim or memory query. No wait: the caller may be the trainer's
 * thread, and our streams may wait for its stream. */
static void cu_mem_trim(void *impl) { cudaMemPoolTrimTo(((cuda_dev *)impl)->mem_pool, 0); }

static ff_status cu_host_alloc(void *impl, size_t size_bytes, void **out, ff__error *err) {
  cuda_dev *d = (cuda_dev *)impl;
  cudaError_t e = cudaHostAlloc(out, size_bytes, cudaHostAllocDefault); /* on the device's context */
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
  stream_node *n = (stream_node *)malloc(sizeof *n);
  if (!n) return ff__error_set(err, FF_ENOMEM, "cuda:%d: out of memory", d->ordinal);
  cudaError_t e = cudaStreamCreateWithFlags(&n->s, cudaStreamNonBlocking);
  if (e != cudaSuccess) {
    free(n);
    return fail(err, d, "cudaStreamCreateWithFlags", e);
  }
  e = cudaEventCreateWithFlags(&n->done, cudaEventBlockingSync | cudaEventDisableTiming);
  if (e != cudaSuccess) {
    cudaStreamDestroy(n->s);
    free(n);
    return fail(err, d, "cudaEventCreateWithFlags", e);
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
  cudaEventDestroy(n->done);
  cudaStreamDestroy(n->s);
  free(n);
}

static ff_status cu_stream_wait(void *impl, void *stream, void *event, ff__error *err) {
  cudaError_t e = cudaStreamWaitEvent(((stream_node *)stream)->s, (cudaEvent_t)event, 0);
  return e == cudaSuccess ? FF_OK : fail(err, (cuda_dev *)impl, "cudaStreamWaitEvent", e);
}

static void *cu_stream_handle(void *impl, void *stream) {
  (void)impl;
  return (void *)((stream_node *)stream)->s;
}

static ff_status cu_foreign_wait(void *impl, void *handle, void *event, ff__error *err) {
  cudaError_t e = cudaStreamWaitEvent((cudaStream_t)handle, (cudaEvent_t)event, 0);
  return e == cudaSuccess ? FF_OK : fail(err, (cuda_dev *)impl, "cudaStreamWaitEvent (consumer's stream)", e);
}

static ff_status cu_foreign_record(void *impl, void *event, void *handle, ff__error *err) {
  cudaError_t e = cudaEventRecord((cudaEvent_t)event, (cudaStream_t)handle);
  return e == cudaSuccess ? FF_OK : fail(err, (cuda_dev *)impl, "cudaEventRecord (consumer's stream)", e);
}

static ff_status cu_copy(void *impl, void *stream, void *dst, const void *src, size_t size_bytes, int kind,
                         ff__error *err) {
  cudaMemcpyKind k = kind == FF__COPY_H2D   ? cudaMemcpyHostToDevice
                     : kind == FF__COPY_D2H ? cudaMemcpyDeviceToHost
                                            : cudaMemcpyDeviceToDevice;
  cudaError_t e = cudaMemcpyAsync(dst, src, size_bytes, k, ((stream_node *)stream)->s);
  return e == cudaSuccess ? FF_OK : fail(err, (cuda_dev *)impl, "cudaMemcpyAsync", e);
}

/* A microbatch's finished slots into the pinned host batch: one call (CUDA
 * 13's cudaMemcpyBatchAsync, in stream order), else one copy each. */
static ff_status cu_download_batch(void *impl, void *stream, int n, void *const *dsts, const void *const *srcs,
                                   const size_t *sizes, ff__error *err) {
  cudaStream_t s = ((stream_node *)stream)->s;
#if CUDART_VERSION >= 13000
  cudaMemcpyAttributes attr = {};
  attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
  size_t first = 0;
  cudaError_t e = cudaMemcpyBatchAsync(dsts, srcs, sizes, (size_t)n, &attr, &first, 1, s);
  if (e == cudaSuccess) return FF_OK;
  if (e != cudaErrorNotSupported && e != cudaErrorInvalidValue)
    return fail(err, (cuda_dev *)impl, "cudaMemcpyBatchAsync", e);
  (void)cudaGetLastError(); /* not taken here (e.g. pageable memory on an older driver): one copy each */
#endif
  for (int i = 0; i < n; i++) {
    cudaError_t c = cudaMemcpyAsync(dsts[i], srcs[i], sizes[i], cudaMemcpyDeviceToHost, s);
    if (c != cudaSuccess) return fail(err, (cuda_dev *)impl, "cudaMemcpyAsync", c);
  }
  return FF_OK;
}

static ff_status cu_event_create(void *impl, void **out, ff__error *err) {
  cudaEvent_t ev;
  cudaError_t e = cudaEventCreateWithFlags(&ev, cudaEventBlockingSync); /* timed: device_ms */
  if (e != cudaSuccess) return fail(err, (cuda_dev *)impl, "cudaEventCreateWithFlags", e);
  *out = (void *)ev;
  return FF_OK;
}

static void cu_event_destroy(void *impl, void *event) {
  (void)impl;
  cudaEventDestroy((cudaEvent_t)event);
}

static ff_status cu_event_record(void *impl, void *event, void *stream, ff__error *err) {
  cudaError_t e = cudaEventRecord((cudaEvent_t)event, ((stream_node *)stream)->s);
  return e == cudaSuccess ? FF_OK : fail(err, (cuda_dev *)impl, "cudaEventRecord", e);
}

static ff_status cu_event_query(void *impl, void *event, int *done, ff__error *err) {
  cudaError_t e = cudaEventQuery((cudaEvent_t)event);
  *done = e != cudaErrorNotReady;
  if (e == cudaSuccess || e == cudaErrorNotReady) return FF_OK;
  return fail(err, (cuda_dev *)impl, "queued work failed (cudaEventQuery)", e);
}

static ff_status cu_event_wait(void *impl, void *event, ff__error *err) {
  cudaError_t e = cudaEventSynchronize((cudaEvent_t)event);
  return e == cudaSuccess ? FF_OK
                          : fail(err, (cuda_dev *)impl, "queued work failed (cudaEventSynchronize)", e);
}

static ff_status cu_event_elapsed_ms(void *impl, void *start, void *end, float *ms, ff__error *err) {
  cudaError_t e = cudaEventElapsedTime(ms, (cudaEvent_t)start, (cudaEvent_t)end);
  return e == cudaSuccess ? FF_OK : fail(err, (cuda_dev *)impl, "cudaEventElapsedTime", e);
}

static ff_status cu_launch(void *impl, void *stream, const void *d_table, int n, int kind, uint32_t max_count,
                           ff__error *err) {
  cuda_dev *d = (cuda_dev *)impl;
  if (n > 65535)
    return ff__error_set(err, FF_EINVAL, "cuda:%d: microbatch of %d samples (at most 65535)", d->ordinal, n);
  if (kind <= FF__DS_NONE || kind >= FF__DS_KINDS)
    return ff__error_set(err, FF_EINTERNAL, "cuda:%d: no kernel for stage kind %d", d->ordinal, kind);
  unsigned blocks;
  stage_kernel kernel = kernel_of(kind, d->tuned, max_count, &blocks);
  dim3 grid(blocks, (unsigned)n);
  kernel<<<grid, BLOCK, 0, ((stream_node *)stream)->s>>>((const ff__dstage *)d_table);
  cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? FF_OK : fail(err, d, "stage kernel launch", e);
}

static void cu_range_push(const char *name) { nvtxRangePushA(name); }
static void cu_range_pop(void) { nvtxRangePop(); }

/* The cudaStream_t (for nvJPEG; the caller holds the device's bracket). */
static void *cu_native_stream(void *impl, void *stream) {
  (void)impl;
  return ((stream_node *)stream)->s;
}

static ff__device_backend make_backend(void) {
  ff__device_backend b = {};
  b.enter = cu_enter, b.leave = cu_leave, b.synchronize = cu_synchronize, b.close = cu_close;
  b.mem_alloc = cu_mem_alloc, b.mem_free = cu_mem_free, b.mem_info = cu_mem_info;
  b.mem_trim = cu_mem_trim;
  b.host_alloc = cu_host_alloc, b.host_free = cu_host_free;
  b.stream_create = cu_stream_create, b.stream_destroy = cu_stream_destroy, b.stream_wait = cu_stream_wait;
  b.stream_handle = cu_stream_handle, b.foreign_wait = cu_foreign_wait, b.foreign_record = cu_foreign_record;
  b.retire_record = cu_retire_record;
  b.copy = cu_copy, b.download_batch = cu_download_batch, b.event_create = cu_event_create, b.event_destroy = cu_event_destroy;
  b.event_record = cu_event_record, b.event_query = cu_event_query, b.event_wait = cu_event_wait;
  b.event_elapsed_ms = cu_event_elapsed_ms, b.launch = cu_launch;
  b.native_stream = cu_native_stream; /* the decoder is nvJPEG's, wired in device.c */
  b.range_push = cu_range_push, b.range_pop = cu_range_pop;
  return b;
}
static const ff__device_backend cuda_backend = make_backend();

/* ------------------------------------------------------------ open */

/* The device count, or FF_EDEVICE naming why there is none. Loads the
 * driver entry points. */
static ff_status device_count(int *count, const char *what, ff__error *err) {
  cudaError_t e = cudaGetDeviceCount(count);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return ff__error_set(
        err, FF_EDEVICE,
        "%s: no usable GPU or NVIDIA driver here (the CUDA runtime says: %s); use emu:0 or cpu", what,
        cudaGetErrorString(e));
  }
  pthread_once(&drv_once, drv_load);
  if (!drv_ok)
    return ff__error_set(err, FF_EDEVICE,
                         "%s: the NVIDIA driver lacks the entry points needed; use emu:0 or cpu", what);
  return FF_OK;
}

extern "C" ff_status ff__cuda_probe(int *count, int *current, ff__error *err) {
  ff_status st = device_count(count, "auto", err);
  if (st) return st;
  if (!*count) return ff__error_set(err, FF_EDEVICE, "auto: no CUDA device; use emu:0 or cpu");
  *current = -1;
  CUcontext cur = NULL;
  CUdevice dev;
  if (drv.ctx_get_current(&cur) == CUDA_SUCCESS && cur && drv.ctx_get_device(&dev) == CUDA_SUCCESS) {
    *current = (int)dev; /* a device is current on this thread: torch's */
    return FF_OK;
  }
  int rt_dev = 0;
  unsigned flags = 0;
  int active = 0;
  if (cudaGetDevice(&rt_dev) == cudaSuccess && drv.device_get(&dev, rt_dev) == CUDA_SUCCESS &&
      drv.primary_state(dev, &flags, &active) == CUDA_SUCCESS && active)
    *current = rt_dev;
  cudaGetLastError();
  return FF_OK;
}

extern "C" ff_status ff__cuda_open(int ordinal, const ff__device_options *opt, ff__device_opened *out,
                                   ff__error *err) {
  (void)opt;
  char what[32];
  snprintf(what, sizeof what, "cuda:%d", ordinal);
  int count = 0;
  ff_status st = device_count(&count, what, err);
  if (st) return st;
  if (ordinal >= count)
    return ff__error_set(err, FF_EDEVICE, "cuda:%d: no such device (%d CUDA device%s); use emu:0 or cpu",
                         ordinal, count, count == 1 ? "" : "s");
  cuda_dev *d = (cuda_dev *)calloc(1, sizeof *d);
  if (!d) return ff__error_set(err, FF_ENOMEM, "cuda:%d: out of memory", ordinal);
  d->ordinal = ordinal;
  const char *kernels = getenv("FF_DEVICE_KERNELS");
  d->tuned = !(kernels && !strcmp(kernels, "plain"));
  if (drv.device_get(&d->cu_dev, ordinal) != CUDA_SUCCESS ||
      drv.primary_retain(&d->ctx, d->cu_dev) != CUDA_SUCCESS) {
    free(d);
    return ff__error_set(err, FF_EDEVICE,
                         "cuda:%d: cannot open the device's primary context; use emu:0 or cpu", ordinal);
  }
  pthread_mutex_init(&d->lock, NULL);
  ff__dguard g;
  if ((st = cu_enter(d, &g, err))) {
    pthread_mutex_destroy(&d->lock);
    drv.primary_release(d->cu_dev);
    free(d);
    return st;
  }
  cudaDeviceProp prop;
  size_t free_bytes = 0, total_bytes = 0;
  cudaMemPoolProps pp = {};
  pp.allocType = cudaMemAllocationTypePinned;
  pp.location.type = cudaMemLocationTypeDevice;
  pp.location.id = ordinal;
  int no_deps = 0; /* an allocation reuses only memory whose free has completed (cu_mem_alloc) */
  cudaError_t e;
  if ((e = cudaGetDeviceProperties(&prop, ordinal)) != cudaSuccess ||
      (e = cudaMemGetInfo(&free_bytes, &total_bytes)) != cudaSuccess ||
      (e = cudaMemPoolCreate(&d->mem_pool, &pp)) != cudaSuccess ||
      (e = cudaMemPoolSetAttribute(d->mem_pool, cudaMemPoolReuseAllowInternalDependencies, &no_deps)) !=
          cudaSuccess ||
      (e = cudaMemPoolSetAttribute(d->mem_pool, cudaMemPoolReuseFollowEventDependencies, &no_deps)) !=
          cudaSuccess ||
      (e = cudaStreamCreateWithFlags(&d->mem_stream, cudaStreamNonBlocking)) != cudaSuccess ||
      (e = cudaStreamCreateWithFlags(&d->alloc_stream, cudaStreamNonBlocking)) != cudaSuccess ||
      (e = cudaEventCreateWithFlags(&d->mem_done, cudaEventBlockingSync | cudaEventDisableTiming)) !=
          cudaSuccess ||
      (e = cudaEventCreateWithFlags(&d->alloc_done, cudaEventBlockingSync | cudaEventDisableTiming)) !=
          cudaSuccess) {
    st = ff__error_set(err, FF_EDEVICE, "cuda:%d: cannot open: %s; use emu:0 or cpu", ordinal,
                       cudaGetErrorString(e));
    cudaGetLastError();
    release(d);
    cu_leave(d, &g);
    drv.primary_release(d->cu_dev);
    free(d);
    return st;
  }
  cu_leave(d, &g);
  size_t tenth = total_bytes / 10, gib = (size_t)1 << 30;
  out->be = &cuda_backend, out->impl = d;
  out->default_headroom_bytes = tenth > gib ? tenth : gib;
  snprintf(out->name, sizeof out->name, "cuda:%d (%.100s)", ordinal, prop.name);
  return FF_OK;
}
