/* geometry.c — crop, resize and flips on HWC uint8 images, and the
 * conversion of the finished image into its batch slot.
 *
 * Resize follows torchvision's float32 tensor path exactly (spec 5.3): a
 * separable filter, horizontal pass first into a float32 intermediate, then
 * the vertical pass, rounding half to even once at the end. Each axis gets a
 * table of taps (input index, weight) per output index; with antialias the
 * taps are a tent of half-width `scale` renormalised at the borders, without
 * it the two taps of plain bilinear interpolation. The accumulation order and
 * fused steps are torch's, so results match to the last bit but for rare
 * ties. */
#include <stdlib.h>
#include <string.h>

#include "kernels/pixel.h"
#include "ops/ops.h"

ff_status ff__op_crop(const ff__image *src, int x, int y, int w, int h, ff__buf *mem,
                      ff__image *dst) {
  int c = src->channels;
  if (x >= 0 && y >= 0 && x + w <= src->width && y + h <= src->height) {
    *dst = *src;
    dst->data = src->data + (size_t)y * src->stride + (size_t)x * c;
    dst->width = w, dst->height = h;
    return FF_OK;
  }
  size_t stride = (size_t)w * c;
  uint8_t *out = ff__buf_reserve(mem, stride * h);
  if (!out) return FF_ENOMEM;
  memset(out, 0, stride * h);
  int x0 = x < 0 ? 0 : x, x1 = x + w > src->width ? src->width : x + w;
  int y0 = y < 0 ? 0 : y, y1 = y + h > src->height ? src->height : y + h;
  for (int r = y0; r < y1 && x0 < x1; r++)
    memcpy(out + (size_t)(r - y) * stride + (size_t)(x0 - x) * c,
           src->data + (size_t)r * src->stride + (size_t)x0 * c, (size_t)(x1 - x0) * c);
  *dst = (ff__image){out, w, h, c, stride};
  return FF_OK;
}

/* Taps of one axis: for output o, taps idx[o*max+t], weight w[o*max+t],
 * t < count[o]. The first tap's product starts the sum. */
typedef struct axis {
  int max_taps;
  int *count, *idx;
  float *w;
} axis;

static size_t axis_bytes(int n_out, int max_taps) {
  return (size_t)n_out * (sizeof(int) + (size_t)max_taps * (sizeof(int) + sizeof(float)));
}

static int axis_max_taps(int n_in, int n_out, int antialias) {
  float scale = (float)n_in / (float)n_out;
  if (!antialias) return 2;
  return (int)((scale >= 1.0f ? scale : 1.0f) * 2.0f) + 3;
}

static void axis_place(axis *a, void *mem, int n_out) {
  a->count = mem;
  a->idx = a->count + n_out;
  a->w = (float *)(a->idx + (size_t)n_out * a->max_taps);
}

/* torch's upsample_bilinear2d (align_corners=False) index and lambda rules. */
static void axis_bilinear(axis *a, int n_in, int n_out) {
  float scale = (float)n_in / (float)n_out;
  for (int o = 0; o < n_out; o++) {
    double src_d = (double)scale * (o + 0.5) - 0.5;
    float src = src_d < 0 ? 0.0f : (float)src_d;
    int i0 = (int)src;
    int i1 = i0 < n_in - 1 ? i0 + 1 : i0;
    float l1 = src - (float)i0, l0 = 1.0f - l1;
    /* torch evaluates f32(x1*l1) first and fuses x0*l0 onto it. */
    a->count[o] = 2;
    a->idx[o * 2] = i1, a->w[o * 2] = l1;
    a->idx[o * 2 + 1] = i0, a->w[o * 2 + 1] = l0;
  }
}

