/* batch_mix.h — the Mixup/CutMix batch stage (pipeline op mixup_cutmix):
 * its parameters, the per-batch plan drawn on the host from the batch's
 * Philox stream (seed, epoch, batch index), and its application to a
 * float32 NCHW batch and its labels (soft targets, N x num_classes).
 *
 * Two conventions:
 *   timm         timm.data.Mixup (timm 1.0): pairing by flipping the batch
 *                (i with N-1-i), modes batch | pair | elem, the CutMix box
 *                from λ (rand_bbox) or cutmix_minmax (rand_bbox_minmax),
 *                λ corrected by the clipped box area, label smoothing in
 *                the targets (mixup_target).
 *   torchvision  torchvision.transforms.v2.MixUp / CutMix: pairing by
 *                rolling the batch by one (i with i-1), mode batch, the
 *                box from λ and one random centre, λ always corrected, no
 *                label smoothing (the loss does it).
 * The plan is a pure function of (params, seed, epoch, batch index, batch
 * size, image size); the arithmetic on the pixels is kernels/batch_mix.h,
 * the same on the CPU batch (ff__mix_apply_images) and on a device batch
 * (exec/dev_mix.h). */
#ifndef FF_OPS_BATCH_MIX_H
#define FF_OPS_BATCH_MIX_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "kernels/batch_mix.h" /* ff__mix_elem */

typedef enum ff__mix_mode { FF__MIX_BATCH, FF__MIX_PAIR, FF__MIX_ELEM } ff__mix_mode;
typedef enum ff__mix_convention { FF__MIX_TIMM, FF__MIX_TORCHVISION } ff__mix_convention;

typedef struct ff__mix_params {
  double mixup_alpha, cutmix_alpha;
  double cutmix_minmax[2]; /* (0, 0): none */
  double prob, switch_prob;
  int mode;       /* ff__mix_mode */
  int convention; /* ff__mix_convention */
  int correct_lam;
  double label_smoothing; /* < 0 while unset: the convention's default (timm 0.1, torchvision 0) */
  int num_classes;
} ff__mix_params;

/* One draw of the reference (per batch in batch mode, per pair in pair
 * mode, per image in elem mode), as the reference's own code sees it. */
typedef struct ff__mix_draw {
  int applied;     /* the prob draw let it mix */
  int cutmix;      /* CutMix rather than Mixup */
  double lam_draw; /* the Beta(alpha, alpha) draw (1 when not applied) */
  int center[2];   /* CutMix from λ: (cy, cx) (timm: randint(0, H), randint(0, W); torchvision: r_y, r_x) */
  int cut[2];      /* cutmix_minmax: (cut_h, cut_w) */
  int corner[2];   /* cutmix_minmax: (yl, xl) */
  int box[4];      /* (y0, y1, x0, x1) of the pasted region */
  double lam;      /* the λ of the targets (corrected by the box's area where the reference does) */
} ff__mix_draw;

typedef struct ff__mix_plan {
  int n, num_draws;
  int rolled;          /* image i's partner is i-1 (torchvision), else n-1-i (timm) */
  ff__mix_elem *elems; /* n */
  ff__mix_draw *draws; /* num_draws: 1 (batch), n / 2 (pair), n (elem) */
  float on_value, off_value;
} ff__mix_plan;

/* Checks the parameters for images of h x w in batches of batch_size (and
 * a last batch of last_size, 0 if none is short): FF_EPIPELINE naming the
 * column, as timm's asserts and numpy's argument checks would fail. */
ff_status ff__mix_check(const ff__mix_params *p, int h, int w, int batch_size, int last_size, int column,
                        ff__error *err);

/* Allocates a plan for batches of up to cap images: FF_OK or FF_ENOMEM. */
ff_status ff__mix_plan_alloc(ff__mix_plan *plan, int cap, ff__error *err);
void ff__mix_plan_free(ff__mix_plan *plan);

/* Draws the plan of batch `batch` of `epoch` (n images of h x w, n <= the
 * plan's cap) from the Philox stream (seed, FF__RNG_BATCH, batch, epoch). */
void ff__mix_plan_make(const ff__mix_params *p, uint64_t seed, uint64_t epoch, uint64_t batch, int n, int h,
                       int w, ff__mix_plan *plan);

/* Applies the plan to n float32 NCHW images of 3 x h x w in place; scratch
 * holds one image. */
void ff__mix_apply_images(const ff__mix_plan *plan, float *images, int h, int w, float *scratch);

/* The soft targets: out (n x num_classes float32) from the labels (timm's
 * mixup_target: one-hot with on/off values, own * ta + partner's * tb).
 * Returns -1, or the first image whose label is outside [0, num_classes)
 * (nothing written then). */
int ff__mix_targets(const ff__mix_plan *plan, int num_classes, const int64_t *labels, float *out);

/* The plan as one JSON object (malloc'ed, NUL-terminated), or NULL when
 * memory runs out. */
char *ff__mix_plan_json(const ff__mix_params *p, const ff__mix_plan *plan);

#endif
