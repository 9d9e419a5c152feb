/* dev_batch.c — a microbatch on a device (see dev_batch.h): each sample's
 * plan lowered to device stages (kernels/stage.h), one upload, one launch
 * per stage index and kind over only the samples that have that work there:
 * the records of each stage index are packed together by kind, empty ones
 * left out, so no block of a launch starts on a sample without that stage
 * and each launch runs the kernel of its kind (exec/cuda.cu).
 *
 * Lowering walks the plan as the CPU step runner does (ops/run.c), tracking
 * the current image as a device view: an in-bounds crop only moves the view;
 * every other step becomes one to three stages, each writing a fresh buffer
 * of the sample's arena (three image buffers: the current one, AugMix's
 * kept one, and a free one to write). Per-sample data the stages read — the
 * resize tap tables (built here by the CPU op's own functions), the ops of a
 * table run, zeroed histograms and sums — goes into an aux area uploaded
 * with the stage table. The walk runs twice: at add, to measure (stages,
 * buffer and aux sizes), and at submit, to write the records at their final
 * device addresses.
 *
 * Device memory of a submitted microbatch: the blob (images, table, aux;
 * uploaded) and the arena (intermediates), both from the pool and both
 * returned at wait. */
#include "exec/dev_batch.h"

#include <stdlib.h>
#include <string.h>

#include "kernels/affine_setup.h"
#include "kernels/stage.h"
#include "ops/augment.h"
#include "ops/ops.h"
#include "ops/pil.h"
#include "ops/pil_blur.h"

#define ALIGN(x, a) (((x) + (a)-1) / (a) * (a))

typedef struct sample {
  ff__plan plan;
  size_t image_off; /* in the image staging (and the blob) */
  int width, height, slot;
  uint64_t d_image; /* the decoded image in device memory (the device decoded it), or 0: in the staging */
  uint64_t d_pitch; /* its row pitch in bytes */
  /* measured at add */
  int num_stages;
  size_t aux_bytes, img_bytes, tmp_bytes, mix_bytes;
  /* set at submit */
  size_t aux_off, arena_off;
} sample;

struct ff__dev_batch {
  ff__device *dev;
  const ff__pipeline *pipe;
  sample *samples;
  int n, cap;
  uint8_t *images, *meta; /* pinned staging: decoded images; stage table + aux */
  size_t images_bytes, images_cap, meta_cap;
  int *packed, packed_cap; /* per stage index: its non-empty records, packed from index k's offset by kind */
  ff__dstage *rows;           /* the records as lowered, [sample][stage index], before packing */
  size_t rows_cap;
  void *d_blob, *d_arena;
  ff__devent *uploaded, *start, *end;
  int pending;
};

/* ------------------------------------------------------------ lowering */

typedef struct walk {
  sample *s;
  int emit;          /* 0: measure into s; 1: write records */
  ff__dstage *row;   /* emit: the sample's row of the table */
  uint8_t *aux_host; /* emit: the sample's aux in the staging */
  uint64_t aux_addr, arena_addr;
  size_t aux_off;
  int num_stages;
  ff__dstage scratch; /* measure: where records go */
  ff__dimg cur, kept;
  int cur_buf, kept_buf; /* arena buffer of each, -1: the uploaded image */
} walk;

static ff__dstage *stage(walk *w, ff__dstage_kind kind, uint64_t count) {
  ff__dstage *st = w->emit ? &w->row[w->num_stages] : &w->scratch;
  w->num_stages++;
  memset(st, 0, sizeof *st);
  st->kind = kind, st->count = (uint32_t)count, st->src = w->cur;
  return st;
}

static uint64_t pixels(const ff__dimg *m) { return (uint64_t)m->width * (uint64_t)m->height; }

/* The stage writes a new width x height image: a buffer that is neither
 * the current nor the kept image; it becomes the current image. */
static void produce(walk *w, ff__dstage *st, int width, int height) {
  int k = 0;
  while (k == w->cur_buf || k == w->kept_buf)
    k++;
  size_t bytes = (size_t)width * height * 3;
  if (!w->emit && bytes > w->s->img_bytes) w->s->img_bytes = bytes;
  st->dst = (ff__dimg){w->arena_addr + (uint64_t)k * ALIGN(w->s->img_bytes, 256), width, height,
                       (uint64_t)width * 3};
  w->cur = st->dst, w->cur_buf = k;
}

