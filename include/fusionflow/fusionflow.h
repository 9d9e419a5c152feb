/*
 * fusionflow.h — the one public header of libfusionflow, and its manual.
 *
 * fusionflow feeds training with batches of augmented images. A loader reads a
 * source (an index of encoded images and integer labels), orders it for the
 * epoch (seeded shuffle, DistributedSampler sharding), draws every random
 * parameter of every sample up front from a counter-based RNG keyed by
 * (seed, epoch, sample index), and runs the pipeline on a pool of CPU threads
 * into an ordered ring (`prefetch` batches ahead of the consumer).
 *
 * With a device configured (ff_config.device) a cooperative scheduler also
 * sends part of each batch to it when, and only as far as, the CPU pool
 * cannot keep up with the consumer — the system of "FusionFlow: Accelerating
 * Data Preprocessing for Machine Learning with CPU-GPU Cooperation" (Kim et
 * al., PVLDB 17(4), 2023). Each of those samples is placed `split` (the CPU
 * reads and decodes it, the device runs its ops as batched kernels) or, with
 * device decode on, `device` (the CPU only reads it; the device decodes it
 * too). See ff_config.device and ff_config.device_decode.
 *
 * Batches are bit-identical for the same (seed, epoch) whatever the number of
 * threads and whatever share the device took (its kernels do the CPU's
 * arithmetic, operation for operation), unless device decode is on: see the
 * determinism contract at ff_config.device_decode.
 *
 * Conventions
 *   - Every fallible function returns ff_status: FF_OK (0) or a negative code.
 *     Outputs are written through `out` parameters and left untouched on
 *     failure. The message of the last failure is on the loader
 *     (ff_loader_errmsg), owned by the library.
 *   - Times are in nanoseconds (`_ns`) unless a name says otherwise; sizes in
 *     bytes (`_bytes`); rates in samples (images) per second.
 *   - Thread-safety: one loader may be used by one consumer thread at a time;
 *     different loaders are independent. ff_batch accessors may be called from
 *     any thread while the batch is held. ff_batch_release may be called from
 *     any thread.
 */
#ifndef FUSIONFLOW_H
#define FUSIONFLOW_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(FF_BUILDING_LIBRARY)
#define FF_API __attribute__((visibility("default")))
#else
#define FF_API
#endif

#define FF_VERSION_MAJOR 0
#define FF_VERSION_MINOR 1
#define FF_VERSION_PATCH 0

/* "MAJOR.MINOR.PATCH" of the library that is linked (may differ from the header). */
FF_API const char *ff_version(void);

/* The widest instruction set the CPU ops' vector paths use in this process:
 * "avx512" (AVX-512 F, BW and VL), "avx2" (AVX2 with FMA) or "scalar" (none
 * of them; also on CPUs other than x86-64). It is the CPU's own, capped by
 * the environment variable FF_CPU_ISA ("scalar", "avx2" or "avx512"), read
 * once, at the first use of an op or of this function; an unknown value is
 * named on stderr and ignored. Every path gives the same bytes: the cap
 * changes the speed only (it lets a test run one process on another path
 * than its peers). Static string. */
FF_API const char *ff_cpu_isa(void);

/* Status codes. Errors are grouped by kind; a caller that only needs the kind
 * compares ranges: -1..-9 invalid argument, -10..-19 input data, -20..-29 I/O,
 * -30..-39 memory, -40..-49 device, -90..-99 internal. */
typedef enum ff_status {
  FF_OK = 0,
  FF_END = 1,              /* not an error: the epoch has no more batches */
  FF_EINVAL = -1,          /* invalid argument or configuration value */
  FF_EPIPELINE = -2,       /* the pipeline text does not parse; message names the column */
  FF_EDATA = -10,          /* an image is corrupt, truncated or of an unsupported kind */
  FF_ETOOBIG = -11,        /* an image has more pixels than max_image_pixels */
  FF_EEMPTY = -12,         /* the source holds no sample */
  FF_EIO = -20,            /* a file could not be opened or read */
  FF_ENOMEM = -30,         /* host memory could not be allocated */
  FF_EDEVICE = -40,        /* a device error, or the device named in ff_config.device cannot be opened */
  FF_EBUDGET = -41,        /* device memory not available now (over the budget, or the device is full);
                              internal to the scheduler, which then runs the work on the CPU: a loader
                              never fails with it */
  FF_EINTERNAL = -90,      /* a bug: please report it */
} ff_status;

/* A short constant English name of a status ("invalid argument", ...). Never NULL. */
FF_API const char *ff_status_str(ff_status status);

/* What a worker does with a sample it cannot read or decode. */
typedef enum ff_on_error {
  FF_ON_ERROR_RAISE = 0,   /* ff_loader_next returns the error for the batch holding it (default) */
  FF_ON_ERROR_SKIP = 1,    /* the sample is left out of its batch, counted and its path kept */
  FF_ON_ERROR_REPLACE = 2, /* the sample is replaced by the next sample of the epoch's order that
                              succeeds (with that sample's own label, index and random draws),
                              counted (ff_stats.replaced) and its path kept: every batch keeps its
                              size and every rank its batch count (DDP, torch.compile, timm). The
                              substitute is a pure function of (seed, epoch), like the rest. When none
                              of the next 1000 samples succeeds, the batch fails with the sample's own
                              error, as under raise */
} ff_on_error;

/* The permutation of a shuffled epoch (ff_config.permutation). */
typedef enum ff_permutation {
  FF_PERMUTATION_PHILOX = 0, /* Fisher-Yates on a Philox4x32-10 stream keyed by (seed, epoch) (default) */
  FF_PERMUTATION_TORCH = 1,  /* torch.randperm(n) after torch.Generator().manual_seed(seed + epoch):
                                exactly DistributedSampler's order (and, with one rank, a DataLoader's
                                with that generator), for n < 214,748,364 samples; computed here,
                                torch is not needed */
} ff_permutation;

/* Which torchvision API the ops' arithmetic follows (ff_config.semantics).
 * Both are torchvision 0.29's uint8 tensor path on torch 2.x; they differ
 * by at most one level per pixel, and only where listed:
 *   FF_SEMANTICS_V1 = 0  torchvision.transforms (v1) (default)
 *   FF_SEMANTICS_V2 = 1  torchvision.transforms.v2: color (saturation) and
 *     contrast blend as x.mul(f).add_(y, alpha=1 - f) (a fused multiply-add)
 *     with a gray of two fused multiply-adds; sharpness leaves the border
 *     pixels unchanged and adds (1 - f) * (smoothed - x) fused; autocontrast
 *     divides by (max - min) / 255; the bilinear warps (rotate, shear_*,
 *     translate_*, affine parts of the policies) blend a fill colour as
 *     (img - fill) * mask + fill; to_dtype (and normalize's first step)
 *     multiplies by 1/255 where v1 divides by 255 (126 of the 256 values
 *     differ by an ulp); the policies' solarize thresholds are
 *     255 * linspace(1, 0, n) (TrivialAugmentWide's bins 16, 18 and 24 of
 *     31 leave the values 119, 102 and 51 alone). Not reproduced: v2's
 *     native uint8 bilinear resize (resize, random_resized_crop), which
 *     rounds its weights to fixed point: v2's resize differs from ours (and
 *     v1's) by one level in 15-16% of the values (measured by the golden
 *     tests; docs/pipeline.md, "v1 and v2"). Brightness, posterize, equalize, invert,
 *     the nearest warps, the warps without a fill, crops, flips, normalize's
 *     mean and std and AugMix's mixing are the same in both. */
typedef enum ff_semantics {
  FF_SEMANTICS_V1 = 0,
  FF_SEMANTICS_V2 = 1,
} ff_semantics;

/* Where a sample of a batch is prepared; the scheduler picks one per sample
 * (see ff_config.device and ff_config.device_decode). */
typedef enum ff_placement {
  FF_PLACEMENT_CPU = 0,    /* read, decode and ops on a CPU worker thread */
  FF_PLACEMENT_SPLIT = 1,  /* a CPU worker reads and decodes; the device runs the ops */
  FF_PLACEMENT_DEVICE = 2, /* a CPU worker reads the encoded bytes; the device decodes and runs the ops */
  FF_PLACEMENT_REMOTE = 3, /* a remote worker (ff_config.remote) reads, decodes and runs the ops; the
                              loader converts its uint8 pixels into the batch */
  FF_PLACEMENTS = 4        /* the number of placements (array sizes below) */
} ff_placement;

/* Whether samples sent to the device may be decoded there (ff_config.device_decode). */
typedef enum ff_device_decode {
  FF_DEVICE_DECODE_AUTO = 0, /* on for a CUDA device with a decoder (nvJPEG), off otherwise (default) */
  FF_DEVICE_DECODE_OFF = 1,  /* never: placements cpu and split only */
  FF_DEVICE_DECODE_ON = 2,   /* whenever the device has a decoder (emu: libjpeg-turbo on the emulator thread) */
} ff_device_decode;

/* One sample handed in by a callback source (ff_source_callbacks.fetch),
 * filled by the caller. */
typedef struct ff_source_item {
  const void *data;  /* the encoded image (JPEG, PNG, WebP, TIFF, PBM/PGM/PPM or BMP, told apart by
                        content), size_bytes bytes; must stay valid and unchanged until release is
                        called with this item; the library only reads it */
  size_t size_bytes;
  int64_t label;     /* the sample's label, >= 0 */
  const char *error; /* NULL when data and label are set; otherwise why the sample cannot be given
                        (e.g. "IndexError: list index out of range"), valid until release: the
                        sample fails with FF_EDATA "NAME[INDEX]: error" under on_error */
  void *handle;      /* the caller's own (e.g. the object that owns data); the library never touches it */
} ff_source_item;

/* A source of encoded images in the caller's hands (a Python dataset, a
 * database, an archive the caller reads): sample i of count is whatever
 * fetch gives for index i. The library asks for the samples of a batch
 * together, in one call, as the batch is started (a sample it needs again
 * later, e.g. after a seek or as a substitute, is asked for alone).
 *
 * Threads: fetch and release are called from the loader's worker threads
 * (several at once, for different batches: they must be thread-safe) and
 * from the thread calling ff_loader_plan, never with a lock of the library
 * held that the consumer could wait on; they must not call the loader. After
 * ff_loader_close returns, neither is called again (every fetched item has
 * been released).
 *
 * Ownership: the items' data belongs to the caller. The library copies the
 * bytes of each item to its worker (once per sample), and then calls release
 * once for each fetch call's items (all of them, with the same pointer and n,
 * also those with an error), when every item of it has been copied or will
 * not be (a seek, close). release must not block on anything a worker thread
 * may wait for (for Python: it must not take the GIL; defer the reference
 * drops).
 *
 * Determinism: batches depend only on the bytes and labels fetch gives for
 * each index; a fetch that gives the same for the same index keeps batches
 * bit-identical whatever the thread count. */
typedef struct ff_source_callbacks {
  size_t count; /* samples, >= 1; indices passed to fetch are in [0, count) */
  /* Fills items[k] for indices[k], k < n (items come zeroed); each item with
   * data and label, or with error. */
  void (*fetch)(void *ctx, const uint64_t *indices, size_t n, ff_source_item *items);
  /* Takes back the items of one fetch call (see Ownership). May be NULL. */
  void (*release)(void *ctx, ff_source_item *items, size_t n);
  void *ctx;        /* passed to both */
  const char *name; /* names the samples in messages: "NAME[INDEX]"; NULL: "callback" */
} ff_source_callbacks;

/* What the open of a streamed tar: source waits for (ff_config.open_progress):
 * it reads every shard once, each with up to 1 + $FF_STREAM_RETRIES attempts. */
typedef struct ff_open_progress {
  const char *shard;      /* the shard being read: its URL, pipe:COMMAND or path */
  size_t shard_index;     /* 0-based, of num_shards, in the pattern's order */
  size_t num_shards;
  int attempt;            /* 1: the first read of this shard; 2 and on: the retries */
  int max_attempts;       /* 1 + $FF_STREAM_RETRIES */
  int backing_off;        /* nonzero: waiting out the backoff before attempt `attempt` */
  const char *last_error; /* why the previous attempt failed ("" on the first) */
  double shard_s;         /* seconds since this shard's first attempt began */
  double elapsed_s;       /* seconds since the open began reading shards */
  int due;                /* nonzero: a line is due by the rule fusionflow's CLI and Python package say
                             them by: once the open has taken 2 s, then when a wait (a shard's attempt,
                             a backoff) has lasted 0.5 s, and at least every 10 s within one */
  uint64_t shard_bytes;   /* bytes received of this shard in this attempt (a drip shows as few) */
  size_t shard_samples;   /* samples counted in it so far */
} ff_open_progress;

/* Called while an open waits (ff_config.open_progress); nonzero gives the open up. */
typedef int (*ff_open_progress_fn)(void *ctx, const ff_open_progress *progress);

/* Loader configuration. Always fill it with ff_config_init() first, then set
 * the fields you need: new fields may be added at the end in later versions,
 * and struct_size tells the library which ones the caller knows. */
