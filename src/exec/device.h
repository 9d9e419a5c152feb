/* device.h — the device interface: one API over two implementations, a CUDA
 * GPU (`cuda:N`, exec/cuda.cu) and a host-emulated device (`emu:N`,
 * exec/emu.c) that runs the same kernel arithmetic on its own thread;
 * exec/backends.c opens one by name, exec/device.c is the object around it.
 *
 * It is what the scheduler needs to send work to a device without ever
 * taking memory the trainer needs: device memory only from the budgeted
 * pool (exec/pool.h), pinned host staging, streams (FIFOs of copies and
 * launches), events (completion and device time), and the launch of one
 * stage index of a microbatch's stage table (kernels/stage.h), and the
 * device's JPEG decoder where it has one (placement `device`). The
 * microbatch itself — decoded images and plans in, finished tensors out —
 * is exec/dev_batch.h.
 *
 * Nothing here synchronises by itself except ff__device_event_wait,
 * ff__device_synchronize and ff__device_close. Errors of asynchronous work
 * (a failed kernel) surface at the next event query or wait. Thread-safety:
 * the pool is thread-safe; a stream and its events belong to one thread at
 * a time. */
#ifndef FF_EXEC_DEVICE_H
#define FF_EXEC_DEVICE_H

#include <stddef.h>
#include <stdint.h>

#include "codec/codec.h"
#include "core/error.h"
#include "exec/pool.h"

typedef struct ff__device ff__device;
typedef struct ff__dstream ff__dstream; /* a stream of the device's backend */
typedef struct ff__devent ff__devent;   /* an event of the device's backend */

typedef struct ff__device_options {
  size_t limit_bytes; /* pool limit; 0 = only the free memory minus the headroom */
  int64_t
      headroom_bytes; /* left free for the trainer; -1 = default (cuda: max(1 GiB, 10% of total); emu: 0) */
  unsigned
      refresh_every;    /* re-read the free memory every this many raw allocations (default 64; 0 = never) */
  size_t emu_mem_bytes; /* emu: device memory size; 0 = `?mem=` in the name, else 2 GiB */
  unsigned emu_fail_alloc_after; /* emu: raw allocations after this many fail; 0 = never (or FF_EMU_FAULTS) */
  unsigned
      emu_fail_kernel_at; /* emu: the launch with this number (1-based) fails; 0 = never (or FF_EMU_FAULTS) */
  unsigned emu_alloc_error_at; /* emu: the raw allocation with this number fails with a device error (not out
                                  of memory) */
  unsigned
      emu_delay_us; /* emu: up to this many µs of random delay before each command; 0 = `?delay=` or none */
  /* The caller's allocator for every raw device allocation (ff_config's
   * device_alloc / device_free); NULL: the backend's own. */
  int (*alloc_hook)(void *ctx, size_t size_bytes, void *stream, void **out);
  void (*free_hook)(void *ctx, void *ptr, size_t size_bytes, void *stream);
  void *hook_ctx;
  int decoder; /* cuda: load nvJPEG (exec/nvjpeg.h) as the device's decoder; only the offload device needs it */
} ff__device_options;

void ff__device_options_init(ff__device_options *opt);

/* Opens "cuda:N", "emu:N", "emu:N?mem=256M" (K, M, G suffixes) or
 * "emu:N?mem=256M&delay=200" (µs of random delay per command); "cuda" and
 * "emu" mean device 0; "auto" means the CUDA device ff__device_auto_pick
 * chooses. opt may be NULL (defaults). Returns FF_OK, FF_EINVAL (bad
 * name), FF_EDEVICE (no such device, no driver, CUDA not built: the message
 * says which and suggests emu:0 or cpu), FF_ENOMEM. Leaves the calling
 * thread's current CUDA device as it was (as does every call here). */
ff_status ff__device_open(const char *name, const ff__device_options *opt, ff__device **out, ff__error *err);

/* What a device name names, without opening anything: the one place that
 * reads a name's kind (the loader asks here, never tests prefixes itself). */
