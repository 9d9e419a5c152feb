/* parse.c — the pipeline text parser.
 *
 * Grammar: `op ('|' op)*`, `op := name ['(' [name '=' value (',' ...)*] ')']`,
 * `value := number | name | '(' number (',' number)* ')'` ('[' ']' also work).
 * Op and argument names are torchvision's in snake_case. A table lists each
 * op's arguments: kind, where in ff__op the value goes, its allowed range;
 * defaults are torchvision's. Every error names the 1-based column and what
 * was expected. After parsing, the ops are checked as a whole: decode first,
 * to_dtype/normalize last, a fixed output size, and a bounded plan. */
#include "pipeline/pipeline.h"

#include <ctype.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum arg_kind {
  ARG_SIZE,        /* int[2]: N or (H, W) */
  ARG_INT,         /* int in [lo, hi] */
  ARG_DOUBLE,      /* double in [lo, hi] */
  ARG_WHOLE,       /* double holding an integer in [lo, hi] */
  ARG_RANGE,       /* double[2]: (min, max), lo < min <= max <= hi (lo exclusive) */
  ARG_BOOL,        /* int: true/false */
  ARG_TRUE,        /* only true is accepted (to_dtype's scale) */
  ARG_RGB,         /* float[3]: (r, g, b), one number, or `imagenet` (mean or std by name) */
  ARG_DTYPE,       /* float32 only */
  ARG_INTERP,      /* ff__aug.bilinear: nearest | bilinear */
  ARG_FILL,        /* ff__aug.has_fill/fill: a number or (r, g, b) in [0, 255] */
  ARG_POLICY,      /* int: imagenet | cifar10 | svhn */
  ARG_MIX_MODE,    /* int: batch | pair | elem (ff__mix_mode) */
  ARG_CONVENTION,  /* int: timm | torchvision (ff__mix_convention) */
} arg_kind;

typedef struct arg_spec {
  const char *name;
  arg_kind kind;
  int required;
  size_t offset; /* into ff__op */
  double lo, hi;
} arg_spec;

typedef struct op_spec {
  const char *name;
  ff__op_kind kind;
  ff__aug_op aug;  /* FF__OP_AUG */
  arg_spec args[12];
} op_spec;

#define AT(field) offsetof(ff__op, field)
#define INTERP {"interpolation", ARG_INTERP, 0, 0, 0, 0}
#define FILL {"fill", ARG_FILL, 0, 0, 0, 0}
#define BIG 1e9

