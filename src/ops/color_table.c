/* color_table.c — the photometric ops that are byte tables (brightness,
 * posterize, solarize, invert, autocontrast, equalize) on interleaved uint8
 * images, bit-exact with torchvision's (transforms v1) uint8 tensor path
 * (spec sections 1.1, 1.2, 2.7-2.15; the tables are built in kernels and
 * ops/lut.c). Each maps every value of a channel through a 256-entry
 * table; autocontrast and equalize derive theirs from the channel's
 * histogram. A run of consecutive table ops costs one histogram pass (only
 * when one of them needs it) and one lookup pass: the tables are composed
 * in order, and each histogram op sees the original histogram pushed
 * through the composition before it — exactly the histogram of the image it
 * would have seen run one by one, so the result is bit-identical. Without a
 * histogram op all channels share one table and the lookup runs over the
 * bytes as one flat array (32 bytes per AVX2 step, ops/lut.c; 64 per
 * AVX-512 VBMI step here). In place works: every byte is read before it is
 * written. */
#include <string.h>

#include "kernels/color.h"
#include "ops/augment.h"
#include "ops/color_rows.h"
#include "ops/lut.h"

#define MAX_CHANNELS 4

int ff__aug_is_lut(ff__aug_op op) {
  switch (op) {
  case FF__AUG_BRIGHTNESS:
  case FF__AUG_POSTERIZE:
  case FF__AUG_SOLARIZE:
  case FF__AUG_INVERT:
  case FF__AUG_AUTOCONTRAST:
  case FF__AUG_EQUALIZE: return 1;
  default: return 0;
  }
}

/* ------------------------------------------------------------ lookups */

#ifdef HAVE_VBMI_PATH
/* A whole 256-entry table fits in four zmm registers and two vpermi2b plus
 * a blend on bit 7 look up 64 bytes at once. */
typedef struct vtab {
  __m512i q[4];
} vtab;

VBMI_TARGET static inline vtab vtab_load(const uint8_t t[256]) {
  vtab v;
  for (int i = 0; i < 4; i++)
    v.q[i] = _mm512_loadu_si512((const void *)(t + 64 * i));
  return v;
}

VBMI_TARGET static inline __m512i vtab_lookup(const vtab *t, __m512i idx) {
  __m512i lo = _mm512_permutex2var_epi8(t->q[0], idx, t->q[1]);
  __m512i hi = _mm512_permutex2var_epi8(t->q[2], idx, t->q[3]);
  return _mm512_mask_blend_epi8(_mm512_movepi8_mask(idx), lo, hi);
}

VBMI_TARGET static void apply_table_vbmi(rows r, const uint8_t t[256]) {
  vtab v = vtab_load(t);
  for (size_t y = 0; y < r.count; y++) {
    const uint8_t *p = r.src + y * r.src_stride;
    uint8_t *q = r.dst + y * r.dst_stride;
    size_t k = 0;
    for (; k + 256 <= r.bytes; k += 256) {
      __m512i a = _mm512_loadu_si512((const void *)(p + k));
      __m512i b = _mm512_loadu_si512((const void *)(p + k + 64));
      __m512i c = _mm512_loadu_si512((const void *)(p + k + 128));
      __m512i d = _mm512_loadu_si512((const void *)(p + k + 192));
      _mm512_storeu_si512((void *)(q + k), vtab_lookup(&v, a));
      _mm512_storeu_si512((void *)(q + k + 64), vtab_lookup(&v, b));
      _mm512_storeu_si512((void *)(q + k + 128), vtab_lookup(&v, c));
      _mm512_storeu_si512((void *)(q + k + 192), vtab_lookup(&v, d));
    }
    for (; k < r.bytes; k += 64) {
      __mmask64 m = tail_mask(r.bytes - k);
      __m512i a = _mm512_maskz_loadu_epi8(m, p + k);
      _mm512_mask_storeu_epi8(q + k, m, vtab_lookup(&v, a));
    }
  }
}

/* One table per channel (c of them, interleaved; each row starts at
 * channel 0): every vector is looked up in each table and the lanes of
 * channel k taken from table k. */
