/* resize.c — torchvision's resize of an HWC uint8 image (spec 5.3, the
 * arithmetic of kernels/resize.h: float32 as v1 does it, or torch's uint8
 * fixed point as v2 does it), with a horizontal flip folded in (the
 * horizontal taps taken in reverse order: each output value's operations
 * are unchanged), into interleaved rows or into three planes.
 *
 * The scalar path is the reference: the horizontal pass over every input
 * row an output row reads, then the vertical pass, value by value. The
 * vector paths (resize_simd.h) run the float32 arithmetic of RGB images:
 * each input row becomes three float planes, its horizontal pass runs a
 * block of output pixels per vector (each lane its own taps, read out of
 * the block's window by permutes) into a ring of planar rows, and each
 * output row's vertical pass runs as soon as the rows it reads are in the
 * ring, while they are in the first-level cache. They give the scalar
 * path's bytes (tests/unit/test_resize_paths.c, at every $FF_CPU_ISA). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/pixel.h"
#include "kernels/resize.h"
#include "ops/ops.h"
#include "ops/resize_simd.h"

#define ALIGN64(p) ((void *)(((uintptr_t)(p) + 63) & ~(uintptr_t)63))

/* Where the output goes: interleaved rows (rows, stride) or three planes of
 * out_w x out_h (planes). */
typedef struct dest {
  uint8_t *rows;
  size_t stride;
  uint8_t *planes;
} dest;

/* Output row r, as three planes of w values, to d. */
static void deliver(const dest *d, int w, int h, int r, uint8_t *const row[3]) {
  if (d->planes) {
    for (int c = 0; c < 3; c++)
      if (row[c] != d->planes + ((size_t)c * h + r) * w) memcpy(d->planes + ((size_t)c * h + r) * w, row[c], (size_t)w);
  } else {
    uint8_t *dst = d->rows + (size_t)r * d->stride;
#ifdef FF__RESIZE_SIMD
    if (ff__cpu_avx512() && __builtin_cpu_supports("avx512vbmi")) {
      const uint8_t *const in[3] = {row[0], row[1], row[2]};
      ff__resize_interleave_avx512(in, w, dst);
      return;
    }
#endif
    for (int p = 0; p < w; p++) dst[3 * p] = row[0][p], dst[3 * p + 1] = row[1][p], dst[3 * p + 2] = row[2][p];
  }
}

/* The vector path this CPU takes: 2 AVX-512, 1 AVX2, 0 none. */
static int vector_level(void) {
#ifdef FF__RESIZE_SIMD
  if (ff__cpu_avx512()) return 2;
  if (ff__cpu_avx2()) return 1;
#endif
  return 0;
}

/* The input rows output row r reads: [*lo, *hi]. */
static void taps_span(const ff__resize_axis *a, int r, int *lo, int *hi) {
  const int *idx = a->idx + (size_t)r * a->max_taps;
  *lo = *hi = idx[0];
  for (int t = 1; t < a->count[r]; t++) {
    *lo = idx[t] < *lo ? idx[t] : *lo;
    *hi = idx[t] > *hi ? idx[t] : *hi;
  }
}

/* The reference: the horizontal pass of rows y0 .. y1 into tmp (float32,
 * or uint8 for the fixed point), then the vertical pass. */