static uint64_t aux(walk *w, size_t bytes, void **host) {
  size_t off = ALIGN(w->aux_off, 16);
  w->aux_off = off + bytes;
  *host = w->emit ? w->aux_host + off : NULL;
  return w->aux_addr + off;
}

static uint64_t tmp_addr(const walk *w) { return w->arena_addr + 3 * ALIGN(w->s->img_bytes, 256); }
static uint64_t mix_addr(const walk *w) { return tmp_addr(w) + ALIGN(w->s->tmp_bytes, 256); }

/* A resize, or (blur: a FF__STEP_BLUR step) the Gaussian blur as the
 * resize to the same size through the blur's taps, as ops/geometry.c runs it. */
static void lower_resize(walk *w, const double *box, int out_w, int out_h, int antialias, const ff__step *blur) {
  int in_w = w->cur.width, in_h = w->cur.height;
  size_t tmp = (size_t)in_h * out_w * 3 * sizeof(float);
  if (!w->emit && tmp > w->s->tmp_bytes) w->s->tmp_bytes = tmp;
  ff__resize_axis ax = {blur ? blur->x : ff__resize_max_taps(in_w, out_w, antialias), 0, 0, 0, 0, 0};
  ff__resize_axis ay = {blur ? blur->y : ff__resize_max_taps(in_h, out_h, antialias), 0, 0, 0, 0, 0};
  void *hx, *hy;
  uint64_t dx = aux(w, ff__resize_axis_bytes(out_w, ax.max_taps), &hx);
  uint64_t dy = aux(w, ff__resize_axis_bytes(out_h, ay.max_taps), &hy);
  if (blur) ax.rule = ay.rule = FF__RESIZE_RULE_BLUR;
  if (w->emit && blur) {
    float k[2 * FF__BLUR_MAX_KSIZE];
    ff__gauss_kernel1d(blur->x, blur->weight, k);
    ff__gauss_kernel1d(blur->y, blur->weight, k + blur->x);
    ff__resize_axis_place(&ax, hx, out_w), ff__resize_axis_gauss(&ax, in_w, k, blur->x);
    ff__resize_axis_place(&ay, hy, out_h), ff__resize_axis_gauss(&ay, in_h, k + blur->x, blur->y);
  } else if (w->emit) {
    double whole[4] = {0, 0, in_w, in_h}; /* the box: ops.h, ff__op_resize_box */
    if (!box) box = whole;
    ff__resize_axis_place(&ax, hx, out_w), ff__resize_axis_build_box(&ax, in_w, box[0], box[2], out_w, antialias);
    ff__resize_axis_place(&ay, hy, out_h), ff__resize_axis_build_box(&ay, in_h, box[1], box[3], out_h, antialias);
  }
  ff__dstage *h = stage(w, FF__DS_RESIZE_H, (uint64_t)in_h * out_w);
  h->dst = (ff__dimg){0, out_w, out_h, 0};
  h->a = tmp_addr(w), h->b = dx;
  h->p.resize.max_taps = ax.max_taps, h->p.resize.rule = ax.rule, h->p.resize.precision = ax.precision;
  ff__dstage *v = stage(w, FF__DS_RESIZE_V, (uint64_t)out_w * out_h);
  v->src = (ff__dimg){0, out_w, in_h, 0};
  v->a = tmp_addr(w), v->b = dy;
  v->p.resize.max_taps = ay.max_taps, v->p.resize.rule = ay.rule, v->p.resize.precision = ay.precision;
  produce(w, v, out_w, out_h);
}

/* A run of n table ops (ops/color.c's fused pass): with a histogram op,
 * histogram → tables (one element per channel) → lookup; otherwise the
 * table is composed here. */
