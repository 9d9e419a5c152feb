/* affine.c — the geometric ops of the automatic policies (ShearX/Y,
 * TranslateX/Y, Rotate) on interleaved RGB uint8 images, bit-exact with
 * torchvision's (transforms v1) tensor path (spec 1.3, 2.2-2.6).
 *
 * Each op becomes torchvision's inverse affine matrix, built in double in
 * Python's order (kernels/affine_setup.h, shared with the device executor),
 * then a float32 sampling grid and nearest or bilinear sampling
 * whose per-pixel arithmetic lives in kernels/affine.h (shared with the
 * device kernels). The CPU loop works row by row in chunks: a first pass
 * maps a chunk of output pixels to input positions and tap weights, a
 * second pass gathers the taps; pixels whose taps are all inside take a
 * short path, pixels whose taps are all outside take the fill, border
 * pixels the general one. In plain C the compiler vectorises the mapping;
 * with AVX2 both passes are written out for eight pixels at a time, one per
 * lane (see warp_bilinear_avx2), and nearest fuses them, copying a group
 * that maps onto consecutive source pixels whole (see nearest_row_avx2).
 * The grid cannot be stepped incrementally — f32(x*a0) is not
 * f32((x-1)*a0) + a0 — so every coordinate is computed from its formula.
 *
 * Translations by whole pixels are row copies where that gives the warp's
 * bits (ff__affine_translate_is_exact). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/affine.h"
#include "kernels/affine_setup.h"
#include "ops/augment.h"

#define CHUNK 256 /* output pixels mapped per pass */

static void translate(const ff__image *src, ff__image *dst, int tx, int ty, const uint8_t fill[3]) {
  int w = src->width, h = src->height;
  size_t row_bytes = (size_t)w * 3;
  /* columns [j0, j1) of each output row come from input columns j - tx */
  int j0 = tx > 0 ? tx : 0, j1 = tx < 0 ? w + tx : w;
  if (j1 < j0) j1 = j0 = 0;
  uint8_t *fill_row = NULL; /* a finished all-fill output row, copied to the others */
  for (int i = 0; i < h; i++) {
    uint8_t *out = dst->data + (size_t)i * dst->stride;
    int si = i - ty;
    if (si < 0 || si >= h || j0 == j1) {
      if (fill_row) {
        memcpy(out, fill_row, row_bytes);
        continue;
      }
      for (int j = 0; j < w; j++)
        memcpy(out + (size_t)j * 3, fill, 3);
      fill_row = out;
      continue;
    }
    for (int j = 0; j < j0; j++)
      memcpy(out + (size_t)j * 3, fill, 3);
    memcpy(out + (size_t)j0 * 3, src->data + (size_t)si * src->stride + (size_t)(j0 - tx) * 3,
           (size_t)(j1 - j0) * 3);
    for (int j = j1; j < w; j++)
      memcpy(out + (size_t)j * 3, fill, 3);
  }
}

/* ------------------------------------------------------------ the warp */

/* Tap positions and weights of one chunk, one array per field (so that the
 * mapping pass vectorises). */
typedef struct chunk_taps {
  const int *x0, *y0;
  const float *nw, *ne, *sw, *se;
  const uint8_t *fill_u8; /* the output of a pixel with all four taps outside */
} chunk_taps;

static inline ff__affine_taps taps_at(const chunk_taps *t, int k) {
  ff__affine_taps tk = {t->x0[k], t->y0[k], t->nw[k], t->ne[k], t->sw[k], t->se[k]};
  return tk;
}

/* Bilinear output of pixel k of a chunk; fill: NULL for black, blended in
 * v2's way when v2. */
