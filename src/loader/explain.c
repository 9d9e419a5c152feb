/* explain.c — what the planner drew for one sample, as JSON: the region the
 * decoder reads and at what DCT scale, then every step with its parameters
 * (crop boxes, flips, each augmentation op with its argument, magnitude and
 * sign, AugMix's weights). The sample is planned exactly as the loader plans
 * it (same file header, seed, epoch and index), without decoding its pixels,
 * so users can debug pipelines and tests can check the policies from the
 * outside (ff_loader_plan, ff_image_plan, `fusionflow plan`). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/cpu.h"
#include "kernels/resize.h"
#include "loader/loader_internal.h"
#include "ops/ops.h"

typedef struct text {
  char *s;
  size_t len, cap;
  int oom;
} text;

static void put(text *t, const char *fmt, ...) {
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    size_t room = t->cap - t->len;
    int n = t->oom ? 0 : vsnprintf(t->s ? t->s + t->len : NULL, t->s ? room : 0, fmt, ap);
    va_end(ap);
    if (t->oom) return;
    if (t->s && (size_t)n < room) {
      t->len += (size_t)n;
      return;
    }
    size_t cap = (t->cap ? t->cap * 2 : 1024) + (size_t)n;
    char *s = realloc(t->s, cap);
    if (!s) {
      t->oom = 1;
      return;
    }
    t->s = s, t->cap = cap;
  }
}

static void put_string(text *t, const char *s) {
  put(t, "\"");
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') put(t, "\\%c", c);
    else if (c < 0x20) put(t, "\\u%04x", c);
    else put(t, "%c", c);
  }
  put(t, "\"");
}

/* The signed ops draw a sign; the factor ops are called with 1 + m. */
static void put_aug(text *t, const ff__aug *a) {
  put(t, "{\"op\": \"%s\"", ff__cost_name((int)a->op));
  if (a->op == FF__AUG_AUTOCONTRAST || a->op == FF__AUG_EQUALIZE || a->op == FF__AUG_INVERT) {
    put(t, "}");
    return;
  }
  put(t, ", \"arg\": %.17g", a->arg);
  int factor = a->op >= FF__AUG_BRIGHTNESS && a->op <= FF__AUG_SHARPNESS;
  if (a->op >= FF__AUG_SHEAR_X && a->op <= FF__AUG_SHARPNESS) {
    double m = factor ? a->arg - 1.0 : a->arg;
    put(t, ", \"magnitude\": %.17g, \"sign\": %d", fabs(m), signbit(m) ? -1 : 1);
  }
  if (a->op >= FF__AUG_SHEAR_X && a->op <= FF__AUG_ROTATE) {
    put(t, ", \"interpolation\": \"%s\", \"fill\": [%.9g, %.9g, %.9g]", a->bilinear ? "bilinear" : "nearest",
        a->has_fill ? a->fill[0] : 0.0f, a->has_fill ? a->fill[1] : 0.0f, a->has_fill ? a->fill[2] : 0.0f);
  }
  put(t, "}");
}

/* A Pillow op (timm's policies): its name, argument, and for the geometric
 * ops the resampling filter and the fill. */
static void put_pil(text *t, const ff__pil *p) {
  static const char *const resample[] = {"nearest", "bilinear", "bicubic"};
  put(t, "{\"op\": \"%s\"", ff__cost_name(FF__COST_PIL + (int)p->op));
  if (p->op != FF__PIL_AUTOCONTRAST && p->op != FF__PIL_EQUALIZE && p->op != FF__PIL_INVERT)
    put(t, ", \"arg\": %.17g", p->arg);
  if (ff__pil_is_geometric(p->op))
    put(t, ", \"interpolation\": \"%s\", \"fill\": [%d, %d, %d]", resample[p->resample], p->fill[0], p->fill[1],
        p->fill[2]);
  put(t, "}");
}