static void lower_lut_run(walk *w, const ff__aug *ops, int n) {
  int any_hist = 0;
  for (int i = 0; i < n; i++)
    any_hist |= ff__lut_needs_histogram(ops[i].op);
  void *host;
  if (!any_hist) {
    uint8_t t[256], scratch_t[256];
    uint64_t scratch_now[256];
    ff__lut_run_channel(ops, n, NULL, t, scratch_now, scratch_t);
    int identity = 1;
    for (int v = 0; v < 256; v++)
      identity &= t[v] == v;
    if (identity) return;
    ff__dstage *st = stage(w, FF__DS_LUT_APPLY, pixels(&w->cur));
    st->a = aux(w, 3 * 256, &host);
    if (host)
      for (int c = 0; c < 3; c++)
        memcpy((uint8_t *)host + 256 * c, t, 256);
    produce(w, st, w->cur.width, w->cur.height);
    return;
  }
  uint64_t hist = aux(w, 3 * 256 * sizeof(uint32_t), &host); /* zeroed with the staging */
  uint64_t d_ops = aux(w, (size_t)n * sizeof *ops, &host);
  if (host) memcpy(host, ops, (size_t)n * sizeof *ops);
  uint64_t luts = aux(w, 3 * 256, &host);
  uint64_t scratch = aux(w, 3 * (256 + 32) * sizeof(uint64_t), &host);
  stage(w, FF__DS_HISTOGRAM, pixels(&w->cur))->a = hist;
  ff__dstage *b = stage(w, FF__DS_LUT_BUILD, 3);
  b->a = hist, b->b = d_ops, b->p.lut.luts = luts, b->p.lut.scratch = scratch, b->p.lut.n = n;
  ff__dstage *st = stage(w, FF__DS_LUT_APPLY, pixels(&w->cur));
  st->a = luts;
  produce(w, st, w->cur.width, w->cur.height);
}

static void lower_aug(walk *w, const ff__aug *a) {
  int width = w->cur.width, height = w->cur.height;
  void *host;
  switch (a->op) {
  case FF__AUG_SHEAR_X:
  case FF__AUG_SHEAR_Y:
  case FF__AUG_TRANSLATE_X:
  case FF__AUG_TRANSLATE_Y:
  case FF__AUG_ROTATE: {
    if (width <= 0 || height <= 0) return;
    ff__affine_setup set;
    ff__affine_setup_make(a, width, height, &set);
    ff__dstage *st = stage(w, set.translate ? FF__DS_TRANSLATE : FF__DS_AFFINE, pixels(&w->cur));
    st->p.affine.grid = set.grid;
    memcpy(st->p.affine.fill, a->fill, sizeof a->fill);
    memcpy(st->p.affine.fill_u8, set.fill_u8, 3);
    st->p.affine.bilinear = a->bilinear, st->p.affine.has_fill = a->has_fill, st->p.affine.v2 = a->v2;
    st->p.affine.tx = set.tx, st->p.affine.ty = set.ty;
    produce(w, st, width, height);
    return;
  }
  case FF__AUG_COLOR: {
    ff__dstage *st = stage(w, FF__DS_COLOR, pixels(&w->cur));
    st->p.blend = ff__blend_weights_of(a);
    produce(w, st, width, height);
    return;
  }
  case FF__AUG_CONTRAST: {
    if (!pixels(&w->cur)) return;
    uint64_t sum = aux(w, sizeof(uint64_t), &host); /* zeroed with the staging */
    ff__dstage *g = stage(w, FF__DS_GRAY_SUM, pixels(&w->cur));
    g->a = sum, g->p.blend = ff__blend_weights_of(a); /* its v2: which gray */
    ff__dstage *st = stage(w, FF__DS_CONTRAST, pixels(&w->cur));
    st->a = sum, st->p.blend = ff__blend_weights_of(a);
    produce(w, st, width, height);
    return;
  }
  case FF__AUG_HUE: {
    ff__dstage *st = stage(w, FF__DS_HUE, pixels(&w->cur));
    st->p.mix.weight = (float)a->arg;
    produce(w, st, width, height);
    return;
  }
  case FF__AUG_SHARPNESS: {
    if (width <= 2 || height <= 2) return; /* unchanged (spec 2.10) */
    ff__dstage *st = stage(w, FF__DS_SHARPNESS, pixels(&w->cur));
    st->p.blend = ff__blend_weights_of(a);
    produce(w, st, width, height);
    return;
  }
  default: return; /* identity; table ops go through lower_lut_run */
  }
}

/* A Pillow op (ops/pil.c): table ops as histogram / luma sum → tables →
 * lookup, GaussianBlur as its six passes (nothing for a box of radius 0),
 * the others one stage each. */