static inline __attribute__((always_inline)) void bilinear_px(const ff__image *src, const chunk_taps *t,
                                                              int k, const float *fill, int v2, uint8_t *o) {
  int w = src->width, h = src->height;
  size_t stride = src->stride;
  ff__affine_taps tk = taps_at(t, k);
  if ((unsigned)tk.x0 < (unsigned)(w - 1) && (unsigned)tk.y0 < (unsigned)(h - 1)) {
    /* all four taps inside */
    const uint8_t *p = src->data + (size_t)tk.y0 * stride + (size_t)tk.x0 * 3;
    const uint8_t *q = p + stride;
    float mask = fill ? ff__affine_blend4(1.0f, 1.0f, 1.0f, 1.0f, &tk) : 1.0f;
    for (int c = 0; c < 3; c++) {
      float val = ff__affine_blend4((float)p[c], (float)p[c + 3], (float)q[c], (float)q[c + 3], &tk);
      if (fill) val = ff__affine_fill_blend(val, mask, fill[c], v2);
      o[c] = ff__round_u8(val);
    }
  } else if (tk.x0 < -1 || tk.x0 >= w || tk.y0 < -1 || tk.y0 >= h) {
    /* all four taps outside: every tap and the mask are 0, so the value is
     * f32(0*0 + 1*fill) = fill (or 0 without fill), rounded */
    o[0] = t->fill_u8[0], o[1] = t->fill_u8[1], o[2] = t->fill_u8[2];
  } else {
    ff__affine_bilinear(src->data, stride, w, h, &tk, fill, v2, o);
  }
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>
#define HAVE_AVX2_PATH 1
#define AVX2 __attribute__((target("avx2,fma")))

/* The AVX2/FMA path runs the same two passes eight pixels at a time, one
 * pixel per lane, with the same float32 operations in the same order as
 * map_taps and bilinear_px — one rounding each, vfmadd for ff__fma_f32,
 * cvtps2dq rounding to nearest even as rintf — so the same bits. It works
 * on bands of CHUNK columns, whose products x*a0, x*b0 are the same on
 * every row. The passes stay apart: fused, each group's long chain
 * (mapping, offsets, loads, blend) left too little to overlap. */

/* One band's columns and one row's taps, as both passes see them (whole
 * groups of eight). */
typedef struct chunk8 {
  float xa[CHUNK], xb[CHUNK]; /* f32(x*a0), f32(x*b0) of each column */
  int x0[CHUNK], y0[CHUNK];
  float nw[CHUNK], ne[CHUNK], sw[CHUNK], se[CHUNK];
  int off[CHUNK]; /* y0 * stride + x0 * 3: the NW tap's byte offset */
} chunk8;

/* ff__affine_coord for eight pixels. */
AVX2 static inline __m256 coord8(__m256 prod, __m256 ry, __m256 rs, __m256 off, __m256 half) {
  __m256 g = _mm256_add_ps(_mm256_fmadd_ps(ry, rs, prod), off);
  return _mm256_fmadd_ps(_mm256_add_ps(g, _mm256_set1_ps(1.0f)), half, _mm256_set1_ps(-0.5f));
}

/* One axis of map_taps for eight pixels: the coordinate's floor and the
 * distance to it. Without ff__affine_clamp: it changes no coordinate in
 * [-2, size + 1], and a pixel beyond has all its taps outside either way
 * (cvttps2dq gives INT_MIN for NaN and for what does not fit, outside
 * too), so its output is the fill, which uses no weight. v - floor(v) is
 * ix - (float)x0 of map_taps: the floor is an integer float, signed as
 * (float)x0 since v is never -0 (an fma with addend -0.5 cannot give -0). */
AVX2 static inline void axis8(__m256 prod, __m256 ry, __m256 rs, __m256 off, __m256 half, __m256i *i0,
                              __m256 *frac) {
  __m256 v = coord8(prod, ry, rs, off, half);
  __m256 f = _mm256_floor_ps(v);
  *i0 = _mm256_cvttps_epi32(f);
  *frac = _mm256_sub_ps(v, f);
}

/* The mapping pass of row i's n pixels of the band, rounded up to whole
 * groups of eight. */
AVX2 static void map_taps_avx2(const ff__affine_grid *g, size_t src_stride, int i, int n, chunk8 *c) {
  ff__affine_row r = ff__affine_row_terms(g, i);
  const __m256 ya = _mm256_set1_ps(r.ya), sa = _mm256_set1_ps(r.sa);
  const __m256 yb = _mm256_set1_ps(r.yb), sb = _mm256_set1_ps(r.sb);
  const __m256 a2 = _mm256_set1_ps(g->a2), b2 = _mm256_set1_ps(g->b2);
  const __m256 half_w = _mm256_set1_ps(g->half_w), half_h = _mm256_set1_ps(g->half_h);
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256i stride = _mm256_set1_epi32((int)src_stride);
  for (int k = 0; k < n; k += 8) {
    __m256i x0, y0;
    __m256 wx, wy;
    axis8(_mm256_loadu_ps(c->xa + k), ya, sa, a2, half_w, &x0, &wx);
    axis8(_mm256_loadu_ps(c->xb + k), yb, sb, b2, half_h, &y0, &wy);
    __m256 ex = _mm256_sub_ps(one, wx), sy = _mm256_sub_ps(one, wy);
    _mm256_storeu_si256((__m256i *)(c->x0 + k), x0), _mm256_storeu_si256((__m256i *)(c->y0 + k), y0);
    _mm256_storeu_ps(c->nw + k, _mm256_mul_ps(sy, ex)), _mm256_storeu_ps(c->ne + k, _mm256_mul_ps(sy, wx));
    _mm256_storeu_ps(c->sw + k, _mm256_mul_ps(wy, ex)), _mm256_storeu_ps(c->se + k, _mm256_mul_ps(wy, wx));
    /* wraps for pixels outside, which never load at it */
    __m256i off =
        _mm256_add_epi32(_mm256_mullo_epi32(y0, stride), _mm256_add_epi32(x0, _mm256_add_epi32(x0, x0)));
    _mm256_storeu_si256((__m256i *)(c->off + k), off);
  }
}

/* The taps of eight pixels, one per lane, each as int32 (r, g, b, 0). */
typedef struct taps8 {
  __m256i nw, ne, sw, se;
} taps8;

/* The 8 bytes at p (a tap's three channels, its right neighbour's and 2
 * more) in every 64-bit lane: a load, no shuffle. */
AVX2 static inline __m256i bytes8_at(const uint8_t *p) {
  int64_t v;
  memcpy(&v, p, 8);
  return _mm256_set1_epi64x(v);
}

/* One row's taps (d bytes past the NW taps: 0 or stride) of pixels at any
 * offsets: the left ones in *left, the right ones in *right. Each pixel's
 * two taps are one 8-byte load, reading 2 bytes past them. */
AVX2 static inline void row_taps8(const uint8_t *data, const int *off, size_t d, __m256i *left,
                                  __m256i *right) {
  /* the 8 bytes of pixels 0, 1 | 4, 5 and of 2, 3 | 6, 7 */
  __m256i a = _mm256_blend_epi32(
      _mm256_blend_epi32(bytes8_at(data + off[0] + d), bytes8_at(data + off[1] + d), 0x0c),
      _mm256_blend_epi32(bytes8_at(data + off[4] + d), bytes8_at(data + off[5] + d), 0xc0), 0xf0);
  __m256i b = _mm256_blend_epi32(
      _mm256_blend_epi32(bytes8_at(data + off[2] + d), bytes8_at(data + off[3] + d), 0x0c),
      _mm256_blend_epi32(bytes8_at(data + off[6] + d), bytes8_at(data + off[7] + d), 0xc0), 0xf0);
  /* bytes 0-2 (left) or 3-5 (right) of each pixel's 8 to its lane: from a
   * lanes 0, 1 of each half, from b lanes 2, 3 */
#define PICK(x, y, z, t)                                                                                     \
  _mm256_setr_epi8(x, x + 1, x + 2, -1, y, y + 1, y + 2, -1, z, z + 1, z + 2, -1, t, t + 1, t + 2, -1, x,    \
                   x + 1, x + 2, -1, y, y + 1, y + 2, -1, z, z + 1, z + 2, -1, t, t + 1, t + 2, -1)
#define NO -64 /* negative up to NO + 2: zero bytes */
  *left =
      _mm256_or_si256(_mm256_shuffle_epi8(a, PICK(0, 8, NO, NO)), _mm256_shuffle_epi8(b, PICK(NO, NO, 0, 8)));
  *right = _mm256_or_si256(_mm256_shuffle_epi8(a, PICK(3, 11, NO, NO)),
                           _mm256_shuffle_epi8(b, PICK(NO, NO, 3, 11)));
#undef NO
#undef PICK
}

/* The taps of the eight pixels at off (NW tap byte offsets), all inside
 * and not in the last two rows, since the loads read up to 2 bytes past
 * the lower taps. Where pixels 0-3 and 4-7 each lie 3 bytes apart (the
 * common case under small shears and rotations) each row of each half is
 * one 16-byte load; otherwise every pixel's rows are loaded apart. */
AVX2 static inline taps8 load_taps8(const uint8_t *data, size_t stride, const int *off) {
  taps8 t;
  __m256i run =
      _mm256_sub_epi32(_mm256_loadu_si256((const __m256i *)off), _mm256_setr_epi32(0, 3, 6, 9, 0, 3, 6, 9));
  if (_mm256_movemask_epi8(_mm256_cmpeq_epi32(run, _mm256_shuffle_epi32(run, 0))) == -1) {
    const uint8_t *p = data + off[0], *q = data + off[4];
    __m256i top = _mm256_loadu2_m128i((const __m128i *)q, (const __m128i *)p);
    __m256i bottom = _mm256_loadu2_m128i((const __m128i *)(q + stride), (const __m128i *)(p + stride));
    /* bytes x + 3j .. x + 3j + 2 to lane j of each half */
#define RUN(x)                                                                                               \
  _mm256_setr_epi8(x, x + 1, x + 2, -1, x + 3, x + 4, x + 5, -1, x + 6, x + 7, x + 8, -1, x + 9, x + 10,     \
                   x + 11, -1, x, x + 1, x + 2, -1, x + 3, x + 4, x + 5, -1, x + 6, x + 7, x + 8, -1, x + 9, \
                   x + 10, x + 11, -1)
    t.nw = _mm256_shuffle_epi8(top, RUN(0)), t.ne = _mm256_shuffle_epi8(top, RUN(3));
    t.sw = _mm256_shuffle_epi8(bottom, RUN(0)), t.se = _mm256_shuffle_epi8(bottom, RUN(3));
#undef RUN
    return t;
  }
  row_taps8(data, off, 0, &t.nw, &t.ne);
  row_taps8(data, off, stride, &t.sw, &t.se);
  return t;
}

/* Channel ch of taps (r, g, b, 0) as float. */
AVX2 static inline __m256 channel8(__m256i taps, int ch) {
  __m256i v = ch ? _mm256_srli_epi32(taps, 8 * ch) : taps;
  return _mm256_cvtepi32_ps(ch < 2 ? _mm256_and_si256(v, _mm256_set1_epi32(0xff)) : v);
}

/* Eight pixels as int32 lanes (r, g, b, any) → their 24 bytes, in the low
 * 24 of the 32. */
AVX2 static inline __m256i pack24(__m256i rgbx) {
  const __m256i drop_spare = _mm256_setr_epi8(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1, 0, 1, 2,
                                              4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1);
  return _mm256_permutevar8x32_epi32(_mm256_shuffle_epi8(rgbx, drop_spare),
                                     _mm256_setr_epi32(0, 1, 2, 4, 5, 6, 3, 7));
}

/* Stores the 24 bytes of pack24 at o and, when room, 8 more (rewritten by
 * the pixels that follow). */
AVX2 static inline void put24(uint8_t *o, __m256i b, int room) {
  if (room) {
    _mm256_storeu_si256((__m256i *)o, b);
  } else {
    _mm_storeu_si128((__m128i *)o, _mm256_castsi256_si128(b));
    _mm_storel_epi64((__m128i *)(o + 16), _mm256_extracti128_si256(b, 1));
  }
}

/* The outputs of the row's pixels k .. k+7 from their taps: 24 bytes at o
 * and, when room, 8 more (rewritten by the pixels that follow). */
AVX2 static inline void blend8(taps8 t, const chunk8 *c, int k, const float *fill, int v2, uint8_t *o,
                               int room) {
  __m256 wnw = _mm256_loadu_ps(c->nw + k), wne = _mm256_loadu_ps(c->ne + k);
  __m256 wsw = _mm256_loadu_ps(c->sw + k), wse = _mm256_loadu_ps(c->se + k);
  const __m256 one = _mm256_set1_ps(1.0f);
  __m256 mask = _mm256_fmadd_ps(one, wse, _mm256_fmadd_ps(one, wsw, _mm256_fmadd_ps(one, wne, wnw)));
  __m256i rgb = _mm256_setzero_si256();
  for (int ch = 0; ch < 3; ch++) {
    __m256 val = _mm256_fmadd_ps(
        channel8(t.se, ch), wse,
        _mm256_fmadd_ps(channel8(t.sw, ch), wsw,
                        _mm256_fmadd_ps(channel8(t.ne, ch), wne, _mm256_mul_ps(channel8(t.nw, ch), wnw))));
    /* without fill the value needs no clamp: taps in [0, 255] under
     * weights >= 0 summing to 1 within a few ulps give [0, 255.5) */
    if (fill) {
      __m256 f = _mm256_set1_ps(fill[ch]); /* ff__affine_fill_blend */
      val = v2 ? _mm256_add_ps(_mm256_mul_ps(_mm256_sub_ps(val, f), mask), f)
               : _mm256_add_ps(_mm256_mul_ps(val, mask), _mm256_mul_ps(_mm256_sub_ps(one, mask), f));
      val = _mm256_min_ps(_mm256_max_ps(val, _mm256_setzero_ps()), _mm256_set1_ps(255.0f));
    }
    rgb = _mm256_or_si256(rgb, _mm256_slli_epi32(_mm256_cvtps_epi32(val), 8 * ch));
  }
  put24(o, pack24(rgb), room);
}

/* A group of eight pixels that is not all inside (out of line, leaving
 * the loop over the others small): the fill for the pixels whose taps are
 * all outside (what the sampling gives there, see bilinear_px), blend8
 * for those inside (the others loading harmless bytes at offset 0 first),
 * the scalar pixel for the rest. */
__attribute__((noinline)) AVX2 static void border8(const ff__image *src, const chunk8 *c, const chunk_taps *t,
                                                   int k, const float *fill, int v2, uint8_t *o, int room) {
  int w = src->width, h = src->height;
  const __m256i minus1 = _mm256_set1_epi32(-1), last_x = _mm256_set1_epi32(w - 1);
  __m256i x0 = _mm256_loadu_si256((const __m256i *)(c->x0 + k));
  __m256i y0 = _mm256_loadu_si256((const __m256i *)(c->y0 + k));
  /* all outside: x0 < -1, x0 >= w, y0 < -1 or y0 >= h */
  __m256i out = _mm256_or_si256(
      _mm256_or_si256(_mm256_cmpgt_epi32(minus1, x0), _mm256_cmpgt_epi32(x0, last_x)),
      _mm256_or_si256(_mm256_cmpgt_epi32(minus1, y0), _mm256_cmpgt_epi32(y0, _mm256_set1_epi32(h - 1))));
  unsigned out_bits = (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(out));
  if (out_bits == 0xff) {
    for (int q = 0; q < 8; q++)
      memcpy(o + (size_t)q * 3, t->fill_u8, 3);
    return;
  }
  /* inside: -1 < x0 < w - 1 and -1 < y0 < h - 2 */
  __m256i in = _mm256_and_si256(
      _mm256_and_si256(_mm256_cmpgt_epi32(x0, minus1), _mm256_cmpgt_epi32(last_x, x0)),
      _mm256_and_si256(_mm256_cmpgt_epi32(y0, minus1), _mm256_cmpgt_epi32(_mm256_set1_epi32(h - 2), y0)));
  unsigned in_bits = (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(in));
  if (in_bits) {
    int off[8];
    _mm256_storeu_si256((__m256i *)off,
                        _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(c->off + k)), in));
    blend8(load_taps8(src->data, src->stride, off), c, k, fill, v2, o, room);
  }
  for (unsigned rest = out_bits; rest; rest &= rest - 1)
    memcpy(o + (size_t)__builtin_ctz(rest) * 3, t->fill_u8, 3);
  for (unsigned rest = ~(in_bits | out_bits) & 0xff; rest; rest &= rest - 1) {
    int q = __builtin_ctz(rest);
    bilinear_px(src, t, k + q, fill, v2, o + (size_t)q * 3);
  }
}