static const op_spec op_specs[] = {
    {"decode", FF__OP_DECODE, 0, {{"dct_scale", ARG_BOOL, 0, AT(dct_scale), 0, 0}}},
    {"crop", FF__OP_CROP, 0,
     {{"top", ARG_INT, 1, AT(top), -BIG, BIG},
      {"left", ARG_INT, 1, AT(left), -BIG, BIG},
      {"height", ARG_INT, 1, AT(height), 1, 65535},
      {"width", ARG_INT, 1, AT(width), 1, 65535}}},
    {"center_crop", FF__OP_CENTER_CROP, 0, {{"size", ARG_SIZE, 1, AT(size), 1, 65535}}},
    {"resize", FF__OP_RESIZE, 0,
     {{"size", ARG_SIZE, 1, AT(size), 1, 65535}, {"antialias", ARG_BOOL, 0, AT(antialias), 0, 0}}},
    {"random_resized_crop", FF__OP_RANDOM_RESIZED_CROP, 0,
     {{"size", ARG_SIZE, 1, AT(size), 1, 65535},
      /* a share of the image's area; aspect ratios past 1:100 make crops of a pixel's width on
       * common images, rounding to nothing (torchvision then fails inside resize) */
      {"scale", ARG_RANGE, 0, AT(scale), 0, 1},
      {"ratio", ARG_RANGE, 0, AT(ratio), 0.01 - 1e-12, 100},
      {"antialias", ARG_BOOL, 0, AT(antialias), 0, 0}}},
    {"random_horizontal_flip", FF__OP_RANDOM_HORIZONTAL_FLIP, 0, {{"p", ARG_DOUBLE, 0, AT(p), 0, 1}}},
    {"random_vertical_flip", FF__OP_RANDOM_VERTICAL_FLIP, 0, {{"p", ARG_DOUBLE, 0, AT(p), 0, 1}}},
    {"identity", FF__OP_AUG, FF__AUG_IDENTITY, {{0}}},
    {"shear_x", FF__OP_AUG, FF__AUG_SHEAR_X, {{"shear", ARG_DOUBLE, 1, AT(aug.arg), -100, 100}, INTERP, FILL}},
    {"shear_y", FF__OP_AUG, FF__AUG_SHEAR_Y, {{"shear", ARG_DOUBLE, 1, AT(aug.arg), -100, 100}, INTERP, FILL}},
    {"translate_x", FF__OP_AUG, FF__AUG_TRANSLATE_X,
     {{"pixels", ARG_DOUBLE, 1, AT(aug.arg), -65535, 65535}, INTERP, FILL}},
    {"translate_y", FF__OP_AUG, FF__AUG_TRANSLATE_Y,
     {{"pixels", ARG_DOUBLE, 1, AT(aug.arg), -65535, 65535}, INTERP, FILL}},
    {"rotate", FF__OP_AUG, FF__AUG_ROTATE, {{"angle", ARG_DOUBLE, 1, AT(aug.arg), -1e6, 1e6}, INTERP, FILL}},
    {"brightness", FF__OP_AUG, FF__AUG_BRIGHTNESS, {{"factor", ARG_DOUBLE, 1, AT(aug.arg), 0, 1e6}}},
    {"color", FF__OP_AUG, FF__AUG_COLOR, {{"factor", ARG_DOUBLE, 1, AT(aug.arg), 0, 1e6}}},
    {"contrast", FF__OP_AUG, FF__AUG_CONTRAST, {{"factor", ARG_DOUBLE, 1, AT(aug.arg), 0, 1e6}}},
    {"sharpness", FF__OP_AUG, FF__AUG_SHARPNESS, {{"factor", ARG_DOUBLE, 1, AT(aug.arg), 0, 1e6}}},
    {"posterize", FF__OP_AUG, FF__AUG_POSTERIZE, {{"bits", ARG_WHOLE, 1, AT(aug.arg), 0, 8}}},
    {"solarize", FF__OP_AUG, FF__AUG_SOLARIZE, {{"threshold", ARG_DOUBLE, 1, AT(aug.arg), 0, 255}}},
    {"autocontrast", FF__OP_AUG, FF__AUG_AUTOCONTRAST, {{0}}},
    {"equalize", FF__OP_AUG, FF__AUG_EQUALIZE, {{0}}},
    {"invert", FF__OP_AUG, FF__AUG_INVERT, {{0}}},
    {"rand_augment", FF__OP_RAND_AUGMENT, 0,
     {{"num_ops", ARG_INT, 0, AT(num_ops), 0, 16},
      {"magnitude", ARG_INT, 0, AT(magnitude), 0, 1000},
      {"num_magnitude_bins", ARG_INT, 0, AT(num_magnitude_bins), 2, 1000},
      INTERP, FILL}},
    {"trivial_augment_wide", FF__OP_TRIVIAL_AUGMENT_WIDE, 0,
     {{"num_magnitude_bins", ARG_INT, 0, AT(num_magnitude_bins), 2, 1000}, INTERP, FILL}},
    {"auto_augment", FF__OP_AUTO_AUGMENT, 0, {{"policy", ARG_POLICY, 0, AT(policy), 0, 0}, INTERP, FILL}},
    {"aug_mix", FF__OP_AUG_MIX, 0,
     {{"severity", ARG_INT, 0, AT(severity), 1, 10},
      {"mixture_width", ARG_INT, 0, AT(mixture_width), 1, FF__AUG_MIX_MAX_WIDTH},
      {"chain_depth", ARG_INT, 0, AT(chain_depth), -1, 8},
      {"alpha", ARG_DOUBLE, 0, AT(alpha), 1e-3, 1e3},
      {"all_ops", ARG_BOOL, 0, AT(all_ops), 0, 0},
      INTERP, FILL}},
    {"to_dtype", FF__OP_TO_DTYPE, 0, {{"dtype", ARG_DTYPE, 0, 0, 0, 0}, {"scale", ARG_TRUE, 0, 0, 0, 0}}},
    {"normalize", FF__OP_NORMALIZE, 0,
     {{"mean", ARG_RGB, 1, AT(mean), -BIG, BIG}, {"std", ARG_RGB, 1, AT(std), 1e-12, BIG}}},
    {"mixup_cutmix", FF__OP_MIXUP_CUTMIX, 0,
     {{"mixup_alpha", ARG_DOUBLE, 0, AT(mix.mixup_alpha), 0, 1e3},
      {"cutmix_alpha", ARG_DOUBLE, 0, AT(mix.cutmix_alpha), 0, 1e3},
      {"cutmix_minmax", ARG_RANGE, 0, AT(mix.cutmix_minmax), 0, 1},
      {"prob", ARG_DOUBLE, 0, AT(mix.prob), 0, 1},
      {"switch_prob", ARG_DOUBLE, 0, AT(mix.switch_prob), 0, 1},
      {"mode", ARG_MIX_MODE, 0, AT(mix.mode), 0, 0},
      {"correct_lam", ARG_BOOL, 0, AT(mix.correct_lam), 0, 0},
      {"label_smoothing", ARG_DOUBLE, 0, AT(mix.label_smoothing), 0, 1},
      {"num_classes", ARG_INT, 0, AT(mix.num_classes), 1, 1 << 24},
      {"convention", ARG_CONVENTION, 0, AT(mix.convention), 0, 0}}},
};
#define NUM_OP_SPECS (sizeof op_specs / sizeof op_specs[0])

