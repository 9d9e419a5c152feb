/* color.c — the photometric augmentation ops of the automatic policies on
 * interleaved uint8 images, in place, bit-exact with torchvision 0.14's
 * uint8 tensor path (spec sections 1.1, 1.2, 2.7-2.15; the per-pixel
 * arithmetic lives in kernels/color.h, shared with the device kernels).
 *
 * Two families. The table ops (brightness, posterize, solarize, invert,
 * autocontrast, equalize) map each value of a channel through a 256-entry
 * table; autocontrast and equalize derive theirs from the channel's
 * histogram. A run of consecutive table ops costs one histogram pass (only
 * when one of them needs it) and one lookup pass: the tables are composed
 * in order, and each histogram op sees the original histogram pushed through
 * the composition before it — exactly the histogram of the image it would
 * have seen run one by one, so the result is bit-identical. Without a
 * histogram op all channels share one table and the lookup runs over the
 * bytes as one flat array.
 *
 * The others read more than one value per output: color (the pixel's gray),
 * contrast (the image's mean gray; after that it is a table too) and
 * sharpness (a 3x3 neighbourhood, read from a copy of the image in the
 * caller's scratch buffer). Their loops run over whole rows with the
 * neighbour offsets and channel counts as constants, so they vectorise; on
 * x86-64 they are also compiled for AVX2 (the results do not change: nothing
 * is fused, -ffp-contract=off). */
#include <string.h>

#include "kernels/color.h"
#include "kernels/pixel.h"
#include "ops/augment.h"

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

/* ------------------------------------------------------------ row helpers */

/* Rows of img as (first row, row count, bytes per row): a dense image is one
 * long row, so the flat loops below see as much work at once as possible. */
typedef struct rows {
  uint8_t *data;
  size_t count, bytes, stride;
} rows;

static rows rows_of(const ff__image *img) {
  size_t bytes = (size_t)img->width * (size_t)img->channels;
  rows r = {img->data, (size_t)img->height, bytes, img->stride};
  if (img->stride == bytes) r.bytes *= r.count, r.count = r.count ? 1 : 0;
  return r;
}

/* Table lookups eight bytes at a time: one 64-bit load and store around
 * eight scalar lookups beats both a byte loop and the compiler's emulated
 * vector gathers. t[j] is the table of byte j of the word. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
static inline void lookup8(uint8_t *p, const uint8_t *const t[8]) {
  uint64_t v, o = 0;
  memcpy(&v, p, 8);
  for (int j = 0; j < 8; j++)
    o |= (uint64_t)t[j][(v >> (8 * j)) & 0xFF] << (8 * j);
  memcpy(p, &o, 8);
}
#else
static inline void lookup8(uint8_t *p, const uint8_t *const t[8]) {
  for (int j = 0; j < 8; j++)
    p[j] = t[j][p[j]];
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

FF_FMA_CLONES static void apply_mask_xor(const ff__image *img, uint8_t m, uint8_t x) {
  rows r = rows_of(img);
  for (size_t y = 0; y < r.count; y++) {
    uint8_t *p = r.data + y * r.stride;
    for (size_t k = 0; k < r.bytes; k++) p[k] = (uint8_t)((p[k] & m) ^ x);
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

FF_FMA_CLONES static void apply_solarize(const ff__image *img, int k) {
  rows r = rows_of(img);
  for (size_t y = 0; y < r.count; y++) {
    uint8_t *p = r.data + y * r.stride;
    for (size_t i = 0; i < r.bytes; i++) p[i] = p[i] < k ? p[i] : (uint8_t)(255 - p[i]);
  }
}

static void apply_table(const ff__image *img, const uint8_t t[256]) {
  uint8_t m, x;
  int k;
  if (mask_xor_form(t, &m, &x)) {
    apply_mask_xor(img, m, x);
    return;
  }
  if (solarize_form(t, &k)) {
    apply_solarize(img, k);
    return;
  }
  rows r = rows_of(img);
  const uint8_t *const same[8] = {t, t, t, t, t, t, t, t};
  for (size_t y = 0; y < r.count; y++) {
    uint8_t *p = r.data + y * r.stride;
    size_t k = 0;
    for (; k + 8 <= r.bytes; k += 8)
      lookup8(p + k, same);
    for (; k < r.bytes; k++)
      p[k] = t[p[k]];
  }
}

/* One table per channel, for interleaved pixels; for RGB, 24 bytes (eight
 * pixels, three words) at a time. */