typedef enum ff__device_kind {
  FF__DEVICE_KIND_NONE, /* NULL, "", or not a device name (the open says why) */
  FF__DEVICE_KIND_CPU,  /* "cpu" */
  FF__DEVICE_KIND_AUTO, /* "auto": the CUDA device a trainer here would use */
  FF__DEVICE_KIND_CUDA, /* "cuda", "cuda:N" */
  FF__DEVICE_KIND_EMU   /* "emu", "emu:N", with options after '?' */
} ff__device_kind;
ff__device_kind ff__device_name_kind(const char *name);
/* The ordinal N a cuda or emu device name names ("cuda:N", "emu:N?..."; 0
 * for "cuda" and "emu"), or -1 for any other name (cpu, auto, NULL, not a
 * device name). Opens nothing. */
int ff__device_name_ordinal(const char *name);

/* The CUDA GPUs offload could use here: -1 when the library was built
 * without CUDA, else the number of usable devices (0: none, with the reason
 * in *err). Opens no device. */
int ff__device_cuda_gpus(ff__error *err);

/* The CUDA device `auto` means, as torch picks it: the calling thread's
 * current device when the process has initialised CUDA there (current >=
 * 0), else LOCAL_RANK (the launcher's rank on this node; NULL or not a
 * number: 0) modulo the visible devices (count > 0), so each rank of a
 * torchrun job takes its own GPU, also under a per-rank
 * CUDA_VISIBLE_DEVICES. */
int ff__device_auto_pick(int current, const char *local_rank, int count);

/* Waits for all queued work, frees every pool block and the device. NULL
 * does nothing. Streams, events and pinned buffers must be destroyed first.
 * A device retained n times closes at its (n+1)-th close. */
void ff__device_close(ff__device *d);

/* One more handle on d (for a second user of the same device, e.g. the
 * output ring on the offload device, so that both share one pool, one
 * set of streams' ordering and pointers); returns d. Thread-safe. */
ff__device *ff__device_retain(ff__device *d);

/* Whether name ("cuda:N", "emu:N", options after '?' ignored; not "auto")
 * names the device d runs on: same kind and ordinal. */
int ff__device_is(const ff__device *d, const char *name);

typedef struct ff__device_info {
  char name[160];                 /* "cuda:0 (NVIDIA H200)", "emu:0" */
  size_t total_bytes, free_bytes; /* the device's memory now */
  ff__pool_stats pool;            /* limit, reserved, used, peak */
} ff__device_info;

ff_status ff__device_query(ff__device *d, ff__device_info *out, ff__error *err);

/* Re-reads the free memory; the pool limit follows it (ff__pool_refresh).
 * The pool's figures after that go to *pool_out (may be NULL). */
ff_status ff__device_refresh(ff__device *d, ff__pool_stats *pool_out, ff__error *err);

/* Takes at most free_bytes as the device's free memory from now on — the
 * trainer's view of what it can spare — and never more than the backend's
 * own query says is free; -1 goes back to that alone. The limit follows at
 * once; when it shrinks the pool hands cached blocks back and trims
 * (cudaMemPoolTrimTo). FF_OK or FF_EDEVICE. */
ff_status ff__device_set_free(ff__device *d, int64_t free_bytes, ff__error *err);

/* Device memory from the pool: FF_OK, FF__EBUDGET (not now: over budget or
 * the device is out of memory — run on the CPU), FF_EDEVICE (the device
 * failed otherwise: not a budget matter), FF_EINVAL. */
ff_status ff__device_alloc(ff__device *d, size_t size_bytes, void **d_out, ff__error *err);
void ff__device_free(ff__device *d, void *d_ptr);

/* Pinned (page-locked) host memory for staging uploads. FF_OK or FF_ENOMEM. */
ff_status ff__device_host_alloc(ff__device *d, size_t size_bytes, void **out, ff__error *err);
void ff__device_host_free(ff__device *d, void *ptr);

ff_status ff__device_stream_create(ff__device *d, ff__dstream **out, ff__error *err);
void ff__device_stream_destroy(ff__device *d, ff__dstream *s);