typedef struct ff_config {
  size_t struct_size;        /* sizeof(ff_config), set by ff_config_init */
  const char *source;        /* "imagefolder:DIR", "list:FILE", "tar:PATTERN", a folder or a .tsv/.txt file (see
                                ff_loader_open); required unless source_callbacks is set */
  const char *pipeline;      /* pipeline text (see below); required */
  int batch_size;            /* samples per batch, 1 to 2**30; default 64 */
  int shuffle;               /* nonzero: seeded permutation per epoch; default 1 */
  int drop_last;             /* nonzero: drop the last batch of an epoch when it is short (DataLoader's
                                drop_last); default 0. See also sampler_drop_last */
  uint64_t seed;             /* base seed of shuffle and augmentation; default 0 */
  int num_threads;           /* CPU worker threads, at most 2**20; 0 = the cores this process may use (default) */
  int prefetch;              /* batches prepared ahead of the consumer, 1 to 2**20; default 2 */
  int rank;                  /* shard of this process, 0 <= rank < world_size; -1 = $RANK or 0 (default) */
  int world_size;            /* number of shards; -1 = $WORLD_SIZE or 1 (default) */
  ff_on_error on_error;      /* default FF_ON_ERROR_RAISE */
  uint64_t max_image_pixels; /* bounds every image of a sample, in pixels (width * height): the
                                decoded image (refused from its header, before allocating) and each
                                image a step of the pipeline makes (sizes planned in 64 bits and
                                refused before allocating, e.g. resize(size=256) on a 1x10^6
                                image); over it the sample fails with FF_ETOOBIG naming the file,
                                the size and the limit, and a pipeline whose fixed sizes exceed it
                                does not open (FF_EPIPELINE); 0 = no limit (a side may still not
                                pass 2^31-1); default 89478485 (Pillow's MAX_IMAGE_PIXELS) */
  /* The device that takes the CPU pool's deficit:
   *   "cpu"     no device (default; also NULL)
   *   "auto"    the CUDA device the calling thread uses when the process has
   *             initialised CUDA (as torch's current device), else GPU
   *             $LOCAL_RANK modulo the visible GPUs (one per torchrun rank);
   *             cpu, quietly, when none opens
   *   "cuda:N"  CUDA GPU N (a build with CUDA)
   *   "emu:N"   the host-emulated device: the same kernels on a host thread,
   *             "emu:N?mem=256M" sets its memory size; for tests and for
   *             machines without a GPU (it shows the mechanism, it does not
   *             add compute beyond one core)
   * A named device that cannot be opened fails ff_loader_open with
   * FF_EDEVICE (FF_EINVAL for a malformed name) and the device's message.
   * Once open, the device never fails the loader: a refusal of memory or a
   * device error sends the samples back to the CPU (counted in
   * ff_stats.device_fallbacks); repeated errors turn offload off. */
  const char *device;
  size_t device_memory_limit_bytes; /* most device memory the loader may hold; 0 = no limit but the free
                                       memory less the headroom (default) */
  int64_t device_headroom_bytes;    /* device memory left free for the trainer, re-read about once per
                                       batch; -1 = default (cuda: max(1 GiB, 10% of total); emu: 0) */
  double device_max_time_share;     /* interference cap: device preprocessing time as a share of wall
                                       time while the consumer does not wait, (0, 1]; default 0.3 */
  /* Resource limits on hostile or broken files (each failure is the sample's error, handled by
   * on_error; the message names the file and the limit). 0 turns a limit off. */
  int max_jpeg_scans;        /* progressive JPEGs with more scans are refused (FF_EDATA) as the decoder
                                reaches the next scan: thousands of scans cost seconds per image;
                                default 500 (DALI's default; libjpeg-turbo's progress monitor) */
  size_t max_metadata_bytes; /* PNG: the memory libspng may take for ancillary chunks (text, inflated
                                zTXt/iTXt, ICC profile, EXIF), in bytes: no chunk may be longer and
                                all kept together may not take more (an inflating text counts about
                                twice); over it the file is refused (FF_EDATA) before the memory is
                                taken, as Pillow refuses text past its MAX_TEXT_CHUNK; default 16 MiB */
  int strict_decode;         /* nonzero: corrupt data the JPEG decoder repairs (a bad Huffman code,
                                extraneous bytes, a lost restart marker: libjpeg's "Corrupt JPEG
                                data" warnings) fails the sample (FF_EDATA). 0 (default): the image is
                                decoded as Pillow decodes it, and the damage is counted
                                (ff_stats.warnings) and listed (ff_loader_warning) */
  int allow_empty;           /* imagefolder: nonzero accepts class folders without images (they keep
                                their labels); 0 (default) refuses them with FF_EEMPTY, as
                                torchvision's ImageFolder does (its allow_empty=False) */
  int sampler_drop_last;     /* nonzero: cut the epoch's order to a multiple of world_size instead of
                                padding it by repeating its start (DistributedSampler's drop_last);
                                default 0. Torch's idiom "pad the shards, drop the short batch" is
                                drop_last = 1 with sampler_drop_last = 0 */
  ff_permutation permutation; /* how shuffle permutes; default FF_PERMUTATION_PHILOX */
  /* Device decode (placement `device`) and the determinism contract.
   *   off: every batch is bit-identical for the same (seed, epoch) whatever
   *        the placement, thread count and device (the kernels do the CPU's
   *        arithmetic); ff_loader_seek resumes exactly.
   *   on:  a sample the device decodes is decoded by the device's decoder.
   *        nvJPEG is not libjpeg-turbo's ISLOW IDCT with fancy upsampling:
   *        it has no fancy chroma upsampling and another IDCT (and its
   *        hybrid backend no DCT scaling), so such a sample's pixels differ
   *        from the CPU decode wherever chroma is subsampled. The emu
   *        device decodes with libjpeg-turbo exactly as the CPU does; its
   *        "emu:N?decode=nvjpeg" variant imitates nvJPEG (no fancy
   *        upsampling, IFAST IDCT). Since the device share follows load,
   *        which samples the device decodes depends on timing: resume stays
   *        exact in samples, labels and random draws, not in pixels.
   * The device decoder takes JPEG (progressive not on a hardware engine);
   * PNG, CMYK/YCCK JPEG and whatever it refuses are decoded by the CPU for
   * that sample (ff_batch_info.device_decode_fallbacks). A corrupt file
   * fails with the same message and on_error handling as on the CPU; an
   * image over max_image_pixels is refused from its header, before any
   * device memory is taken. Device decode is off under on_error=replace
   * (substitutes are decoded on the CPU), and nvJPEG under strict_decode
   * (it does not report the damage it repairs); it takes no progressive
   * JPEG from nvJPEG (max_jpeg_scans is the CPU decoder's), and repaired
   * damage in a device-decoded sample is not listed (ff_loader_warning).
   * ff_stats.device_decoder_note says why it is off. Default
   * FF_DEVICE_DECODE_AUTO. */
  ff_device_decode device_decode;
  int deterministic;         /* nonzero: bit-identical batches and exact resume whatever the load, i.e.
                                device decode off whatever device_decode says; default 0 */
  /* Host batches in pinned (page-locked) memory, so that copying a batch to
   * the GPU (torch's .cuda(non_blocking=True), cudaMemcpyAsync) is truly
   * asynchronous, as with DataLoader(pin_memory=True):
   *   -1  when device is a CUDA GPU ("cuda:N", or "auto" when it opens one;
   *       default); otherwise ordinary memory, quietly
   *    1  always, from the device's host allocator (device "cpu": the CUDA
   *       device "auto" picks; ff_loader_open fails with FF_EDEVICE when there
   *       is none)
   *    2  as 1 when that device opens, else ordinary memory (DataLoader's
   *       pin_memory=True on a machine without a GPU; ff_stats.
   *       host_memory_pinned says which)
   *    0  ordinary memory
   * The memory is created on the device's context and stays valid while a
   * batch is held, also after ff_loader_close. A consumer that copies it
   * asynchronously fences before each ff_loader_next (ff_loader_fence). */
  int pin_memory;
  /* Where batches are handed out (the images; labels, mixup_cutmix's soft
   * labels and indices stay on the host):
   *   "cpu"     host memory (default; also NULL)
   *   "cuda:N"  GPU N's memory: at ff_loader_next the batch goes up from
   *             pinned host memory by an asynchronous copy on the loader's
   *             output stream, followed by the batch's ready event
   *             (ff_batch_stream, ff_batch_event); a consumer makes its own
   *             stream wait for it (ff_batch_wait_on) and releases with the
   *             stream that reads it (ff_batch_release_after)
   *   "emu:N"   the emulated device's memory (host memory; for tests)
   * When output_device is the offload device (device "emu:0" or "cuda:N"
   * with output_device the same, or "auto" resolving to it), the samples
   * the device prepares are written straight into the output batch
   * (direct aggregation: no host round trip), the host-prepared ones go up
   * in one copy per run of consecutive slots (ff_batch_info says which).
   * The bytes are the same as with "cpu" (same layout and dtype). A device
   * that cannot be opened, or has no memory for the ring's batch_size x
   * (prefetch + 1) images, fails ff_loader_open with FF_EDEVICE. */
  const char *output_device;
  /* The caller's device allocator (e.g. a framework's caching allocator), for
   * every device allocation the loader makes (device and output_device),
   * instead of the device's own; both or neither. device_alloc sets *out and
   * returns 0, or refuses with nonzero: a refusal sends the work to the CPU
   * (as an exhausted budget does; with output_device the open fails). stream
   * is NULL: the memory must be usable on any stream when it returns.
   * device_free gets what device_alloc gave with its size_bytes, once none of
   * the loader's work uses it (stream NULL): checked at each batch, so it may
   * come a batch after the loader gave the block up; the loader never waits
   * for its own streams to hand a block back. Called on the loader's threads
   * (feeder, consumer) with ctx = device_alloc_ctx, one call at a time per
   * device; they must not wait for an interpreter lock another thread may
   * hold (Python's GIL). */
  int (*device_alloc)(void *ctx, size_t size_bytes, void *stream, void **out);
  void (*device_free)(void *ctx, void *ptr, size_t size_bytes, void *stream);
  void *device_alloc_ctx;
  /* The images' element type (ff_output_dtype): FF_OUTPUT_DTYPE_AUTO
   * (default) float32 when the pipeline ends in normalize or to_dtype, else
   * uint8; FF_OUTPUT_FLOAT32 / BFLOAT16 / FLOAT16 need such a pipeline (the
   * float32 value rounded to nearest, ties to even, as torch's .to(dtype):
   * bfloat16 keeps the top 16 bits after rounding, NaN stays NaN; float16
   * rounds to IEEE binary16, over 65504 after rounding to infinity, below
   * 2^-14 to its subnormals); FF_OUTPUT_UINT8 one without it. Another
   * combination fails ff_loader_open with FF_EINVAL. */
  int output_dtype;
  /* The images' memory order (ff_memory_format): FF_MEMORY_FORMAT_AUTO
   * (default) NCHW planes for float types, NHWC (shape N, H, W, 3) for
   * uint8; FF_MEMORY_FORMAT_CONTIGUOUS NCHW planes (shape N, 3, H, W, also
   * for uint8); FF_MEMORY_FORMAT_CHANNELS_LAST NHWC memory reported as
   * shape (N, 3, H, W) with strides (3HW, 1, 3W, 3), torch's channels_last.
   * With an output_device and a float type, the samples the host prepares
   * go up as uint8 (a quarter of float32's bytes) and the device converts
   * them with the same table (ff_batch_info.output_upload_bytes); with
   * random_erasing, which writes the float32 output, they go up as float32. */
  int memory_format;
  /* torchvision.transforms (v1, default) or transforms.v2 arithmetic (see
   * ff_semantics). Part of what a batch is: the same seed, epoch and
   * semantics give the same batches; the random draws do not depend on it. */
  ff_semantics semantics;
  /* Repeated augmentation (DeiT's RASampler, timm's RepeatAugSampler with
   * num_repeats = N and its default selected_round 256 / selected_ratio
   * world_size): N >= 1 repeats each index of the epoch's permutation N
   * times in a row before the strided split across ranks (so its copies go
   * to different ranks), and each rank takes num_selected_samples of them:
   * floor(n // 256 * 256 / world_size) for n >= 256 samples, else
   * ceil(n / world_size), at most ceil(n * N / world_size). With
   * permutation=torch the lists equal RepeatAugSampler's for seed 0 (it
   * seeds torch.randperm with the epoch; here seed + epoch). Copy r of a
   * sample draws its own augmentation (keyed by index and r; copy 0 draws
   * as without repeats); ff_batch_sample_indices shows the copies as the
   * same index. 0 (default): DistributedSampler's order; at most 4096.
   * Not with sampler_drop_last (FF_EINVAL). */
  int repeated_augmentations;
  /* Streamed tar: sources (http://, https://, pipe:, compressed shards; see ff_loader_open): the
   * shuffle buffer of each rank's stream, in samples (the encoded bytes of up to this many samples,
   * plus the batches in flight, are kept in memory); 0 = none (only the shard order is shuffled);
   * without shuffle neither is. Below 2**40; default 1000. Other sources ignore it. */
  size_t shuffle_buffer;
  /* Samples from the caller's callbacks instead of files (see
   * ff_source_callbacks): when not NULL, the source (copied at open; ctx and
   * the functions must stay valid until ff_loader_close returns) and
   * `source` may be NULL. Labels come with the bytes, so
   * ff_loader_num_classes is 0 and class names are NULL; the scheduler has no
   * encoded sizes before a sample is read (its cost model learns from the
   * decodes). Default NULL. */
  const ff_source_callbacks *source_callbacks;
  /* Streamed tar: sources read every shard once at open, and a slow or
   * stalled server makes that wait, with its retries, for minutes. When not
   * NULL, ff_loader_open calls open_progress(open_progress_ctx, progress)
   * on its own thread while it reads them: as each attempt (a shard, a
   * retry) starts and about every 100 ms while it reads or backs off;
   * *progress is valid for the call only. A nonzero return gives the open
   * up at once (the transfer or command in progress abandoned):
   * ff_loader_open returns FF_EIO, the message naming the shard and "given
   * up". Other sources never call it. Default NULL. */
  ff_open_progress_fn open_progress;
  void *open_progress_ctx;
  /* The encoded bytes one sample may have: a tar member (of a local or a
   * streamed shard) or an image file (a callback source's items are the
   * caller's). A larger one fails as FF_ETOOBIG, naming the file and
   * max_member_bytes, before its bytes are read; a streamed member is passed
   * over without being held. FF_MEMBER_BYTES_AUTO (default): 8 bytes a
   * pixel of max_image_pixels (a raw 16-bit RGBA image of that many pixels)
   * plus 16 MiB for headers and metadata, 732605096 bytes for its default;
   * no limit when max_image_pixels is 0. 0: no limit. */
  uint64_t max_member_bytes;
  /* Remote workers that take what the local CPU threads and the device
   * leave (see ff_remote_executor): when not NULL (copied at open; its ctx
   * and functions must stay valid until ff_loader_close returns), the
   * loader sends microbatches of CPU-placed samples to it. Default NULL. */
  const struct ff_remote_executor *remote;
} ff_config;