/* The gather pass of row i's n pixels of the band (`left` pixels from the
 * band's start to the row's end) in groups of eight. A group is inside —
 * all taps inside and not in the last two rows — when its first and last
 * pixels are, x0 and y0 being monotonic along a row when `monotonic`.
 * The taps of the next group inside load before this one's blend, so that
 * their latency overlaps it. */
AVX2 static void gather_bilinear_avx2(const ff__image *src, const chunk8 *c, int n, int left, int monotonic,
                                      const float *fill, int v2, const uint8_t fill_u8[3], uint8_t *out) {
  chunk_taps t = {c->x0, c->y0, c->nw, c->ne, c->sw, c->se, fill_u8};
  /* inside: 0 <= x0 < in_x and 0 <= y0 < in_y */
  unsigned in_x = (unsigned)(src->width - 1), in_y = src->height > 2 ? (unsigned)(src->height - 2) : 0;
#define INSIDE(k)                                                                                            \
  (monotonic && (unsigned)c->x0[k] < in_x && (unsigned)c->x0[k + 7] < in_x && (unsigned)c->y0[k] < in_y &&   \
   (unsigned)c->y0[k + 7] < in_y)
  int k = 0;
  while (k + 8 <= n) {
    if (!INSIDE(k)) {
      border8(src, c, &t, k, fill, v2, out + (size_t)k * 3, k + 11 <= left);
      k += 8;
      continue;
    }
    taps8 cur = load_taps8(src->data, src->stride, c->off + k);
    for (;;) {
      int more = k + 16 <= n && INSIDE(k + 8);
      taps8 next = cur;
      if (more) next = load_taps8(src->data, src->stride, c->off + k + 8);
      blend8(cur, c, k, fill, v2, out + (size_t)k * 3, k + 11 <= left);
      k += 8;
      if (!more) break;
      cur = next;
    }
  }
#undef INSIDE
  for (; k < n; k++)
    bilinear_px(src, &t, k, fill, v2, out + (size_t)k * 3);
}

