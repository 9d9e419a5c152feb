/* parse.c — the pipeline text parser.
 *
 * Grammar: `op ('|' op)*`, `op := name ['(' [name '=' value (',' ...)*] ')']`,
 * `value := number | name | '(' number (',' number)* ')'` ('[' ']' also work).
 * Op and argument names are torchvision's in snake_case. The op table
 * (op_table.c) lists each op's arguments: kind, where in ff__op the value
 * goes, its allowed range; defaults are torchvision's. Every error names the
 * 1-based column and what was expected; a mistyped op or argument name gets
 * the nearest known one. After parsing, the ops are checked as a whole: decode first,
 * to_dtype/normalize last, a fixed output size, and a bounded plan. */
#include "pipeline/pipeline.h"

#include <ctype.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fusionflow/fusionflow.h"
#include "core/nearest.h"
#include "pipeline/op_table.h"

#define BIG 1e9

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
  double nums[FF__GROUP_MAX_OPS];
  char name[32];
  int is_string;
  char str[1024]; /* a quoted string's characters */
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
      if (v->count == FF__GROUP_MAX_OPS) return fail(lx, lx->pos, "%s", "too many numbers in a tuple");
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
  if (c == '"' || c == '\'') { /* a string, no escapes */
    const char *start = lx->text + lx->pos + 1, *end = strchr(start, c);
    if (!end) return fail(lx, lx->pos, "%s", "a string without its closing quote");
    if ((size_t)(end - start) >= sizeof v->str) return fail(lx, lx->pos, "%s", "a string over 1023 characters");
    memcpy(v->str, start, (size_t)(end - start));
    v->is_string = 1;
    lx->pos += (size_t)(end - start) + 2;
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

/* The index of name among n names, or -1. */
static int name_index(const char *const *names, int n, const char *name) {
  for (int k = 0; k < n; k++)
    if (!strcmp(name, names[k])) return k;
  return -1;
}

static ff_status set_arg(lexer *lx, ff__op *op, const ff__arg_spec *a, const value *v) {
  char *field = (char *)op + a->offset;
  switch (a->kind) {
  case FF__ARG_SIZE: {
    int *size = (int *)field;
    if (v->count < 1 || v->count > 2) return bad(lx, v, "a size N or (H, W)");
    for (int k = 0; k < v->count; k++)
      if (!is_int(v->nums[k]) || v->nums[k] < a->lo || v->nums[k] > a->hi)
        return out_of_range(lx, v, "sizes", a->lo, a->hi);
    size[0] = (int)v->nums[0];
    size[1] = v->count == 2 ? (int)v->nums[1] : (op->kind == FF__OP_RESIZE ? 0 : size[0]);
    return FF_OK;
  }
  case FF__ARG_INT:
    if (!is_scalar(v) || v->nums[0] != floor(v->nums[0])) return bad(lx, v, "an integer");
    if (v->nums[0] < a->lo || v->nums[0] > a->hi) { /* the bounds as integers: 16777216, not 1.67772e+07 */
      char want[64];
      snprintf(want, sizeof want, "an integer in [%.0f, %.0f]", a->lo, a->hi);
      return bad(lx, v, want);
    }
    *(int *)field = (int)v->nums[0];
    return FF_OK;
  case FF__ARG_WHOLE:
  case FF__ARG_DOUBLE:
    if (!is_scalar(v)) return bad(lx, v, "a number");
    if (a->kind == FF__ARG_WHOLE && !is_int(v->nums[0])) return bad(lx, v, "a whole number");
    if (v->nums[0] < a->lo || v->nums[0] > a->hi) return out_of_range(lx, v, "a number", a->lo, a->hi);
    *(double *)field = v->nums[0];
    return FF_OK;
  case FF__ARG_RANGE: {
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
  case FF__ARG_BOOL:
  case FF__ARG_TRUE: {
    int yes = !strcmp(v->name, "true") || (is_scalar(v) && v->nums[0] == 1);
    int no = !strcmp(v->name, "false") || (is_scalar(v) && v->nums[0] == 0);
    if (!yes && !no) return bad(lx, v, "true or false");
    if (a->kind == FF__ARG_TRUE) return yes ? FF_OK : bad(lx, v, "true (float32 output is always scaled to [0, 1])");
    *(int *)field = yes;
    return FF_OK;
  }
  case FF__ARG_RGB: {
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
  case FF__ARG_DTYPE:
    if (strcmp(v->name, "float32")) return bad(lx, v, "float32");
    return FF_OK;
  case FF__ARG_INTERP:
    if (strcmp(v->name, "nearest") && strcmp(v->name, "bilinear")) return bad(lx, v, "nearest or bilinear");
    op->aug.bilinear = !strcmp(v->name, "bilinear");
    return FF_OK;
  case FF__ARG_FILL:
    if (v->count != 3 && !is_scalar(v)) return bad(lx, v, "a fill value or (r, g, b)");
    for (int c = 0; c < 3; c++) {
      double x = v->nums[v->count == 3 ? c : 0];
      if (x < 0 || x > 255) return out_of_range(lx, v, "fill values", 0, 255);
      op->aug.fill[c] = (float)x;
    }
    op->aug.has_fill = 1;
    return FF_OK;
  case FF__ARG_TIMM_CONFIG: {
    char why[160];
    size_t col = 0;
    if (!v->is_string) return bad(lx, v, "a quoted config string such as \"rand-m9-mstd0.5-inc1\"");
    int kind = op->kind == FF__OP_TIMM_RAND_AUGMENT ? FF__TIMM_RAND_AUGMENT
               : op->kind == FF__OP_TIMM_AUTO_AUGMENT ? FF__TIMM_AUTO_AUGMENT
                                                      : FF__TIMM_AUG_MIX;
    if (ff__timm_parse(v->str, kind, &op->timm, why, sizeof why, &col)) return fail(lx, v->column + 1 + col, "%s", why);
    return FF_OK;
  }
  case FF__ARG_PIL_INTERP: {
    static const char *names[] = {"nearest", "bilinear", "bicubic", "random"};
    int n = op->kind == FF__OP_PIL ? 3 : 4; /* a single op has no random choice */
    for (int k = 0; k < n; k++)
      if (!strcmp(v->name, names[k])) {
        op->pil.resample = k;
        op->timm.interpolation = k == 3 ? FF__TIMM_RANDOM_INTERPOLATION : k;
        return FF_OK;
      }
    return bad(lx, v, n == 3 ? "nearest, bilinear or bicubic" : "random, nearest, bilinear or bicubic");
  }
  case FF__ARG_RINTERP: {
    static const char *const names[] = {"bilinear", "bicubic", "random"};
    return (op->interp = name_index(names, 3, v->name)) >= 0 ? FF_OK : bad(lx, v, "bilinear, bicubic or random");
  }
  case FF__ARG_JITTER: {
    /* torchvision ColorJitter._check_input: v gives (centre - v, centre + v), the lower end
     * clipped at 0 for brightness, contrast and saturation (centre 1); hue's centre is 0 */
    double *range = (double *)field;
    int is_hue = a->lo < 0, k = (int)((a->offset - offsetof(ff__op, jitter)) / sizeof op->jitter[0]);
    double centre = is_hue ? 0.0 : 1.0;
    if (is_scalar(v)) {
      if (v->nums[0] < 0 || (is_hue && v->nums[0] > 0.5))
        return out_of_range(lx, v, "a non-negative number", 0, is_hue ? 0.5 : BIG);
      range[0] = centre - v->nums[0], range[1] = centre + v->nums[0];
      if (!is_hue && range[0] < 0) range[0] = 0;
    } else if (v->count == 2 && v->nums[0] <= v->nums[1]) {
      if (v->nums[0] < a->lo || v->nums[1] > a->hi) return out_of_range(lx, v, "the bounds", a->lo, a->hi);
      range[0] = v->nums[0], range[1] = v->nums[1];
    } else {
      return bad(lx, v, "a number or (min, max) with min <= max");
    }
    op->jitter_on[k] = !(range[0] == centre && range[1] == centre);
    return FF_OK;
  }
  case FF__ARG_SIGMA: {
    double *range = (double *)field;
    if (is_scalar(v)) range[0] = range[1] = v->nums[0];
    else if (v->count == 2) range[0] = v->nums[0], range[1] = v->nums[1];
    else return bad(lx, v, "a standard deviation or (min, max)");
    if (!(range[0] > 0 && range[0] <= range[1] && range[1] <= a->hi)) {
      char what[96];
      snprintf(what, sizeof what, "positive standard deviations with min <= max <= %g", a->hi);
      return bad(lx, v, what);
    }
    return FF_OK;
  }
  case FF__ARG_SEMANTICS:
    if (!strcmp(v->name, "v1")) return op->semantics = FF__OP_SEMANTICS_V1, FF_OK;
    if (!strcmp(v->name, "pil")) return op->semantics = FF__OP_SEMANTICS_PIL, FF_OK;
    return bad(lx, v, "v1 or pil");
  case FF__ARG_WEIGHTS: {
    double *w = (double *)field, total = 0;
    if (v->count < 1) return bad(lx, v, "a tuple of weights, one per op");
    for (int k = 0; k < v->count; k++) {
      if (!(v->nums[k] >= 0)) return bad(lx, v, "weights >= 0");
      w[k] = v->nums[k], total += v->nums[k];
    }
    if (!(total > 0)) return bad(lx, v, "weights that are not all 0");
    return FF_OK;
  }
  case FF__ARG_ERASE_VALUE:
    if (!strcmp(v->name, "random")) return op->erase_random = 1, FF_OK;
    if (v->count != 3 && !is_scalar(v)) return bad(lx, v, "a number, (r, g, b) or random");
    for (int c = 0; c < 3; c++) op->erase_value[c] = (float)v->nums[v->count == 3 ? c : 0];
    return FF_OK;
  case FF__ARG_ERASE_MODE: {
    static const char *const names[] = {"const", "rand", "pixel"};
    return (op->erase_mode = name_index(names, 3, v->name)) >= 0 ? FF_OK : bad(lx, v, "const, rand or pixel");
  }
  case FF__ARG_PATH: return v->is_string ? FF_OK : bad(lx, v, "a quoted path such as \"policy.json\"");
  case FF__ARG_POLICY: {
    static const char *const names[] = {"imagenet", "cifar10", "svhn"};
    return (*(int *)field = name_index(names, 3, v->name)) >= 0 ? FF_OK : bad(lx, v, "imagenet, cifar10 or svhn");
  }
  case FF__ARG_MIX_MODE:
  case FF__ARG_CONVENTION: {
    static const char *modes[] = {"batch", "pair", "elem", NULL}, *conventions[] = {"timm", "torchvision", NULL};
    const char **names = a->kind == FF__ARG_MIX_MODE ? modes : conventions;
    for (int k = 0; names[k]; k++)
      if (!strcmp(v->name, names[k])) return *(int *)field = k, FF_OK;
    return bad(lx, v, a->kind == FF__ARG_MIX_MODE ? "batch, pair or elem" : "timm or torchvision");
  }
  }
  return FF_EINTERNAL;
}

static void set_defaults(ff__op *op, const ff__op_spec *spec) {
  op->kind = spec->kind;
  op->scale[0] = 0.08, op->scale[1] = 1.0;
  op->ratio[0] = 3.0 / 4.0, op->ratio[1] = 4.0 / 3.0;
  op->p = spec->kind == FF__OP_RANDOM_AUG && spec->aug == FF__AUG_COLOR ? 0.1 : 0.5; /* RandomGrayscale: 0.1 */
  op->antialias = 1;
  op->sigma[0] = 0.1, op->sigma[1] = 2.0;
  op->channels = 1;
  op->erase_mode = FF__ERASE_TORCHVISION;
  op->min_count = 1;
  if (spec->kind == FF__OP_RANDOM_ERASING) /* RandomErasing's defaults (timm's: 1/3 and 1/0.3, below) */
    op->scale[0] = 0.02, op->scale[1] = 0.33, op->ratio[0] = 0.3, op->ratio[1] = 3.3;
  op->dct_scale = 0; /* exact by default: torchvision's full decode; DCT scaling is an opt-in */
  for (int c = 0; c < 3; c++) op->mean[c] = 0.0f, op->std[c] = 1.0f;
  op->aug.op = spec->kind == FF__OP_PIL ? FF__AUG_IDENTITY : (ff__aug_op)spec->aug; /* PIL: spec->aug is its ff__pil_op */
  op->aug.bilinear = spec->kind == FF__OP_AUG_MIX; /* AugMix defaults to bilinear, the rest to nearest */
  op->num_ops = 2, op->magnitude = 9, op->num_magnitude_bins = 31;
  op->severity = 3, op->mixture_width = 3, op->chain_depth = -1, op->all_ops = 1, op->alpha = 1.0;
  if (spec->kind >= FF__OP_TIMM_RAND_AUGMENT && spec->kind <= FF__OP_TIMM_AUG_MIX)
    ff__timm_defaults(spec->kind - FF__OP_TIMM_RAND_AUGMENT, &op->timm);
  if (spec->kind == FF__OP_PIL) op->pil.op = (ff__pil_op)spec->aug;
  /* timm.data.Mixup's defaults */
  op->mix = (ff__mix_params){.mixup_alpha = 1.0, .prob = 1.0, .switch_prob = 0.5, .correct_lam = 1,
                             .label_smoothing = -1, .num_classes = 1000};
}

/* Whether an op may stand inside random_apply / random_choice: one that
 * keeps the image's size (the planner lowers the group without knowing
 * whether it runs). */
static int keeps_size(ff__op_kind kind) {
  switch (kind) {
  case FF__OP_RANDOM_HORIZONTAL_FLIP:
  case FF__OP_RANDOM_VERTICAL_FLIP:
  case FF__OP_AUG:
  case FF__OP_RAND_AUGMENT:
  case FF__OP_TRIVIAL_AUGMENT_WIDE:
  case FF__OP_AUTO_AUGMENT:
  case FF__OP_AUG_MIX:
  case FF__OP_POLICY_FILE:
  case FF__OP_RANDOM_AUG:
  case FF__OP_COLOR_JITTER:
  case FF__OP_GAUSSIAN_BLUR: return 1;
  default: return 0;
  }
}

/* "resize has no argument 'sise' (did you mean 'size'?; its arguments: size, antialias, interpolation)". */
static void unknown_argument(const ff__op_spec *spec, const char *arg, char *what, size_t size) {
  const char *near = ff__nearest_name(arg, strlen(arg), spec->args, FF__OP_MAX_ARGS, sizeof spec->args[0], NULL);
  size_t n = 0;
  n += (size_t)snprintf(what, size, "%s has no argument '%s' (%s%s%s", spec->name, arg,
                        near ? "did you mean '" : "", near ? near : "", near ? "'?; " : "");
  if (n < size && !spec->args[0].name) n += (size_t)snprintf(what + n, size - n, "it takes none)");
  for (int k = 0; k < FF__OP_MAX_ARGS && spec->args[k].name && n < size; k++) /* n >= size: cut short */
    n += (size_t)snprintf(what + n, size - n, "%s%s%s", k ? ", " : "its arguments: ", spec->args[k].name,
                          k + 1 < FF__OP_MAX_ARGS && spec->args[k + 1].name ? "" : ")");
}

static ff_status parse_op(lexer *lx, ff__pipeline *p, int in_group);

/* The op list of a group: `[op | op ...]` (random_apply: all in order) or
 * `[op, op, ...]` (random_choice: one of them), appended after the group's
 * head (p->ops[head]). */
static ff_status parse_group(lexer *lx, ff__pipeline *p, int head) {
  int choice = p->ops[head].kind == FF__OP_RANDOM_CHOICE;
  int sep = choice ? ',' : '|';
  lx->pos++; /* '[' */
  for (int n = 1;; n++) {
    if (n > FF__GROUP_MAX_OPS) return fail(lx, lx->pos, "%s", "too many ops in the group (at most 8)");
    ff_status st = parse_op(lx, p, 1);
    if (st) return st;
    p->ops[head].group_len = n;
    int c = peek(lx);
    if (c == ']') break;
    if (c != sep) return fail(lx, lx->pos, "expected %s", choice ? "',' or ']'" : "'|' or ']'");
    lx->pos++;
  }
  lx->pos++;
  return FF_OK;
}

/* three_augment(color_jitter=0.3, semantics=v1): DeiT III's 3-Augment
 * (Touvron et al., "DeiT III: Revenge of the ViT", 2022; timm/deit's
 * new_data_aug_generator) after the crop and flip: one of grayscale,
 * solarize (threshold 128) and Gaussian blur (sigma drawn in (0.1, 2)),
 * then ColorJitter(j, j, j) unless j is 0. semantics=pil is DeiT III's own:
 * each op on the PIL image (Grayscale, ImageOps.solarize,
 * ImageFilter.GaussianBlur with the radius drawn, ColorJitter). In tensor
 * semantics (v1) the blur needs a kernel size where Pillow's takes a
 * radius: 23 taps, as BYOL and SimCLR use at 224 pixels. */
static ff_status expand_three_augment(lexer *lx, ff__pipeline *p, int column, double jitter, int semantics) {
  char text[512];
  int pil = semantics == FF__OP_SEMANTICS_PIL;
  const char *sem = pil ? ", semantics=pil" : "";
  int n = snprintf(text, sizeof text,
                   "random_choice([random_grayscale(p=1%s), random_solarize(threshold=128, p=1%s), %s])", sem, sem,
                   pil ? "gaussian_blur(sigma=(0.1, 2.0), semantics=pil)"
                       : "gaussian_blur(kernel_size=23, sigma=(0.1, 2.0))");
  if (jitter > 0)
    snprintf(text + n, sizeof text - (size_t)n,
             " | color_jitter(brightness=%.17g, contrast=%.17g, saturation=%.17g%s)", jitter, jitter, jitter, sem);
  lexer sub = {text, 0, lx->err};
  int first = p->num_ops;
  for (;;) {
    ff_status st = parse_op(&sub, p, 0);
    if (st) return st;
    if (peek(&sub) != '|') break;
    sub.pos++;
  }
  for (int i = first; i < p->num_ops; i++) p->ops[i].column = column;
  return FF_OK;
}

static ff_status parse_op(lexer *lx, ff__pipeline *p, int in_group) {
  char name[64];
  size_t column = (peek(lx), lx->pos);
  if (p->num_ops == FF__PIPELINE_MAX_OPS) return fail(lx, column, "%s", "too many ops");
  if (!read_name(lx, name, sizeof name)) return fail(lx, column, "expected %s", "an op name");
  const ff__op_spec *spec = ff__op_spec_find(name);
  if (!spec) {
    const char *near = ff__nearest_name(name, strlen(name), ff__op_specs, ff__num_op_specs, sizeof *spec, "pil_");
    char what[160];
    snprintf(what, sizeof what, "unknown op '%s'%s%s%s; see 'fusionflow ops' for the list", name,
             near ? " (did you mean '" : "", near ? near : "", near ? "'?)" : "");
    return fail(lx, column, "%s", what);
  }
  int three = !strcmp(name, "three_augment");
  if (in_group && (three || !keeps_size(spec->kind))) {
    char what[256];
    snprintf(what, sizeof what, "%s cannot be inside random_apply or random_choice (only ops that keep the "
             "image size, and groups do not nest)", name);
    return fail(lx, column, "%s", what);
  }
  int index = p->num_ops++;
  ff__op *op = &p->ops[index];
  memset(op, 0, sizeof *op);
  set_defaults(op, spec);
  if (three) op->alpha = 0.3; /* three_augment's color_jitter */
  if (spec->kind == FF__OP_RANDOM_CHOICE) op->num_ops = 0;   /* the count of p's weights, once read */
  op->column = (int)column + 1;
  int group = !three && (spec->kind == FF__OP_RANDOM_APPLY || spec->kind == FF__OP_RANDOM_CHOICE);
  unsigned seen = 0;
  const unsigned list_seen = 1u << 31;
  char path[1024] = "";
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
      if (group && peek(lx) == '[') {
        if (seen & list_seen) return fail(lx, arg_column, "%s", "a group has one list of ops");
        ff_status st = parse_group(lx, p, index);
        if (st) return st;
        op = &p->ops[index];
        seen |= list_seen;
        if (peek(lx) == 0) return fail(lx, lx->pos, "expected %s", "')'");
        continue;
      }
      if (!isalpha(peek(lx)))
        return fail(lx, arg_column, "%s",
                    group ? "expected a named argument such as p=0.5 or the list of ops in [ ]"
                          : "expected a named argument such as size=224 (arguments are keywords)");
      read_name(lx, arg, sizeof arg);
      int k = 0;
      while (spec->args[k].name && strcmp(spec->args[k].name, arg)) k++;
      if (!spec->args[k].name) {
        char what[512];
        unknown_argument(spec, arg, what, sizeof what);
        return fail(lx, arg_column, "%s", what);
      }
      if (seen & (1u << k)) return fail(lx, arg_column, "argument '%s' given twice", arg);
      if (peek(lx) != '=') return fail(lx, lx->pos, "expected %s", "'='");
      lx->pos++;
      value v;
      ff_status st = read_value(lx, &v);
      if (st || (st = set_arg(lx, op, &spec->args[k], &v))) return st;
      if (spec->args[k].kind == FF__ARG_WEIGHTS) op->num_ops = v.count, op->num_magnitude_bins = (int)v.column;
      if (spec->args[k].kind == FF__ARG_PATH) memcpy(path, v.str, sizeof path);
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
  if (op->aug.has_fill) /* the timm policies' img_mean, the Pillow ops' fill */
    for (int c = 0; c < 3; c++) op->timm.fill[c] = op->pil.fill[c] = (uint8_t)lrintf(op->aug.fill[c]);
  char what[FF__ERRMSG_MAX - 48] = "";
  if (op->kind == FF__OP_RAND_AUGMENT && op->magnitude >= op->num_magnitude_bins)
    snprintf(what, sizeof what, "rand_augment: magnitude must be in [0, %d] (below num_magnitude_bins=%d), got %d",
             op->num_magnitude_bins - 1, op->num_magnitude_bins, op->magnitude);
  else if (op->kind == FF__OP_GAUSSIAN_BLUR && op->semantics == FF__OP_SEMANTICS_PIL && (seen & 1u)) /* kernel_size */
    snprintf(what, sizeof what, "gaussian_blur: kernel_size has no meaning with semantics=pil (Pillow's "
             "ImageFilter.GaussianBlur takes only its radius, given as sigma=(min, max)); leave it out");
  else if (op->kind == FF__OP_GAUSSIAN_BLUR && op->semantics != FF__OP_SEMANTICS_PIL && !(seen & 1u))
    snprintf(what, sizeof what, "gaussian_blur needs the argument 'kernel_size' (or semantics=pil, Pillow's "
             "blur, which takes only sigma)");
  else if (!strcmp(name, "grayscale") && op->channels != 3)
    snprintf(what, sizeof what, "grayscale: num_output_channels=%d would make %d-channel samples in an RGB batch; "
             "pass num_output_channels=3", op->channels, op->channels);
  else if (op->kind == FF__OP_GAUSSIAN_BLUR && op->semantics != FF__OP_SEMANTICS_PIL &&
           (op->size[0] % 2 == 0 || op->size[1] % 2 == 0))
    snprintf(what, sizeof what, "gaussian_blur: kernel_size must be odd, got (%d, %d)", op->size[0], op->size[1]);
  else if (op->interp == FF__INTERP_BICUBIC && !op->antialias)
    snprintf(what, sizeof what, "%s: interpolation=bicubic is built with antialias=true only", spec->name);
  else if (group && !(seen & list_seen))
    snprintf(what, sizeof what, "%s needs its ops in [ ]: %s", spec->name,
             spec->kind == FF__OP_RANDOM_APPLY ? "random_apply(p=0.8, [op | op])" : "random_choice([op, op], p=(0.5, 0.5))");
  if (!*what && op->kind == FF__OP_RANDOM_ERASING) {
    int timm = op->erase_mode != FF__ERASE_TORCHVISION;
    unsigned value = 1u << 3, counts = 3u << 5, scale = 1u << 1, ratio = 1u << 2;
    if (timm && (seen & value))
      snprintf(what, sizeof what, "random_erasing: value is torchvision's fill, mode timm's: give one of them");
    else if (!timm && (seen & counts))
      snprintf(what, sizeof what, "random_erasing: min_count and max_count are timm's: give a mode as well");
    if (timm && !(seen & scale)) op->scale[1] = 1.0 / 3.0; /* timm: max_area=1/3, max_aspect=1/min_aspect */
    if (timm && !(seen & ratio)) op->ratio[1] = 1.0 / op->ratio[0];
    if (!(seen & (1u << 6))) op->max_count = op->min_count;
    if (!*what && op->max_count < op->min_count)
      snprintf(what, sizeof what, "random_erasing: max_count=%d is below min_count=%d", op->max_count, op->min_count);
  }
  if (!*what && op->kind == FF__OP_POLICY_FILE) {
    for (int i = 0; i < index; i++)
      if (p->ops[i].kind == FF__OP_POLICY_FILE)
        snprintf(what, sizeof what, "policy_file: a pipeline has one policy_file (the other at column %d)",
                 p->ops[i].column);
    char why[FF__ERRMSG_MAX - 96];
    if (!*what && ff__policy_file_load(path, &p->policy, why, sizeof why) != FF_OK)
      snprintf(what, sizeof what, "policy_file: %s", why);
  }
  if (*what) return fail(lx, column, "%s", what);
  if (three) {
    double jitter = op->alpha;
    p->num_ops--; /* the head is replaced by its expansion */
    return expand_three_augment(lx, p, (int)column + 1, jitter, op->semantics);
  }
  if (op->kind == FF__OP_RANDOM_CHOICE) {
    int n = op->group_len, weights = op->num_ops;
    if (weights && weights != n) {
      snprintf(what, sizeof what, "random_choice: p has %d weights for %d ops", weights, n);
      return fail(lx, (size_t)op->num_magnitude_bins, "%s", what);
    }
    double total = 0;
    for (int k = 0; k < n; k++) total += weights ? op->choice_p[k] : 1.0;
    for (int k = 0; k < n; k++) op->choice_p[k] = (weights ? op->choice_p[k] : 1.0) / total;
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

/* The most plan steps op i can produce (a group: with its ops). */
static int max_steps(const ff__pipeline *p, int i) {
  const ff__op *op = &p->ops[i];
  int most = 0, total = 0;
  switch (op->kind) {
  case FF__OP_RANDOM_APPLY:
  case FF__OP_RANDOM_CHOICE:
    for (int k = 1; k <= op->group_len; k++) {
      int n = max_steps(p, i + k);
      total += n, most = n > most ? n : most;
    }
    return op->kind == FF__OP_RANDOM_APPLY ? total : most;
  case FF__OP_COLOR_JITTER: return 4;
  case FF__OP_RANDOM_ERASING: return op->max_count;
  case FF__OP_POLICY_FILE:
    for (int g = 0; g < p->policy.num_groups; g++) {
      int n = p->policy.start[g + 1] - p->policy.start[g];
      most = n > most ? n : most;
    }
    return p->policy.layered ? p->policy.num_groups : most;
  case FF__OP_RANDOM_RESIZED_CROP: return 2;
  case FF__OP_RAND_AUGMENT: return op->num_ops;
  case FF__OP_AUTO_AUGMENT: return 2;
  case FF__OP_AUG_MIX: return 2 + op->mixture_width * (2 + (op->chain_depth > 0 ? op->chain_depth : 3));
  case FF__OP_TIMM_RAND_AUGMENT:
  case FF__OP_TIMM_AUTO_AUGMENT:
  case FF__OP_TIMM_AUG_MIX: return ff__timm_max_steps(&op->timm);
  case FF__OP_DECODE:
  case FF__OP_TO_DTYPE:
  case FF__OP_NORMALIZE:
  case FF__OP_MIXUP_CUTMIX: return 0;
  default: return 1;
  }
}

/* The output layout and, for a float output, each uint8 value's float32
 * output: transforms v1's ConvertImageDtype divides, x = f32(v / 255);
 * transforms.v2's to_dtype(scale=True) multiplies, x = f32(v * f32(1 / 255))
 * (126 of the 256 values differ by an ulp); then normalize's
 * f32(f32(x - mean) / std) in both. */
static void output_lut(ff__pipeline *p) {
  const ff__op *last = &p->ops[p->num_ops - 1];
  while (last->kind == FF__OP_RANDOM_ERASING || last->kind == FF__OP_MIXUP_CUTMIX)
    last--; /* after normalize or to_dtype (check_whole) */
  p->output = FF__OUTPUT_NHWC_U8;
  if (last->kind != FF__OP_TO_DTYPE && last->kind != FF__OP_NORMALIZE) return;
  p->output = FF__OUTPUT_NCHW_F32;
  for (int c = 0; c < 3; c++)
    for (int v = 0; v < 256; v++) {
      float x = p->semantics == FF_SEMANTICS_V2 ? (float)v * (float)(1.0 / 255.0) : (float)v / 255.0f;
      p->lut[c][v] = (x - last->mean[c]) / last->std[c];
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
    while (before > p->ops && before->kind == FF__OP_RANDOM_ERASING) before--; /* erasing works on the floats */
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
    int tail = 1; /* nothing but random_erasing after op i, up to the batch stage */
    for (int k = i + 1; k < sample_ops; k++) tail &= p->ops[k].kind == FF__OP_RANDOM_ERASING;
    ff__op_kind before = p->ops[i - 1].kind;
    if ((op->kind == FF__OP_TO_DTYPE || op->kind == FF__OP_NORMALIZE) && !tail)
      return fail(lx, (size_t)op->column - 1, "%s", "to_dtype and normalize must be the last op (but for random_erasing)");
    if (op->kind == FF__OP_RANDOM_ERASING && before != FF__OP_RANDOM_ERASING && before != FF__OP_TO_DTYPE &&
        before != FF__OP_NORMALIZE)
      return fail(lx, (size_t)op->column - 1, "%s",
                  "random_erasing works on the float output: it comes after normalize or to_dtype");
    if ((steps += max_steps(p, i)) > FF__PLAN_MAX_STEPS)
      return fail(lx, (size_t)op->column - 1, "%s", "the pipeline is too long (too many augmentation steps)");
    if (op->kind == FF__OP_RANDOM_APPLY || op->kind == FF__OP_RANDOM_CHOICE) i += op->group_len;
  }
  output_size(p, &p->out_height, &p->out_width);
  if (!p->out_height && !any_size)
    return fail(lx, strlen(lx->text), "%s",
                "the output size depends on the image: end with random_resized_crop, center_crop, "
                "crop or resize(size=(H, W)) so that every sample has the same size");
  output_lut(p);
  return FF_OK;
}

static ff_status parse(const char *text, ff__pipeline *out, int any_size, ff__error *err) {
  lexer lx = {text ? text : "", 0, err};
  ff__pipeline *p = calloc(1, sizeof *p);
  if (!p) return ff__error_set(err, FF_ENOMEM, "out of memory parsing the pipeline");
  ff_status st = FF_OK;
  for (;;) {
    if ((st = parse_op(&lx, p, 0))) break;
    int c = peek(&lx);
    if (c == 0) break;
    if (c != '|') {
      st = fail(&lx, lx.pos, "expected %s", "'|' or the end of the pipeline");
      break;
    }
    lx.pos++;
    if (peek(&lx) == '|') { /* the loader splits views before it parses each one */
      st = fail(&lx, lx.pos, "%s",
                "'||' starts a view, and views are made by a loader only: one image here takes one "
                "view's ops (decode | OPS)");
      break;
    }
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

void ff__pipeline_set_semantics(ff__pipeline *pipe, int semantics) {
  pipe->semantics = semantics;
  for (int i = 0; i < pipe->num_ops; i++)
    pipe->ops[i].aug.v2 = semantics == FF_SEMANTICS_V2;
  output_lut(pipe);
}

ff_status ff__pipeline_parse_image(const char *text, int semantics, ff__pipeline *out, ff__error *err) {
  if (semantics != FF_SEMANTICS_V1 && semantics != FF_SEMANTICS_V2)
    return ff__error_set(err, FF_EINVAL, "semantics must be v1 or v2 (got %d)", semantics);
  ff_status st = parse(text, out, 1, err);
  if (!st) ff__pipeline_set_semantics(out, semantics);
  return st;
}