/* ff_config.max_member_bytes: derived from max_image_pixels. */
#define FF_MEMBER_BYTES_AUTO UINT64_MAX

/*
 * Remote executors: an engine (Ray actors, a process pool, an RPC service)
 * whose workers run samples with the library's ff_augmenter on other
 * machines' CPUs. The loader places samples in the order of their cost to
 * the job: its CPU threads first, then its device, and only the deficit
 * both leave goes remote (the policy, docs/remote.md). A microbatch is a
 * list of sample indices of one epoch (and their encoded bytes when the
 * workers cannot read the source); each sample's plan is keyed by (seed,
 * epoch, index), so a worker with an ff_augmenter opened on the loader's
 * pipeline, seed, semantics, limits and source, output FF_OUTPUT_UINT8 and
 * the default memory format, gives that sample's uint8 pixels bit for bit;
 * the loader converts and normalises them locally into the batch (host or
 * output_device). Batches are bit-identical whatever share ran remotely.
 *
 * Work goes out only for batches at least one measured round trip ahead of
 * the consumer, never while the ring is full, and at most max_in_flight
 * microbatches at a time. A sample the engine fails (a corrupt file, a
 * worker lost, a result never sent) is run by a local worker, so its
 * error, on_error and replacement are exactly the local ones; a microbatch
 * not completed within timeout_ms is run locally and its late result
 * dropped. Each sample is delivered once.
 */

/* One microbatch handed to ff_remote_executor.submit. Valid during the call only: the engine copies
 * what it keeps. */
typedef struct ff_remote_task {
  uint64_t id;               /* its ticket for ff_loader_remote_complete; never reused by a loader */
  uint64_t epoch;            /* the epoch whose draws its samples make */
  size_t n;                  /* samples, 1 .. microbatch_size */
  const uint64_t *indices;   /* n dataset indices (the source's order, as ff_batch_sample_indices gives them) */
  const void *const *data;   /* NULL when the workers read the samples from the source themselves; else n
                                encoded images (JPEG, PNG, ...), size_bytes[k] bytes each */
  const size_t *size_bytes;  /* NULL with data NULL */
  size_t sample_bytes;       /* bytes of one result sample: uint8 (H, W, 3), the pipeline's output size */
} ff_remote_task;

typedef struct ff_remote_executor {
  /* Takes microbatch *task (a copy: see ff_remote_task) and returns 0, or
   * nonzero when the engine can take no work (its pool is gone): the
   * samples then run locally and nothing is sent again. Called from the
   * loader's worker threads, several at once, with no lock of the loader
   * held; must not block (queue the work) nor call the loader. */
  int (*submit)(void *ctx, const ff_remote_task *task);
  /* Called once by ff_loader_close (also of a loader that failed to open)
   * before it frees anything; returns when the engine will call
   * ff_loader_remote_complete no more. May be NULL when the engine stops
   * before the close. */
  void (*stop)(void *ctx);
  void *ctx;
  int workers;            /* remote workers, >= 1 */
  int max_in_flight;      /* most microbatches submitted and not completed; 0 = 2 per worker */
  int microbatch_size;    /* most samples per microbatch; 0 = 16 */
  int reads_source;       /* nonzero: the workers read the samples from the loader's source (shared paths,
                             URLs, shards) and only indices are sent; 0: the loader reads each sample and
                             sends its bytes (always for source_callbacks) */
  uint64_t timeout_ms;    /* a microbatch not completed this long after its submit is run locally and its
                             late result dropped; 0 = 60000 */
} ff_remote_executor;


/* ff_config.output_dtype. */
typedef enum ff_output_dtype {
  FF_OUTPUT_DTYPE_AUTO = 0,
  FF_OUTPUT_FLOAT32 = 1,
  FF_OUTPUT_BFLOAT16 = 2,
  FF_OUTPUT_FLOAT16 = 3,
  FF_OUTPUT_UINT8 = 4
} ff_output_dtype;

/* ff_config.memory_format. */
typedef enum ff_memory_format {
  FF_MEMORY_FORMAT_AUTO = 0,
  FF_MEMORY_FORMAT_CONTIGUOUS = 1,
  FF_MEMORY_FORMAT_CHANNELS_LAST = 2
} ff_memory_format;

/* Fills *cfg with the defaults above. Callers built against an older
 * header (a smaller struct_size) get the defaults for the fields they lack. */
FF_API void ff_config_init(ff_config *cfg);

typedef struct ff_loader ff_loader;
typedef struct ff_batch ff_batch;

/*
 * Completes remote microbatch `id` (an ff_remote_task's): samples holds its
 * n results, task.sample_bytes each, in task order (size_bytes = n *
 * sample_bytes); statuses[k] FF_OK where sample k is valid, any error where
 * it is not (that sample runs locally: its error and on_error are the
 * local ones); statuses NULL: all valid; samples NULL: none ran (the worker
 * or pool was lost), all run locally. attempts: how many times the engine
 * ran it (1 = first try), worker_cpu_ns: the workers' CPU time on it (0:
 * unknown), both for ff_stats. Converts the samples into their batch on
 * the calling thread. A ticket completed before, dropped (a restart, a
 * timeout) or unknown is ignored (counted in ff_stats.remote_late). Any
 * thread, until ff_remote_executor.stop returns. FF_OK, or FF_EINVAL
 * (size_bytes not n * sample_bytes for a ticket in flight; its samples run
 * locally).
 */
FF_API ff_status ff_loader_remote_complete(ff_loader *loader, uint64_t id, const void *samples, size_t size_bytes,
                                           const ff_status *statuses, int attempts, uint64_t worker_cpu_ns);