typedef struct lexer {
  const char *text;
  size_t pos;
  ff__error *err;
} lexer;

static ff_status fail(lexer *lx, size_t pos, const char *fmt, const char *what) {
  char msg[FF__ERRMSG_MAX - 32];
  snprintf(msg, sizeof msg, fmt, what);
  return ff__error_set(lx->err, FF_EPIPELINE, "pipeline column %zu: %s", pos + 1, msg);
}

static int peek(lexer *lx) {
  while (isspace((unsigned char)lx->text[lx->pos])) lx->pos++;
  return (unsigned char)lx->text[lx->pos];
}

/* Reads an identifier into buf; returns its length (0 if none). */
static size_t read_name(lexer *lx, char *buf, size_t cap) {
  peek(lx);
  size_t n = 0;
  while (isalnum((unsigned char)lx->text[lx->pos]) || lx->text[lx->pos] == '_') {
    if (n + 1 < cap) buf[n++] = (char)tolower((unsigned char)lx->text[lx->pos]);
    lx->pos++;
  }
  buf[n] = 0;
  return n;
}

/* A parsed value: up to 4 numbers, or a name. */
typedef struct value {
  size_t column;
  int count; /* numbers read; 0 for a name */
  int is_tuple;
  double nums[4];
  char name[32];
} value;

static ff_status read_number(lexer *lx, double *out) {
  peek(lx);
  const char *start = lx->text + lx->pos;
  /* plain decimal only: strtod would also take hex, inf and nan */
  size_t len = strspn(start, "0123456789.eE+-");
  char *end;
  double v = strtod(start, &end);
  if (end == start || (size_t)(end - start) != len || !isfinite(v))
    return fail(lx, lx->pos, "expected %s", "a number");
  lx->pos += (size_t)(end - start);
  *out = v;
  return FF_OK;
}

static ff_status read_value(lexer *lx, value *v) {
  memset(v, 0, sizeof *v);
  int c = peek(lx);
  v->column = lx->pos;
  if (c == '(' || c == '[') {
    int close = c == '(' ? ')' : ']';
    lx->pos++;
    v->is_tuple = 1;
    for (;;) {
      if (v->count == 4) return fail(lx, lx->pos, "%s", "too many numbers in a tuple");
      ff_status st = read_number(lx, &v->nums[v->count]);
      if (st) return st;
      v->count++;
      c = peek(lx);
      if (c == close) break;
      if (c != ',') return fail(lx, lx->pos, "expected %s", "',' or the end of the tuple");
      lx->pos++;
    }
    lx->pos++;
    return FF_OK;
  }
  if (isalpha(c)) {
    read_name(lx, v->name, sizeof v->name);
    return FF_OK;
  }
  v->count = 1;
  return read_number(lx, &v->nums[0]);
}