static ff_status resize_scalar(const ff__image *src, const ff__resize_axis *ax, ff__resize_axis *ay, int out_w,
                               int out_h, int hflip, ff__op_scratch *s, const dest *d) {
  int c = src->channels, y0 = src->height, y1 = -1, fixed = ax->precision > 0;
  for (int r = 0; r < out_h; r++) {
    int lo, hi;
    taps_span(ay, r, &lo, &hi);
    y0 = lo < y0 ? lo : y0, y1 = hi > y1 ? hi : y1;
  }
  if (y1 < y0) return FF_OK;
  size_t row_elems = (size_t)out_w * c, elem = fixed ? 1 : sizeof(float), rows = (size_t)(y1 - y0 + 1);
  char *tmp = ff__buf_reserve(&s->floats, rows * row_elems * elem + row_elems);
  if (!tmp) return FF_ENOMEM;
  uint8_t *out = (uint8_t *)tmp + rows * row_elems * elem; /* one output row, channel after channel */
  for (int y = y0; y <= y1; y++) {
    const uint8_t *in = src->data + (size_t)y * src->stride;
    for (int o = 0; o < out_w; o++) {
      const int *idx = ax->idx + (size_t)o * ax->max_taps;
      const float *w = ax->w + (size_t)o * ax->max_taps;
      int n = ax->count[o], plain = ff__resize_plain_taps(ax->rule, n);
      size_t at = (size_t)(y - y0) * row_elems + (size_t)o * c;
      for (int ch = 0; ch < c; ch++)
        if (fixed) ((uint8_t *)tmp)[at + ch] = ff__resize_taps_fixed(in + ch, c, idx, w, n, ax->precision);
        else ((float *)tmp)[at + ch] = ff__resize_taps_sum_u8(in + ch, c, idx, w, n, plain);
    }
  }
  for (size_t i = 0; i < (size_t)out_h * ay->max_taps; i++) ay->idx[i] -= y0; /* rows of tmp */
  for (int r = 0; r < out_h; r++) {
    const int *idx = ay->idx + (size_t)r * ay->max_taps;
    const float *w = ay->w + (size_t)r * ay->max_taps;
    int n = ay->count[r], plain = ff__resize_plain_taps(ay->rule, n);
    for (int p = 0; p < out_w; p++) {
      size_t at = (size_t)(hflip ? out_w - 1 - p : p) * c;
      for (int ch = 0; ch < c; ch++)
        out[(size_t)ch * out_w + p] =
            fixed ? ff__resize_taps_fixed((const uint8_t *)tmp + at + ch, row_elems, idx, w, n, ay->precision)
                  : ff__round_u8(ff__resize_taps_sum((const float *)tmp + at + ch, row_elems, idx, w, n, plain));
    }
    if (c == 3) {
      uint8_t *row[3] = {out, out + out_w, out + 2 * (size_t)out_w};
      deliver(d, out_w, out_h, r, row);
    } else { /* other channel counts: interleaved rows only */
      for (int p = 0; p < out_w; p++)
        for (int ch = 0; ch < c; ch++) d->rows[(size_t)r * d->stride + (size_t)p * c + ch] = out[(size_t)ch * out_w + p];
    }
  }
  return FF_OK;
}

#ifdef FF__RESIZE_SIMD
/* Records the horizontal pass's tables need (blocks of `lanes` output
 * positions, each as many records as its longest lane has taps). */
static size_t hpass_records(const ff__resize_axis *ax, int out_w, int hflip, int lanes) {
  size_t recs = 0;
  for (int b = 0; b * lanes < out_w; b++) {
    int taps = 1;
    for (int p = b * lanes; p < (b + 1) * lanes && p < out_w; p++) {
      int n = ax->count[hflip ? out_w - 1 - p : p];
      taps = n > taps ? n : taps;
    }
    recs += (size_t)taps;
  }
  return recs;
}

static size_t hpass_bytes(int out_w, int lanes, size_t recs) {
  size_t blocks = ((size_t)out_w + lanes - 1) / lanes;
  return blocks * sizeof(ff__hblock) + recs * lanes * (sizeof(int32_t) + sizeof(float)) + recs * sizeof(uint32_t) +
         3 * 64;
}

/* The horizontal pass's tables (resize_simd.h) for output positions 0 ..
 * out_w - 1, position p taking output o = p (out_w - 1 - p with hflip) of
 * ax, in blocks of `lanes`. */