/*
 * Opens a loader: indexes the source, parses the pipeline and starts the
 * worker threads, which begin preparing epoch 0 at once.
 *
 * Sources
 *   imagefolder:DIR  one sub-folder per class, classes sorted by name and
 *                    numbered from 0 (torchvision.datasets.ImageFolder); files
 *                    with torchvision's image extensions .jpg .jpeg .png .ppm
 *                    .bmp .pgm .tif .tiff .webp (any case), sorted by path
 *                    (other files are left out and counted:
 *                    ff_stats.source_ignored_files); the decoder goes by the
 *                    content (JPEG, PNG, WebP, TIFF, PBM/PGM/PPM, BMP), not
 *                    the extension;
 *                    sub-folders of a class are searched too, links followed
 *                    (os.walk(followlinks=True)) except a link back to a
 *                    folder on its own path (a cycle: not entered). Only
 *                    regular files are taken (a FIFO or device named like an
 *                    image is left out); a name that cannot be stat'ed (a
 *                    dangling link) is a sample that fails when read. A class
 *                    folder without images fails the open (FF_EEMPTY) unless
 *                    allow_empty.
 *   list:FILE        one sample per line: `path<TAB>label`, label a
 *                    non-negative integer below 2^63-1; a relative path is
 *                    relative to FILE's folder; empty lines and lines starting
 *                    with '#' are ignored, and so is a UTF-8 byte-order mark at
 *                    the start. A listed path is only read when its sample
 *                    is: one that is missing fails that sample (on_error).
 *   tar:PATTERN      WebDataset shards (uncompressed tar files; ustar, pax or
 *                    GNU, read with libarchive). PATTERN is a shard name in
 *                    WebDataset's brace notation ("train-{000000..001023}.tar",
 *                    "{a,b}", "{0..10..2}", zero padded when an end has a
 *                    leading zero: the braceexpand package's rules), several
 *                    joined by "::", or "@FILE", a file of such names, one per
 *                    line ('#' comments; text after a TAB ignored, so the
 *                    manifest of `fusionflow shards make` is one; relative to
 *                    FILE's folder). Members are grouped into samples as
 *                    webdataset groups them: the key is the member's path up
 *                    to the first dot of its basename, consecutive members
 *                    with one key are one sample, suffixes compared in lower
 *                    case. A sample is its KEY.jpg, .jpeg, .png or .webp (the
 *                    first of these when it has several) and its label, the
 *                    integer text of KEY.cls (as Python's int(): white space,
 *                    '+', '_' between digits; >= 0). Other members are
 *                    ignored and counted (`fusionflow shards check`). Samples
 *                    come in shard order then tar order; the epoch's order,
 *                    ranks, resume and on_error are those of any source,
 *                    because each shard is indexed once (every image's data
 *                    offset and size) and samples are read from it by offset.
 *                    The index is cached in $FF_CACHE_DIR/tar (default
 *                    $XDG_CACHE_HOME/fusionflow/tar, else
 *                    ~/.cache/fusionflow/tar; FF_CACHE_DIR="" turns the cache
 *                    off) under the shard's real path and is used while the
 *                    shard's size, modification time and inode are unchanged.
 *                    A shard member that makes no sample -- a KEY.cls missing
 *                    or not a non-negative integer, a .cls without an image,
 *                    a suffix twice in one sample (webdataset raises on it),
 *                    a key that comes back later in the shard, a member cut
 *                    off by the end of the file or a damaged header (the
 *                    rest of the shard, or the members libarchive skips, are
 *                    lost) -- and a shard that is missing, empty or
 *                    compressed fail the open with FF_EDATA naming the shard
 *                    and the member (on_error=raise), or are left out,
 *                    counted in ff_stats.skipped and listed by
 *                    ff_loader_skipped (skip, replace). A pattern none of
 *                    whose names exists is FF_EIO, one that names nothing
 *                    or is malformed FF_EEMPTY / FF_EINVAL.
 *                    Streamed shards: when a name is http://URL, https://URL,
 *                    pipe:COMMAND (run with /bin/sh -c; its standard output
 *                    is the shard, as WebDataset's pipe:) or a compressed
 *                    file (.gz .tgz .bz2 .xz .zst .lz4 .lzma), the whole
 *                    source is read as streams: at open every shard is read
 *                    once to count its samples and labels (the same grouping
 *                    and bad-member rules); each epoch then reads the rank's
 *                    shards from start to end on one reader thread. The
 *                    order is a two-level shuffle, a pure function of (seed,
 *                    epoch, rank, world_size) and not of the threads: the
 *                    shards in a Philox permutation of the epoch, each given
 *                    to the rank with the fewest samples so far (lowest rank
 *                    on a tie), the rank's shards one after the other through
 *                    a shuffle buffer of shuffle_buffer samples (a Philox
 *                    slot per incoming sample; shuffle=0: shard order, no
 *                    buffer). Every rank gets the same number of samples,
 *                    floor((total - (world_size - 1) * largest shard) /
 *                    world_size), each dropping the rest of its share (its
 *                    tail; fewer than 1 is FF_EINVAL at open: too few shards
 *                    for the ranks). ff_loader_seek resumes exactly (the
 *                    shards wholly before the position are not read again).
 *                    Network errors (refused or cut connections, HTTP 5xx,
 *                    408, 429, 30 s without data) are retried 3 times
 *                    ($FF_STREAM_RETRIES) after 200 ms, doubling
 *                    ($FF_STREAM_BACKOFF_MS); then the shard's samples not
 *                    yet read fail (FF_EIO naming the URL, "after retries")
 *                    under on_error. Other HTTP errors (404) fail at once.
 *                    on_error=replace is FF_EINVAL for streams. Memory: the
 *                    encoded bytes of up to shuffle_buffer + (prefetch + 2) *
 *                    batch_size samples.
 *   DIR, FILE        without a kind: a folder is imagefolder:DIR, a regular
 *                    file ending in .tsv or .txt (any case) is list:FILE;
 *                    anything else is FF_EINVAL, a missing path FF_EIO.
 *   source_callbacks the caller's samples (ff_source_callbacks): count samples
 *                    named NAME[i] in messages; no fetch is FF_EINVAL, count
 *                    0 FF_EEMPTY.
 *
 * Pipeline text: ops separated by '|', torchvision names, keyword arguments
 * (arguments must be named), e.g. "decode | random_resized_crop(size=224) |
 * random_horizontal_flip | normalize(mean=imagenet, std=imagenet)". The
 * first op is `decode`; the pipeline must give every sample the same size
 * (and no op may make images over max_image_pixels). A pipeline ending with
 * normalize or to_dtype gives NCHW float32 batches, otherwise NHWC uint8.
 * Ops and their sources: torchvision.transforms (v1), or transforms.v2 with
 * ff_config.semantics = FF_SEMANTICS_V2 (v2 differs by one level in several
 * ops and in solarize's threshold: ff_semantics), uint8 tensor semantics,
 * as in torchvision 0.29 on torch 2.15 (the golden tests' reference; the
 * policies' magnitude tables follow torch 2.x's linspace, which differs from
 * torch 1.13's in the last bit of some bins, e.g. TrivialAugmentWide's
 * translate bin 15 of 31 is 15 px on torch 2.x, 16 on 1.13):
 *   decode(dct_scale=false)        JPEG (libjpeg-turbo, as Pillow decodes it; CMYK
 *                                  read as Adobe's inverted inks, with or without
 *                                  the Adobe marker, as Pillow and torchvision.io
 *                                  do) or PNG (libspng; 16-bit samples keep their
 *                                  high byte, as torchvision.io.decode_png +
 *                                  to_dtype(uint8, scale=True)) to RGB uint8; only
 *                                  the region a leading crop needs is decoded (the
 *                                  same pixels). By default the bits torchvision
 *                                  gives. dct_scale=true (an opt-in): the JPEG
 *                                  decoder reduces the image by 1/2, 1/4 or 1/8 in
 *                                  the DCT domain when the following resize still
 *                                  gets at least its target size, and the crop's
 *                                  exact box is resampled from the reduced image:
 *                                  faster, and no longer torchvision's pixels (the
 *                                  reduction's blur: 46 dB PSNR on the reduced
 *                                  draws of the demo data, about 5% less CPU time
 *                                  for the standard training pipeline: bench/
 *                                  RESULTS.md, "DCT-scaled vs exact decode").
 *   crop(top, left, height, width) functional.crop, zero padding outside the image;
 *                                  a box wholly or partly left of or above the
 *                                  image gives the zero-padded box of the asked
 *                                  size (torchvision returns wrong sizes there)
 *   center_crop(size)              CenterCrop (zero padding if smaller)
 *   resize(size, antialias=true, interpolation=bilinear)
 *                                  Resize; size=N sets the shorter side, size=(H, W) both
 *   random_resized_crop(size, scale=(0.08, 1.0), ratio=(0.75, 1.3333), antialias=true,
 *                       interpolation=bilinear)
 *                                  RandomResizedCrop. interpolation=bicubic: torchvision's
 *                                  bicubic with antialias=True (Keys a=-0.5, within one
 *                                  level); random: timm's choice of bilinear or bicubic,
 *                                  probability 1/2 each, per sample
 *   random_horizontal_flip(p=0.5), random_vertical_flip(p=0.5)
 *   rand_augment(num_ops=2, magnitude=9, num_magnitude_bins=31, interpolation=nearest, fill)
 *   trivial_augment_wide(num_magnitude_bins=31, interpolation=nearest, fill)
 *   auto_augment(policy=imagenet|cifar10|svhn, interpolation=nearest, fill)
 *   aug_mix(severity=3, mixture_width=3, chain_depth=-1, alpha=1.0, all_ops=true,
 *           interpolation=bilinear, fill)
 *                                  RandAugment, TrivialAugmentWide, AutoAugment, AugMix:
 *                                  torchvision's op lists, magnitude bins, signs and
 *                                  probabilities; fill is a value or (r, g, b) in [0, 255]
 *   single ops with explicit arguments, as the policies apply them:
 *     identity, shear_x(shear), shear_y(shear) (shear coefficient, pivot top-left),
 *     translate_x(pixels), translate_y(pixels), rotate(angle) (degrees, counter-
 *     clockwise) — each with interpolation=nearest|bilinear and fill —
 *     brightness(factor), color(factor), contrast(factor), sharpness(factor),
 *     posterize(bits), solarize(threshold), autocontrast, equalize, invert.
 *     Consecutive brightness/posterize/solarize/invert/autocontrast/equalize run
 *     as one pass through one composed table (bit-identical to one by one).
 *   timm_rand_augment(config="rand-m9-mstd0.5-inc1", interpolation=random,
 *                     img_mean=(128, 128, 128), translate_pct=0.45, translate_const=250)
 *   timm_auto_augment(config="original-mstd0.5", ...the same hparams)
 *   timm_aug_mix(config="augmix-m5-w4-d2", ...the same hparams)
 *                                  timm 1.0's RandAugment, AutoAugment (v0, v0r,
 *                                  original, originalr) and AugMix
 *                                  (timm.data.auto_augment) from timm's config
 *                                  strings: sections m, n, p, mstd (over 100:
 *                                  uniform), mmax, inc, tweights (RandAugment);
 *                                  mstd (AutoAugment); m, w, d, a, mstd (AugMix,
 *                                  whose magnitude is uniform in [0, m] unless
 *                                  mstd is given); AugMix's b (blended) and the
 *                                  t3a/t3aw sets (Gaussian blur) are refused.
 *                                  The hparams are timm's:
 *                                  interpolation random (bilinear or bicubic per
 *                                  op, timm's default) | nearest | bilinear |
 *                                  bicubic (create_transform pins its
 *                                  interpolation), img_mean the fill (timm's
 *                                  create_transform gives (124, 116, 104) for the
 *                                  ImageNet mean). The ops run with Pillow 13's
 *                                  arithmetic (ImageOps, ImageEnhance,
 *                                  Image.transform, Image.rotate): bit-exact with
 *                                  timm's op functions (docs/pillow-semantics.md);
 *                                  every random choice is drawn when planning. An
 *                                  unknown or malformed section is an error naming
 *                                  its column (timm ignores sections without a
 *                                  number and unknown transform sets).
 *   single Pillow-semantics ops with explicit arguments (the ops of timm's policies
 *   and of torchvision's PIL path, docs/pillow-semantics.md):
 *     pil_autocontrast, pil_equalize, pil_invert, pil_posterize(bits),
 *     pil_solarize(threshold), pil_solarize_add(add), pil_color(factor) (saturation),
 *     pil_contrast(factor), pil_brightness(factor), pil_sharpness(factor),
 *     pil_hue(factor) (-0.5..0.5), and pil_shear_x(shear), pil_shear_y(shear),
 *     pil_translate_x(pixels), pil_translate_y(pixels) (fractional; Image.transform's
 *     matrix terms), pil_rotate(angle) (degrees counter-clockwise about the centre),
 *     each with interpolation=nearest|bilinear|bicubic and fill;
 *     pil_gaussian_blur(radius) (ImageFilter.GaussianBlur: radius the Gaussian's
 *     standard deviation in pixels, 0 to 1e6; 0 leaves the image).
 *   torchvision's per-sample transforms (v1 tensor semantics; semantics=v1, the
 *   default, where the op takes it; semantics=pil: the same draws, each op with
 *   Pillow's arithmetic as on a PIL image, docs/pillow-semantics.md):
 *     color_jitter(brightness=0, contrast=0, saturation=0, hue=0, semantics=v1)
 *                                  ColorJitter: each a number v (the range around 1, or
 *                                  0 for hue) or (min, max); the four in randperm order,
 *                                  hue through HSV exactly as adjust_hue; semantics=pil:
 *                                  ImageEnhance Brightness, Contrast, Color and the
 *                                  PIL hue shift (bit-exact with ColorJitter on a PIL image)
 *     grayscale(num_output_channels=3), random_grayscale(p=0.1, semantics=v1), hue(factor)
 *                                  Grayscale (3 channels only: batches are RGB),
 *                                  RandomGrayscale, adjust_hue; random_grayscale's
 *                                  semantics=pil: mode "L" (Pillow's luma)
 *     gaussian_blur(kernel_size, sigma=(0.1, 2.0), semantics=v1)
 *                                  GaussianBlur: odd sizes up to 255 (N or (width,
 *                                  height)), sigma drawn per sample; reflect padding;
 *                                  computed separably, within one level of torchvision.
 *                                  semantics=pil: Pillow's ImageFilter.GaussianBlur
 *                                  (DINO's and DeiT III's blur of a PIL image) with the
 *                                  radius (Pillow's sigma, pixels) drawn uniformly in
 *                                  sigma=(min, max), as their random.uniform(min, max);
 *                                  no kernel_size (refused: Pillow takes none);
 *                                  bit-exact with Pillow 13 (three extended box passes
 *                                  per axis, docs/pillow-semantics.md)
 *     random_solarize(threshold, p=0.5, semantics=v1), random_posterize(bits, p=0.5),
 *     random_autocontrast(p=0.5), random_equalize(p=0.5), random_invert(p=0.5),
 *     random_adjust_sharpness(sharpness_factor, p=0.5)
 *                                  the Random* transforms: the op when torch.rand(1) < p;
 *                                  random_solarize(semantics=pil): ImageOps.solarize
 *     random_apply(p=0.5, [op | op ...]), random_choice([op, op, ...], p=(w, ...))
 *                                  RandomApply, RandomChoice over ops that keep the
 *                                  image size (docs/composition.md)
 *     three_augment(color_jitter=0.3, semantics=v1)
 *                                  DeiT III's 3-Augment (one of grayscale, solarize(128),
 *                                  gaussian_blur(23, (0.1, 2)); then ColorJitter(j, j, j));
 *                                  semantics=pil: DeiT III's own, each op in Pillow's
 *                                  arithmetic (its blur ImageFilter.GaussianBlur)
 *     policy_file(path="policy.json", interpolation=nearest, fill)
 *                                  sub-policies or DeepAutoAugment layers from a JSON
 *                                  file, read when the pipeline is parsed
 *                                  (docs/policy-file.md)
 *   to_dtype(dtype=float32)        x / 255 (ConvertImageDtype; scaling is always on;
 *                                  semantics v2: x * (1 / 255), v2's to_dtype(scale=True))
 *   normalize(mean, std)           (x / 255 - mean) / std per channel; `imagenet`
 *                                  names (0.485, 0.456, 0.406) / (0.229, 0.224, 0.225)
 *   random_erasing(p=0.5, scale=(0.02, 0.33), ratio=(0.3, 3.3), value=0)
 *                                  after normalize/to_dtype only: RandomErasing on the
 *                                  float output (value a number, (r, g, b) or random:
 *                                  standard normal noise); with mode=const|rand|pixel,
 *                                  min_count=1, max_count timm's RandomErasing (area
 *                                  (0.02, 1/3), aspect (0.3, 1/0.3) unless given). The
 *                                  noise comes from the sample's Philox stream.
 *
 * A batch stage may follow normalize (or to_dtype), as the last op:
 *   mixup_cutmix(mixup_alpha=1.0, cutmix_alpha=0.0, cutmix_minmax, prob=1.0, switch_prob=0.5,
 *                mode=batch|pair|elem, correct_lam=true, label_smoothing, num_classes=1000,
 *                convention=timm|torchvision)
 *     Mixup and CutMix on the assembled float32 batch; the batch then also
 *     has soft labels (ff_batch_soft_labels, N x num_classes float32);
 *     num_classes is an integer in [1, FF_MAX_NUM_CLASSES].
 *     Every draw comes from a Philox stream keyed by (seed, epoch, batch
 *     index): the same batches whatever the threads (ff_loader_mix_plan).
 *     convention=timm (default) is timm.data.Mixup (timm 1.0): with
 *     probability prob per batch (mode=batch), per pair of images i and
 *     N-1-i (pair) or per image (elem), λ ~ Beta(α, α), CutMix instead of
 *     Mixup with probability switch_prob when both alphas are > 0; image i
 *     mixes with image N-1-i of the batch (its original); Mixup is
 *     x * λ + x' * (1 - λ) in float32, CutMix pastes x' into the box of
 *     side sqrt(1 - λ) times the image's around a uniform centre, clipped
 *     (or, with cutmix_minmax=(lo, hi), a box of uniform sides in
 *     [lo, hi) of the image's anywhere inside), λ corrected to the kept
 *     area when correct_lam or cutmix_minmax; the targets are
 *     one-hot(label) * λ + one-hot(label') * (1 - λ) with label_smoothing
 *     (default 0.1: off = s / num_classes, on = 1 - s + off). Batches of
 *     odd size are refused at open (timm asserts an even batch: set
 *     drop_last or an even batch_size); one that on_error=skip makes odd
 *     mixes its middle image with itself.
 *     convention=torchvision is torchvision.transforms.v2.MixUp / CutMix
 *     (mode=batch only): image i mixes with image i-1 (the batch rolled by
 *     one), CutMix's box has half-sides int(sqrt(1 - λ) / 2 * side) around
 *     a uniform centre, λ always corrected, plain one-hot targets (no
 *     label_smoothing: give it to the loss); both alphas > 0 behaves as
 *     RandomChoice([MixUp, CutMix], p=[1 - switch_prob, switch_prob]) and
 *     prob as RandomApply. A label outside [0, num_classes) fails its batch
 *     (FF_EDATA naming the file). With a device output_device ("cuda:N",
 *     "emu:N") the stage mixes the device batch once every sample is in
 *     place there (direct aggregation included): the draws and the soft
 *     labels are made on the host in ff_loader_next, the images are mixed
 *     by one kernel launch on the batch's stream before its ready event
 *     (each pair read before written, the same float32 arithmetic: the
 *     same bytes as output_device cpu). The stage mixes float32 NCHW
 *     images: output_dtype and memory_format must be auto (or float32,
 *     contiguous), on the host and on the device alike, else
 *     ff_loader_open fails with FF_EINVAL naming the stage's column.
 *
 * Views: several views of each sample after one shared decode (DINO's
 * global and local crops, SimCLR's pairs), as
 *   "decode || 2 x random_resized_crop(size=224, scale=(0.4, 1)) | random_horizontal_flip
 *      | normalize(mean=imagenet, std=imagenet)
 *    || 8 x random_resized_crop(size=96, scale=(0.05, 0.4)) | random_horizontal_flip
 *      | normalize(mean=imagenet, std=imagenet)"
 * `||` separates the shared decode from each group of views; `N x` makes
 * the group N views (one without it). Every view is planned first, then
 * the image is decoded once: only the window that holds all the views'
 * crops when each view starts with a crop inside the image (crop,
 * center_crop, random_resized_crop), else whole, and without DCT scaling.
 * The pixels are those of a whole decode; as for one pipeline's region,
 * damage or truncation below the window goes unnoticed. Each group runs as
 * the pipeline `decode(dct_scale=false) | OPS` on it: every view of a group
 * has the group's size, groups may differ. View v (counted over the groups in
 * order) of sample i draws from the sample's stream as index i + v * 2^52
 * would (view 0 as the sample without views; ff_image_augment with that
 * index and the group's pipeline gives the view's pixels). A batch holds
 * one tensor per view (ff_batch_view_images); views run on the CPU (device
 * cpu; "auto" stays on the CPU), and with an output_device ("cuda:N",
 * "emu:N") each view's tensor goes up to it in one copy after the batch is
 * assembled (the same bytes); at most 64 views in 8 groups; mixup_cutmix
 * does not take views.
 *
 * The scheduler (ff_config.device other than "cpu"): the loader measures the
 * consumer's rate D (from the times between ff_loader_next calls) and the
 * CPU pool's capacity C (threads / measured CPU time per sample). While the
 * consumer does not wait and the ring stays full, nothing is offloaded. When
 * it waits or the ring drains, the device share of the following batches
 * rises toward the deficit 1 - C/D plus a correction for the missing ring
 * batches (to the deficit alone while the ring is below full but the
 * consumer does not wait yet), never past the point where the device
 * becomes the bottleneck, and decays again when the stall is gone, never
 * below the deficit (the deficit counts what an offloaded sample still costs
 * the CPU: its read, and its decode when placed split). Within a batch the
 * samples whose placement would save the CPU the most go to the device:
 * the steps after decode, predicted from the sample's own plan and the
 * measured per-op ns per pixel once its header has been seen (its first
 * epoch), before that the mean, ties to the larger file; placed `device`,
 * also its decode (learned as ns per encoded byte and per decoded pixel),
 * less the share a hybrid decoder leaves on the host — as
 * many as the device memory budget (free memory - headroom, at most
 * device_memory_limit_bytes) can hold. Without a stall the device's time is
 * kept under device_max_time_share of wall time. Batches stay in host
 * memory.
 *
 * On success *out is the loader and FF_OK is returned. On failure *out is
 * still set (unless memory ran out, then it is NULL) to a loader in a failed
 * state: read the reason with ff_loader_errmsg and free it with
 * ff_loader_close. Returns FF_EINVAL (bad field: message names it),
 * FF_EPIPELINE (message names the column), FF_EIO (source missing or
 * unreadable), FF_EDATA (malformed list file: message names the line),
 * FF_EEMPTY (no sample, none for this rank, or a class folder without
 * images), FF_ENOMEM, FF_EDEVICE (the
 * named device cannot be opened: no GPU, no driver, a build without CUDA —
 * the message says which). A NULL cfg is
 * FF_EINVAL (with a failed loader); a NULL out is FF_EINVAL (nothing made).
 * On a failed loader, ff_loader_next and ff_loader_set_epoch return
 * FF_EINVAL and the counts below are 0.
 */