/* Whether no step of the mapping can overflow (or meet an infinity or a
 * NaN) before its last — the products and sums stay far below FLT_MAX,
 * NaN coefficients failing the test. Then each coordinate is a monotonic
 * function of the column, as each step (a product by a0 or b0, the fma
 * that adds the row's term to it, a sum, an fma by a positive half size,
 * each rounded) and the floor are. */
static int grid_is_tame(const ff__affine_grid *g, int w, int h) {
  double lim = 1e30;
  return fabs(g->a0) * w + fabs(g->a1) * h + fabs(g->a2) < lim &&
         fabs(g->b0) * w + fabs(g->b1) * h + fabs(g->b2) < lim;
}

/* f32(x*a0), f32(x*b0) of the CHUNK columns from j0 (the spare lanes of a
 * last group too). */
static void band_products(const ff__affine_grid *g, int j0, float *xa, float *xb) {
  for (int k = 0; k < CHUNK; k++) {
    float x = ff__affine_centred(j0 + k, g->half_w);
    xa[k] = x * g->a0, xb[k] = x * g->b0;
  }
}

/* The warp with AVX2/FMA; the image's bytes must fit 32-bit offsets. */
AVX2 static void warp_bilinear_avx2(const ff__affine_grid *g, const ff__image *src, ff__image *dst,
                                    const float *fill, int v2, const uint8_t fill_u8[3]) {
  int w = src->width, h = src->height;
  int monotonic = grid_is_tame(g, w, h);
  chunk8 c;
  for (int j0 = 0; j0 < w; j0 += CHUNK) {
    int n = w - j0 < CHUNK ? w - j0 : CHUNK;
    band_products(g, j0, c.xa, c.xb);
    for (int i = 0; i < h; i++) {
      map_taps_avx2(g, src->stride, i, n, &c);
      gather_bilinear_avx2(src, &c, n, w - j0, monotonic, fill, v2, fill_u8,
                           dst->data + (size_t)i * dst->stride + (size_t)j0 * 3);
    }
  }
}

