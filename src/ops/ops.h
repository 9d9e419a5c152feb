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
  ff__op_costs costs;
} ff__op_scratch;

void ff__op_scratch_free(ff__op_scratch *s);

/* Crops box (x, y, w, h) of src into *dst: a view when the box lies inside,
 * a zero-padded copy otherwise (torchvision crop/center_crop). */
ff_status ff__op_crop(const ff__image *src, int x, int y, int w, int h, ff__buf *mem,
                      ff__image *dst);

/* Bilinear resize of src to out_w x out_h into dst (whose memory the caller
 * sets up), with or without antialias (torchvision resize, spec 5.3). */
ff_status ff__op_resize(const ff__image *src, int out_w, int out_h, int antialias,
                        ff__op_scratch *s, ff__image *dst);

/* The same resize of the source box (x, y, width, height in fractional
 * pixels of src, inside it; NULL: the whole of src): the exact region after
 * a DCT-scaled decode (pipeline.h, ff__dct_box). */
ff_status ff__op_resize_box(const ff__image *src, const double *box, int out_w, int out_h, int antialias,
                            ff__op_scratch *s, ff__image *dst);

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

/* Writes img (out_height x out_width RGB) as sample `slot` of a batch buffer:
 * NHWC uint8 rows, or NCHW float32 through the pipeline's per-channel table
 * (to_dtype / normalize). */
void ff__op_write_output(const ff__pipeline *pipe, const ff__image *img, void *batch_data,
                         int slot);

#endif