FF_API ff_status ff_loader_open(const ff_config *cfg, ff_loader **out);

/* Stops the workers promptly (mid-epoch too), joins them and frees the
 * loader. Batches still held stay valid until released. NULL does nothing. */
FF_API void ff_loader_close(ff_loader *loader);

/* The message of the loader's last failure ("" if none). Owned by the loader,
 * valid until the next call on it. Names the file and the reason for data
 * errors, the column for pipeline errors. NULL gives "out of memory". */
FF_API const char *ff_loader_errmsg(const ff_loader *loader);

/* Starts epoch `epoch` (>= 0): the order and every random draw are keyed by
 * (seed, epoch). Epochs also advance by themselves: after FF_END the next
 * batch is the first of the following epoch, which the workers prepare
 * while the consumer finishes the current one. Setting the epoch that is
 * about to start keeps that work; any other epoch discards what was
 * prepared and starts over (batches held stay valid).
 * Returns FF_OK, or FF_EINVAL on a loader that failed to open. */
FF_API ff_status ff_loader_set_epoch(ff_loader *loader, uint64_t epoch);

/* Continues at batch `batch` (0 <= batch <= ff_loader_num_batches) of
 * `epoch`: the batches that follow are bit-identical to those an
 * uninterrupted run hands out from that point, which is how a training run
 * resumes mid-epoch from a checkpoint (save ff_loader_position). Batches
 * held stay valid. Returns FF_OK or FF_EINVAL. */
FF_API ff_status ff_loader_seek(ff_loader *loader, uint64_t epoch, size_t batch);

/* Where the consumer is: the epoch and the index of the batch the next
 * ff_loader_next returns (== ff_loader_num_batches when FF_END comes next). */
FF_API void ff_loader_position(const ff_loader *loader, uint64_t *epoch, size_t *batch);

/* Batches in one epoch for this rank (the last may be short unless drop_last). */
FF_API size_t ff_loader_num_batches(const ff_loader *loader);

/* Samples in one epoch for this rank (DistributedSampler's num_samples). */
FF_API size_t ff_loader_num_samples(const ff_loader *loader);

/* Samples in the source (all ranks). */
FF_API size_t ff_loader_dataset_size(const ff_loader *loader);

/* Classes of the source: for imagefolder the class folders (torchvision's
 * ImageFolder.classes, sorted by name; label i is folder i), for list files
 * the largest label + 1, for callback sources 0 (labels come with the bytes). */
FF_API size_t ff_loader_num_classes(const ff_loader *loader);

/* The name of class i (0 <= i < ff_loader_num_classes): the class folder's
 * name for imagefolder (ImageFolder.classes[i]); NULL for the other kinds
 * (their labels have no names) or i out of range. Owned by the loader, valid
 * until ff_loader_close. */
FF_API const char *ff_loader_class_name(const ff_loader *loader, size_t i);

/*
 * Waits for the next batch of the epoch, in order, and hands it out in *out.
 * The batch stays valid until ff_batch_release; at most prefetch + 1 batches
 * can be held at once (one more call returns FF_EINVAL).
 * Returns FF_OK, FF_END after the last batch of the epoch (the next call
 * returns the first batch of the next epoch), or the
 * error of a sample of this batch with on_error=raise (FF_EDATA, FF_ETOOBIG,
 * FF_EIO, FF_ENOMEM; message names the file and the reason). After an error
 * the following call returns the next batch.
 */
FF_API ff_status ff_loader_next(ff_loader *loader, ff_batch **out);

/* Gives the batch's memory back to the loader's ring. NULL does nothing.
 * Any thread; each batch exactly once. With a device output_device the
 * caller's reads of the images must have completed. In a child of fork()
 * (which has none of the loader's threads) it does nothing: the parent's
 * loader state is never touched from there. */
FF_API void ff_batch_release(ff_batch *batch);

/* Where the batch's images are: "cpu", or the output_device ("cuda:0",
 * "emu:0"). Valid while the batch is held. */
FF_API const char *ff_batch_device(const ff_batch *batch);

/* Where the batch's images are, in DLPack's terms (DLDevice): *device_type
 * kDLCPU (1) with *device_id 0 for host memory (no output_device, "cpu",
 * and an "emu:N" output_device, whose images are host memory: read them
 * after ff_batch_sync), or kDLCUDA (2) with the CUDA ordinal N for images
 * on "cuda:N" ("cuda": 0). The library resolves the name; callers need not
 * parse ff_batch_device. batch must be held (not NULL); device_type and
 * device_id must not be NULL. Any thread. */
FF_API void ff_batch_dlpack_device(const ff_batch *batch, int *device_type, int *device_id);

/* The loader's output stream the batch's upload ran on (cuda: a
 * cudaStream_t; emu: internal) and its ready event, recorded after the
 * upload (cuda: a cudaEvent_t, blocking-sync); NULL for host batches. Valid
 * while the batch is held; do not destroy them. */
FF_API void *ff_batch_stream(const ff_batch *batch);
FF_API void *ff_batch_event(const ff_batch *batch);

/* Makes the consumer's stream (cuda: a cudaStream_t of the output device,
 * 0 the legacy default stream) wait for the batch's ready event, without
 * blocking the calling thread. FF_OK (also for host batches: nothing to
 * do) or FF_EDEVICE. */
FF_API ff_status ff_batch_wait_on(const ff_batch *batch, void *stream);

/* Blocks the calling thread (sleeping, not spinning) until the batch's
 * images are on its device: for a consumer that reads them from the host
 * (emu:N memory is host memory) or from outside any stream. FF_OK (host
 * batches: at once) or FF_EDEVICE. */
FF_API ff_status ff_batch_sync(const ff_batch *batch);

/* Releases the batch once the work queued on the consumer's stream so far
 * (kernels that read the images) is done: an event is recorded on stream
 * and the ring reuses the memory only after it. Returns at once. For host
 * batches, the same as ff_batch_release. */
FF_API void ff_batch_release_after(ff_batch *batch, void *stream);

/*
 * Keeps released host batches from being refilled while the consumer's
 * asynchronous copies still read them.
 *
 * A host batch in pinned memory (ff_config.pin_memory) is copied to a GPU
 * asynchronously: torch's images.cuda(non_blocking=True) is a
 * cudaMemcpyAsync that only queues the copy, and PyTorch records no event
 * for pinned memory it did not allocate. Releasing the batch right after
 * (its tensors die) would let the workers refill its memory before the copy
 * has read it: the GPU would get pixels of a later batch. Call
 * ff_loader_fence with the stream the copies are queued on right before
 * each ff_loader_next and before ff_loader_close. It records an event on
 * `stream`, after every copy queued there so far; each host batch released
 * since the previous fence (or, when ff_loader_next came first, since the
 * fence before that) is refilled only once that event has completed. From
 * the first fence on, a released host batch is held back until the next
 * fence (so a consumer that fences keeps fencing); a batch released between
 * a fence and the ff_loader_next that follows takes that fence. A copy
 * made on another stream must be ordered before the fence on `stream`
 * (cudaStreamWaitEvent, torch's current_stream().wait_stream(side)) before
 * the next ff_loader_next. The workers wait for the event only when they
 * need the memory (sleeping, one of them at a time; ff_stats.fence_wait_ns),
 * and the ring's memory is freed (ff_loader_close, or the last release
 * after it) only once every fence's event has completed: a copy still
 * queued on `stream` then delays the close.
 *
 *   stream  (in) where the copies were queued: a cudaStream_t of the device
 *           that pinned the host batches (ff_loader_pinned_device), NULL
 *           its legacy default stream (torch's default stream); on "emu:N"
 *           NULL (the emulator's default stream) or a stream of that
 *           emulator.
 *
 * Nothing to do, FF_OK at once: host batches in ordinary memory (a copy
 * from pageable memory has read it when the copy call returns) and batches
 * on an output_device (ff_batch_release_after orders those). Thread-safety:
 * the consumer's thread, or any one thread while another waits inside
 * ff_loader_next (a binding that fetches on a helper thread fences on the
 * thread that queues the copies). Returns FF_OK, FF_EINVAL (NULL loader or
 * one that failed to open), FF_EDEVICE (the event could not be recorded,
 * e.g. a stream of another device: message; the batches released since the
 * last fence stay held back until a fence succeeds or ff_loader_next),
 * FF_ENOMEM. ff_stats.fences counts the fences recorded.
 */
FF_API ff_status ff_loader_fence(ff_loader *loader, void *stream);

/* The device whose host allocator holds the ring's host batches: "cuda:0",
 * "emu:0" (pinned memory; see ff_config.pin_memory), or "cpu" (ordinary
 * memory). Owned by the loader, valid until ff_loader_close; NULL gives
 * "cpu". Any thread. */
FF_API const char *ff_loader_pinned_device(const ff_loader *loader);

/* The CUDA ordinal N of the device that pinned the host batches
 * (ff_loader_pinned_device "cuda:N"), or -1 when no CUDA device did ("emu:N"
 * or ordinary memory; NULL loader). The CUDA device whose streams
 * ff_loader_fence takes. Any thread. */