/* Nearest with AVX2 maps and copies eight pixels at a time, one per lane,
 * on the same bands as the bilinear warp, with the two passes fused (its
 * per-group work is short: apart, they measured 10-30% slower). rint is
 * cvtps2dq, rounding to nearest even as rintf; ff__affine_clamp is left
 * out as in axis8 — beyond [-2, size + 1] the rounded coordinate is outside
 * either way, INT_MIN for NaN and for what does not fit. The mapping keeps
 * the vector units busy, so pixels go through general registers, one
 * 4-byte load and store each (AVX2 gathers and vector inserts measured
 * slower). */

/* One row's constants for map_nearest8. */
typedef struct near_row {
  __m256 ya, sa, yb, sb, a2, b2, half_w, half_h; /* ya, sa, yb, sb: ff__affine_row_terms */
  __m256i last_x, last_y, stride;
} near_row;

/* The source byte offsets of eight pixels (any for those outside) and the
 * lanes inside (all ones) in *in. */
AVX2 static inline __m256i map_nearest8(const near_row *r, const float *xa, const float *xb, __m256i *in) {
  __m256i u = _mm256_cvtps_epi32(coord8(_mm256_loadu_ps(xa), r->ya, r->sa, r->a2, r->half_w));
  __m256i v = _mm256_cvtps_epi32(coord8(_mm256_loadu_ps(xb), r->yb, r->sb, r->b2, r->half_h));
  /* (unsigned)u <= w - 1 and (unsigned)v <= h - 1 */
  *in = _mm256_and_si256(_mm256_cmpeq_epi32(_mm256_min_epu32(u, r->last_x), u),
                         _mm256_cmpeq_epi32(_mm256_min_epu32(v, r->last_y), v));
  return _mm256_add_epi32(_mm256_mullo_epi32(v, r->stride), _mm256_add_epi32(u, _mm256_add_epi32(u, u)));
}