/* Asynchronous copies on stream s; the host memory must stay untouched
 * until an event recorded after them completes. */
ff_status ff__device_upload(ff__device *d, ff__dstream *s, void *d_dst, const void *src, size_t size_bytes,
                            ff__error *err);
ff_status ff__device_download(ff__device *d, ff__dstream *s, void *dst, const void *d_src, size_t size_bytes,
                              ff__error *err);

/* A device-to-device copy on s (both pointers device memory of d). */
ff_status ff__device_copy(ff__device *d, ff__dstream *s, void *d_dst, const void *d_src, size_t size_bytes,
                          ff__error *err);

/* n device-to-host copies queued on s by one call (cuda: one
 * cudaMemcpyBatchAsync; host memory pinned for it to be asynchronous), in
 * stream order. FF_OK or FF_EDEVICE. */
ff_status ff__device_download_batch(ff__device *d, ff__dstream *s, int n, void *const *dsts,
                                    const void *const *d_srcs, const size_t *sizes, ff__error *err);

/* Work queued on s after this call starts only when e's last record (made
 * before this call) has completed. FF_OK or FF_EDEVICE. */
ff_status ff__device_stream_wait(ff__device *d, ff__dstream *s, ff__devent *e, ff__error *err);

/* A consumer's streams: the handle of one of ours as a consumer sees it
 * (cuda: its cudaStream_t; emu: the ff__dstream), and making a consumer's
 * stream (given by such a handle; cuda: any cudaStream_t of the device, 0
 * the legacy default stream; emu: NULL the emulator's default stream) wait
 * for e, or recording e on it. FF_OK or FF_EDEVICE. */
void *ff__device_stream_handle(ff__device *d, ff__dstream *s);
ff_status ff__device_foreign_wait(ff__device *d, void *handle, ff__devent *e, ff__error *err);
ff_status ff__device_foreign_record(ff__device *d, ff__devent *e, void *handle, ff__error *err);

/* Events are blocking-sync: waiting for one sleeps, it does not spin. */
ff_status ff__device_event_create(ff__device *d, ff__devent **out, ff__error *err);
void ff__device_event_destroy(ff__device *d, ff__devent *e);
/* Completes when the work queued on s before it is done. */
ff_status ff__device_event_record(ff__device *d, ff__devent *e, ff__dstream *s, ff__error *err);
/* *done = 1 when complete. FF_EDEVICE when queued work failed (message
 * names the failure). */
ff_status ff__device_event_query(ff__device *d, ff__devent *e, int *done, ff__error *err);
ff_status ff__device_event_wait(ff__device *d, ff__devent *e, ff__error *err);
/* Device time between two completed events, in milliseconds. */
ff_status ff__device_event_elapsed_ms(ff__device *d, ff__devent *start, ff__devent *end, float *ms,
                                      ff__error *err);

/* A named range of the calling thread's work for a profiler (cuda: an
 * NVTX range, seen in Nsight Systems beside the trainer's; emu: nothing),
 * and its end. Pairs nest. NULL d does nothing. */
void ff__device_range_push(ff__device *d, const char *name);
void ff__device_range_pop(ff__device *d);

/* Waits for all work queued on the device (error paths and shutdown). */
void ff__device_synchronize(ff__device *d);

/* Launches n stage records of one kind, packed at d_table (device memory:
 * n ff__dstage records of kind `kind`; a record of another kind, e.g. an
 * FF__DS_NONE placeholder, does nothing): every element of each (max_count:
 * the largest count among them), in the kind's shape
 * (kernels/stage_block.h; cuda: a kernel per kind). FF_OK or FF_EDEVICE. */
ff_status ff__device_launch_stages(ff__device *d, ff__dstream *s, const void *d_table, int n, int kind,
                                   uint32_t max_count, ff__error *err);

/* ---- the decoder ---- */

