/* op_table.h — the pipeline ops the parser knows: each op's name, a
 * one-line summary, its ff__op_kind and its arguments (kind, where the value
 * goes in ff__op, allowed range). The parser (parse.c) reads the table; the
 * CLI lists it (`fusionflow ops`); unknown names get the nearest known one. */
#ifndef FF_PIPELINE_OP_TABLE_H
#define FF_PIPELINE_OP_TABLE_H

#include <stddef.h>

#include "pipeline/pipeline.h"

#define FF__OP_MAX_ARGS 12

typedef enum ff__arg_kind {
  FF__ARG_SIZE,        /* int[2]: N or (H, W) */
  FF__ARG_INT,         /* int in [lo, hi] */
  FF__ARG_DOUBLE,      /* double in [lo, hi] */
  FF__ARG_WHOLE,       /* double holding an integer in [lo, hi] */
  FF__ARG_RANGE,       /* double[2]: (min, max), lo < min <= max <= hi (lo exclusive) */
  FF__ARG_BOOL,        /* int: true/false */
  FF__ARG_TRUE,        /* only true is accepted (to_dtype's scale) */
  FF__ARG_RGB,         /* float[3]: (r, g, b), one number, or `imagenet` (mean or std by name) */
  FF__ARG_DTYPE,       /* float32 only */
  FF__ARG_INTERP,      /* ff__aug.bilinear: nearest | bilinear */
  FF__ARG_FILL,        /* ff__aug.has_fill/fill: a number or (r, g, b) in [0, 255] */
  FF__ARG_POLICY,      /* int: imagenet | cifar10 | svhn */
  FF__ARG_TIMM_CONFIG, /* "text": timm's config string, parsed into op.timm */
  FF__ARG_PIL_INTERP,  /* op.timm.interpolation: random | nearest | bilinear | bicubic */
  FF__ARG_RINTERP,     /* resize filter (ff__op.interp): bilinear | bicubic | random */
  FF__ARG_JITTER,      /* double[2] of ff__op.jitter: v (the range around the centre) or (min, max) in [lo, hi] */
  FF__ARG_SIGMA,       /* double[2]: s or (min, max), 0 < min <= max <= hi */
  FF__ARG_SEMANTICS,   /* ff__op.semantics: v1 | pil */
  FF__ARG_WEIGHTS,     /* ff__op.choice_p: one weight >= 0 per op of the group */
  FF__ARG_ERASE_VALUE, /* random_erasing value: a number, (r, g, b) or random */
  FF__ARG_ERASE_MODE,  /* random_erasing mode (timm): const | rand | pixel */
  FF__ARG_PATH,        /* a quoted string: policy_file's path (read by parse_op) */
  FF__ARG_MIX_MODE,    /* int: batch | pair | elem (ff__mix_mode) */
  FF__ARG_CONVENTION,  /* int: timm | torchvision (ff__mix_convention) */
} ff__arg_kind;

typedef struct ff__arg_spec {
  const char *name;
  ff__arg_kind kind;
  int required;
  size_t offset; /* into ff__op */
  double lo, hi;
} ff__arg_spec;

typedef struct ff__op_spec {
  const char *name;
  const char *summary; /* one line for `fusionflow ops` */
  ff__op_kind kind;
  int aug;         /* FF__OP_AUG: the ff__aug_op; FF__OP_PIL: the ff__pil_op */
  ff__arg_spec args[FF__OP_MAX_ARGS]; /* ended by a NULL name */
} ff__op_spec;

/* The ops, in the order `fusionflow ops` lists them. */
extern const ff__op_spec ff__op_specs[];
extern const size_t ff__num_op_specs;

/* The op named name, or NULL. */
const ff__op_spec *ff__op_spec_find(const char *name);

/* Whether op is internal: the pil_* ops, the Pillow op functions the timm_*
 * policies apply (usable in a pipeline, listed apart). */
int ff__op_spec_internal(const ff__op_spec *op);

/* What argument a takes, in words ("an integer in [0, 16]", "N or (H, W)",
 * "true or false"), into buf (size bytes, NUL-terminated). */
void ff__arg_spec_describe(const ff__arg_spec *a, char *buf, size_t size);

#endif