FF_API int ff_loader_pinned_cuda_device(const ff_loader *loader);

typedef enum ff_dtype { FF_UINT8 = 0, FF_FLOAT32 = 1, FF_INT64 = 2, FF_BFLOAT16 = 3, FF_FLOAT16 = 4 } ff_dtype;
typedef enum ff_layout { FF_NHWC = 0, FF_NCHW = 1 } ff_layout;

/* A dense host tensor view. shape and strides are in elements (as DLPack). */
typedef struct ff_tensor {
  void *data;
  ff_dtype dtype;
  ff_layout layout;        /* images: NCHW float32 or NHWC uint8; labels (1-D): not meaningful */
  int ndim;
  int64_t shape[4];
  int64_t strides[4];
} ff_tensor;

/* Samples in the batch: batch_size, fewer for the last batch of an epoch
 * without drop_last, and fewer still by the samples skipped (on_error=skip;
 * on_error=replace keeps the size); never 0: a batch whose samples were all
 * skipped is not handed out. */
FF_API size_t ff_batch_size(const ff_batch *batch);

/* Index of the batch within its epoch (0-based), and its epoch. */
FF_API size_t ff_batch_index(const ff_batch *batch);
FF_API uint64_t ff_batch_epoch(const ff_batch *batch);

/* The images, by ff_config.output_dtype and memory_format: shape (N, 3, H,
 * W) for NCHW planes and for channels_last (layout FF_NHWC, strides (3HW,
 * 1, 3W, 3)), (N, H, W, 3) for the default uint8 NHWC; strides in
 * elements, dense. Valid until the batch is released. */
FF_API void ff_batch_images(const ff_batch *batch, ff_tensor *out);

/* Views (a pipeline with `||`, see ff_loader_open): the views per sample,
 * 1 without views. */
FF_API size_t ff_loader_num_views(const ff_loader *loader);

/* The images of view `view` (0 <= view < ff_loader_num_views), as
 * ff_batch_images gives view 0 (which it is): shape (N, 3, H, W) float32 or
 * (N, H, W, 3) uint8 with the view group's size, contiguous, in the
 * memory ff_batch_device names (after the batch's ready event on a
 * device). Valid until the batch is released. FF_OK, or FF_EINVAL (out
 * zeroed) for a view past the last. */
FF_API ff_status ff_batch_view_images(const ff_batch *batch, size_t view, ff_tensor *out);

/* The labels, shape (N,), int64. Valid until the batch is released. */
FF_API void ff_batch_labels(const ff_batch *batch, ff_tensor *out);

/* The soft labels of a pipeline ending in mixup_cutmix: shape (N,
 * num_classes) float32, row-major, each row the sample's mixed target (see
 * mixup_cutmix). Valid until the batch is released; host memory whatever
 * output_device says. FF_OK, or FF_EINVAL (out zeroed) without the stage. */
FF_API ff_status ff_batch_soft_labels(const ff_batch *batch, ff_tensor *out);

/* Dataset indices of the batch's samples, N values (for debugging and tests). */
FF_API const int64_t *ff_batch_sample_indices(const ff_batch *batch);

/* Sample i of the data set (0 <= i < ff_loader_dataset_size; its place in
 * the source's order, as ff_batch_sample_indices gives it): *path gets its
 * file (imagefolder, list), "SHARD:MEMBER" (tar:) or its name in messages
 * (callback sources: "NAME[i]"), owned by the loader and valid until
 * ff_loader_close; *label its label, or -1 where the label comes with the
 * bytes (callback sources). Either out pointer may be NULL. What
 * torchvision's ImageFolder.samples[i] holds, for a folder source.
 * Thread-safe. Returns FF_OK, or FF_EINVAL (i out of range, a loader that
 * failed to open) with the message on the handle. */
FF_API ff_status ff_loader_sample_info(const ff_loader *loader, size_t i, const char **path, int64_t *label);

/*
 * Runs sample i of the data set through the pipeline as epoch `epoch`
 * draws it (its first copy under repeated_augmentations; no batch stage),
 * outside the ring: the bytes its place in a batch of that epoch gets. One
 * tensor per view (ff_loader_num_views) goes to views_out[0 ..
 * num_views - 1], each the image of one sample without the batch dimension:
 * (3, H, W) for NCHW planes and for channels_last (strides (1, 3W, 3)),
 * (H, W, 3) for NHWC uint8, by output_dtype and memory_format as batches;
 * the memory of all of them is one block at views_out[0].data, the caller's
 * to free with ff_free. *label gets the sample's label. On the CPU whatever
 * the device, on the calling thread; thread-safe, also while batches are
 * being prepared (callback sources call their fetch from this thread).
 * Returns FF_OK, FF_EINVAL (i out of range, num_views below the views,
 * views_out or label NULL, a streamed tar: source: its samples are read
 * only in stream order, a loader that failed to open), FF_EIO, FF_EDATA,
 * FF_ETOOBIG or FF_ENOMEM naming the file, with the message on the handle;
 * views_out and *label are untouched on failure.
 */
FF_API ff_status ff_loader_sample_images(ff_loader *loader, size_t i, uint64_t epoch, ff_tensor *views_out,
                                         size_t num_views, int64_t *label);

/* The dataset indices this rank's epoch `epoch` hands out, in order:
 * ff_loader_num_samples of them into out[0 .. cap - 1] (DistributedSampler's
 * or RepeatAugSampler's list, padding and repeats included; a streamed
 * source's two-level shuffle). Batch b holds positions b * batch_size on,
 * less the samples skipped under on_error=skip (on_error=replace puts a
 * substitute in place). A pure function of (seed, epoch, rank, world_size).
 * Thread-safe. Returns FF_OK, or FF_EINVAL (cap below the samples, out NULL,
 * a loader that failed to open) or FF_ENOMEM with the message on the
 * handle. */
FF_API ff_status ff_loader_epoch_order(ff_loader *loader, uint64_t epoch, int64_t *out, size_t cap);

/* This process's shard, as the open resolved it: *rank and *world_size are
 * ff_config's, with -1 replaced by $RANK / $WORLD_SIZE (or 0 / 1) -- what the
 * order above is a function of. Either pointer may be NULL. Thread-safe. */
FF_API void ff_loader_shard(const ff_loader *loader, int *rank, int *world_size);

/* Where one batch was prepared and what it cost. */
typedef struct ff_batch_info {
  size_t cpu_samples;       /* samples the CPU prepared (device fallbacks included) */
  size_t device_samples;    /* samples the device prepared; cpu + device = ff_batch_size */
  size_t device_fallbacks;  /* samples meant for the device that the CPU prepared */
  size_t placement_samples[FF_PLACEMENTS]; /* samples by where they were prepared (ff_placement; a device
                                              fallback counts as cpu); sum = ff_batch_size */
  uint64_t placement_cpu_ns[FF_PLACEMENTS];  /* CPU time on them by placement: read + decode + ops */
  uint64_t placement_read_ns[FF_PLACEMENTS]; /* of which reading the file and its header */
  size_t device_decode_fallbacks; /* samples placed for device decode that the CPU decoded (PNG, CMYK,
                                     progressive, a region the decoder refused, a decode it failed, a
                                     batch smaller than it takes) */
  uint64_t wait_ns;         /* time the consumer waited for this batch in ff_loader_next */
  uint64_t cpu_ns;          /* CPU time on its CPU samples (read + decode + ops, summed over threads) */
  uint64_t device_ns;       /* device time of its microbatch (events): ops, and decodes (placement device)
                               unless they run on JPEG engines beside the kernels */
  size_t device_bytes;      /* device memory its microbatch took from the pool, output tensor included */
  double offload_share;     /* the scheduler's share when the batch was split, 0..1 */
  /* How its images reached the memory they are handed out in: */
  size_t output_uploads;    /* host-to-device copy calls to output_device: one per run of consecutive
                               samples prepared on the host (0 for host output) */
  uint64_t output_upload_bytes; /* their bytes */
  size_t device_downloads;  /* device-to-host copy calls that brought its device-prepared samples to host
                               memory: host output, one batched call per microbatch into the (pinned)
                               host batch; output_device the offload device: 0, the device writes them in
                               place into the output batch (direct aggregation) */
  uint64_t device_download_bytes; /* their bytes */
  size_t host_round_trips;  /* device-prepared samples that went down to host memory and up again to
                               output_device (only when output_device is not the offload device) */
  uint64_t feeder_cpu_ns;   /* the device feeder's threads' CPU time on its microbatch, waits included
                               (they sleep: events are blocking-sync), against device_ns */
  uint64_t batch_stage_ns;  /* the batch stage (mixup_cutmix) on this batch: draws, soft labels and
                               images, on the consumer thread in ff_loader_next, ns; 0 without one.
                               With a device output_device the images are mixed on the device (after
                               ff_loader_next returns, before the ready event): this is the host's
                               part, draws and soft labels */
} ff_batch_info;

/* Fills *out for a held batch. Any thread. */
FF_API void ff_batch_stats(const ff_batch *batch, ff_batch_info *out);

/* Caps the device memory the offload device's budget may count as free,
 * in bytes: what the trainer wants to leave the loader, read on the
 * consumer thread before ff_loader_next. The budget is
 * min(device_memory_limit_bytes, what the loader holds + free -
 * device_headroom_bytes), free being the device's free memory
 * (cudaMemGetInfo, torch.cuda.mem_get_info()[0]), re-read about once per
 * batch, and at most free_bytes from this call on. Memory a framework
 * caches unused (PyTorch's memory_reserved() - memory_allocated()) is not
 * free: the framework holds it and the loader cannot get it; it becomes
 * free only once the framework releases it (torch.cuda.empty_cache(); the
 * Python Loader does that when release_torch_cache=True and the budget
 * refused work, see ff_stats.device_budget_refusals). When the figure
 * shrinks, the loader hands its cached device memory back at once
 * (cudaMemPoolTrimTo, or the caller's device_free once the loader's work
 * is done with it) and sends work to the CPU until it fits. -1 removes the
 * cap. Consumer thread. FF_OK (also without a device: nothing to do),
 * FF_EDEVICE. */
FF_API ff_status ff_loader_set_device_free_bytes(ff_loader *loader, int64_t free_bytes);

/* Loader statistics since open. Times are summed over worker threads.
 * The struct grows at the end in new versions: build against the header of
 * the library you link. */