static void lower_pil(walk *w, const ff__pil *p) {
  int width = w->cur.width, height = w->cur.height;
  if (width <= 0 || height <= 0) return;
  void *host;
  ff__dstage *st;
  if (ff__pil_has_table(p->op)) {
    uint64_t hist = aux(w, 3 * 256 * sizeof(uint32_t), &host); /* zeroed with the staging */
    uint64_t sum = aux(w, sizeof(uint64_t), &host);
    uint64_t d_op = aux(w, sizeof *p, &host);
    if (host) memcpy(host, p, sizeof *p);
    uint64_t luts = aux(w, 3 * 256, &host);
    if (ff__pil_needs_histogram(p->op)) stage(w, FF__DS_HISTOGRAM, pixels(&w->cur))->a = hist;
    if (p->op == FF__PIL_CONTRAST) stage(w, FF__DS_PIL_LUMA_SUM, pixels(&w->cur))->a = sum;
    ff__dstage *b = stage(w, FF__DS_PIL_LUT_BUILD, 3);
    b->a = hist, b->b = d_op, b->p.pil_lut.luts = luts, b->p.pil_lut.sum = sum;
    st = stage(w, FF__DS_LUT_APPLY, pixels(&w->cur));
    st->a = luts;
  } else if (p->op == FF__PIL_GAUSSIAN_BLUR) { /* three passes along x, three along y, a launch each */
    ff__pil_box box = ff__pil_blur_box(p->arg);
    for (int k = 0; box.on && k < 2 * FF__PIL_BLUR_PASSES; k++) {
      int along_x = k < FF__PIL_BLUR_PASSES;
      st = stage(w, along_x ? FF__DS_PIL_BOX_H : FF__DS_PIL_BOX_V, (uint64_t)(along_x ? height : width) * 3);
      st->p.pil_box = box;
      produce(w, st, width, height);
    }
    return;
  } else if (p->op == FF__PIL_HUE) {
    st = stage(w, FF__DS_PIL_HUE, pixels(&w->cur));
    st->p.pil_hue = ff__pil_hue_shift(p->arg);
  } else if (p->op == FF__PIL_COLOR || p->op == FF__PIL_SHARPNESS) {
    st = stage(w, p->op == FF__PIL_COLOR ? FF__DS_PIL_COLOR : FF__DS_PIL_SHARPNESS, pixels(&w->cur));
    st->p.pil_alpha = (float)p->arg;
  } else {
    st = stage(w, FF__DS_PIL_WARP, pixels(&w->cur));
    ff__pil_warp_setup(p, width, height, &st->p.pil_warp);
  }
  produce(w, st, width, height);
}

/* An erasing box of the float slot out (ops/erase.c's values, from the host). */
static void lower_erase(walk *w, const ff__step *st, const ff__dimg *out) {
  size_t n = st->antialias ? (size_t)3 * st->w * st->h : 3;
  void *host;
  uint64_t values = aux(w, n * sizeof(float), &host);
  if (host && st->antialias) ff__erase_normals(st->noise_key, n, host);
  else if (host) memcpy(host, st->aug.fill, sizeof st->aug.fill);
  ff__dstage *e = stage(w, FF__DS_ERASE, (uint64_t)st->w * st->h);
  e->src = (ff__dimg){0, st->w, st->h, 0};
  e->dst = *out;
  e->a = values, e->p.crop.x = st->x, e->p.crop.y = st->y, e->p.crop.per_value = st->antialias;
}

