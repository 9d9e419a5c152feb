/* ops.h — the CPU implementations of the pipeline's steps on interleaved
 * (HWC) uint8 RGB images, torchvision's tensor semantics (spec section 5). */
#ifndef FF_OPS_OPS_H
#define FF_OPS_OPS_H

#include "core/error.h"
#include "core/image.h"
#include "ops/augment.h"
#include "ops/pil.h"
#include "pipeline/pipeline.h"

/* What the per-op costs are kept for: each augmentation op (ff__aug_op
 * values first), then the fused table ops, crop, resize, flips, AugMix's
 * mixing, the output conversion and the Pillow ops (ff__pil_op order). */
enum {
  FF__COST_LUT = FF__AUG_COUNT,
  FF__COST_CROP,
  FF__COST_RESIZE,
  FF__COST_FLIP,
  FF__COST_BLUR,
  FF__COST_ERASE,
  FF__COST_MIX,
  FF__COST_OUTPUT,
  FF__COST_PIL,                              /* the Pillow ops, one kind per ff__pil_op */
  FF__COST_COUNT = FF__COST_PIL + FF__PIL_COUNT
};

/* The name of a cost kind ("rotate", "resize", ...). */
const char *ff__cost_name(int kind);

/* Measured cost of the ops: calls, nanoseconds, and pixels processed. */
typedef struct ff__op_costs {
  uint64_t calls[FF__COST_COUNT], ns[FF__COST_COUNT], pixels[FF__COST_COUNT];
} ff__op_costs;

/* Per-thread memory the ops reuse between samples. */
typedef struct ff__op_scratch {
  ff__buf image[2];  /* ping-pong uint8 images */
  ff__buf floats;    /* resize's horizontal-pass intermediate */
  ff__buf weights;   /* resize's per-axis tap tables */
  ff__buf kept;      /* AugMix: the image the chains start from */
  ff__buf chain[FF__AUG_MIX_MAX_WIDTH]; /* AugMix: each chain's result */
  ff__buf copy;      /* sharpness: the unmodified neighbours */
  ff__buf planes;    /* the output stage's resize: its three planes */
  ff__op_costs costs;
} ff__op_scratch;

void ff__op_scratch_free(ff__op_scratch *s);

/* Crops box (x, y, w, h) of src into *dst: a view when the box lies inside,
 * a zero-padded copy otherwise (torchvision crop/center_crop). */
ff_status ff__op_crop(const ff__image *src, int x, int y, int w, int h, ff__buf *mem,
                      ff__image *dst);

/* Resize of src to out_w x out_h into dst (whose memory the caller sets
 * up) with `filter` (kernels/resize.h: FF__RESIZE_ANTIALIAS, _BICUBIC,
 * _UINT8; 0 is bilinear without antialias): torchvision resize, spec 5.3
 * (ops/resize.c). */
ff_status ff__op_resize(const ff__image *src, int out_w, int out_h, int filter, ff__op_scratch *s, ff__image *dst);

/* The same resize of the source box (x, y, width, height in fractional
 * pixels of src, inside it; NULL: the whole of src): the exact region after
 * a DCT-scaled decode (pipeline.h, ff__dct_box); hflip: the result's
 * columns reversed (a resize then a horizontal flip, in one pass). */
ff_status ff__op_resize_box(const ff__image *src, const double *box, int out_w, int out_h, int filter, int hflip,
                            ff__op_scratch *s, ff__image *dst);

/* ff__op_resize_box into three planes (R, G, B) of out_w x out_h bytes,
 * one after the other at planes. */
ff_status ff__op_resize_planar(const ff__image *src, const double *box, int out_w, int out_h, int filter, int hflip,
                               ff__op_scratch *s, uint8_t *planes);


/* torchvision's _get_gaussian_kernel1d in float32: k[t] = exp(-0.5 *
 * ((t - (ksize-1)/2) / sigma)^2), normalised to sum 1 (ksize floats). */
void ff__gauss_kernel1d(int ksize, float sigma, float *k);

/* Gaussian blur of src into dst (src's size, memory set up by the caller,
 * not overlapping src) with odd kernel sizes ksize_x, ksize_y and standard
 * deviation sigma (pixels), torchvision gaussian_blur's tensor path
 * (reflect padding, float32, rounded half to even) computed separably: at
 * most one level from torchvision. Returns FF_OK, FF_ENOMEM, or FF_EINVAL
 * for a size outside [1, FF__BLUR_MAX_KSIZE]. */