VBMI_TARGET static void apply_tables_vbmi(const ff__image *src, const ff__image *dst, uint8_t t[][256]) {
  int c = src->channels;
  vtab v[MAX_CHANNELS];
  for (int k = 0; k < c; k++)
    v[k] = vtab_load(t[k]);
  __mmask64 lanes[MAX_CHANNELS][MAX_CHANNELS]; /* [phase][channel] */
  for (int ph = 0; ph < c; ph++)
    for (int k = 0; k < c; k++) {
      __mmask64 m = 0;
      for (int i = 0; i < 64; i++)
        if ((ph + i) % c == k) m |= (__mmask64)1 << i;
      lanes[ph][k] = m;
    }
  int step = 64 % c;
  rows rw = rows_of(src, dst); /* a row, dense or not, starts at channel 0 */
  size_t bytes = rw.bytes;
  for (size_t y = 0; y < rw.count; y++) {
    const uint8_t *p = rw.src + y * rw.src_stride;
    uint8_t *q = rw.dst + y * rw.dst_stride;
    int ph = 0;
    for (size_t k = 0; k < bytes; k += 64) {
      int full = bytes - k >= 64;
      __mmask64 m = tail_mask(bytes - k);
      __m512i a = full ? _mm512_loadu_si512((const void *)(p + k)) : _mm512_maskz_loadu_epi8(m, p + k);
      __m512i r = vtab_lookup(&v[0], a);
      for (int ch = 1; ch < c; ch++)
        r = _mm512_mask_blend_epi8(lanes[ph][ch], r, vtab_lookup(&v[ch], a));
      if (full)
        _mm512_storeu_si512((void *)(q + k), r);
      else
        _mm512_mask_storeu_epi8(q + k, m, r);
      ph += step;
      if (ph >= c) ph -= c;
    }
  }
}
#endif

/* Table lookups eight bytes at a time: one 64-bit load and store around
 * eight scalar lookups beats both a byte loop and the compiler's emulated
 * vector gathers. t[j] is the table of byte j of the word. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
static inline void lookup8(const uint8_t *p, uint8_t *q, const uint8_t *const t[8]) {
  uint64_t v, o = 0;
  memcpy(&v, p, 8);
  for (int j = 0; j < 8; j++)
    o |= (uint64_t)t[j][(v >> (8 * j)) & 0xFF] << (8 * j);
  memcpy(q, &o, 8);
}
#else
static inline void lookup8(const uint8_t *p, uint8_t *q, const uint8_t *const t[8]) {
  uint8_t o[8];
  for (int j = 0; j < 8; j++)
    o[j] = t[j][p[j]];
  memcpy(q, o, 8);
}
#endif

/* Tables of the form (v & m) ^ x — posterize, invert, and runs of them —
 * are plain byte arithmetic, which vectorises where a lookup cannot. */
static int mask_xor_form(const uint8_t t[256], uint8_t *m, uint8_t *x) {
  *x = t[0];
  *m = t[255] ^ *x;
  for (int v = 0; v < 256; v++)
    if (t[v] != ((v & *m) ^ *x)) return 0;
  return 1;
}

FF_FMA_CLONES static void apply_mask_xor(rows r, uint8_t m, uint8_t x) {
  for (size_t y = 0; y < r.count; y++) {
    const uint8_t *p = r.src + y * r.src_stride;
    uint8_t *q = r.dst + y * r.dst_stride;
    for (size_t k = 0; k < r.bytes; k++) q[k] = (uint8_t)((p[k] & m) ^ x);
  }
}

/* Solarize's table, v below k kept and the rest inverted, as a compare. */
static int solarize_form(const uint8_t t[256], int *k) {
  *k = 0;
  while (*k < 256 && t[*k] == *k) (*k)++;
  for (int v = *k; v < 256; v++)
    if (t[v] != 255 - v) return 0;
  return 1;
}

FF_FMA_CLONES static void apply_solarize(rows r, int k) {
  for (size_t y = 0; y < r.count; y++) {
    const uint8_t *p = r.src + y * r.src_stride;
    uint8_t *q = r.dst + y * r.dst_stride;
    for (size_t i = 0; i < r.bytes; i++) q[i] = p[i] < k ? p[i] : (uint8_t)(255 - p[i]);
  }
}

void ff__color_apply_table(const ff__image *src, const ff__image *dst, const uint8_t t[256]) {
  uint8_t m, x;
  int k;
  rows r = rows_of(src, dst);
  if (mask_xor_form(t, &m, &x)) {
    apply_mask_xor(r, m, x);
    return;
  }
#ifdef HAVE_VBMI_PATH
  if (have_vbmi()) { /* faster than the compare below */
    apply_table_vbmi(r, t);
    return;
  }
#endif
  if (solarize_form(t, &k)) {
    apply_solarize(r, k);
    return;
  }
  if (ff__lut_vectorised()) {
    ff__lut_rows(r.src, r.src_stride, r.dst, r.dst_stride, r.count, r.bytes, t);
    return;
  }
  const uint8_t *const same[8] = {t, t, t, t, t, t, t, t};
  for (size_t y = 0; y < r.count; y++) {
    const uint8_t *p = r.src + y * r.src_stride;
    uint8_t *q = r.dst + y * r.dst_stride;
    size_t k = 0;
    for (; k + 8 <= r.bytes; k += 8)
      lookup8(p + k, q + k, same);
    for (; k < r.bytes; k++)
      q[k] = t[p[k]];
  }
}