typedef struct ff_stats {
  uint64_t batches;          /* batches handed out by ff_loader_next */
  uint64_t samples;          /* samples handed out */
  uint64_t read_ns;          /* reading encoded files and their headers (and planning the sample) */
  uint64_t decode_ns;        /* decoding on the CPU (including region and DCT-scaled decode) */
  uint64_t ops_ns;           /* running the ops after decode */
  uint64_t wait_ns;          /* time the consumer waited inside ff_loader_next */
  uint64_t read_bytes;       /* encoded bytes read */
  uint64_t skipped;          /* samples skipped under on_error=skip; with a tar: source also, from the open
                                on (under skip or replace), each shard member or shard that makes no
                                sample (listed first by ff_loader_skipped) */
  int num_threads;           /* worker threads in use at normal priority (in a node group: the allotment and
                                burst of the node coordinator; its spare threads in SCHED_IDLE, which run on
                                cores nothing else wants, are not counted) */
  const char *device;        /* the device in use: "cpu", "emu:0", "cuda:0 (NVIDIA H200)"; owned by the loader */
  uint64_t device_samples;   /* samples handed out that the device prepared */
  uint64_t device_ns;        /* device time of their microbatches (events: their kernels, and their decodes
                                where the decoder runs on the SMs) */
  uint64_t device_fallbacks; /* samples handed out that were meant for the device and were prepared by
                                the CPU workers instead (a refusal of memory, a device error, a decode the
                                device's decoder refused or failed) */
  size_t device_pool_limit_bytes; /* the device memory budget now (0 without a device) */
  size_t device_pool_peak_bytes;  /* the most device memory the loader held at once */
  double offload_share;      /* the scheduler's current share of samples for the device, 0..1 */
  uint64_t replaced;         /* samples replaced under on_error=replace (each failed one counts once) */
  uint64_t warnings;         /* samples decoded despite repaired corrupt data (see strict_decode) */
  uint64_t placement_samples[FF_PLACEMENTS]; /* samples handed out, by where they were prepared */
  uint64_t placement_cpu_ns[FF_PLACEMENTS];  /* their CPU time by placement (read + decode + ops) */
  uint64_t placement_read_ns[FF_PLACEMENTS]; /* of which reading */
  uint64_t device_decode_fallbacks; /* samples handed out that were placed for device decode and decoded
                                       by the CPU workers (ff_batch_info.device_decode_fallbacks; the
                                       device_decode_* counts below say why) */
  const char *device_decoder; /* the decoder of device-placed samples: "libjpeg-turbo", "nvjpeg-like"
                                 (emu variants), "nvjpeg-hardware", "nvjpeg-hybrid", or "none" (device
                                 decode off or unavailable: see device_decoder_note); owned by the loader */
  const char *device_decoder_note; /* why device decode is off: "" when on, "no device",
                                      "device_decode=off", "deterministic=1", "device_decode=auto is on
                                      for CUDA devices only", the device's reason (e.g. "nvjpeg not
                                      available: libnvjpeg.so.13: cannot open shared object file ..."),
                                      or, when its failures turned it off during the run (3 microbatches
                                      in a row whose decode failed on most images; said once on stderr),
                                      "nvjpeg-hybrid turned off after ..."; owned by the loader, valid
                                      until ff_loader_close */
  uint64_t output_upload_bytes;   /* sums of ff_batch_info's over the batches handed out */
  uint64_t device_download_bytes;
  uint64_t host_round_trips;
  uint64_t feeder_cpu_ns;         /* the device feeder's threads' CPU time (ff_batch_info.feeder_cpu_ns) */
  uint64_t batch_stage_ns;   /* the batch stage (mixup_cutmix) on the batches handed out */
  uint64_t source_ignored_files; /* imagefolder: files in the class folders left out because their
                                    extension is not an image's (torchvision's IMG_EXTENSIONS), as
                                    ImageFolder leaves them out; counted once, at open */
  const char *node_group;    /* the node group whose coordinator sets num_threads (FF_NODE_GROUP; auto
                                resolved to the torchrun job's), or "" when the loader runs alone (no
                                group, it could not join, or it left a damaged group's shared memory
                                later: it said why on stderr); owned by the loader, valid until
                                ff_loader_close */
  /* Which decoder ran, over the batches handed out. A sample is decoded
   * once: by the CPU workers (libjpeg-turbo, the codecs of the other
   * formats) or by the device's decoder (placement device). */
  const char *decoders;      /* the decoders that decoded the samples handed out so far: "libjpeg-turbo"
                                (the CPU workers alone), the device decoder's name (device_decoder's
                                values) when it decoded every one, both joined by '+' when both did
                                ("nvjpeg-hardware+libjpeg-turbo"), or "none" before any; a static string */
  uint64_t cpu_decodes;      /* samples handed out whose image the CPU worker threads decoded (each sample
                                the device handed back included: nothing is decoded on the device
                                feeder's threads) */
  uint64_t device_decodes;   /* samples handed out whose image the device's decoder decoded */
  uint64_t device_decode_failures;       /* images a failed device decode handed back to the CPU workers, which
                                            decode them with the CPU's message and on_error: a batched decode
                                            that fails is split in halves until each failing image is alone, or
                                            on a decoder that takes no small batch (nvJPEG hybrid: 51 or more)
                                            with the batch mates of the smallest batch it takes */
  uint64_t device_decode_failed_batches; /* batches whose batched device decode failed (and was split) */
  uint64_t device_decode_small_batches;  /* batches whose device-decode samples the CPU workers decoded
                                            because they were fewer than the decoder takes in one call (nvJPEG's
                                            hybrid backend decodes Huffman on the calling thread for 50 or
                                            fewer images) */
  uint64_t fences;           /* events recorded by ff_loader_fence */
  uint64_t fence_wait_ns;    /* time a worker slept until a released batch's copies had read it (one
                                worker at a time; the others wait for it) */
  uint64_t device_budget_refusals; /* times the device memory budget said no: batches of which it admitted
                                      no sample the scheduler wanted on the device, and microbatches the
                                      pool or the device refused for memory (their samples ran on the CPU) */
  int host_memory_pinned;    /* 1: the host batches are in pinned (page-locked) memory (pin_memory) */
  uint64_t thread_cpu_samples;   /* samples a CPU worker thread ran start to finish (placement cpu, no
                                    substitute) and whose thread CPU time the next two fields sum */
  uint64_t thread_cpu_ns;        /* the worker threads' own CPU time on those samples (the thread CPU
                                    clock: time other processes held the core is not in it): read,
                                    decode, ops and the output into the batch */
  uint64_t thread_decode_cpu_ns; /* of which decoding; the rest, thread_cpu_ns - thread_decode_cpu_ns,
                                    is the samples' non-decode CPU time */
  uint64_t source_ignored_members; /* tar: members that belong to no sample (no suffix, a .json or .txt, a
                                      second image, "__meta__" files...), as webdataset ignores them;
                                      counted once, at open */
  /* Remote workers (ff_config.remote), since open; the samples they prepared are
   * placement_samples[FF_PLACEMENT_REMOTE]. */
  int remote_workers;              /* ff_remote_executor.workers, or 0 without remote workers */
  double remote_share;             /* the policy's share of a batch for remote workers now, 0..1 */
  uint64_t remote_microbatches;    /* microbatches completed */
  uint64_t remote_latency_ns;      /* their round trips, submit to complete, summed (mean: / microbatches) */
  double remote_rtt_s;             /* the round trip the policy expects now (moving average), 0 before one */
  uint64_t remote_bytes_sent;      /* encoded bytes sent with microbatches (0 when the workers read the source) */
  uint64_t remote_bytes_received;  /* result bytes taken back (uint8 samples) */
  uint64_t remote_retries;         /* tries past the first the engine reported (ff_loader_remote_complete) */
  uint64_t remote_worker_cpu_ns;   /* the workers' CPU time the engine reported */
  uint64_t remote_convert_ns;      /* this process's time converting remote samples into batches */
  uint64_t remote_fallbacks;       /* samples sent remote that ran locally: failed there, timed out, refused */
  uint64_t remote_timeouts;        /* microbatches not completed within timeout_ms (run locally) */
  uint64_t remote_late;            /* completions ignored: a ticket completed before, dropped or unknown */
  const char *remote_note;         /* why remote work stopped ("" while it goes on); owned by the loader */
} ff_stats;

/* Fills *out. Any time, from the consumer thread. */
FF_API void ff_loader_stats(const ff_loader *loader, ff_stats *out);

/* Measured cost of one kind of op, summed over worker threads since open:
 * per image = ns / calls, per pixel = ns / pixels (pixels of the op's input).
 * An op that provably changes nothing (a factor of 1, a rotation, shear or
 * translation by 0, identity) is skipped and not counted. */
typedef struct ff_op_cost {
  const char *op;   /* "resize", "rotate", "fused_lut" (a run of table ops done as one pass), "output" ... */
  uint64_t calls;
  uint64_t ns;
  uint64_t pixels;
} ff_op_cost;

/* Writes up to cap costs (ops that ran at least once) to out and returns
 * how many there are. Names are static strings. Consumer thread. */
FF_API size_t ff_loader_op_costs(const ff_loader *loader, ff_op_cost *out, size_t cap);

/* The path and reason of the i-th distinct failure, skipped or replaced,
 * or NULL past the last: a file that fails the same way in several epochs is
 * listed once, so there are at most stats.skipped + stats.replaced (the
 * samples) and at most 1000 are kept. Owned by the loader. */
FF_API const char *ff_loader_skipped(const ff_loader *loader, size_t i);

/* The path and damage of the i-th distinct sample decoded with a warning
 * (at most stats.warnings; listed once over epochs; at most the first 1000
 * are kept), e.g.
 * "x.jpg: Corrupt JPEG data: 12 extraneous bytes before marker 0xd9
 * (decoded anyway)", or NULL. Owned by the loader. */
FF_API const char *ff_loader_warning(const ff_loader *loader, size_t i);

/*
 * Starts recording a timeline of the loader's work (replacing a trace
 * already started): one span per sample and phase on each CPU worker's
 * track (read, decode, ops), one per microbatch on the device stream's
 * (submit to complete, downloads included), the batches the device feeder
 * handed back to the CPU workers, and the consumer's waits in ff_loader_next. Memory is bounded:
 * after max_events events (0 = 262144, about 10 MiB) later ones are dropped
 * and counted. Consumer thread. Returns FF_OK, FF_ENOMEM, or FF_EINVAL on a
 * loader that failed to open.
 */
FF_API ff_status ff_loader_trace_start(ff_loader *loader, size_t max_events);

/* Writes the events recorded so far to path as a Chrome trace (a JSON
 * array of events; open it in https://ui.perfetto.dev or chrome://tracing).
 * *events and *dropped (each may be NULL) get the events written and those
 * dropped at the cap. Returns FF_OK, FF_EIO (message names the path), or
 * FF_EINVAL (no trace started). */
FF_API ff_status ff_loader_trace_write(ff_loader *loader, const char *path, size_t *events, size_t *dropped);

/*
 * Runs `pipeline` on one image file as sample `index` of `epoch` under
 * `seed` — the same draws a loader makes for that sample — and returns the
 * RGB uint8 result, (height, width, 3) HWC, in *out (free it with ff_free).
 * A final to_dtype or normalize is not applied, and the pipeline need not
 * give a fixed size. Thread-safe. Returns FF_OK, FF_EPIPELINE, FF_EIO,
 * FF_EDATA, FF_ETOOBIG, FF_ENOMEM or FF_EINVAL, with the message in errbuf
 * (if not NULL); on FF_OK errbuf holds "" or, when the decoder repaired
 * corrupt data (a loader counts it in ff_stats.warnings), what it repaired.
 */
FF_API ff_status ff_image_augment(const char *path, const char *pipeline, uint64_t seed, uint64_t epoch,
                                  uint64_t index, uint8_t **out, int *height, int *width, char *errbuf,
                                  size_t errbuf_size);

/* ff_image_augment in the given semantics (ff_image_augment is
 * FF_SEMANTICS_V1); FF_EINVAL for a value that is not an ff_semantics. */
FF_API ff_status ff_image_augment_as(const char *path, const char *pipeline, ff_semantics semantics,
                                     uint64_t seed, uint64_t epoch, uint64_t index, uint8_t **out, int *height,
                                     int *width, char *errbuf, size_t errbuf_size);

/*
 * What the planner drew for sample `index` of `epoch`: the draws the loader
 * makes for it (same seed, same file header), without decoding its pixels.
 * index is the sample's place in the data set (0 .. ff_loader_dataset_size()
 * - 1, as ff_batch_sample_indices reports it), whatever the shuffle. *json_out
 * gets one JSON object, NUL-terminated UTF-8 (free it with ff_free):
 *   "path", "label", "seed", "epoch", "index", "semantics": "v1" | "v2";
 *   "image": {"format": "jpeg" | "png", "width", "height"} (pixels, from the header);
 *   "decode": {"region": [x, y, width, height] (full-image pixels: what is decoded,
 *             the crop of a leading crop/random_resized_crop/center_crop),
 *             "dct_scale": 0.125 | 0.25 | 0.5 | 1 (the JPEG DCT reduction),
 *             "decoded_size": [width, height] (the decoded image, pixels at that scale),
 *             "box": [x, y, width, height] (the region in the decoded image, fractional
 *             pixels, which the first resize resamples)};
 *   with views (`decode || N x OPS ...`), "decode" is the one window decoded for
 *   all of them (dct_scale 1) and, in place of "steps", "views": [{"view": v,
 *   "group": g (0-based, in the text's order), "region": [x, y, width, height]
 *   (the view's crop, full-image pixels), "steps": [...]}, ...] (view 0 draws
 *   as the sample without views);
 *   "steps": [...], in order, each {"op": NAME, ...}:
 *     {"op": "crop", "box": [x, y, width, height]} (current image's pixels, zero padding),
 *     {"op": "resize", "size": [height, width], "antialias": bool,
 *      "interpolation": "bilinear" | "bicubic"},
 *     {"op": "gaussian_blur", "kernel_size": [width, height], "sigma": s},
 *     {"op": "erase", "box": [x, y, width, height], "fill": [r, g, b]} or with
 *      "noise_key": K (the Philox key of its normal noise) — on the float output,
 *     {"op": "horizontal_flip"}, {"op": "vertical_flip"} (a flip drawn), and where a
 *      random_*_flip's draw said no, {"op": "horizontal_flip", "applied": false}
 *      (not a step: a replay skips it; "applied" appears only there),
 *     an augmentation op, named as in the pipeline text ("rotate", "solarize", ...) with
 *       "arg": what the op is called with, as torchvision's _apply_op calls it (degrees,
 *       pixels, shear coefficient, factor 1 + m, bits, threshold); for the signed ops
 *       (shear_*, translate_*, rotate, brightness, color, contrast, sharpness)
 *       "magnitude": |m| and "sign": -1 | 1; for the geometric ops "interpolation" and
 *       "fill" ([r, g, b], 0..255); autocontrast, equalize and invert have no argument,
 *       and an identity draw has no step;
 *     AugMix: {"op": "aug_mix_begin", "weight": m0 (the original image's share)}, then per
 *       chain {"op": "chain_begin"}, its ops, {"op": "chain_end", "weight": w_i * m1},
 *       then {"op": "aug_mix_end"}; (m0, m1) and the w_i are
 *       the Dirichlet draws (spec 4.4);
 *     timm's policies: their Pillow ops, named "pil_" and the op ("pil_rotate",
 *       "pil_solarize_add", ...) with "arg" as timm's op function receives it (degrees,
 *       shear factor, pixels, enhance factor, bits, threshold, added value) and for
 *       the geometric ops "interpolation" ("nearest" | "bilinear" | "bicubic") and
 *       "fill"; timm's AugMix: {"op": "aug_mix_begin", "weight": 0}, the chains with
 *       "weight": w_i (the Dirichlet draw), then {"op": "timm_aug_mix_end", "weight": m}
 *       (the Beta draw: the result is Image.blend(image, mixture, m)).
 * Thread-safe, also while batches are being prepared. Returns FF_OK,
 * FF_EINVAL (index past the data set, json_out NULL, a loader that failed to
 * open), FF_EIO, FF_EDATA, FF_ETOOBIG or FF_ENOMEM (naming the file), with
 * the message on the handle.
 */
