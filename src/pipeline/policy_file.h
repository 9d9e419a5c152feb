/* policy_file.h — learned augmentation policies loaded from a JSON file
 * (docs/policy-file.md): AutoAugment-style sub-policies and DeepAutoAugment's
 * layered tables, as the planner draws from them (policy.c). */
#ifndef FF_PIPELINE_POLICY_FILE_H
#define FF_PIPELINE_POLICY_FILE_H

#include <stddef.h>

#include "core/error.h"
#include "kernels/aug.h"

#define FF__POLICY_MAX_GROUPS 128  /* sub-policies or layers */
#define FF__POLICY_MAX_ENTRIES 1024 /* ops over all of them */
#define FF__POLICY_MAX_GROUP_OPS 8  /* ops in one sub-policy */

/* One op of a sub-policy or one choice of a layer. */
typedef struct ff__policy_entry {
  ff__aug_op op;
  float p;         /* sub-policy: probability of applying; layer: probability of being chosen (sum 1) */
  int bin;         /* magnitude bin of torchvision's AutoAugment space, -1: none (arg or no magnitude) */
  int has_arg;     /* arg given: the op's argument itself (units of the single ops: degrees, pixels, ...) */
  int of_size;     /* translate: arg is a fraction of the image's width (translate_x) or height */
  int random_sign; /* arg negated with probability 1/2 (AutoAugment's signed ops always, with a bin) */
  double arg;
} ff__policy_entry;

typedef struct ff__policy_table {
  int layered;            /* 0: sub-policies (one chosen uniformly); 1: layers (each draws one entry) */
  int num_magnitude_bins; /* of the magnitude space (default 10, AutoAugment's) */
  int num_groups;
  int start[FF__POLICY_MAX_GROUPS + 1]; /* group g's entries: [start[g], start[g + 1]) */
  ff__policy_entry entries[FF__POLICY_MAX_ENTRIES];
} ff__policy_table;

/* Reads the policy file at path into *t. On failure returns FF_EIO (the
 * file cannot be read) or FF_EPIPELINE (its content), the reason (naming
 * the file, and the line and column in it) in why. */
ff_status ff__policy_file_load(const char *path, ff__policy_table *t, char *why, size_t why_cap);

#endif