AVX2 static inline int32_t load32(const uint8_t *p) {
  int32_t v;
  memcpy(&v, p, 4);
  return v;
}

/* The pixels at eight byte offsets as int32 lanes (r, g, b, and the byte
 * after them: each offset needs 4 readable bytes), for the groups that
 * copy8 cannot take. */
AVX2 static inline __m256i pixels8(const uint8_t *data, __m256i off) {
  int o[8];
  _mm256_storeu_si256((__m256i *)o, off);
  __m128i lo = _mm_cvtsi32_si128(load32(data + o[0]));
  __m128i hi = _mm_cvtsi32_si128(load32(data + o[4]));
  lo = _mm_insert_epi32(lo, load32(data + o[1]), 1), hi = _mm_insert_epi32(hi, load32(data + o[5]), 1);
  lo = _mm_insert_epi32(lo, load32(data + o[2]), 2), hi = _mm_insert_epi32(hi, load32(data + o[6]), 2);
  lo = _mm_insert_epi32(lo, load32(data + o[3]), 3), hi = _mm_insert_epi32(hi, load32(data + o[7]), 3);
  return _mm256_set_m128i(hi, lo);
}

/* Copies the pixels at eight byte offsets to o, one 4-byte load and store
 * each: each offset needs 4 readable bytes, o 25 writable ones (the
 * fourth byte of each store is rewritten by the next). */
AVX2 static inline void copy8(const uint8_t *data, __m256i off, uint8_t *o) {
  __m128i lo = _mm256_castsi256_si128(off), hi = _mm256_extracti128_si256(off, 1);
  uint64_t pair[4] = {(uint64_t)_mm_cvtsi128_si64(lo), (uint64_t)_mm_extract_epi64(lo, 1),
                      (uint64_t)_mm_cvtsi128_si64(hi), (uint64_t)_mm_extract_epi64(hi, 1)};
  for (int q = 0; q < 8; q++) {
    uint32_t v;
    memcpy(&v, data + (uint32_t)(pair[q / 2] >> (q % 2 * 32)), 4);
    memcpy(o + (size_t)q * 3, &v, 4);
  }
}

/* The first n of eight pixels one by one: three bytes at their offset, or
 * the fill for the lanes not in `in_bits`. For the groups whose 4-byte
 * loads could pass the image's end, and for the n < 8 pixels that end a
 * band's row. */
__attribute__((noinline)) AVX2 static void copy_lanes(const uint8_t *data, __m256i off, unsigned in_bits,
                                                      int n, const uint8_t fill[3], uint8_t *o) {
  int of[8];
  _mm256_storeu_si256((__m256i *)of, off);
  for (int q = 0; q < n; q++)
    memcpy(o + (size_t)q * 3, in_bits >> q & 1 ? data + of[q] : fill, 3);
}