FF_API ff_status ff_loader_plan(ff_loader *loader, uint64_t index, uint64_t epoch, char **json_out);

/*
 * What the batch stage (mixup_cutmix) draws for batch `batch` of `epoch`
 * (0 <= batch < ff_loader_num_batches) as a JSON object in *json_out (free
 * it with ff_free): "convention", "mode", "batch_size" (the batch's size
 * when none of its samples is skipped), "on_value", "off_value" (the
 * smoothed one-hot values), "draws" (one for the batch in batch mode, one
 * per pair i, N-1-i in pair mode, one per image in elem mode), each
 * {"applied" (the prob draw), "cutmix", "lam_draw" (the Beta draw, 1 when
 * not applied), "lam" (the targets' λ, area-corrected), and for a CutMix
 * box "center": [cy, cx] (the box centre drawn), "cut": [h, w] and
 * "corner": [y, x] (cutmix_minmax's draws), "box": [y0, y1, x0, x1]}, and
 * "partners" (the image each image mixes with). A pure function of
 * (seed, epoch, batch) while mixing is on (ff_loader_set_mix_enabled). Returns FF_OK, FF_EINVAL (no stage, batch out of
 * range, json_out NULL) or FF_ENOMEM.
 */
FF_API ff_status ff_loader_mix_plan(ff_loader *loader, uint64_t epoch, size_t batch, char **json_out);

/* Turns the batch stage's mixing off (enabled 0) or back on (nonzero), from
 * the next batch handed out (and in ff_loader_mix_plan): while off, no draw
 * applies, so every image stays itself and its target is its label's
 * smoothed one-hot row, as timm's Mixup gives with mixup_enabled = False
 * (timm's train.py sets it at --mixup-off-epoch). The draws of later
 * batches do not depend on it. From the consumer thread. Returns FF_OK, or
 * FF_EINVAL (no mixup_cutmix stage, a loader that failed to open). */
FF_API ff_status ff_loader_set_mix_enabled(ff_loader *loader, int enabled);

/*
 * The same plan for one image file outside any loader, as ff_image_augment
 * draws it (sample `index` of `epoch` under `seed`; no "label" key).
 * Thread-safe. Returns FF_OK, FF_EPIPELINE, FF_EIO, FF_EDATA, FF_ETOOBIG,
 * FF_ENOMEM or FF_EINVAL, with the message in errbuf (if not NULL).
 */
FF_API ff_status ff_image_plan(const char *path, const char *pipeline, uint64_t seed, uint64_t epoch,
                               uint64_t index, char **json_out, char *errbuf, size_t errbuf_size);

/* ff_image_plan in the given semantics (ff_image_plan is FF_SEMANTICS_V1):
 * v2's solarize thresholds and the "semantics" key. FF_EINVAL for a value
 * that is not an ff_semantics. */
FF_API ff_status ff_image_plan_as(const char *path, const char *pipeline, ff_semantics semantics, uint64_t seed,
                                  uint64_t epoch, uint64_t index, char **json_out, char *errbuf,
                                  size_t errbuf_size);
/*
 * Augmenters: a loader's per-sample work for callers that order and batch
 * the samples themselves — an ingest framework's workers (Ray Data's
 * map_batches, remote workers that take a share of a loader's batches).
 * An augmenter runs a list of samples, each given by its encoded bytes (or,
 * with a source, by its index alone) and its index in the data set, through
 * the pipeline with the random draws a loader with the same seed makes for
 * that (epoch, index), on its own threads, into the caller's buffer; each
 * sample succeeds or fails on its own.
 *
 * Bits: a sample is bit-identical to that index's sample in a loader's batch
 * of that epoch (same pipeline, seed, semantics, limits and output format;
 * FF_OUTPUT_UINT8 as described at ff_augmenter_open), whatever the threads,
 * the other samples of the run and the vector paths (ff_cpu_isa) of either
 * process.
 */
typedef struct ff_augmenter ff_augmenter;

/* One sample of a run (ff_augmenter_run), filled by the caller. */
typedef struct ff_augment_item {
  const void *data;  /* its encoded image (JPEG, PNG, WebP, TIFF, PBM/PGM/PPM or BMP, told apart by content),
                        size_bytes bytes, only read, during the run; NULL: sample `index` of the augmenter's
                        source, read from there (its file, or its member of a shard) */
  size_t size_bytes;
  uint64_t index;    /* its index in the data set (0-based, the loader's order of the source): its draws are
                        keyed by (seed, epoch, index) */
  const char *name;  /* names it in messages (a path, a URL, a key); NULL: the source's path of the sample
                        when read from there, else "sample[INDEX]" */
} ff_augment_item;

/*
 * Opens an augmenter from the fields of *cfg (ff_config_init first) that
 * describe one sample's work: pipeline (required), seed, semantics,
 * num_threads (threads of a run, the caller's among them; 0 = the cores
 * this process may use), max_image_pixels, max_jpeg_scans,
 * max_metadata_bytes, strict_decode, output_dtype and memory_format; and,
 * when not NULL, source (with allow_empty): "imagefolder:DIR",
 * "list:FILE", "tar:PATTERN" of local uncompressed shards, or a bare folder
 * or list file, indexed exactly as ff_loader_open indexes it (the same
 * samples in the same order, so an index names the same sample; shard
 * members that make no sample are left out, as under on_error=skip), for
 * ff_augmenter_sample and for items without data. No other field is read:
 * the caller orders and batches (no sampler, device or batch stage).
 *
 * Each sample comes out as one image of the pipeline's fixed output size
 * in the format output_dtype and memory_format give a loader's batch (see
 * ff_config), except that FF_OUTPUT_UINT8 also takes a pipeline that ends
 * in to_dtype or normalize: the image is then the uint8 pixels that step
 * would convert (ff_image_augment's), for a consumer that converts them
 * itself, with a quarter of float32's bytes; FF_MEMORY_FORMAT_CONTIGUOUS
 * stores those as (3, H, W) planes, otherwise (H, W, 3). Damage the JPEG
 * decoder repairs is not reported (strict_decode makes it an error).
 *
 * On success *out is the augmenter and FF_OK is returned. On failure *out
 * is still set (unless memory ran out: NULL) to a failed augmenter: read
 * the reason with ff_augmenter_errmsg, free it with ff_augmenter_close.
 * Returns FF_EINVAL (a bad field, named; a pipeline with views, with
 * mixup_cutmix, or with random_erasing and uint8 output, which the float
 * output carries; a streamed tar: source, which has no random access;
 * NULL cfg or out: for NULL out nothing is made), FF_EPIPELINE (the text,
 * naming the column), FF_EIO, FF_EDATA, FF_EEMPTY (the source, as
 * ff_loader_open), FF_ENOMEM. Starts num_threads - 1 threads.
 */
FF_API ff_status ff_augmenter_open(const ff_config *cfg, ff_augmenter **out);

/* Stops and joins the threads and frees the augmenter (no run may be in
 * progress). NULL does nothing. */
FF_API void ff_augmenter_close(ff_augmenter *aug);

/* The message of the last failure of ff_augmenter_open or ff_augmenter_run
 * ("" when none), owned by the augmenter, valid until its next call. */
FF_API const char *ff_augmenter_errmsg(const ff_augmenter *aug);

/* One output sample: *out gets data NULL, the dtype, the layout (FF_NHWC,
 * or FF_NCHW for planes and for channels_last), ndim 3, the shape (H, W, 3)
 * or (3, H, W) and the strides in elements ((1, 3W, 3) for channels_last:
 * NHWC memory); sample k of a run is at byte k * ff_augmenter_sample_bytes
 * of the output. A failed augmenter gives ndim 0 and 0 bytes. */
FF_API void ff_augmenter_sample_shape(const ff_augmenter *aug, ff_tensor *out);
FF_API size_t ff_augmenter_sample_bytes(const ff_augmenter *aug);

/* Samples in the source's index (0 without a source). */
FF_API size_t ff_augmenter_dataset_size(const ff_augmenter *aug);

/* Sample i of the source's index: *path its file (tar: the shard's name as
 * the pattern expands it), *member its image member in the shard (NULL for
 * a file), *label the label the source gives it (the class folder's place
 * among the sorted class folders, the list's label, the shard's KEY.cls).
 * Each out pointer may be NULL; the strings stay valid until
 * ff_augmenter_close. FF_OK, or FF_EINVAL (no source, i past the index). */
FF_API ff_status ff_augmenter_sample(const ff_augmenter *aug, size_t i, const char **path, const char **member,
                                     int64_t *label);

/*
 * Runs items[0 .. n) of `epoch`: sample k goes to out + k *
 * ff_augmenter_sample_bytes (out holds out_size_bytes, at least n of them)
 * and its status to statuses[k]: FF_OK, or as a loader's sample fails
 * (FF_EIO, FF_EDATA, FF_ETOOBIG, FF_ENOMEM; the message names the item
 * and the reason, from ff_augmenter_item_errmsg until the next run), or
 * FF_EINVAL for an item without data whose index the source does not hold;
 * a failed sample's bytes in out are unspecified. The samples run on the
 * augmenter's threads and the calling one, in no set order; the call
 * returns when all are done. Returns FF_OK (the run took place; look at
 * statuses), FF_EINVAL (NULL items, out or statuses with n > 0,
 * out_size_bytes too small, n over INT_MAX, a failed augmenter; message on
 * the handle, nothing run), FF_ENOMEM. One run at a time per augmenter:
 * calls must not overlap; different augmenters are independent.
 */
FF_API ff_status ff_augmenter_run(ff_augmenter *aug, uint64_t epoch, const ff_augment_item *items, size_t n,
                                  void *out, size_t out_size_bytes, ff_status *statuses);

/* Why item k of the last run failed (NULL when it did not, or k is past the
 * run), valid until the next run. */
FF_API const char *ff_augmenter_item_errmsg(const ff_augmenter *aug, size_t k);

/*
 * Training-recipe presets: a published recipe's training data pipeline as
 * pipeline text (views and the batch stage included) with its sampler
 * setting. Recipes: "deit", "torchvision-v2", "dino", "simclr",
 * "resnet-strikes-back-a1" (source: each recipe's `source`). To use one,
 * set ff_config.pipeline = pipeline and ff_config.repeated_augmentations =
 * repeated_augmentations (the num_classes=1000 of its mixup_cutmix is
 * ImageNet's: ff_recipe_pipeline sets another).
 */
typedef struct ff_recipe {
  const char *name;
  const char *source;      /* the recipe it follows: paper, script and the settings taken from it */
  const char *pipeline;    /* pipeline text */
  int repeated_augmentations; /* ff_config.repeated_augmentations (0: DistributedSampler's order) */
  const char *needs;       /* the ops and arguments beyond decode/crops/flips/policies/normalize it uses,
                              comma separated ("" none) */
} ff_recipe;

/* The i-th recipe (0-based), NULL past the last. Static data. */
FF_API const ff_recipe *ff_recipe_at(size_t i);

/* The recipe called name, or NULL. Static data. */
FF_API const ff_recipe *ff_recipe_find(const char *name);

/* Whether this build runs the recipe: FF_OK, or FF_EPIPELINE with
 * errbuf (may be NULL) saying which ops it needs and the parser's message
 * ("recipe deit needs ops this build does not have (...): pipeline column
 * N: unknown op ..."); FF_EINVAL for NULL. Thread-safe. */
FF_API ff_status ff_recipe_check(const ff_recipe *recipe, char *errbuf, size_t errbuf_size);

/* The most classes mixup_cutmix's num_classes takes (2^24: every class
 * index up to it is exact in float32). */
#define FF_MAX_NUM_CLASSES (1 << 24)

/*
 * The recipe's pipeline text for a data set of num_classes classes: the
 * num_classes=1000 (ImageNet's) of its mixup_cutmix becomes num_classes;
 * num_classes 0 gives the text as published. Writes the text and its NUL
 * into buf when they fit in buf_size bytes, else its first buf_size - 1
 * bytes and a NUL (snprintf's rule; buf may be NULL when buf_size is 0),
 * and the text's length in bytes, NUL not counted, into *len_out (may be
 * NULL) in both cases: *len_out >= buf_size says that buf was too small,
 * and a first call with buf_size 0 sizes it. Then set ff_config.pipeline
 * to buf (and repeated_augmentations to the recipe's). Returns FF_OK;
 * FF_EINVAL for a NULL recipe, a NULL buf with buf_size > 0 or a
 * num_classes below 0 or above FF_MAX_NUM_CLASSES; FF_EPIPELINE for a num_classes above 0 and a recipe
 * without mixup_cutmix (no batch stage: num_classes does not apply);
 * FF_EINTERNAL (a bug). buf and *len_out are left as they were on
 * FF_EINVAL and FF_EPIPELINE.
 * Writes no message: the caller words it for its own argument (the CLI's
 * --num-classes, Python's num_classes=). Thread-safe.
 */
FF_API ff_status ff_recipe_pipeline(const ff_recipe *recipe, int num_classes, char *buf, size_t buf_size,
                                    size_t *len_out);

/* Frees memory the library allocated for the caller (ff_image_augment, the
 * plans' JSON). NULL does nothing. */
FF_API void ff_free(void *ptr);

#ifdef __cplusplus
}
#endif
#endif /* FUSIONFLOW_H */