static int is_scalar(const value *v) { return v->count == 1 && !v->is_tuple; }
static int is_int(double v) { return v == floor(v) && fabs(v) < 1e9; }

static ff_status bad(lexer *lx, const value *v, const char *want) { return fail(lx, v->column, "expected %s", want); }

/* "a number in [lo, hi]" with the bounds printed compactly. */
static ff_status out_of_range(lexer *lx, const value *v, const char *what, double lo, double hi) {
  char want[128];
  snprintf(want, sizeof want, "%s in [%g, %g]", what, lo, hi);
  return bad(lx, v, want);
}

static ff_status set_arg(lexer *lx, ff__op *op, const arg_spec *a, const value *v) {
  char *field = (char *)op + a->offset;
  switch (a->kind) {
  case ARG_SIZE: {
    int *size = (int *)field;
    if (v->count < 1 || v->count > 2) return bad(lx, v, "a size N or (H, W)");
    for (int k = 0; k < v->count; k++)
      if (!is_int(v->nums[k]) || v->nums[k] < a->lo || v->nums[k] > a->hi)
        return out_of_range(lx, v, "sizes", a->lo, a->hi);
    size[0] = (int)v->nums[0];
    size[1] = v->count == 2 ? (int)v->nums[1] : (op->kind == FF__OP_RESIZE ? 0 : size[0]);
    return FF_OK;
  }
  case ARG_INT:
    if (!is_scalar(v) || !is_int(v->nums[0])) return bad(lx, v, "an integer");
    if (v->nums[0] < a->lo || v->nums[0] > a->hi) return out_of_range(lx, v, "an integer", a->lo, a->hi);
    *(int *)field = (int)v->nums[0];
    return FF_OK;
  case ARG_WHOLE:
  case ARG_DOUBLE:
    if (!is_scalar(v)) return bad(lx, v, "a number");
    if (a->kind == ARG_WHOLE && !is_int(v->nums[0])) return bad(lx, v, "a whole number");
    if (v->nums[0] < a->lo || v->nums[0] > a->hi) return out_of_range(lx, v, "a number", a->lo, a->hi);
    *(double *)field = v->nums[0];
    return FF_OK;
  case ARG_RANGE: {
    double *range = (double *)field;
    if (v->count != 2 || v->nums[0] <= 0 || v->nums[0] > v->nums[1])
      return bad(lx, v, "a pair (min, max) of positive numbers with min <= max");
    if (v->nums[0] <= a->lo || v->nums[1] > a->hi) {
      char want[160];
      snprintf(want, sizeof want, "%s within (%.3g, %g]: (%g, %g) is degenerate", a->name, a->lo, a->hi,
               v->nums[0], v->nums[1]);
      return bad(lx, v, want);
    }
    range[0] = v->nums[0], range[1] = v->nums[1];
    return FF_OK;
  }
  case ARG_BOOL:
  case ARG_TRUE: {
    int yes = !strcmp(v->name, "true") || (is_scalar(v) && v->nums[0] == 1);
    int no = !strcmp(v->name, "false") || (is_scalar(v) && v->nums[0] == 0);
    if (!yes && !no) return bad(lx, v, "true or false");
    if (a->kind == ARG_TRUE) return yes ? FF_OK : bad(lx, v, "true (float32 output is always scaled to [0, 1])");
    *(int *)field = yes;
    return FF_OK;
  }
  case ARG_RGB: {
    static const float imagenet[2][3] = {{0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f}};
    float *rgb = (float *)field;
    int is_std = !strcmp(a->name, "std");
    if (!strcmp(v->name, "imagenet")) {
      memcpy(rgb, imagenet[is_std], sizeof imagenet[0]);
      return FF_OK;
    }
    if (v->count != 3 && !is_scalar(v)) return bad(lx, v, "(r, g, b), one number or imagenet");
    for (int c = 0; c < 3; c++) {
      double x = v->nums[v->count == 3 ? c : 0];
      if (x < a->lo) return bad(lx, v, "positive standard deviations");
      rgb[c] = (float)x;
    }
    return FF_OK;
  }
  case ARG_DTYPE:
    if (strcmp(v->name, "float32")) return bad(lx, v, "float32");
    return FF_OK;
  case ARG_INTERP:
    if (strcmp(v->name, "nearest") && strcmp(v->name, "bilinear")) return bad(lx, v, "nearest or bilinear");
    op->aug.bilinear = !strcmp(v->name, "bilinear");
    return FF_OK;
  case ARG_FILL:
    if (v->count != 3 && !is_scalar(v)) return bad(lx, v, "a fill value or (r, g, b)");
    for (int c = 0; c < 3; c++) {
      double x = v->nums[v->count == 3 ? c : 0];
      if (x < 0 || x > 255) return out_of_range(lx, v, "fill values", 0, 255);
      op->aug.fill[c] = (float)x;
    }
    op->aug.has_fill = 1;
    return FF_OK;
  case ARG_POLICY: {
    static const char *names[] = {"imagenet", "cifar10", "svhn"};
    for (int k = 0; k < 3; k++)
      if (!strcmp(v->name, names[k])) return *(int *)field = k, FF_OK;
    return bad(lx, v, "imagenet, cifar10 or svhn");
  }
  case ARG_MIX_MODE:
  case ARG_CONVENTION: {
    static const char *modes[] = {"batch", "pair", "elem", NULL}, *conventions[] = {"timm", "torchvision", NULL};
    const char **names = a->kind == ARG_MIX_MODE ? modes : conventions;
    for (int k = 0; names[k]; k++)
      if (!strcmp(v->name, names[k])) return *(int *)field = k, FF_OK;
    return bad(lx, v, a->kind == ARG_MIX_MODE ? "batch, pair or elem" : "timm or torchvision");
  }
  }
  return FF_EINTERNAL;
}