static void hpass_build(ff__hpass *h, const ff__resize_axis *ax, int out_w, int hflip, int lanes, size_t recs,
                        void *mem) {
  int mt = ax->max_taps;
  h->lanes = lanes, h->blocks = (out_w + lanes - 1) / lanes, h->out_pad = h->blocks * lanes;
  h->idx = ALIGN64(mem);
  h->w = ALIGN64(h->idx + recs * lanes);
  h->fuse = ALIGN64(h->w + recs * lanes);
  h->block = (ff__hblock *)(h->fuse + recs);
  int rec = 0;
  for (int b = 0; b < h->blocks; b++) {
    ff__hblock *k = &h->block[b];
    int o[64], n[64], plain[64], lo = -1, hi = -1, taps = 1;
    for (int l = 0; l < lanes; l++) {
      int p = b * lanes + l;
      o[l] = p < out_w ? (hflip ? out_w - 1 - p : p) : -1;
      n[l] = o[l] < 0 ? 0 : ax->count[o[l]];
      plain[l] = ff__resize_plain_taps(ax->rule, n[l]);
      taps = n[l] > taps ? n[l] : taps;
      for (int t = 0; t < n[l]; t++) {
        int x = ax->idx[(size_t)o[l] * mt + t];
        lo = lo < 0 || x < lo ? x : lo;
        hi = x > hi ? x : hi;
      }
    }
    if (lo < 0) lo = hi = 0; /* no lane reads anything (empty windows): weights 0 at the base */
    int span = hi - lo + 1;
    k->base = lo, k->taps = taps, k->rec = rec;
    if (lanes == 16) k->wide = span <= 32 ? 2 : span <= 64 ? 4 : 0;
    else k->wide = span <= 8 ? 1 : span <= 16 ? 2 : span <= 32 ? 4 : 0;
    /* uniform when no tap is plain for one lane and fused for another */
    int mixed = 0, top = 0;
    for (int t = 1; t < taps; t++) {
      int want_plain = 0, want_fused = 0;
      for (int l = 0; l < lanes; l++)
        if (t < n[l]) {
          want_plain |= t <= plain[l];
          want_fused |= t > plain[l];
        }
      mixed |= want_plain && want_fused;
      if (want_plain) top = t;
    }
    k->plain = mixed ? -1 : top;
    for (int t = 0; t < taps; t++, rec++) {
      uint32_t fuse = 0;
      for (int l = 0; l < lanes; l++) {
        int live = t < n[l];
        int x = live ? ax->idx[(size_t)o[l] * mt + t] : lo;
        h->idx[(size_t)rec * lanes + l] = k->wide ? x - lo : x;
        h->w[(size_t)rec * lanes + l] = live ? ax->w[(size_t)o[l] * mt + t] : 0.0f;
        if (!live || t > plain[l]) fuse |= 1u << l; /* a tap of weight 0 is a no-op either way */
      }
      h->fuse[rec] = fuse;
    }
  }
}

/* The vector path: float32 arithmetic of an RGB image (level 2 AVX-512, 1 AVX2). */
static ff_status resize_vector(const ff__image *src, const ff__resize_axis *ax, const ff__resize_axis *ay, int out_w,
                               int out_h, int hflip, int level, ff__op_scratch *s, void *tables, const dest *d) {
  int lanes = level == 2 ? 16 : 8, in_w = src->width;
  size_t recs = hpass_records(ax, out_w, hflip, lanes);
  ff__hpass h;
  hpass_build(&h, ax, out_w, hflip, lanes, recs, tables);
  /* the ring: the rows an output reads, one more for a row done ahead (row y in slot y % slots) */
  int slots = ay->max_taps + 2;
  int last = 0; /* the last input row any output reads */
  for (int r = 0; r < out_h; r++) {
    int lo, hi;
    taps_span(ay, r, &lo, &hi);
    last = hi > last ? hi : last;
  }
  size_t in_plane = ((size_t)in_w + FF__RESIZE_PLANE_PAD + 15) & ~(size_t)15, ring_row = (size_t)3 * h.out_pad;
  /* two input rows' planes, the ring, 3 byte rows for interleaving, each input row's slot */
  size_t floats = 6 * in_plane + (size_t)slots * ring_row + (size_t)h.out_pad;
  float *mem = ff__buf_reserve(&s->floats, floats * sizeof(float) + 64 + (size_t)src->height * sizeof(int));
  if (!mem) return FF_ENOMEM;
  float *in = ALIGN64(mem), *ring = in + 6 * in_plane;
  uint8_t *rows8 = (uint8_t *)(ring + (size_t)slots * ring_row);
  int *slot_of = (int *)(rows8 + 4 * (size_t)h.out_pad);
  for (int y = 0, k = 0; y < src->height; y++, k = k + 1 == slots ? 0 : k + 1) slot_of[y] = k;
  float *planes[6];
  const float *cin[6];
  for (int c = 0; c < 6; c++) {
    cin[c] = planes[c] = in + (size_t)c * in_plane;
    memset(planes[c] + in_w, 0, (in_plane - (size_t)in_w) * sizeof(float));
  }
  int next = 0, pairs = level == 2; /* the next input row the horizontal pass does; whether two at a time */
  for (int b = 0; b < h.blocks; b++) pairs &= h.block[b].wide == 2;
  for (int r = 0; r < out_h; r++) {
    int lo, hi, n = ay->count[r];
    taps_span(ay, r, &lo, &hi);
    if (next < lo) next = lo; /* rows no output reads */
    while (next <= hi) { /* with AVX-512 and narrow windows two rows at a time, one ahead if a later output reads it */
      int two = pairs && next + 1 <= last;
      float *out[6];
      for (int j = 0; j <= two; j++) {
        float *slot = ring + (size_t)slot_of[next + j] * ring_row;
        for (int c = 0; c < 3; c++) out[3 * j + c] = slot + (size_t)c * h.out_pad;
        const uint8_t *row = src->data + (size_t)(next + j) * src->stride;
        if (level == 2) ff__resize_planes_avx512(row, in_w, planes + 3 * j);
        else ff__resize_planes_avx2(row, in_w, planes);
      }
      if (two) ff__resize_hrow2_avx512(&h, cin, out);
      else if (level == 2) ff__resize_hrow_avx512(&h, cin, out);
      else ff__resize_hrow_avx2(&h, cin, out);
      next += 1 + two;
    }
    const float *rows[FF__RESIZE_MAX_VTAPS];
    const int *idx = ay->idx + (size_t)r * ay->max_taps;
    for (int t = 0; t < n; t++) rows[t] = ring + (size_t)slot_of[idx[t]] * ring_row;
    uint8_t *o[3];
    for (int c = 0; c < 3; c++)
      o[c] = d->planes ? d->planes + ((size_t)c * out_h + r) * out_w : rows8 + (size_t)c * h.out_pad;
    const float *w = ay->w + (size_t)r * ay->max_taps;
    int plain = ff__resize_plain_taps(ay->rule, n);
    if (level == 2) ff__resize_vrow_avx512(rows, n, w, plain, h.out_pad, out_w, o);
    else ff__resize_vrow_avx2(rows, n, w, plain, h.out_pad, out_w, o);
    deliver(d, out_w, out_h, r, o);
  }
  return FF_OK;
}
#endif