/* One table per channel, for interleaved pixels; for RGB, 24 bytes (eight
 * pixels, three words) at a time. */
static void apply_tables(const ff__image *src, const ff__image *dst, uint8_t t[][256]) {
  int c = src->channels;
#ifdef HAVE_VBMI_PATH
  if (have_vbmi()) {
    apply_tables_vbmi(src, dst, t);
    return;
  }
#endif
  size_t w = (size_t)src->width;
  const uint8_t *const w0[8] = {t[0], t[1], t[2], t[0], t[1], t[2], t[0], t[1]};
  const uint8_t *const w1[8] = {t[2], t[0], t[1], t[2], t[0], t[1], t[2], t[0]};
  const uint8_t *const w2[8] = {t[1], t[2], t[0], t[1], t[2], t[0], t[1], t[2]};
  for (int y = 0; y < src->height; y++) {
    const uint8_t *p = src->data + (size_t)y * src->stride;
    uint8_t *q = dst->data + (size_t)y * dst->stride;
    size_t x = 0;
    if (c == 3) {
      for (; x + 8 <= w; x += 8, p += 24, q += 24) {
        lookup8(p, q, w0);
        lookup8(p + 8, q + 8, w1);
        lookup8(p + 16, q + 16, w2);
      }
    }
    for (; x < w; x++, p += c, q += c)
      for (int k = 0; k < c; k++)
        q[k] = t[k][p[k]];
  }
}

/* Per-channel counts of each value. Two sets of counters, for even and odd
 * pixels, so that runs of equal values do not serialise on one counter. */
static void histogram(const ff__image *img, uint32_t hist[][256]) {
  int c = img->channels;
  uint32_t h2[MAX_CHANNELS][2][256];
  memset(h2, 0, sizeof h2);
  size_t w = (size_t)img->width;
  for (int y = 0; y < img->height; y++) {
    const uint8_t *p = img->data + (size_t)y * img->stride;
    size_t x = 0;
    if (c == 3) {
      for (; x + 1 < w; x += 2, p += 6) {
        h2[0][0][p[0]]++, h2[1][0][p[1]]++, h2[2][0][p[2]]++;
        h2[0][1][p[3]]++, h2[1][1][p[4]]++, h2[2][1][p[5]]++;
      }
    }
    for (; x < w; x++, p += c)
      for (int k = 0; k < c; k++)
        h2[k][0][p[k]]++;
  }
  for (int k = 0; k < c; k++)
    for (int v = 0; v < 256; v++)
      hist[k][v] = h2[k][0][v] + h2[k][1][v];
}

#ifdef HAVE_VBMI_PATH
/* Byte min/max of the first whole 192-byte blocks of p into mn[0..191],
 * mx[0..191]; returns the bytes covered. */
VBMI_TARGET static size_t minmax192_avx512(const uint8_t *p, size_t bytes, uint8_t mn[192], uint8_t mx[192]) {
  __m512i n[3], x[3];
  for (int i = 0; i < 3; i++)
    n[i] = _mm512_loadu_si512((const void *)(mn + 64 * i)), x[i] = _mm512_loadu_si512((const void *)(mx + 64 * i));
  size_t k = 0;
  for (; k + 192 <= bytes; k += 192)
    for (int i = 0; i < 3; i++) {
      __m512i v = _mm512_loadu_si512((const void *)(p + k + 64 * i));
      n[i] = _mm512_min_epu8(n[i], v), x[i] = _mm512_max_epu8(x[i], v);
    }
  for (int i = 0; i < 3; i++)
    _mm512_storeu_si512((void *)(mn + 64 * i), n[i]), _mm512_storeu_si512((void *)(mx + 64 * i), x[i]);
  return k;
}
#endif

/* Per-channel minimum and maximum: all AutoContrast needs of the histogram
 * of the image it sees first. Blocks of 64*c bytes keep lane i on channel
 * i % c, so the loop is plain byte min/max. */