/* torch's _upsample_bilinear2d_aa weights (tent filter, renormalised). */
static void axis_antialias(axis *a, int n_in, int n_out) {
  float scale = (float)n_in / (float)n_out;
  float support = scale >= 1.0f ? scale : 1.0f;
  float invscale = scale >= 1.0f ? 1.0f / scale : 1.0f;
  for (int o = 0; o < n_out; o++) {
    float center = (float)((double)scale * (o + 0.5));
    int xmin = (int)((center - support) + 0.5f);
    int xend = (int)((center + support) + 0.5f);
    if (xmin < 0) xmin = 0;
    if (xend > n_in) xend = n_in;
    int n = xend - xmin;
    if (n > a->max_taps) n = a->max_taps;
    float *w = a->w + (size_t)o * a->max_taps;
    float total = 0.0f;
    for (int t = 0; t < n; t++) {
      float d = ((float)(xmin + t) - center + 0.5f) * invscale;
      float ad = d < 0 ? -d : d;
      w[t] = ad < 1.0f ? 1.0f - ad : 0.0f;
      total += w[t];
    }
    for (int t = 0; t < n; t++) {
      if (total != 0.0f) w[t] /= total;
      a->idx[(size_t)o * a->max_taps + t] = xmin + t;
    }
    a->count[o] = n;
  }
}

static void axis_build(axis *a, int n_in, int n_out, int antialias) {
  if (antialias) axis_antialias(a, n_in, n_out);
  else axis_bilinear(a, n_in, n_out);
}

/* Sum of taps in torch's order: ≤ 4 taps fused, longer windows plainly. */
static inline __attribute__((always_inline)) float taps_sum(const float *x, size_t step, const int *idx, const float *w, int n) {
  float acc = x[(size_t)idx[0] * step] * w[0];
  if (n <= 4)
    for (int t = 1; t < n; t++) acc = ff__fma_f32(x[(size_t)idx[t] * step], w[t], acc);
  else
    for (int t = 1; t < n; t++) acc = acc + x[(size_t)idx[t] * step] * w[t];
  return acc;
}

FF_FMA_CLONES ff_status ff__op_resize(const ff__image *src, int out_w, int out_h, int antialias,
                        ff__op_scratch *s, ff__image *dst) {
  int c = src->channels, in_w = src->width, in_h = src->height;
  axis ax = {axis_max_taps(in_w, out_w, antialias), 0, 0, 0};
  axis ay = {axis_max_taps(in_h, out_h, antialias), 0, 0, 0};
  size_t bx = axis_bytes(out_w, ax.max_taps), by = axis_bytes(out_h, ay.max_taps);
  char *wmem = ff__buf_reserve(&s->weights, bx + by);
  float *tmp = ff__buf_reserve(&s->floats, (size_t)(in_h + 1) * out_w * c * sizeof(float));
  if (!wmem || !tmp) return FF_ENOMEM;
  axis_place(&ax, wmem, out_w);
  axis_place(&ay, wmem + bx, out_h);
  axis_build(&ax, in_w, out_w, antialias);
  axis_build(&ay, in_h, out_h, antialias);

  /* Horizontal pass: uint8 rows → float32 rows of out_w pixels. */
  float xrow[4096 * 3];
  float *row = in_w <= 4096 ? xrow : NULL;
  float *heap_row = NULL;
  if (!row && !(row = heap_row = malloc((size_t)in_w * c * sizeof(float)))) return FF_ENOMEM;
  for (int y = 0; y < in_h; y++) {
    const uint8_t *in = src->data + (size_t)y * src->stride;
    for (int i = 0; i < in_w * c; i++) row[i] = (float)in[i];
    float *out = tmp + (size_t)y * out_w * c;
    for (int o = 0; o < out_w; o++) {
      const int *idx = ax.idx + (size_t)o * ax.max_taps;
      const float *w = ax.w + (size_t)o * ax.max_taps;
      int n = ax.count[o];
      if (c != 3) {
        for (int ch = 0; ch < c; ch++) out[o * c + ch] = taps_sum(row + ch, (size_t)c, idx, w, n);
        continue;
      }
      /* RGB: three independent sums side by side. */
      const float *x = row + (size_t)idx[0] * 3;
      float r = x[0] * w[0], g = x[1] * w[0], b = x[2] * w[0];
      for (int t = 1; t < n; t++) {
        x = row + (size_t)idx[t] * 3;
        if (n <= 4)
          r = ff__fma_f32(x[0], w[t], r), g = ff__fma_f32(x[1], w[t], g), b = ff__fma_f32(x[2], w[t], b);
        else
          r = r + x[0] * w[t], g = g + x[1] * w[t], b = b + x[2] * w[t];
      }
      out[o * 3] = r, out[o * 3 + 1] = g, out[o * 3 + 2] = b;
    }
  }
  free(heap_row);

  /* Vertical pass: float32 rows → uint8, rounding half to even. The taps
   * loop is outside so the inner loops run over whole contiguous rows. */
  size_t row_elems = (size_t)out_w * c;
  float *acc = tmp + (size_t)in_h * row_elems;
  for (int o = 0; o < out_h; o++) {
    const int *idx = ay.idx + (size_t)o * ay.max_taps;
    const float *w = ay.w + (size_t)o * ay.max_taps;
    int n = ay.count[o];
    const float *x0 = tmp + (size_t)idx[0] * row_elems;
    for (size_t i = 0; i < row_elems; i++) acc[i] = x0[i] * w[0];
    for (int t = 1; t < n; t++) {
      const float *xt = tmp + (size_t)idx[t] * row_elems;
      float wt = w[t];
      if (n <= 4)
        for (size_t i = 0; i < row_elems; i++) acc[i] = ff__fma_f32(xt[i], wt, acc[i]);
      else
        for (size_t i = 0; i < row_elems; i++) acc[i] = acc[i] + xt[i] * wt;
    }
    uint8_t *out = dst->data + (size_t)o * dst->stride;
    for (size_t i = 0; i < row_elems; i++) out[i] = ff__round_u8(acc[i]);
  }
  dst->width = out_w, dst->height = out_h, dst->channels = c;
  return FF_OK;
}