/* Lowers sample s's plan and output stage (d_out + slot). */
static void lower(walk *w, const ff__pipeline *pipe, uint64_t image_addr, uint64_t d_out, uint64_t lut_addr) {
  sample *s = w->s;
  const ff__plan *plan = &s->plan;
  w->cur = (ff__dimg){image_addr, s->width, s->height, s->d_image ? s->d_pitch : (uint64_t)s->width * 3};
  w->cur_buf = w->kept_buf = -1;
  for (int i = 0; i < plan->num_steps; i++) {
    const ff__step *st = &plan->steps[i];
    switch (st->kind) {
    case FF__STEP_CROP:
      if (st->x >= 0 && st->y >= 0 && st->x + st->w <= w->cur.width && st->y + st->h <= w->cur.height) {
        w->cur.addr += (uint64_t)st->y * w->cur.stride + (uint64_t)st->x * 3; /* a view */
        w->cur.width = st->w, w->cur.height = st->h;
      } else {
        ff__dstage *c = stage(w, FF__DS_CROP, (uint64_t)st->w * st->h);
        c->p.crop.x = st->x, c->p.crop.y = st->y;
        produce(w, c, st->w, st->h);
      }
      break;
    case FF__STEP_RESIZE: {
      const double *box = ff__plan_step_box(plan, i, w->cur.width, w->cur.height);
      if (box || st->w != w->cur.width || st->h != w->cur.height) lower_resize(w, box, st->w, st->h, st->antialias, NULL);
      break;
    }
    case FF__STEP_BLUR:
      if (pixels(&w->cur)) lower_resize(w, NULL, w->cur.width, w->cur.height, 0, st);
      break;
    case FF__STEP_ERASE: break; /* on the float slot, after the output stage */
    case FF__STEP_HFLIP:
    case FF__STEP_VFLIP: {
      ff__dstage *f = stage(w, FF__DS_FLIP, pixels(&w->cur));
      f->p.flip.horizontal = st->kind == FF__STEP_HFLIP;
      produce(w, f, w->cur.width, w->cur.height);
      break;
    }
    case FF__STEP_AUG:
      if (ff__aug_is_lut(st->aug.op)) {
        ff__aug run[FF__PLAN_MAX_STEPS];
        int n = ff__plan_lut_run(plan, i, run);
        lower_lut_run(w, run, n);
        i += n - 1;
      } else {
        lower_aug(w, &st->aug);
      }
      break;
    case FF__STEP_MIX_BEGIN: {
      size_t bytes = (size_t)pixels(&w->cur) * 3 * sizeof(float);
      if (!w->emit && bytes > s->mix_bytes) s->mix_bytes = bytes;
      ff__dstage *m = stage(w, FF__DS_MIX_SCALE, pixels(&w->cur));
      m->a = mix_addr(w), m->p.mix.weight = st->weight;
      w->kept = w->cur, w->kept_buf = w->cur_buf;
      break;
    }
    case FF__STEP_CHAIN_BEGIN: w->cur = w->kept, w->cur_buf = w->kept_buf; break;
    case FF__STEP_CHAIN_END: {
      ff__dstage *m = stage(w, FF__DS_MIX_ADD, pixels(&w->cur));
      m->a = mix_addr(w), m->p.mix.weight = st->weight;
      break;
    }
    case FF__STEP_MIX_END:
    case FF__STEP_PIL_MIX_END: {
      w->cur = w->kept;
      ff__dstage *m = stage(w, FF__DS_MIX_TRUNC, pixels(&w->kept));
      m->a = mix_addr(w);
      if (st->kind == FF__STEP_PIL_MIX_END) { /* timm: Image.blend(kept, mixture, m), a third buffer */
        produce(w, m, w->kept.width, w->kept.height);
        m = stage(w, FF__DS_PIL_BLEND, pixels(&w->kept));
        m->src = w->kept, m->a = w->cur.addr, m->p.pil_alpha = st->weight;
        produce(w, m, w->kept.width, w->kept.height);
        w->kept_buf = -1;
        break;
      }
      w->kept_buf = -1;
      produce(w, m, w->kept.width, w->kept.height);
      break;
    }
    case FF__STEP_PIL: lower_pil(w, &st->pil); break;
    }
  }
  int f32 = pipe->output == FF__OUTPUT_NCHW_F32;
  ff__dstage *o = stage(w, pipe->out_custom ? FF__DS_OUT_FMT : f32 ? FF__DS_OUT_F32 : FF__DS_OUT_U8, pixels(&w->cur));
  size_t slot_bytes = ff__pipeline_sample_bytes(pipe);
  o->dst = (ff__dimg){d_out + (uint64_t)s->slot * slot_bytes, w->cur.width, w->cur.height, 0};
  o->a = lut_addr; /* the output table: normalize's floats, or the format's element bits */
  if (pipe->out_custom) o->p.out.elem_bytes = pipe->out_elem_bytes, o->p.out.planar = pipe->out_planar;
  for (int i = 0; f32 && i < plan->num_steps; i++) /* random_erasing on the float slot, noise made here */
    if (plan->steps[i].kind == FF__STEP_ERASE) lower_erase(w, &plan->steps[i], &o->dst);
}

/* ------------------------------------------------------------ the batch */

ff_status ff__dev_batch_create(ff__device *dev, ff__dev_batch **out, ff__error *err) {
  ff__dev_batch *b = calloc(1, sizeof *b);
  if (!b) return ff__error_set(err, FF_ENOMEM, "out of memory for a device microbatch");
  b->dev = dev;
  ff_status st = ff__device_event_create(dev, &b->start, err);
  if (!st) st = ff__device_event_create(dev, &b->end, err);
  if (!st) st = ff__device_event_create(dev, &b->uploaded, err);
  if (st) {
    ff__dev_batch_destroy(b);
    return st;
  }
  *out = b;
  return FF_OK;
}

static void release_device_memory(ff__dev_batch *b) {
  ff__device_free(b->dev, b->d_blob);
  ff__device_free(b->dev, b->d_arena);
  b->d_blob = b->d_arena = NULL;
  b->pending = 0;
}