FF_FMA_CLONES static void channel_minmax(const ff__image *img, uint8_t lo[], uint8_t hi[]) {
  int c = img->channels;
  rows r = rows_of(img, img); /* a row, dense or not, is whole pixels */
  size_t bytes = r.bytes, block = 64 * (size_t)c;
  uint8_t mn[64 * MAX_CHANNELS], mx[64 * MAX_CHANNELS];
  memset(mn, 0xFF, sizeof mn);
  memset(mx, 0, sizeof mx);
  for (int k = 0; k < c; k++)
    lo[k] = 0xFF, hi[k] = 0;
  for (size_t y = 0; y < r.count; y++) {
    const uint8_t *p = r.src + y * r.src_stride;
    size_t k = 0;
#ifdef HAVE_VBMI_PATH
    if (c == 3 && have_vbmi()) {
      k = minmax192_avx512(p, bytes, mn, mx);
    } else
#endif
    if (c == 3) { /* 96-byte blocks in six vector registers */
      typedef uint8_t v32 __attribute__((vector_size(32)));
      v32 n0, n1, n2, x0, x1, x2;
      memcpy(&n0, mn, 32), memcpy(&n1, mn + 32, 32), memcpy(&n2, mn + 64, 32);
      memcpy(&x0, mx, 32), memcpy(&x1, mx + 32, 32), memcpy(&x2, mx + 64, 32);
      for (; k + 96 <= bytes; k += 96) {
        v32 a, b, d;
        memcpy(&a, p + k, 32), memcpy(&b, p + k + 32, 32), memcpy(&d, p + k + 64, 32);
#define VMIN(u, v) (((u) & (v32)((u) < (v))) | ((v) & ~(v32)((u) < (v))))
#define VMAX(u, v) (((u) & (v32)((u) > (v))) | ((v) & ~(v32)((u) > (v))))
        n0 = VMIN(a, n0), n1 = VMIN(b, n1), n2 = VMIN(d, n2);
        x0 = VMAX(a, x0), x1 = VMAX(b, x1), x2 = VMAX(d, x2);
#undef VMIN
#undef VMAX
      }
      memcpy(mn, &n0, 32), memcpy(mn + 32, &n1, 32), memcpy(mn + 64, &n2, 32);
      memcpy(mx, &x0, 32), memcpy(mx + 32, &x1, 32), memcpy(mx + 64, &x2, 32);
    } else {
      for (; k + block <= bytes; k += block)
        for (size_t i = 0; i < block; i++) {
          uint8_t v = p[k + i];
          mn[i] = v < mn[i] ? v : mn[i];
          mx[i] = v > mx[i] ? v : mx[i];
        }
    }
    for (int ch = 0; k < bytes; k++) { /* k is a multiple of c */
      uint8_t v = p[k];
      lo[ch] = v < lo[ch] ? v : lo[ch];
      hi[ch] = v > hi[ch] ? v : hi[ch];
      if (++ch == c) ch = 0;
    }
  }
  for (size_t i = 0; i < block; i++) {
    int ch = (int)(i % (size_t)c);
    lo[ch] = mn[i] < lo[ch] ? mn[i] : lo[ch];
    hi[ch] = mx[i] > hi[ch] ? mx[i] : hi[ch];
  }
}

/* ------------------------------------------------------------ table ops */

static int identity(const uint8_t t[256]) {
  for (int v = 0; v < 256; v++)
    if (t[v] != v) return 0;
  return 1;
}

void ff__aug_lut_run(const ff__aug *ops, int n, const ff__image *src, ff__image *dst) {
  int c = src->channels;
  if (c < 1 || c > MAX_CHANNELS || n <= 0) {
    copy_rows(src, dst);
    return;
  }
  uint32_t hist[MAX_CHANNELS][256];
  uint64_t now[256];
  uint8_t t[256];
  int any_hist = 0;
  for (int i = 0; i < n; i++)
    any_hist |= ff__lut_needs_histogram(ops[i].op);
  if (!any_hist) { /* one table serves every channel */
    uint8_t lut[256];
    ff__lut_run_channel(ops, n, NULL, lut, now, t);
    if (identity(lut))
      copy_rows(src, dst);
    else
      ff__color_apply_table(src, dst, lut);
    return;
  }
  int only_first_ac = ops[0].op == FF__AUG_AUTOCONTRAST;
  for (int i = 1; i < n; i++)
    only_first_ac &= !ff__lut_needs_histogram(ops[i].op);
  if (only_first_ac) {
    /* The only histogram op is an AutoContrast of the original image: its
     * table depends only on which values are the smallest and largest
     * present, so a histogram with those two marks gives the same table. */
    uint8_t lo[MAX_CHANNELS], hi[MAX_CHANNELS];
    channel_minmax(src, lo, hi);
    memset(hist, 0, sizeof hist);
    for (int k = 0; k < c; k++)
      hist[k][lo[k]] = hist[k][hi[k]] = 1;
  } else {
    histogram(src, hist);
  }
  uint8_t lut[MAX_CHANNELS][256];
  int all_identity = 1;
  for (int k = 0; k < c; k++) {
    ff__lut_run_channel(ops, n, hist[k], lut[k], now, t);
    all_identity &= identity(lut[k]);
  }
  if (all_identity)
    copy_rows(src, dst);
  else
    apply_tables(src, dst, lut);
}