static void apply_tables(const ff__image *img, uint8_t t[][256]) {
  int c = img->channels;
  size_t w = (size_t)img->width;
  const uint8_t *const w0[8] = {t[0], t[1], t[2], t[0], t[1], t[2], t[0], t[1]};
  const uint8_t *const w1[8] = {t[2], t[0], t[1], t[2], t[0], t[1], t[2], t[0]};
  const uint8_t *const w2[8] = {t[1], t[2], t[0], t[1], t[2], t[0], t[1], t[2]};
  for (int y = 0; y < img->height; y++) {
    uint8_t *p = img->data + (size_t)y * img->stride;
    size_t x = 0;
    if (c == 3) {
      for (; x + 8 <= w; x += 8, p += 24) {
        lookup8(p, w0);
        lookup8(p + 8, w1);
        lookup8(p + 16, w2);
      }
    }
    for (; x < w; x++, p += c)
      for (int k = 0; k < c; k++)
        p[k] = t[k][p[k]];
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

/* ------------------------------------------------------------ table ops */

static int identity(const uint8_t t[256]) {
  for (int v = 0; v < 256; v++)
    if (t[v] != v) return 0;
  return 1;
}

void ff__aug_lut_run(const ff__aug *ops, int n, ff__image *img) {
  int c = img->channels;
  if (c < 1 || c > MAX_CHANNELS || n <= 0) return;
  uint32_t hist[MAX_CHANNELS][256];
  uint64_t now[256];
  uint8_t t[256];
  int any_hist = 0;
  for (int i = 0; i < n; i++)
    any_hist |= ff__lut_needs_histogram(ops[i].op);
  if (!any_hist) { /* one table serves every channel */
    uint8_t lut[256];
    ff__lut_run_channel(ops, n, NULL, lut, now, t);
    if (!identity(lut)) apply_table(img, lut);
    return;
  }
  histogram(img, hist);
  uint8_t lut[MAX_CHANNELS][256];
  int all_identity = 1;
  for (int k = 0; k < c; k++) {
    ff__lut_run_channel(ops, n, hist[k], lut[k], now, t);
    all_identity &= identity(lut[k]);
  }
  if (!all_identity) apply_tables(img, lut);
}

/* ------------------------------------------------------------ color, contrast */

/* Color (spec 2.8): blend(X, gray(X), f) on RGB pixels. */
FF_FMA_CLONES static void saturation(const ff__image *img, ff__blend_w w) {
  rows r = rows_of(img);
  size_t pixels = r.bytes / 3;
  for (size_t y = 0; y < r.count; y++) {
    uint8_t *restrict p = r.data + y * r.stride;
    for (size_t x = 0; x < pixels; x++) {
      uint8_t R = p[3 * x], G = p[3 * x + 1], B = p[3 * x + 2];
      float g = (float)ff__gray_u8(R, G, B);
      p[3 * x] = ff__blend_u8(w, (float)R, g);
      p[3 * x + 1] = ff__blend_u8(w, (float)G, g);
      p[3 * x + 2] = ff__blend_u8(w, (float)B, g);
    }
  }
}

/* The sum of the truncated gray values of an RGB image (or of the pixels of
 * a one-channel one), exact in integers. */
FF_FMA_CLONES static uint64_t gray_sum(const ff__image *img) {
  rows r = rows_of(img);
  uint64_t sum = 0;
  for (size_t y = 0; y < r.count; y++) {
    const uint8_t *p = r.data + y * r.stride;
    uint32_t row = 0; /* < 2^32: a row is at most 2^24 pixels here */
    if (img->channels == 3) {
      size_t pixels = r.bytes / 3;
      for (size_t x = 0; x < pixels; x++)
        row += ff__gray_u8(p[3 * x], p[3 * x + 1], p[3 * x + 2]);
    } else {
      for (size_t k = 0; k < r.bytes; k++)
        row += p[k];
    }
    sum += row;
  }
  return sum;
}

/* gray_sum over chunks of at most 2^24 pixels, so the per-row uint32 sum
 * cannot overflow even when a dense image is one long row. */
static uint64_t gray_sum_chunked(const ff__image *img) {
  const size_t chunk = (size_t)1 << 24;
  size_t pixels = (size_t)img->width * (size_t)img->height;
  if (img->stride != (size_t)img->width * img->channels || pixels <= chunk) return gray_sum(img);
  uint64_t sum = 0;
  for (size_t done = 0; done < pixels; done += chunk) {
    size_t m = pixels - done < chunk ? pixels - done : chunk;
    ff__image part = {img->data + done * img->channels, (int)m, 1, img->channels, m * img->channels};
    sum += gray_sum(&part);
  }
  return sum;
}

/* Contrast (spec 2.9): blend(X, mean, f) with the mean of
 * ff__contrast_mean: a table once the mean is known. */
static void contrast(const ff__image *img, ff__blend_w w) {
  size_t pixels = (size_t)img->width * (size_t)img->height;
  if (!pixels) return;
  float mean = ff__contrast_mean(gray_sum_chunked(img), pixels);
  uint8_t t[256];
  for (int v = 0; v < 256; v++)
    t[v] = ff__blend_u8(w, (float)v, mean);
  apply_table(img, t);
}

/* ------------------------------------------------------------ sharpness */

/* One interior row of sharpness: up, mid, down are rows of the original,
 * c (a constant after inlining) the channel count, so neighbours are c
 * bytes apart. The first and last pixel are border: blended with
 * themselves (self[]). */
static inline void sharpen_row(uint8_t *restrict out, const uint8_t *restrict up, const uint8_t *restrict mid,
                               const uint8_t *restrict down, size_t bytes, const int c, ff__blend_w w,
                               const uint8_t self[256]) {
  for (int k = 0; k < c; k++) {
    out[k] = self[mid[k]];
    out[bytes - c + k] = self[mid[bytes - c + k]];
  }
  for (size_t k = (size_t)c; k < bytes - c; k++) {
    int s = up[k - c] + up[k] + up[k + c] + mid[k - c] + 5 * mid[k] + mid[k + c] + down[k - c] + down[k] +
            down[k + c];
    out[k] = ff__blend_u8(w, (float)mid[k], (float)ff__sharp_smooth_u8(s));
  }
}

/* Sharpness (spec 2.10): images of height or width <= 2 are unchanged;
 * otherwise blend(X, B, f) over all pixels, B = X on the border and the
 * smoothed value inside, neighbours read from a copy of the original. */
FF_FMA_CLONES static ff_status sharpness(ff__image *img, ff__blend_w w, ff__buf *scratch) {
  int c = img->channels, h = img->height;
  if (h <= 2 || img->width <= 2) return FF_OK;
  size_t bytes = (size_t)img->width * (size_t)c;
  uint8_t *copy = ff__buf_reserve(scratch, bytes * (size_t)h);
  if (!copy) return FF_ENOMEM;
  for (int y = 0; y < h; y++)
    memcpy(copy + (size_t)y * bytes, img->data + (size_t)y * img->stride, bytes);

  uint8_t self[256];
  for (int v = 0; v < 256; v++)
    self[v] = ff__blend_u8(w, (float)v, (float)v);
  for (size_t k = 0; k < bytes; k++) {
    img->data[k] = self[copy[k]];
    img->data[(size_t)(h - 1) * img->stride + k] = self[copy[(size_t)(h - 1) * bytes + k]];
  }
  for (int y = 1; y < h - 1; y++) {
    uint8_t *out = img->data + (size_t)y * img->stride;
    const uint8_t *mid = copy + (size_t)y * bytes;
    if (c == 3)
      sharpen_row(out, mid - bytes, mid, mid + bytes, bytes, 3, w, self);
    else if (c == 1)
      sharpen_row(out, mid - bytes, mid, mid + bytes, bytes, 1, w, self);
    else
      sharpen_row(out, mid - bytes, mid, mid + bytes, bytes, c, w, self);
  }
  return FF_OK;
}

/* ------------------------------------------------------------ entry point */

ff_status ff__aug_color(const ff__aug *a, ff__image *img, ff__buf *scratch) {
  if (ff__aug_is_lut(a->op)) {
    ff__aug_lut_run(a, 1, img);
    return FF_OK;
  }
  if (img->channels != 1 && img->channels != 3) return FF_EINVAL;
  ff__blend_w w = ff__blend_weights(a->arg);
  switch (a->op) {
  case FF__AUG_IDENTITY: return FF_OK;
  case FF__AUG_COLOR: /* one-channel images have no saturation to change */
    if (img->channels == 3) saturation(img, w);
    return FF_OK;
  case FF__AUG_CONTRAST: contrast(img, w); return FF_OK;
  case FF__AUG_SHARPNESS: return sharpness(img, w, scratch);
  default: /* a geometric op: not ours */ return FF_EINVAL;
  }
}