static void set_defaults(ff__op *op, const op_spec *spec) {
  op->kind = spec->kind;
  op->scale[0] = 0.08, op->scale[1] = 1.0;
  op->ratio[0] = 3.0 / 4.0, op->ratio[1] = 4.0 / 3.0;
  op->p = 0.5;
  op->antialias = 1;
  op->dct_scale = 1;
  for (int c = 0; c < 3; c++) op->mean[c] = 0.0f, op->std[c] = 1.0f;
  op->aug.op = spec->aug;
  op->aug.bilinear = spec->kind == FF__OP_AUG_MIX; /* AugMix defaults to bilinear, the rest to nearest */
  op->num_ops = 2, op->magnitude = 9, op->num_magnitude_bins = 31;
  op->severity = 3, op->mixture_width = 3, op->chain_depth = -1, op->all_ops = 1, op->alpha = 1.0;
  /* timm.data.Mixup's defaults */
  op->mix = (ff__mix_params){.mixup_alpha = 1.0, .prob = 1.0, .switch_prob = 0.5, .correct_lam = 1,
                             .label_smoothing = -1, .num_classes = 1000};
}

static ff_status parse_op(lexer *lx, ff__op *op) {
  char name[64];
  size_t column = (peek(lx), lx->pos);
  if (!read_name(lx, name, sizeof name)) return fail(lx, column, "expected %s", "an op name");
  const op_spec *spec = NULL;
  for (size_t i = 0; i < NUM_OP_SPECS; i++)
    if (!strcmp(op_specs[i].name, name)) spec = &op_specs[i];
  if (!spec) {
    char list[1024] = "";
    for (size_t i = 0; i < NUM_OP_SPECS; i++) {
      strcat(list, i ? ", " : "");
      strcat(list, op_specs[i].name);
    }
    char what[FF__ERRMSG_MAX - 64];
    snprintf(what, sizeof what, "unknown op '%s' (ops: %s)", name, list);
    return fail(lx, column, "%s", what);
  }
  memset(op, 0, sizeof *op);
  set_defaults(op, spec);
  op->column = (int)column + 1;
  unsigned seen = 0;
  if (peek(lx) == '(') {
    lx->pos++;
    while (peek(lx) != ')') {
      if (seen) {
        if (peek(lx) != ',') return fail(lx, lx->pos, "expected %s", "',' or ')'");
        lx->pos++;
        if (peek(lx) == ')') break; /* a trailing comma */
      }
      char arg[64];
      size_t arg_column = (peek(lx), lx->pos);
      if (!isalpha(peek(lx)))
        return fail(lx, arg_column, "%s", "expected a named argument such as size=224 (arguments are keywords)");
      read_name(lx, arg, sizeof arg);
      int k = 0;
      while (spec->args[k].name && strcmp(spec->args[k].name, arg)) k++;
      if (!spec->args[k].name) {
        char what[160];
        snprintf(what, sizeof what, "%s has no argument '%s'", spec->name, arg);
        return fail(lx, arg_column, "%s", what);
      }
      if (seen & (1u << k)) return fail(lx, arg_column, "argument '%s' given twice", arg);
      if (peek(lx) != '=') return fail(lx, lx->pos, "expected %s", "'='");
      lx->pos++;
      value v;
      ff_status st = read_value(lx, &v);
      if (st || (st = set_arg(lx, op, &spec->args[k], &v))) return st;
      seen |= 1u << k;
      if (peek(lx) == 0) return fail(lx, lx->pos, "expected %s", "')'");
    }
    lx->pos++;
  }
  for (int k = 0; spec->args[k].name; k++)
    if (spec->args[k].required && !(seen & (1u << k))) {
      char what[160];
      snprintf(what, sizeof what, "%s needs the argument '%s'", spec->name, spec->args[k].name);
      return fail(lx, column, "%s", what);
    }
  if (op->kind == FF__OP_RAND_AUGMENT && op->magnitude >= op->num_magnitude_bins) {
    char what[160];
    snprintf(what, sizeof what, "rand_augment: magnitude must be in [0, %d] (below num_magnitude_bins=%d), got %d",
             op->num_magnitude_bins - 1, op->num_magnitude_bins, op->magnitude);
    return fail(lx, column, "%s", what);
  }
  return FF_OK;
}