void ff__dev_batch_destroy(ff__dev_batch *b) {
  if (!b) return;
  if (b->pending) ff__dev_batch_wait(b, NULL, NULL);
  ff__device_host_free(b->dev, b->images);
  ff__device_host_free(b->dev, b->meta);
  ff__device_event_destroy(b->dev, b->start);
  ff__device_event_destroy(b->dev, b->end);
  ff__device_event_destroy(b->dev, b->uploaded);
  free(b->samples);
  free(b->packed), free(b->rows);
  free(b);
}

ff_status ff__dev_batch_begin(ff__dev_batch *b, const ff__pipeline *pipe, ff__error *err) {
  if (b->pending)
    return ff__error_set(err, FF_EINVAL, "device microbatch begun before its last one was waited for");
  b->pipe = pipe, b->n = 0, b->images_bytes = 0;
  return FF_OK;
}

int ff__dev_batch_count(const ff__dev_batch *b) { return b->n; }

/* Makes *buf (pinned, *cap bytes) hold at least need bytes, keeping the
 * first keep bytes. */
static ff_status grow_pinned(ff__device *dev, uint8_t **buf, size_t *cap, size_t need, size_t keep,
                             ff__error *err) {
  if (need <= *cap) return FF_OK;
  size_t c = *cap ? *cap : 1 << 20;
  while (c < need)
    c *= 2;
  void *p;
  ff_status st = ff__device_host_alloc(dev, c, &p, err);
  if (st) return st;
  if (keep) memcpy(p, *buf, keep);
  ff__device_host_free(dev, *buf);
  *buf = p, *cap = c;
  return FF_OK;
}

/* A new sample record (lowered and measured), not counted yet. */
static ff_status new_sample(ff__dev_batch *b, int width, int height, const ff__plan *plan, int slot,
                            sample **out, ff__error *err) {
  if (b->n == b->cap) {
    int cap = b->cap ? 2 * b->cap : 16;
    sample *s = realloc(b->samples, (size_t)cap * sizeof *s);
    if (!s) return ff__error_set(err, FF_ENOMEM, "out of memory for a device microbatch");
    b->samples = s, b->cap = cap;
  }
  sample *s = &b->samples[b->n];
  memset(s, 0, sizeof *s);
  s->plan = *plan, s->width = width, s->height = height, s->slot = slot;
  walk w = {.s = s};
  lower(&w, b->pipe, 0, 0, 0);
  if (w.cur.width != b->pipe->out_width || w.cur.height != b->pipe->out_height)
    return ff__error_set(err, FF_EINTERNAL, "device: the plan gives %dx%d instead of %dx%d", w.cur.width,
                         w.cur.height, b->pipe->out_width, b->pipe->out_height);
  s->num_stages = w.num_stages, s->aux_bytes = ALIGN(w.aux_off, 256);
  *out = s;
  return FF_OK;
}

ff_status ff__dev_batch_add_device(ff__dev_batch *b, const void *d_image, int width, int height, size_t pitch_bytes,
                                   const ff__plan *plan, int slot, ff__error *err) {
  sample *s;
  ff_status st = new_sample(b, width, height, plan, slot, &s, err);
  if (st) return st;
  s->d_image = (uint64_t)(uintptr_t)d_image, s->d_pitch = pitch_bytes;
  b->n++;
  return FF_OK;
}

ff_status ff__dev_batch_add(ff__dev_batch *b, const ff__image *img, const ff__plan *plan, int slot,
                            ff__error *err) {
  if (img->channels != 3)
    return ff__error_set(err, FF_EINVAL, "device: %d-channel image (RGB expected)", img->channels);
  sample *s;
  ff_status st = new_sample(b, img->width, img->height, plan, slot, &s, err);
  if (st) return st;
  size_t row = (size_t)img->width * 3, bytes = row * img->height;
  s->image_off = b->images_bytes;
  st = grow_pinned(b->dev, &b->images, &b->images_cap, s->image_off + bytes, b->images_bytes, err);
  if (st) return st;
  for (int y = 0; y < img->height; y++)
    memcpy(b->images + s->image_off + y * row, img->data + y * img->stride, row);
  b->images_bytes = ALIGN(s->image_off + bytes, 256);
  b->n++;
  return FF_OK;
}

void ff__dev_batch_sample(ff__dev_batch *b, int i, ff__image *img, const ff__plan **plan, int *slot) {
  const sample *s = &b->samples[i];
  *img = (ff__image){s->d_image ? NULL : b->images + s->image_off, s->width, s->height, 3, (size_t)s->width * 3};
  *plan = &s->plan, *slot = s->slot;
}

