/* views.h — multi-view pipelines: several views of one sample after one
 * shared decode (DINO's 2 global + 8 local crops, SimCLR's 2 views).
 *
 * Text: `decode || N x OPS || M x OPS ...`: `||` separates the shared
 * decode from each group of views, `N x` repeats a group N times (each view
 * with its own draws; without it, one view). Each group is parsed as the
 * pipeline `decode(dct_scale=false) | OPS`: every view is planned first,
 * then the image is decoded once, as the window that holds every view's
 * crop (ff__views_window; no DCT-scaled decode, which would differ per
 * view), and each view's crop is taken from it. View v (0-based over all
 * groups, in order) of a sample draws from the sample's Philox stream with
 * index ff__view_draw_index(index, repeat, v): view 0 draws as the sample
 * without views. */
#ifndef FF_PIPELINE_VIEWS_H
#define FF_PIPELINE_VIEWS_H

#include "pipeline/pipeline.h"

#define FF__VIEWS_MAX 64
#define FF__VIEW_GROUPS_MAX 8

typedef struct ff__views {
  int num_groups; /* 0: a pipeline without views */
  int num_views;  /* sum of count[] */
  int count[FF__VIEW_GROUPS_MAX];
  int group_of[FF__VIEWS_MAX];
  ff__pipeline *pipes; /* num_groups, one per group */
} ff__views;

/* Parses text into *out (num_groups 0 when it has no `||`: parse it as one
 * pipeline then). Errors are FF_EPIPELINE "pipeline column N: ..." with N a
 * column of text; FF_ENOMEM. */
ff_status ff__views_parse(const char *text, ff__views *out, ff__error *err);
void ff__views_free(ff__views *v);

/* The region of the image the views planned in plans[0 .. num_views) need
 * decoded, into req's crop_x, crop_y, crop_width, crop_height: the bounding
 * box of the regions ff__plan_make folded into each plan's decode request
 * (their leading crops inside the image), or the whole image (crop_width 0)
 * when a plan has none or the box is the whole info->width x
 * info->height image. A region decode is bit-identical to the same region
 * of a whole decode (codec.h), so each view's crop can be taken from it. */
void ff__views_window(const ff__plan *plans, int num_views, const ff__image_info *info, ff__decode_req *req);

static inline uint64_t ff__view_draw_index(uint64_t index, uint32_t repeat, int view) {
  return ff__draw_index(index, repeat) + ((uint64_t)view << 52);
}

#endif
