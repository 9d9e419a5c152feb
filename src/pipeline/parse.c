/* parse.c — the pipeline text parser.
 *
 * Grammar: `op ('|' op)*`, `op := name ['(' [name '=' value (',' ...)*] ')']`,
 * `value := number | name | '(' number (',' number)* ')'` ('[' ']' also work).
 * Op and argument names are torchvision's in snake_case; a table below lists
 * each op's arguments, their kinds and defaults. Every error names the
 * 1-based column and what was expected. After parsing, the ops are checked as
 * a whole: decode first, to_dtype/normalize last, and a fixed output size. */
#include "pipeline/pipeline.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum arg_kind { ARG_SIZE, ARG_INT, ARG_FLOAT, ARG_FLOAT_PAIR, ARG_BOOL, ARG_FLOAT3, ARG_DTYPE } arg_kind;

typedef struct arg_spec {
  const char *name;
  arg_kind kind;
  int required;
} arg_spec;

typedef struct op_spec {
  const char *name;
  ff__op_kind kind;
  arg_spec args[5];
} op_spec;

static const op_spec op_specs[] = {
    {"decode", FF__OP_DECODE, {{"dct_scale", ARG_BOOL, 0}}},
    {"crop", FF__OP_CROP,
     {{"top", ARG_INT, 1}, {"left", ARG_INT, 1}, {"height", ARG_INT, 1}, {"width", ARG_INT, 1}}},
    {"center_crop", FF__OP_CENTER_CROP, {{"size", ARG_SIZE, 1}}},
    {"resize", FF__OP_RESIZE, {{"size", ARG_SIZE, 1}, {"antialias", ARG_BOOL, 0}}},
    {"random_resized_crop", FF__OP_RANDOM_RESIZED_CROP,
     {{"size", ARG_SIZE, 1}, {"scale", ARG_FLOAT_PAIR, 0}, {"ratio", ARG_FLOAT_PAIR, 0},
      {"antialias", ARG_BOOL, 0}}},
    {"random_horizontal_flip", FF__OP_RANDOM_HORIZONTAL_FLIP, {{"p", ARG_FLOAT, 0}}},
    {"random_vertical_flip", FF__OP_RANDOM_VERTICAL_FLIP, {{"p", ARG_FLOAT, 0}}},
    {"to_dtype", FF__OP_TO_DTYPE, {{"dtype", ARG_DTYPE, 0}, {"scale", ARG_BOOL, 0}}},
    {"normalize", FF__OP_NORMALIZE, {{"mean", ARG_FLOAT3, 1}, {"std", ARG_FLOAT3, 1}}},
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

static void skip_space(lexer *lx) {
  while (isspace((unsigned char)lx->text[lx->pos])) lx->pos++;
}

static int peek(lexer *lx) {
  skip_space(lx);
  return (unsigned char)lx->text[lx->pos];
}

static const char *describe(int c) {
  static const char *names[] = {"end of text", "'('", "')'", "','", "'='", "'|'"};
  switch (c) {
  case 0: return names[0];
  case '(': return names[1];
  case ')': return names[2];
  case ',': return names[3];
  case '=': return names[4];
  case '|': return names[5];
  default: return NULL;
  }
}

static ff_status expect(lexer *lx, int c) {
  if (peek(lx) != c) {
    const char *want = describe(c);
    return fail(lx, lx->pos, "expected %s", want);
  }
  lx->pos++;
  return FF_OK;
}

/* Reads an identifier into buf; returns its length (0 if none). */
static size_t read_name(lexer *lx, char *buf, size_t cap) {
  skip_space(lx);
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
  int count;            /* numbers read; 0 for a name */
  int is_tuple;
  double nums[4];
  char name[32];
} value;

static ff_status read_number(lexer *lx, double *out) {
  skip_space(lx);
  const char *start = lx->text + lx->pos;
  char *end;
  double v = strtod(start, &end);
  if (end == start || !isfinite(v)) return fail(lx, lx->pos, "expected %s", "a number");
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

static int is_int(double v) { return v == floor(v) && fabs(v) < 1e9; }

static ff_status bad_value(lexer *lx, const value *v, const char *want) {
  return fail(lx, v->column, "expected %s", want);
}

static ff_status set_arg(lexer *lx, ff__op *op, const arg_spec *spec, const value *v) {
  const char *name = spec->name;
  switch (spec->kind) {
  case ARG_SIZE:
    if (v->count < 1 || v->count > 2 || !is_int(v->nums[0]) || v->nums[0] < 1 ||
        (v->count == 2 && (!is_int(v->nums[1]) || v->nums[1] < 1)))
      return bad_value(lx, v, "a positive size N or (H, W)");
    op->size[0] = (int)v->nums[0];
    op->size[1] = v->count == 2 ? (int)v->nums[1] : (op->kind == FF__OP_RESIZE ? 0 : op->size[0]);
    return FF_OK;
  case ARG_INT: {
    if (v->count != 1 || v->is_tuple || !is_int(v->nums[0])) return bad_value(lx, v, "an integer");
    int x = (int)v->nums[0];
    if ((!strcmp(name, "height") || !strcmp(name, "width")) && x < 1)
      return bad_value(lx, v, "a positive integer");
    if (!strcmp(name, "top")) op->top = x;
    else if (!strcmp(name, "left")) op->left = x;
    else if (!strcmp(name, "height")) op->height = x;
    else op->width = x;
    return FF_OK;
  }
  case ARG_FLOAT:
    if (v->count != 1 || v->is_tuple || v->nums[0] < 0 || v->nums[0] > 1)
      return bad_value(lx, v, "a probability in [0, 1]");
    op->p = v->nums[0];
    return FF_OK;
  case ARG_FLOAT_PAIR: {
    if (v->count != 2 || v->nums[0] <= 0 || v->nums[1] <= 0 || v->nums[0] > v->nums[1])
      return bad_value(lx, v, "a pair (min, max) of positive numbers with min <= max");
    double *dst = !strcmp(name, "scale") ? op->scale : op->ratio;
    dst[0] = v->nums[0];
    dst[1] = v->nums[1];
    return FF_OK;
  }
  case ARG_BOOL:
    if (!strcmp(v->name, "true") || (v->count == 1 && !v->is_tuple && v->nums[0] == 1)) {
      if (!strcmp(name, "antialias")) op->antialias = 1;
      else if (!strcmp(name, "dct_scale")) op->dct_scale = 1;
      return FF_OK;
    }
    if (!strcmp(v->name, "false") || (v->count == 1 && !v->is_tuple && v->nums[0] == 0)) {
      if (!strcmp(name, "antialias")) op->antialias = 0;
      else if (!strcmp(name, "dct_scale")) op->dct_scale = 0;
      else return bad_value(lx, v, "true (float32 output is always scaled to [0, 1])");
      return FF_OK;
    }
    return bad_value(lx, v, "true or false");
  case ARG_FLOAT3: {
    static const float imagenet_mean[3] = {0.485f, 0.456f, 0.406f};
    static const float imagenet_std[3] = {0.229f, 0.224f, 0.225f};
    float *dst = !strcmp(name, "mean") ? op->mean : op->std;
    if (!strcmp(v->name, "imagenet")) {
      memcpy(dst, dst == op->mean ? imagenet_mean : imagenet_std, sizeof imagenet_mean);
      return FF_OK;
    }
    if (v->count != 3 && v->count != 1) return bad_value(lx, v, "three numbers (R, G, B), one number or imagenet");
    for (int c = 0; c < 3; c++) dst[c] = (float)v->nums[v->count == 3 ? c : 0];
    if (dst == op->std)
      for (int c = 0; c < 3; c++)
        if (!(dst[c] > 0)) return bad_value(lx, v, "positive standard deviations");
    return FF_OK;
  }
  case ARG_DTYPE:
    if (strcmp(v->name, "float32")) return bad_value(lx, v, "float32");
    return FF_OK;
  }
  return FF_EINTERNAL;
}

static void set_defaults(ff__op *op) {
  op->scale[0] = 0.08, op->scale[1] = 1.0;
  op->ratio[0] = 3.0 / 4.0, op->ratio[1] = 4.0 / 3.0;
  op->p = 0.5;
  op->antialias = 1;
  op->dct_scale = 1;
  for (int c = 0; c < 3; c++) op->mean[c] = 0.0f, op->std[c] = 1.0f;
}

static ff_status parse_op(lexer *lx, ff__op *op) {
  char name[64];
  size_t column = (skip_space(lx), lx->pos);
  if (!read_name(lx, name, sizeof name)) return fail(lx, column, "expected %s", "an op name");
  const op_spec *spec = NULL;
  for (size_t i = 0; i < NUM_OP_SPECS; i++)
    if (!strcmp(op_specs[i].name, name)) spec = &op_specs[i];
  if (!spec) {
    char list[512] = "";
    for (size_t i = 0; i < NUM_OP_SPECS; i++) {
      strcat(list, i ? ", " : "");
      strcat(list, op_specs[i].name);
    }
    char what[400];
    snprintf(what, sizeof what, "unknown op '%s' (ops: %s)", name, list);
    return fail(lx, column, "%s", what);
  }
  memset(op, 0, sizeof *op);
  set_defaults(op);
  op->kind = spec->kind;
  op->column = (int)column + 1;
  unsigned seen = 0;
  if (peek(lx) == '(') {
    lx->pos++;
    while (peek(lx) != ')') {
      if (seen && expect(lx, ',')) return fail(lx, lx->pos, "expected %s", "',' or ')'");
      char arg[64];
      size_t arg_column = (skip_space(lx), lx->pos);
      if (!read_name(lx, arg, sizeof arg)) return fail(lx, arg_column, "expected %s", "an argument name");
      int k = 0;
      while (spec->args[k].name && strcmp(spec->args[k].name, arg)) k++;
      if (!spec->args[k].name) {
        char what[128];
        snprintf(what, sizeof what, "%s has no argument '%s'", spec->name, arg);
        return fail(lx, arg_column, "%s", what);
      }
      if (seen & (1u << k)) return fail(lx, arg_column, "argument '%s' given twice", arg);
      ff_status st = expect(lx, '=');
      if (st) return st;
      value v;
      if ((st = read_value(lx, &v)) || (st = set_arg(lx, op, &spec->args[k], &v))) return st;
      seen |= 1u << k;
      if (peek(lx) == 0) return fail(lx, lx->pos, "expected %s", "')'");
    }
    lx->pos++;
  }
  for (int k = 0; spec->args[k].name; k++)
    if (spec->args[k].required && !(seen & (1u << k))) {
      char what[128];
      snprintf(what, sizeof what, "%s needs the argument '%s'", spec->name, spec->args[k].name);
      return fail(lx, column, "%s", what);
    }
  return FF_OK;
}

/* Output size after the ops, or 0 where it depends on the image. */
static void output_size(const ff__pipeline *p, int *h, int *w) {
  *h = *w = 0;
  for (int i = 0; i < p->num_ops; i++) {
    const ff__op *op = &p->ops[i];
    switch (op->kind) {
    case FF__OP_CROP: *h = op->height, *w = op->width; break;
    case FF__OP_CENTER_CROP:
    case FF__OP_RANDOM_RESIZED_CROP: *h = op->size[0], *w = op->size[1]; break;
    case FF__OP_RESIZE:
      if (op->size[1]) *h = op->size[0], *w = op->size[1];
      else if (*h) {
        int s = op->size[0];
        if (*h <= *w) *w = (int)((long long)s * *w / *h), *h = s;
        else *h = (int)((long long)s * *h / *w), *w = s;
      }
      break;
    default: break;
    }
  }
}

static ff_status check_whole(lexer *lx, ff__pipeline *p) {
  if (p->ops[0].kind != FF__OP_DECODE)
    return fail(lx, (size_t)p->ops[0].column - 1, "expected %s", "'decode' as the first op");
  for (int i = 1; i < p->num_ops; i++) {
    const ff__op *op = &p->ops[i];
    if (op->kind == FF__OP_DECODE) return fail(lx, (size_t)op->column - 1, "%s", "decode may only come first");
    int last = i == p->num_ops - 1;
    if ((op->kind == FF__OP_TO_DTYPE || op->kind == FF__OP_NORMALIZE) && !last)
      return fail(lx, (size_t)op->column - 1, "%s", "to_dtype and normalize must be the last op");
  }
  output_size(p, &p->out_height, &p->out_width);
  if (!p->out_height)
    return fail(lx, strlen(lx->text), "%s",
                "the output size depends on the image: end with random_resized_crop, center_crop, "
                "crop or resize(size=(H, W)) so that every sample has the same size");
  const ff__op *last = &p->ops[p->num_ops - 1];
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

ff_status ff__pipeline_parse(const char *text, ff__pipeline *out, ff__error *err) {
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
  if (!st) st = check_whole(&lx, p);
  if (!st) *out = *p;
  free(p);
  return st;
}