/* The device's JPEG decoder: "libjpeg-turbo" (emu, bit-identical to the
 * CPU decode), "nvjpeg-like" (emu:N?decode=nvjpeg: libjpeg-turbo with
 * nvJPEG's arithmetic, no fancy upsampling and the IFAST IDCT),
 * "nvjpeg-hardware" / "nvjpeg-hybrid" (cuda, libnvjpeg loaded at run
 * time), or NULL when there is none; then *why (may be NULL) gets the
 * reason, e.g. why libnvjpeg could not be loaded. */
const char *ff__device_decoder(ff__device *d, const char **why);

/* 1 when the decoder runs on engines of its own beside the kernels
 * (nvJPEG's hardware backend): its time does not take the SMs from the
 * trainer, so it does not count against the interference cap. */
int ff__device_decoder_beside_kernels(ff__device *d);

/* Whether the decoder takes an image with this header and, when data is
 * not NULL, these encoded bytes, decoded for req (nvJPEG parses them, and
 * its hardware backend answers for req's region and scale): 1, or 0 with
 * *why ("not a JPEG", "CMYK/YCCK", "progressive", ...) — the CPU then
 * decodes it. Thread-safe. */
int ff__device_decode_takes(ff__device *d, const ff__image_info *info, const uint8_t *data, size_t size_bytes,
                            const ff__decode_req *req, const char **why);

/* The fewest images ff__device_decode takes in one call (nvJPEG's hybrid
 * backend: 51, below which it decodes Huffman on the calling thread; else 1). */
int ff__device_decode_min_batch(ff__device *d);

/* Device memory the decode of req's region of an image with header info
 * writes: the region (an upper bound over the DCT scales), or the whole
 * image for a decoder that cannot decode a region alone (nvJPEG hybrid). */
size_t ff__device_decode_bytes(ff__device *d, const ff__image_info *info, const ff__decode_req *req);

/* One decode. The caller fills the inputs; ff__device_decode sets the
 * geometry of the image it will write when it queues the job, and the
 * pixels are there when the work queued before an event recorded after it
 * has completed (read them after that event's wait). */
typedef struct ff__device_decode_job {
  const uint8_t *src;        /* encoded bytes (host memory, untouched until then) */
  size_t size_bytes;
  const char *name;          /* the file, for messages */
  ff__image_info info;       /* its header */
  ff__decode_req req;        /* region, DCT-scale minimum, pixel limit */
  void *d_dst;               /* device memory of ff__device_decode_bytes */
  size_t dst_bytes;
  /* out, set when queued */
  int width, height;         /* the decoded region (DCT-scaled where the decoder scales) */
  size_t offset_bytes, pitch_bytes; /* where it starts in d_dst, and its row pitch (RGB) */
  ff_status status;          /* FF_OK: queued; else the decoder failed it at once (nvJPEG: FF_EDATA,
                                FF_EDEVICE, ...) — the CPU then decodes it, so that a corrupt file
                                fails exactly as there */
  /* out, valid once the event after it has completed (the device writes them meanwhile) */
  ff_status result;          /* the decode's outcome (the backend's own decoder fails a file only here) */
  ff__error err;             /* why it failed */
} ff__device_decode_job;

/* Queues n jobs (at least ff__device_decode_min_batch) on stream s with
 * decoder state `slot` (one per microbatch in flight, 0 ..; its previous
 * decode must have completed). nvJPEG decodes them in one batched call,
 * which has one status for the whole batch: a failed batch is split in
 * halves, and those again, until each image that fails is alone (or in the
 * smallest batch the decoder takes: its batch mates fail with it); the
 * jobs' statuses say which decoded. *calls_failed gets the batched calls
 * that failed. The jobs stay untouched until the event after them has
 * completed. Returns FF_OK (the jobs' statuses say which decoded) or
 * FF_EDEVICE (no decoder, or the queueing failed: nothing was queued),
 * FF_EINVAL (fewer jobs than the minimum), FF_ENOMEM. */
ff_status ff__device_decode(ff__device *d, ff__dstream *s, int slot, ff__device_decode_job *jobs, int n,
                            int *calls_failed, ff__error *err);

#endif