/* The microbatch's layout: stride (stages per sample), meta bytes (table,
 * output table, aux), arena bytes; sets each sample's offsets. */
static void layout(ff__dev_batch *b, int *stride, size_t *meta_bytes, size_t *arena_bytes) {
  int k = 0;
  for (int i = 0; i < b->n; i++)
    if (b->samples[i].num_stages > k) k = b->samples[i].num_stages;
  size_t off = ALIGN((size_t)b->n * k * sizeof(ff__dstage), 256) + ALIGN(3 * 256 * sizeof(float), 256);
  size_t arena = 0;
  for (int i = 0; i < b->n; i++) {
    sample *s = &b->samples[i];
    s->aux_off = off, off += s->aux_bytes;
    s->arena_off = arena;
    arena += 3 * ALIGN(s->img_bytes, 256) + ALIGN(s->tmp_bytes, 256) + ALIGN(s->mix_bytes, 256);
  }
  *stride = k, *meta_bytes = off, *arena_bytes = arena;
}

size_t ff__dev_batch_device_bytes(const ff__dev_batch *b) {
  int stride;
  size_t meta, arena;
  layout((ff__dev_batch *)b, &stride, &meta, &arena);
  return b->images_bytes + meta + arena;
}

/* The profiler's name of a launch: the kind of its records (ff__dstage_kind). */
static const char *stage_name(int kind) {
  static const char *const names[] = {
      "fusionflow: -",         "fusionflow: crop",      "fusionflow: flip",      "fusionflow: resize_h",
      "fusionflow: resize_v",  "fusionflow: affine",    "fusionflow: translate", "fusionflow: color",
      "fusionflow: sharpness", "fusionflow: gray_sum",  "fusionflow: contrast",  "fusionflow: histogram",
      "fusionflow: lut_build", "fusionflow: lut_apply", "fusionflow: mix_scale", "fusionflow: mix_add",
      "fusionflow: mix_trunc", "fusionflow: batch_mix", "fusionflow: out_u8",    "fusionflow: out_f32",   "fusionflow: out_fmt",
      "fusionflow: pil_warp",  "fusionflow: pil_color", "fusionflow: pil_sharpness", "fusionflow: pil_luma_sum",
      "fusionflow: pil_lut_build", "fusionflow: pil_blend", "fusionflow: pil_hue", "fusionflow: pil_box_h",
      "fusionflow: pil_box_v", "fusionflow: hue",
      "fusionflow: erase"};
  _Static_assert(sizeof names / sizeof *names == FF__DS_KINDS, "a name per stage kind");
  return kind >= 0 && kind < FF__DS_KINDS ? names[kind] : "fusionflow: stage";
}

ff_status ff__dev_batch_submit(ff__dev_batch *b, ff__dstream *s, void *d_out, ff__error *err) {
  return ff__dev_batch_submit_on(b, s, s, NULL, 0, d_out, err);
}