/* Output size after the ops, or 0 where it depends on the image; and the
 * largest fixed size on the way (p->peak_pixels). */
static void output_size(ff__pipeline *p, int *out_h, int *out_w) {
  int64_t h = 0, w = 0;
  for (int i = 0; i < p->num_ops; i++) {
    const ff__op *op = &p->ops[i];
    switch (op->kind) {
    case FF__OP_CROP: h = op->height, w = op->width; break;
    case FF__OP_CENTER_CROP:
    case FF__OP_RANDOM_RESIZED_CROP: h = op->size[0], w = op->size[1]; break;
    case FF__OP_RESIZE:
      if (op->size[1]) h = op->size[0], w = op->size[1];
      else if (h) ff__resize_shorter_side(op->size[0], &h, &w);
      break;
    default: break;
    }
    if ((uint64_t)h * (uint64_t)w > p->peak_pixels) {
      p->peak_pixels = (uint64_t)h * (uint64_t)w;
      p->peak_column = op->column;
    }
  }
  *out_h = (int)h, *out_w = (int)w; /* fixed sizes come from ops' arguments, at most 65535 */
}

/* The most plan steps an op can produce. */
static int max_steps(const ff__op *op) {
  switch (op->kind) {
  case FF__OP_RANDOM_RESIZED_CROP: return 2;
  case FF__OP_RAND_AUGMENT: return op->num_ops;
  case FF__OP_AUTO_AUGMENT: return 2;
  case FF__OP_AUG_MIX: return 2 + op->mixture_width * (2 + (op->chain_depth > 0 ? op->chain_depth : 3));
  case FF__OP_DECODE:
  case FF__OP_TO_DTYPE:
  case FF__OP_NORMALIZE:
  case FF__OP_MIXUP_CUTMIX: return 0;
  default: return 1;
  }
}