/* Resizes src (the box [lo, lo + len) of each axis, or all of it) into d. */
static ff_status resize(const ff__image *src, const double *box, int out_w, int out_h, int filter, int hflip,
                        ff__op_scratch *s, const dest *d) {
  int in_w = src->width, in_h = src->height;
  if (out_w <= 0 || out_h <= 0) return FF_OK;
  ff__resize_axis ax = {ff__resize_max_taps(in_w, out_w, filter), 0, 0, 0, 0, 0};
  ff__resize_axis ay = {ff__resize_max_taps(in_h, out_h, filter), 0, 0, 0, 0, 0};
  int level = !(filter & FF__RESIZE_UINT8) && src->channels == 3 && ay.max_taps <= FF__RESIZE_MAX_VTAPS
                  ? vector_level() : 0;
  size_t bx = ff__resize_axis_bytes(out_w, ax.max_taps), by = ff__resize_axis_bytes(out_h, ay.max_taps), bh = 0;
#ifdef FF__RESIZE_SIMD
  int lanes = level == 2 ? 16 : 8; /* the horizontal tables' records: at most max_taps per block */
  if (level) bh = hpass_bytes(out_w, lanes, (size_t)((out_w + lanes - 1) / lanes) * ax.max_taps);
#endif
  char *mem = ff__buf_reserve(&s->weights, bx + by + bh);
  if (!mem) return FF_ENOMEM;
  ff__resize_axis_place(&ax, mem, out_w);
  ff__resize_axis_place(&ay, mem + bx, out_h);
  double whole[4] = {0, 0, in_w, in_h};
  if (!box) box = whole;
  ff__resize_axis_build_box(&ax, in_w, box[0], box[2], out_w, filter);
  ff__resize_axis_build_box(&ay, in_h, box[1], box[3], out_h, filter);
#ifdef FF__RESIZE_SIMD
  if (level) return resize_vector(src, &ax, &ay, out_w, out_h, hflip, level, s, mem + bx + by, d);
#endif
  return resize_scalar(src, &ax, &ay, out_w, out_h, hflip, s, d);
}

ff_status ff__op_resize_box(const ff__image *src, const double *box, int out_w, int out_h, int filter, int hflip,
                            ff__op_scratch *s, ff__image *dst) {
  dest d = {dst->data, dst->stride, NULL};
  ff_status st = resize(src, box, out_w, out_h, filter, hflip, s, &d);
  if (!st) dst->width = out_w, dst->height = out_h, dst->channels = src->channels;
  return st;
}

ff_status ff__op_resize(const ff__image *src, int out_w, int out_h, int filter, ff__op_scratch *s, ff__image *dst) {
  return ff__op_resize_box(src, NULL, out_w, out_h, filter, 0, s, dst);
}

ff_status ff__op_resize_planar(const ff__image *src, const double *box, int out_w, int out_h, int filter, int hflip,
                               ff__op_scratch *s, uint8_t *planes) {
  dest d = {NULL, 0, planes};
  return resize(src, box, out_w, out_h, filter, hflip, s, &d);
}
