/* nvjpeg.h — NVIDIA's nvJPEG batched JPEG decoder, loaded at run time.
 *
 * The library is opened with dlopen — FF_NVJPEG_LIBRARY when set (a path or
 * a name; the tests point it at a stub with the same symbols), else
 * libnvjpeg.so.13, libnvjpeg.so.12, libnvjpeg.so from the loader's search
 * path (the CUDA toolkit's, or the `nvidia-nvjpeg` wheel's) — so fusionflow
 * builds, loads and runs where there is none: opening then fails with a
 * message that names what was tried and why, and the device goes on without
 * a decoder (placement `split`). The few types and entry points used are
 * declared here from nvJPEG's documented C ABI; no NVIDIA header is needed
 * to build.
 *
 * The handle is made with nvjpegCreateExV2 and the caller's device and
 * pinned allocators, so nvJPEG's scratch memory comes from the budgeted
 * pool; the hardware backend (the JPEG engines of A100/H100/H200) is tried
 * first, then the GPU hybrid one (FF_NVJPEG_BACKEND=hardware or hybrid
 * forces one, for measurements). Per image the decoder is asked whether it
 * takes it: the stream's header is parsed (CMYK/YCCK are refused: nvJPEG's
 * conversion is not Adobe's, which the CPU decoder follows) and, on the
 * hardware backend only, nvjpegDecodeBatchedSupportedEx answers for the
 * region and scale that will be decoded (the hybrid backend has no such
 * call: libnvjpeg answers "not supported for the selected backend"). The
 * hardware backend decodes the region of interest (nvjpegDecodeBatchedEx
 * with an ROI), reduced by its scale factor when asked; the hybrid one
 * decodes the whole image and the region is a view into it, and it decodes
 * Huffman on the GPU only for batches of more than 50 baseline images
 * (below that on the calling thread), so it takes no smaller batch
 * (ff__nvjpeg_min_batch). A batched decode has one status for the batch.
 * Each microbatch in flight decodes with a state of its own (a slot: one
 * nvjpegJpegState_t, its decode parameters and arrays), so one can be
 * queued while another runs; a hardware state is pre-allocated
 * (nvjpegDecodeBatchedPreAllocate) at its first batch. The support check
 * may be called from any thread; the decodes from one thread at a time. */
#ifndef FF_EXEC_NVJPEG_H
#define FF_EXEC_NVJPEG_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

typedef struct ff__nvjpeg ff__nvjpeg;

/* Where nvJPEG's memory comes from (nvJPEG's V2 allocator signatures;
 * stream is a cudaStream_t). Each returns 0 on success. */
typedef struct ff__nvjpeg_alloc {
  void *ctx;
  int (*dev_malloc)(void *ctx, void **ptr, size_t size, void *stream);
  int (*dev_free)(void *ctx, void *ptr, size_t size, void *stream);
  int (*pinned_malloc)(void *ctx, void **ptr, size_t size, void *stream);
  int (*pinned_free)(void *ctx, void *ptr, size_t size, void *stream);
} ff__nvjpeg_alloc;

/* Loads the library and creates a handle with alloc's allocators. Returns
 * FF_OK or FF_EDEVICE with the reason ("libnvjpeg.so.13: cannot open shared
 * object file ...; libnvjpeg.so.12: ..."), FF_ENOMEM. */
ff_status ff__nvjpeg_open(const ff__nvjpeg_alloc *alloc, ff__nvjpeg **out, ff__error *err);

/* Destroys the handle and unloads the library. NULL does nothing. */
void ff__nvjpeg_close(ff__nvjpeg *n);

/* "nvjpeg-hardware" or "nvjpeg-hybrid". */
const char *ff__nvjpeg_backend(const ff__nvjpeg *n);

/* Whether the region is decoded by itself (hardware backend) or as a view
 * into the whole image (hybrid): what ff__nvjpeg_decode writes. */
int ff__nvjpeg_decodes_region(const ff__nvjpeg *n);

/* Whether the decoder can reduce the image by 2, 4 or 8 as it decodes
 * (the hardware backend, with nvjpegDecodeParamsSetScaleFactor). */
int ff__nvjpeg_scales(const ff__nvjpeg *n);

/* The fewest images a batched decode takes: 51 on the hybrid backend
 * (its Huffman decode runs on the GPU only above 50 baseline images, per
 * nvJPEG's documentation), else 1. */
int ff__nvjpeg_min_batch(const ff__nvjpeg *n);

/* One image of a batch: the bytes, the region (full-image pixels; width 0:
 * the whole image, whose size must be given), the reduction, the destination. */
typedef struct ff__nvjpeg_image {
  const uint8_t *data;
  size_t size_bytes;
  int image_width, image_height; /* from the header */
  int x, y, width, height;       /* the region of interest */
  int scale_shift;               /* decode reduced by 2^scale_shift (0..3); > 0 only where ff__nvjpeg_scales */
  void *d_dst;                   /* device memory: interleaved RGB, pitch_bytes per row */
  size_t pitch_bytes;            /* >= 3 x the decoded width */
} ff__nvjpeg_image;

/* Whether the decoder takes im's bytes, decoded as im says (its region and
 * reduction; d_dst unused): 1, or 0 with *why ("CMYK/YCCK", "not a JPEG
 * the decoder can parse", "not supported by the decoder
 * (nvjpegDecodeBatchedSupportedEx)", ...) — the CPU then decodes the image.
 * Thread-safe. */
int ff__nvjpeg_takes(ff__nvjpeg *n, const ff__nvjpeg_image *im, const char **why);

/* Decodes count images on stream (a cudaStream_t) into their destinations,
 * with the state of `slot` (0 ..; made at its first use; its previous
 * decode must have completed): with ff__nvjpeg_decodes_region the region
 * alone (region width x height, reduced by the scale), else the whole image
 * (image_width x image_height). Asynchronous: the pixels are there when
 * work queued on stream after it completes. The bytes and destinations
 * stay untouched until then. Returns FF_OK, FF_EDATA (nvJPEG found a stream
 * bad: the batch failed), FF_EBUDGET (our allocator said no), FF_EDEVICE
 * (any other failure); the message names nvJPEG's status. */
ff_status ff__nvjpeg_decode(ff__nvjpeg *n, int slot, const ff__nvjpeg_image *images, int count, void *stream,
                            ff__error *err);

#endif