static void put_step(text *t, const ff__step *s) {
  switch (s->kind) {
  case FF__STEP_CROP: put(t, "{\"op\": \"crop\", \"box\": [%d, %d, %d, %d]}", s->x, s->y, s->w, s->h); break;
  case FF__STEP_RESIZE:
    put(t, "{\"op\": \"resize\", \"size\": [%d, %d], \"antialias\": %s, \"interpolation\": \"%s\"}", s->h, s->w,
        s->antialias & FF__RESIZE_ANTIALIAS ? "true" : "false", s->antialias & FF__RESIZE_BICUBIC ? "bicubic" : "bilinear");
    break;
  case FF__STEP_BLUR:
    put(t, "{\"op\": \"gaussian_blur\", \"kernel_size\": [%d, %d], \"sigma\": %.9g}", s->x, s->y, s->weight);
    break;
  case FF__STEP_ERASE:
    put(t, "{\"op\": \"erase\", \"box\": [%d, %d, %d, %d], ", s->x, s->y, s->w, s->h);
    if (s->antialias) put(t, "\"noise_key\": %llu}", (unsigned long long)s->noise_key);
    else put(t, "\"fill\": [%.9g, %.9g, %.9g]}", s->aug.fill[0], s->aug.fill[1], s->aug.fill[2]);
    break;
  case FF__STEP_HFLIP: put(t, "{\"op\": \"horizontal_flip\"}"); break;
  case FF__STEP_VFLIP: put(t, "{\"op\": \"vertical_flip\"}"); break;
  case FF__STEP_AUG: put_aug(t, &s->aug); break;
  case FF__STEP_MIX_BEGIN: put(t, "{\"op\": \"aug_mix_begin\", \"weight\": %.9g}", s->weight); break;
  case FF__STEP_CHAIN_BEGIN: put(t, "{\"op\": \"chain_begin\"}"); break;
  case FF__STEP_CHAIN_END: put(t, "{\"op\": \"chain_end\", \"weight\": %.9g}", s->weight); break;
  case FF__STEP_MIX_END: put(t, "{\"op\": \"aug_mix_end\"}"); break;
  case FF__STEP_PIL: put_pil(t, &s->pil); break;
  case FF__STEP_PIL_MIX_END: put(t, "{\"op\": \"timm_aug_mix_end\", \"weight\": %.9g}", s->weight); break;
  }
}

/* The steps of plan, as the "steps" array, with the flips not drawn among
 * them as {"op": "horizontal_flip", "applied": false}. */
static void put_steps(text *t, const ff__plan *plan, const char *indent) {
  put(t, "\"steps\": [");
  int k = 0, first = 1;
  for (int i = 0; i <= plan->num_steps; i++) {
    for (; k < plan->num_unflipped && plan->unflipped[k].at == i; k++, first = 0)
      put(t, "%s%s{\"op\": \"%s_flip\", \"applied\": false}", first ? "\n" : ",\n", indent,
          plan->unflipped[k].vertical ? "vertical" : "horizontal");
    if (i == plan->num_steps) break;
    put(t, first ? "\n%s" : ",\n%s", indent);
    put_step(t, &plan->steps[i]);
    first = 0;
  }
  put(t, "]");
}

/* views: NULL or num_groups 0 for a pipeline without views (pipe); else
 * every view is planned as the loader plans it (pipeline/views.h) and the
 * decode is the window that holds all their crops. */
static ff_status plan_json(const ff__pipeline *pipe, const ff__views *views, const ff__sample_job *job,
                           int64_t label, char **out, ff__error *err) {
  int n = views && views->num_groups ? views->num_views : 1;
  ff__worker w = {0};
  size_t size_bytes;
  ff__plan *plan = calloc((size_t)n, sizeof *plan);
  ff_status st = plan ? ff__sample_read(&w, n > 1 ? &views->pipes[views->group_of[0]] : pipe, job, &size_bytes,
                                        plan, err)
                      : FF_ENOMEM;
  ff__image_info info = w.header;
  if (label < 0) label = w.label; /* a reader's source gives it with the bytes */
  ff__worker_free(&w);
  ff__decode_req window = {0}; /* what is decoded: with views, their one window */
  if (!st && n > 1) st = ff__views_plan(views, job, &info, plan, &window, err);
  else if (!st) window = plan[0].decode;
  if (st) {
    free(plan);
    return st == FF_ENOMEM && !plan ? ff__error_set(err, st, "out of memory planning %s", job->path) : st;
  }
  text t = {0};
  put(&t, "{\"path\": ");
  put_string(&t, job->path);
  if (label >= 0) put(&t, ", \"label\": %lld", (long long)label);
  put(&t, ", \"seed\": %llu, \"epoch\": %llu, \"index\": %llu, \"semantics\": \"%s\"",
      (unsigned long long)job->seed, (unsigned long long)job->epoch, (unsigned long long)job->index,
      pipe->semantics == FF_SEMANTICS_V2 ? "v2" : "v1");
  put(&t, ",\n \"image\": {\"format\": \"%s\", \"width\": %d, \"height\": %d}",
      ff__format_name(info.format), info.width, info.height);
  const ff__decode_req *d = &window;
  int rx = d->crop_width ? d->crop_x : 0, ry = d->crop_width ? d->crop_y : 0;
  int rw = d->crop_width ? d->crop_width : info.width, rh = d->crop_width ? d->crop_height : info.height;
  put(&t, ",\n \"decode\": {\"region\": [%d, %d, %d, %d]", rx, ry, rw, rh);
  const ff__dct_box *b = &plan->dct;
  if (n == 1 && b->scale_num > 0 && b->scale_num < 8)
    put(&t, ", \"dct_scale\": %g, \"decoded_size\": [%d, %d], \"box\": [%.17g, %.17g, %.17g, %.17g]}",
        b->scale_num / 8.0, b->width, b->height, b->box[0], b->box[1], b->box[2], b->box[3]);
  else
    put(&t, ", \"dct_scale\": 1, \"decoded_size\": [%d, %d], \"box\": [0, 0, %d, %d]}", rw, rh, rw, rh);
  if (n == 1) {
    put(&t, ",\n ");
    put_steps(&t, plan, "   ");
  } else {
    put(&t, ",\n \"views\": [");
    for (int k = 0; k < n; k++) {
      const ff__decode_req *r = &plan[k].decode;
      put(&t, "%s{\"view\": %d, \"group\": %d, \"region\": [%d, %d, %d, %d], ", k ? ",\n   " : "\n   ", k,
          views->group_of[k], r->crop_width ? r->crop_x : 0, r->crop_width ? r->crop_y : 0,
          r->crop_width ? r->crop_width : info.width, r->crop_width ? r->crop_height : info.height);
      put_steps(&t, &plan[k], "     ");
      put(&t, "}");
    }
    put(&t, "]");
  }
  put(&t, "}\n");
  free(plan);
  if (t.oom) {
    free(t.s);
    return ff__error_set(err, FF_ENOMEM, "out of memory writing the plan of %s", job->path);
  }
  *out = t.s;
  return FF_OK;
}