void ff__op_hflip(ff__image *img) {
  int c = img->channels;
  for (int y = 0; y < img->height; y++) {
    uint8_t *l = img->data + (size_t)y * img->stride, *r = l + (size_t)(img->width - 1) * c;
    for (; l < r; l += c, r -= c)
      for (int ch = 0; ch < c; ch++) {
        uint8_t t = l[ch];
        l[ch] = r[ch], r[ch] = t;
      }
  }
}

void ff__op_vflip(ff__image *img) {
  size_t n = (size_t)img->width * img->channels;
  for (int y = 0; y < img->height / 2; y++) {
    uint8_t *a = img->data + (size_t)y * img->stride;
    uint8_t *b = img->data + (size_t)(img->height - 1 - y) * img->stride;
    for (size_t i = 0; i < n; i++) {
      uint8_t t = a[i];
      a[i] = b[i], b[i] = t;
    }
  }
}

void ff__op_write_output(const ff__pipeline *pipe, const ff__image *img, void *batch_data,
                         int slot) {
  int h = pipe->out_height, w = pipe->out_width;
  size_t plane = (size_t)h * w;
  if (pipe->output == FF__OUTPUT_NHWC_U8) {
    uint8_t *dst = (uint8_t *)batch_data + (size_t)slot * plane * 3;
    for (int y = 0; y < h; y++) memcpy(dst + (size_t)y * w * 3, img->data + (size_t)y * img->stride, (size_t)w * 3);
    return;
  }
  float *dst = (float *)batch_data + (size_t)slot * plane * 3;
  for (int y = 0; y < h; y++) {
    const uint8_t *in = img->data + (size_t)y * img->stride;
    float *r = dst + (size_t)y * w, *g = r + plane, *b = g + plane;
    for (int x = 0; x < w; x++) {
      r[x] = pipe->lut[0][in[3 * x]];
      g[x] = pipe->lut[1][in[3 * x + 1]];
      b[x] = pipe->lut[2][in[3 * x + 2]];
    }
  }
}