ff_status ff__op_gaussian_blur(const ff__image *src, int ksize_x, int ksize_y, float sigma, ff__op_scratch *s,
                               ff__image *dst);

/* n standard normal float32 values from the Philox stream keyed by key
 * (normals.h: Box-Muller in float32 with our own log and sine/cosine, host
 * only): random_erasing's noise, the same on every host and instruction
 * set, and on every placement because the host makes it for the device. */
void ff__erase_normals(uint64_t key, size_t n, float *out);

/* Erases the plan's FF__STEP_ERASE boxes in sample `slot` of an NCHW
 * float32 batch of out_height x out_width samples (torchvision's
 * RandomErasing / timm's RandomErasing on the normalized tensor), noise in
 * s->floats; adds the time to s->costs. Returns FF_OK or FF_ENOMEM. */
ff_status ff__op_erase(const ff__pipeline *pipe, const ff__plan *plan, void *batch_data, int slot,
                       ff__op_scratch *s);

/* Reverses the columns (hflip) or the rows (vflip) in place. */
void ff__op_hflip(ff__image *img);
void ff__op_vflip(ff__image *img);

/* The run of consecutive table-op steps (ff__aug_is_lut) starting at step
 * i of plan: copies their ops to run[] (room for FF__PLAN_MAX_STEPS) and
 * returns how many, 0 when step i is not one. Such a run is done as one
 * fused pass, on the CPU and on a device alike. */
int ff__plan_lut_run(const ff__plan *plan, int i, ff__aug *run);

/* Whether op a leaves every width x height image as it is, so that the
 * step runner skips it (AugMix draws magnitude 0, hence such an op, for a
 * third of its ops): identity; a blend with factor 1, f32(1*X + 0*Y) = X
 * (spec 1.1); a geometric op whose warp provably is the shift by (0, 0). */
int ff__aug_is_noop(const ff__aug *a, int width, int height);

/* Runs the plan's steps on *img (which may be replaced by a scratch image,
 * and may be changed in place): consecutive table ops run fused as one pass,
 * AugMix mixes its chains (spec 4.4), ops that change nothing are skipped.
 * Adds each step's time to s->costs (a skipped op is not counted).
 * Returns FF_OK or FF_ENOMEM. */
ff_status ff__ops_run(const ff__plan *plan, ff__op_scratch *s, ff__image *img, ff__error *err);

/* ff__ops_run of the plan's steps before step `end` only. */
ff_status ff__ops_run_until(const ff__plan *plan, int end, ff__op_scratch *s, ff__image *img, ff__error *err);

/* The step at which the output stage can take over the plan: its last
 * steps (before the erasing boxes) are a resize and at most a horizontal
 * flip, and the output is planar (NCHW). Returns that resize's index, or -1. */
int ff__ops_output_tail(const ff__plan *plan, const ff__pipeline *pipe);

/* Runs plan step i (a resize, ff__ops_output_tail's) and the flip that
 * follows it on *img straight into sample `slot` of the batch (the
 * resize's planes into ff__op_write_output_planar): the bytes of
 * ff__ops_run's image written by ff__op_write_output. The resize's time is
 * added to s->costs, the output's to *output_ns; *img gets the output
 * size. Returns FF_OK or FF_ENOMEM. */
ff_status ff__ops_resize_to_output(const ff__pipeline *pipe, const ff__plan *plan, int i, ff__op_scratch *s,
                                   ff__image *img, void *batch_data, int slot, uint64_t *output_ns);

/* Writes img (out_height x out_width RGB) as sample `slot` of a batch buffer
 * in the pipeline's output format: NHWC uint8 rows, or each value through
 * the pipeline's per-channel table (to_dtype / normalize: float32,
 * bfloat16, float16) in NCHW planes or NHWC (ops/output.c). */
void ff__op_write_output(const ff__pipeline *pipe, const ff__image *img, void *batch_data, int slot);

/* The same from three planes of out_width x out_height values (R, G, B one
 * after the other, as ff__op_resize_planar writes them). */
void ff__op_write_output_planar(const ff__pipeline *pipe, const uint8_t *planes, void *batch_data, int slot);


#endif