ff_status ff_loader_plan(ff_loader *l, uint64_t index, uint64_t epoch, char **json_out) {
  if (!json_out) return ff__error_set(&l->err, FF_EINVAL, "json_out is required");
  if (!l->started_threads) return ff__error_set(&l->err, FF_EINVAL, "the loader failed to open");
  if (index >= l->index.count)
    return ff__error_set(&l->err, FF_EINVAL, "sample %llu is past the %zu samples of the data set",
                         (unsigned long long)index, l->index.count);
  const ff_config *c = &l->cfg;
  ff__sample_job job = {.path = l->index.paths[index], .reader = l->index.reader, .seed = c->seed, .epoch = epoch,
                        .index = index,
                        .max_pixels = c->max_image_pixels, .max_scans = c->max_jpeg_scans,
                        .max_metadata_bytes = c->max_metadata_bytes, .strict = c->strict_decode};
  ff__index_locate(&l->index, index, &job.shard, &job.offset, &job.length);
  ff__error err = {0}; /* the handle's message is written only on failure */
  ff_status st = plan_json(&l->pipe, &l->views, &job, l->index.labels ? l->index.labels[index] : -1, json_out, &err);
  if (st) ff__error_set(&l->err, st, "%s", err.msg);
  return st;
}

ff_status ff_image_plan(const char *path, const char *pipeline, uint64_t seed, uint64_t epoch, uint64_t index,
                        char **json_out, char *errbuf, size_t errbuf_size) {
  return ff_image_plan_as(path, pipeline, FF_SEMANTICS_V1, seed, epoch, index, json_out, errbuf, errbuf_size);
}

ff_status ff_image_plan_as(const char *path, const char *pipeline, ff_semantics semantics, uint64_t seed,
                           uint64_t epoch, uint64_t index, char **json_out, char *errbuf, size_t errbuf_size) {
  ff__error err = {0};
  ff__pipeline *pipe = malloc(sizeof *pipe);
  ff_status st = pipe ? FF_OK : ff__error_set(&err, FF_ENOMEM, "out of memory");
  if (!st && (!path || !json_out)) st = ff__error_set(&err, FF_EINVAL, "path and json_out are required");
  if (!st) st = ff__pipeline_parse_image(pipeline, semantics, pipe, &err);
  if (!st) {
    ff_config c; /* the loader's default limits, as ff_image_augment */
    ff_config_init(&c);
    ff__sample_job job = {.path = path, .seed = seed, .epoch = epoch, .index = index,
                          .max_pixels = c.max_image_pixels, .max_scans = c.max_jpeg_scans,
                          .max_metadata_bytes = c.max_metadata_bytes};
    st = plan_json(pipe, NULL, &job, -1, json_out, &err);
  }
  if (st && errbuf && errbuf_size) snprintf(errbuf, errbuf_size, "%s", err.msg);
  free(pipe);
  return st;
}