static ff_status check_whole(lexer *lx, ff__pipeline *p, int any_size) {
  if (p->ops[0].kind != FF__OP_DECODE)
    return fail(lx, (size_t)p->ops[0].column - 1, "expected %s", "'decode' as the first op");
  int steps = 0;
  /* A batch stage ends the pipeline, after the per-sample ops it mixes the results of. */
  const ff__op *stage = p->num_ops > 1 && p->ops[p->num_ops - 1].kind == FF__OP_MIXUP_CUTMIX ? &p->ops[p->num_ops - 1] : NULL;
  int sample_ops = p->num_ops - (stage != NULL);
  if (stage) {
    const ff__op *before = &p->ops[sample_ops - 1];
    if (before->kind != FF__OP_NORMALIZE && before->kind != FF__OP_TO_DTYPE)
      return fail(lx, (size_t)stage->column - 1, "%s",
                  "mixup_cutmix mixes float32 batches: put it after normalize (or to_dtype)");
    p->has_mix = 1;
    p->mix = stage->mix;
  }
  for (int i = 1; i < p->num_ops; i++) {
    const ff__op *op = &p->ops[i];
    if (op->kind == FF__OP_DECODE) return fail(lx, (size_t)op->column - 1, "%s", "decode may only come first");
    if (op->kind == FF__OP_MIXUP_CUTMIX && op != stage)
      return fail(lx, (size_t)op->column - 1, "%s", "mixup_cutmix is a batch stage: it must be the last op");
    int last = i == sample_ops - 1;
    if ((op->kind == FF__OP_TO_DTYPE || op->kind == FF__OP_NORMALIZE) && !last)
      return fail(lx, (size_t)op->column - 1, "%s", "to_dtype and normalize must be the last op");
    if ((steps += max_steps(op)) > FF__PLAN_MAX_STEPS)
      return fail(lx, (size_t)op->column - 1, "%s", "the pipeline is too long (too many augmentation steps)");
  }
  output_size(p, &p->out_height, &p->out_width);
  if (!p->out_height && !any_size)
    return fail(lx, strlen(lx->text), "%s",
                "the output size depends on the image: end with random_resized_crop, center_crop, "
                "crop or resize(size=(H, W)) so that every sample has the same size");
  const ff__op *last = &p->ops[sample_ops - 1];
  p->output = FF__OUTPUT_NHWC_U8;
  if (last->kind == FF__OP_TO_DTYPE || last->kind == FF__OP_NORMALIZE) {
    p->output = FF__OUTPUT_NCHW_F32;
    /* torchvision: x = f32(v / 255) (a division), then f32(f32(x - mean) / std). */
    for (int c = 0; c < 3; c++)
      for (int v = 0; v < 256; v++) {
        float x = (float)v / 255.0f;
        p->lut[c][v] = (x - last->mean[c]) / last->std[c];
      }
  }
  return FF_OK;
}

static ff_status parse(const char *text, ff__pipeline *out, int any_size, ff__error *err) {
  lexer lx = {text ? text : "", 0, err};
  ff__pipeline *p = calloc(1, sizeof *p);
  if (!p) return ff__error_set(err, FF_ENOMEM, "out of memory parsing the pipeline");
  ff_status st = FF_OK;
  for (;;) {
    if (p->num_ops == FF__PIPELINE_MAX_OPS) {
      st = fail(&lx, lx.pos, "%s", "too many ops");
      break;
    }
    if ((st = parse_op(&lx, &p->ops[p->num_ops]))) break;
    p->num_ops++;
    int c = peek(&lx);
    if (c == 0) break;
    if (c != '|') {
      st = fail(&lx, lx.pos, "expected %s", "'|' or the end of the pipeline");
      break;
    }
    lx.pos++;
  }
  if (!st) st = check_whole(&lx, p, any_size);
  if (!st) *out = *p;
  free(p);
  return st;
}

ff_status ff__pipeline_parse(const char *text, ff__pipeline *out, ff__error *err) { return parse(text, out, 0, err); }

ff_status ff__pipeline_parse_any_size(const char *text, ff__pipeline *out, ff__error *err) {
  return parse(text, out, 1, err);
}