ff_status ff__dev_batch_submit_on(ff__dev_batch *b, ff__dstream *up, ff__dstream *s, ff__devent *const *waits,
                                  int num_waits, void *d_out, ff__error *err) {
  if (b->pending) return ff__error_set(err, FF_EINVAL, "device microbatch submitted twice");
  if (!b->n) return FF_OK;
  int stride;
  size_t meta_bytes, arena_bytes;
  layout(b, &stride, &meta_bytes, &arena_bytes);
  ff_status st = grow_pinned(b->dev, &b->meta, &b->meta_cap, meta_bytes, 0, err);
  if (!st && stride > b->packed_cap) {
    int *pk = realloc(b->packed, (size_t)stride * sizeof *pk);
    if (!pk)
      st = ff__error_set(err, FF_ENOMEM, "out of memory for a device microbatch");
    else
      b->packed = pk, b->packed_cap = stride;
  }
  if (!st && (size_t)b->n * stride > b->rows_cap) {
    ff__dstage *r = realloc(b->rows, (size_t)b->n * stride * sizeof *r);
    if (!r)
      st = ff__error_set(err, FF_ENOMEM, "out of memory for a device microbatch");
    else
      b->rows = r, b->rows_cap = (size_t)b->n * stride;
  }
  if (!st) st = ff__device_alloc(b->dev, b->images_bytes + meta_bytes, &b->d_blob, err);
  if (!st && arena_bytes) st = ff__device_alloc(b->dev, arena_bytes, &b->d_arena, err);
  if (st) {
    release_device_memory(b);
    return st;
  }

  uint64_t blob = (uint64_t)(uintptr_t)b->d_blob, meta = blob + b->images_bytes;
  uint64_t lut_addr = meta + ALIGN((size_t)b->n * stride * sizeof(ff__dstage), 256);
  memset(b->meta, 0, meta_bytes);
  _Static_assert(sizeof b->pipe->lut == sizeof b->pipe->out_table, "one output table region");
  memcpy(b->meta + (lut_addr - meta), b->pipe->out_custom ? (const void *)b->pipe->out_table : b->pipe->lut,
         sizeof b->pipe->lut);
  memset(b->rows, 0, (size_t)b->n * stride * sizeof *b->rows);
  for (int i = 0; i < b->n; i++) {
    sample *sm = &b->samples[i];
    walk w = {.s = sm,
              .emit = 1,
              .row = b->rows + (size_t)i * stride,
              .aux_host = b->meta + sm->aux_off,
              .aux_addr = meta + sm->aux_off,
              .arena_addr = (uint64_t)(uintptr_t)b->d_arena + sm->arena_off};
    lower(&w, b->pipe, sm->d_image ? sm->d_image : blob + sm->image_off, (uint64_t)(uintptr_t)d_out, lut_addr);
  }
  /* stage index k's records from k * n on, grouped by kind (a launch per kind), the empty ones left out */
  ff__dstage *table = (ff__dstage *)b->meta;
  for (int k = 0; k < stride; k++) {
    int m = 0;
    for (int kind = FF__DS_NONE + 1; kind < FF__DS_KINDS; kind++)
      for (int i = 0; i < b->n; i++) {
        const ff__dstage *r = &b->rows[(size_t)i * stride + k];
        if (r->kind == kind && r->count) table[(size_t)k * b->n + m++] = *r;
      }
    b->packed[k] = m;
  }

  ff__device_range_push(b->dev, "fusionflow: microbatch (upload, stages)");
  st = ff__device_upload(b->dev, up, b->d_blob, b->images, b->images_bytes, err);
  if (!st)
    st = ff__device_upload(b->dev, up, (uint8_t *)b->d_blob + b->images_bytes, b->meta, meta_bytes, err);
  if (!st && up != s) st = ff__device_event_record(b->dev, b->uploaded, up, err);
  if (!st && up != s) st = ff__device_stream_wait(b->dev, s, b->uploaded, err);
  for (int i = 0; i < num_waits && !st; i++)
    if (waits[i]) st = ff__device_stream_wait(b->dev, s, waits[i], err);
  if (!st) st = ff__device_event_record(b->dev, b->start, s, err); /* device time: the stages alone */
  for (int k = 0; k < stride && !st; k++) {
    const ff__dstage *rec = table + (size_t)k * b->n;
    for (int r = 0; r < b->packed[k] && !st;) { /* a launch per run of one kind */
      int first = r, kind = rec[r].kind;
      uint32_t max_count = 0;
      for (; r < b->packed[k] && rec[r].kind == kind; r++)
        if (rec[r].count > max_count) max_count = rec[r].count;
      ff__device_range_push(b->dev, stage_name(kind));
      st = ff__device_launch_stages(b->dev, s,
                                    (uint8_t *)b->d_blob + b->images_bytes + ((size_t)k * b->n + first) * sizeof(ff__dstage),
                                    r - first, kind, max_count, err);
      ff__device_range_pop(b->dev);
    }
  }
  if (!st) st = ff__device_event_record(b->dev, b->end, s, err);
  ff__device_range_pop(b->dev);
  if (st) { /* what was queued must finish before its memory goes back */
    ff__device_synchronize(b->dev);
    release_device_memory(b);
    return st;
  }
  b->pending = 1;
  return FF_OK;
}

ff_status ff__dev_batch_query(ff__dev_batch *b, int *done, ff__error *err) {
  if (!b->pending) {
    *done = 1;
    return FF_OK;
  }
  ff_status st = ff__device_event_query(b->dev, b->end, done, err);
  if (st || *done) release_device_memory(b);
  return st;
}

ff_status ff__dev_batch_wait(ff__dev_batch *b, float *device_ms, ff__error *err) {
  if (!b->pending) return FF_OK;
  ff_status st = ff__device_event_wait(b->dev, b->end, err);
  if (!st && device_ms) st = ff__device_event_elapsed_ms(b->dev, b->start, b->end, device_ms, err);
  release_device_memory(b);
  return st;
}

ff__devent *ff__dev_batch_done_event(ff__dev_batch *b) { return b->end; }
