/* geometry.c — crop, resize and flips on HWC uint8 images, and the
 * conversion of the finished image into its batch slot.
 *
 * Resize follows torchvision's float32 tensor path exactly (spec 5.3): a
 * separable filter, horizontal pass first into a float32 intermediate, then
 * the vertical pass, rounding half to even once at the end. The tap tables
 * and the accumulation order (torch's, fused steps included) are in
 * kernels/resize.h, shared with the device kernels; results match torch to
 * the last bit but for rare ties. */
#include <stdlib.h>
#include <string.h>

#include "kernels/pixel.h"
#include "kernels/resize.h"
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

FF_FMA_CLONES ff_status ff__op_resize(const ff__image *src, int out_w, int out_h, int antialias,
                        ff__op_scratch *s, ff__image *dst) {
  int c = src->channels, in_w = src->width, in_h = src->height;
  ff__resize_axis ax = {ff__resize_max_taps(in_w, out_w, antialias), 0, 0, 0};
  ff__resize_axis ay = {ff__resize_max_taps(in_h, out_h, antialias), 0, 0, 0};
  size_t bx = ff__resize_axis_bytes(out_w, ax.max_taps), by = ff__resize_axis_bytes(out_h, ay.max_taps);
  char *wmem = ff__buf_reserve(&s->weights, bx + by);
  float *tmp = ff__buf_reserve(&s->floats, (size_t)(in_h + 1) * out_w * c * sizeof(float));
  if (!wmem || !tmp) return FF_ENOMEM;
  ff__resize_axis_place(&ax, wmem, out_w);
  ff__resize_axis_place(&ay, wmem + bx, out_h);
  ff__resize_axis_build(&ax, in_w, out_w, antialias);
  ff__resize_axis_build(&ay, in_h, out_h, antialias);

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
        for (int ch = 0; ch < c; ch++) out[o * c + ch] = ff__resize_taps_sum(row + ch, (size_t)c, idx, w, n);
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