/* Row i's n pixels of the band (`left` pixels from the band's start to the
 * row's end). A group mapped onto eight consecutive source pixels (most
 * groups under a small ShearX) is one 24-byte copy; one all outside, the
 * fill; one all inside, copy8; one partly inside, a blend of its pixels
 * and the fill. The image's last pixel has no fourth byte to load. */
AVX2 static void nearest_row_avx2(const ff__affine_grid *g, const ff__image *src, const float *xa,
                                  const float *xb, int i, int n, int left, const uint8_t fill[3],
                                  uint8_t *out) {
  int w = src->width, h = src->height;
  ff__affine_row t = ff__affine_row_terms(g, i);
  near_row r = {_mm256_set1_ps(t.ya),
                _mm256_set1_ps(t.sa),
                _mm256_set1_ps(t.yb),
                _mm256_set1_ps(t.sb),
                _mm256_set1_ps(g->a2),
                _mm256_set1_ps(g->b2),
                _mm256_set1_ps(g->half_w),
                _mm256_set1_ps(g->half_h),
                _mm256_set1_epi32(w - 1),
                _mm256_set1_epi32(h - 1),
                _mm256_set1_epi32((int)src->stride)};
  const __m256i last = _mm256_set1_epi32((int)((size_t)(h - 1) * src->stride) + (w - 1) * 3);
  const __m256i steps = _mm256_setr_epi32(0, 3, 6, 9, 12, 15, 18, 21);
  const __m256i fill_px = _mm256_set1_epi32(fill[0] | fill[1] << 8 | fill[2] << 16);
  const __m256i fill24 = pack24(fill_px);
  int k = 0;
  for (; k + 8 <= n; k += 8) {
    __m256i in;
    __m256i off = map_nearest8(&r, xa + k, xb + k, &in);
    unsigned in_bits = (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(in));
    uint8_t *o = out + (size_t)k * 3;
    int room = k + 11 <= left;
    if (!in_bits) {
      put24(o, fill24, room);
      continue;
    }
    __m256i run = _mm256_add_epi32(_mm256_broadcastd_epi32(_mm256_castsi256_si128(off)), steps);
    if (in_bits == 0xff && _mm256_movemask_epi8(_mm256_cmpeq_epi32(off, run)) == -1) {
      const uint8_t *p = src->data + _mm256_cvtsi256_si32(off);
      _mm_storeu_si128((__m128i *)o, _mm_loadu_si128((const __m128i *)p));
      _mm_storel_epi64((__m128i *)(o + 16), _mm_loadl_epi64((const __m128i *)(p + 16)));
      continue;
    }
    /* lanes outside load at offset 0, the last pixel's only for 1x1 */
    off = _mm256_and_si256(off, in);
    if (_mm256_movemask_epi8(_mm256_cmpeq_epi32(off, last))) {
      copy_lanes(src->data, off, in_bits, 8, fill, o);
      continue;
    }
    if (in_bits == 0xff && k + 9 <= left)
      copy8(src->data, off, o);
    else
      put24(o, pack24(_mm256_blendv_epi8(fill_px, pixels8(src->data, off), in)), room);
  }
  if (k < n) {
    __m256i in;
    __m256i off = map_nearest8(&r, xa + k, xb + k, &in);
    copy_lanes(src->data, off, (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(in)), n - k, fill,
               out + (size_t)k * 3);
  }
}

/* The nearest warp with AVX2; the image's bytes must fit 32-bit offsets. */
AVX2 static void warp_nearest_avx2(const ff__affine_grid *g, const ff__image *src, ff__image *dst,
                                   const uint8_t fill[3]) {
  int w = src->width, h = src->height;
  float xa[CHUNK], xb[CHUNK];
  for (int j0 = 0; j0 < w; j0 += CHUNK) {
    int n = w - j0 < CHUNK ? w - j0 : CHUNK;
    band_products(g, j0, xa, xb);
    for (int i = 0; i < h; i++)
      nearest_row_avx2(g, src, xa, xb, i, n, w - j0, fill,
                       dst->data + (size_t)i * dst->stride + (size_t)j0 * 3);
  }
}
#endif

/* Tap positions and weights of output pixels (i, j0 .. j0+n-1). */
static inline void map_taps(const ff__affine_grid *g, int i, int j0, int n, int w, int h, int *restrict x0,
                            int *restrict y0, float *restrict nw, float *restrict ne, float *restrict sw,
                            float *restrict se) {
  ff__affine_row r = ff__affine_row_terms(g, i);
  float a0 = g->a0, a2 = g->a2, b0 = g->b0, b2 = g->b2, hw = g->half_w, hh = g->half_h;
  for (int k = 0; k < n; k++) {
    float x = ff__affine_centred(j0 + k, hw);
    float ix = ff__affine_clamp(ff__affine_coord(x * a0, r.ya, r.sa, a2, hw), w);
    float iy = ff__affine_clamp(ff__affine_coord(x * b0, r.yb, r.sb, b2, hh), h);
    int fx = ff__affine_floor(ix), fy = ff__affine_floor(iy);
    float wx = ix - (float)fx, wy = iy - (float)fy, ex = 1.0f - wx, sy = 1.0f - wy;
    x0[k] = fx, y0[k] = fy;
    nw[k] = sy * ex, ne[k] = sy * wx, sw[k] = wy * ex, se[k] = wy * wx;
  }
}

/* fill: NULL for black, else the three fill values (blended in v2's way
 * when v2). */
FF_FMA_CLONES
static void warp_bilinear(const ff__affine_grid *g, const ff__image *src, ff__image *dst, const float *fill,
                          int v2) {
  int w = src->width, h = src->height;
  uint8_t fill_u8[3] = {0, 0, 0};
  if (fill)
    for (int c = 0; c < 3; c++) fill_u8[c] = ff__affine_fill_u8(fill[c]);
#ifdef HAVE_AVX2_PATH
  /* its tap offsets are 32-bit */
  if (ff__cpu_avx2() &&
      (size_t)h * src->stride <= INT32_MAX) {
    warp_bilinear_avx2(g, src, dst, fill, v2, fill_u8);
    return;
  }
#endif
  int x0[CHUNK], y0[CHUNK];
  float nw[CHUNK], ne[CHUNK], sw[CHUNK], se[CHUNK];
  chunk_taps t = {x0, y0, nw, ne, sw, se, fill_u8};
  for (int i = 0; i < h; i++) {
    uint8_t *out = dst->data + (size_t)i * dst->stride;
    for (int j0 = 0; j0 < w; j0 += CHUNK) {
      int n = w - j0 < CHUNK ? w - j0 : CHUNK;
      map_taps(g, i, j0, n, w, h, x0, y0, nw, ne, sw, se);
      for (int k = 0; k < n; k++)
        bilinear_px(src, &t, k, fill, v2, out + (size_t)(j0 + k) * 3);
    }
  }
}

/* Input positions of output pixels (i, j0 .. j0+n-1). */
static inline void map_chunk(const ff__affine_grid *g, int i, int j0, int n, float *ix, float *iy) {
  ff__affine_row r = ff__affine_row_terms(g, i);
  for (int k = 0; k < n; k++) {
    float x = ff__affine_centred(j0 + k, g->half_w);
    ix[k] = ff__affine_coord(x * g->a0, r.ya, r.sa, g->a2, g->half_w);
    iy[k] = ff__affine_coord(x * g->b0, r.yb, r.sb, g->b2, g->half_h);
  }
}

FF_FMA_CLONES
static void warp_nearest(const ff__affine_grid *g, const ff__image *src, ff__image *dst,
                         const uint8_t fill[3]) {
  int w = src->width, h = src->height;
#ifdef HAVE_AVX2_PATH
  /* its source offsets are 32-bit */
  if (ff__cpu_avx2() &&
      (size_t)h * src->stride <= INT32_MAX) {
    warp_nearest_avx2(g, src, dst, fill);
    return;
  }
#endif
  float ix[CHUNK], iy[CHUNK];
  int u[CHUNK], v[CHUNK];
  for (int i = 0; i < h; i++) {
    uint8_t *out = dst->data + (size_t)i * dst->stride;
    for (int j0 = 0; j0 < w; j0 += CHUNK) {
      int n = w - j0 < CHUNK ? w - j0 : CHUNK;
      map_chunk(g, i, j0, n, ix, iy);
      for (int k = 0; k < n; k++) {
        u[k] = (int)rintf(ff__affine_clamp(ix[k], w));
        v[k] = (int)rintf(ff__affine_clamp(iy[k], h));
      }
      for (int k = 0; k < n; k++) {
        const uint8_t *p = (unsigned)u[k] < (unsigned)w && (unsigned)v[k] < (unsigned)h
                               ? src->data + (size_t)v[k] * src->stride + (size_t)u[k] * 3
                               : fill;
        uint8_t *o = out + (size_t)(j0 + k) * 3;
        o[0] = p[0], o[1] = p[1], o[2] = p[2];
      }
    }
  }
}

void ff__aug_affine(const ff__aug *a, const ff__image *src, ff__image *dst) {
  int w = src->width, h = src->height;
  if (w <= 0 || h <= 0) return;
  ff__affine_setup set;
  ff__affine_setup_make(a, w, h, &set);
  if (set.translate) translate(src, dst, set.tx, set.ty, set.fill_u8);
  else if (a->bilinear) warp_bilinear(&set.grid, src, dst, a->has_fill ? a->fill : NULL, a->v2);
  else warp_nearest(&set.grid, src, dst, set.fill_u8);
}
