/* webp.c — WebP decoding through libwebp (lossy, lossless, with or without
 * alpha), straight to RGB8 in the worker's buffer. Alpha is dropped, not
 * composited, as Pillow's convert('RGB') drops it; lossy chroma is
 * upsampled with libwebp's default ("fancy") filter, the one Pillow's
 * decoder runs, so the pixels equal Pillow's. An animated file gives its
 * first frame (what Pillow's Image.open shows), through libwebpdemux's
 * animation decoder on the canvas. The canvas size is checked against the
 * pixel limit from the header, before libwebp allocates. WebP has no region
 * decode here, so a region is a view into the full image. */
#include "codec/codec_internal.h"

#include <limits.h>
#include <string.h>

#include <webp/decode.h>
#include <webp/demux.h>

static const char *status_text(VP8StatusCode rc) {
  switch (rc) {
  case VP8_STATUS_OUT_OF_MEMORY: return "out of memory";
  case VP8_STATUS_INVALID_PARAM: return "invalid parameter";
  case VP8_STATUS_BITSTREAM_ERROR: return "bitstream error";
  case VP8_STATUS_UNSUPPORTED_FEATURE: return "unsupported feature";
  case VP8_STATUS_SUSPENDED: return "suspended";
  case VP8_STATUS_USER_ABORT: return "aborted";
  case VP8_STATUS_NOT_ENOUGH_DATA: return "truncated (not enough data)";
  default: return "unknown error";
  }
}

static ff_status read_features(const uint8_t *data, size_t size_bytes, const char *name, uint64_t max_pixels,
                               WebPBitstreamFeatures *f, ff__error *err) {
  VP8StatusCode rc = WebPGetFeatures(data, size_bytes, f);
  if (rc != VP8_STATUS_OK) return ff__error_set(err, FF_EDATA, "%s: corrupt WebP: %s", name, status_text(rc));
  return ff__codec_check_pixels(name, f->width, f->height, max_pixels, err);
}

ff_status ff__webp_probe(const uint8_t *data, size_t size_bytes, const char *name, uint64_t max_pixels,
                         ff__image_info *out, ff__error *err) {
  WebPBitstreamFeatures f;
  ff_status st = read_features(data, size_bytes, name, max_pixels, &f, err);
  if (!st) *out = (ff__image_info){FF__FORMAT_WEBP, f.width, f.height, 0};
  return st;
}

/* The first frame of an animation, composed on its canvas, as RGB. */
static ff_status decode_first_frame(const uint8_t *data, size_t size_bytes, const char *name, uint8_t *rgb,
                                    int width, int height, ff__error *err) {
  WebPAnimDecoderOptions opt;
  if (!WebPAnimDecoderOptionsInit(&opt))
    return ff__error_set(err, FF_EINTERNAL, "%s: libwebp version mismatch", name);
  opt.color_mode = MODE_RGBA;
  opt.use_threads = 0;
  WebPData in = {data, size_bytes};
  WebPAnimDecoder *dec = WebPAnimDecoderNew(&in, &opt);
  if (!dec) return ff__error_set(err, FF_EDATA, "%s: corrupt animated WebP", name);
  WebPAnimInfo info;
  uint8_t *frame = NULL;
  int timestamp;
  ff_status st = FF_OK;
  if (!WebPAnimDecoderGetInfo(dec, &info) || (int)info.canvas_width != width ||
      (int)info.canvas_height != height)
    st = ff__error_set(err, FF_EDATA, "%s: corrupt animated WebP (canvas size)", name);
  else if (!WebPAnimDecoderGetNext(dec, &frame, &timestamp))
    st = ff__error_set(err, FF_EDATA, "%s: corrupt animated WebP (its first frame does not decode)", name);
  for (size_t i = 0, n = st ? 0 : (size_t)width * (size_t)height; i < n; i++)
    memcpy(rgb + 3 * i, frame + 4 * i, 3);
  WebPAnimDecoderDelete(dec);
  return st;
}

ff_status ff__webp_decode(const uint8_t *data, size_t size_bytes, const char *name, const ff__decode_req *req,
                          ff__buf *pixels, ff__image *out, ff__error *err) {
  WebPDecoderConfig cfg;
  if (!WebPInitDecoderConfig(&cfg))
    return ff__error_set(err, FF_EINTERNAL, "%s: libwebp version mismatch", name);
  ff_status st = read_features(data, size_bytes, name, req->max_pixels, &cfg.input, err);
  int w = cfg.input.width, h = cfg.input.height;
  ff__region r;
  if (!st) st = ff__codec_region(req, w, h, name, &r, err);
  if (st) return st;
  size_t stride = (size_t)w * 3, size = stride * (size_t)h;
  if (stride > INT_MAX) /* libwebp takes the stride as an int */
    return ff__error_set(err, FF_ETOOBIG, "%s: WebP image %d pixels wide, too wide to decode", name, w);
  uint8_t *rgb = ff__buf_reserve(pixels, size);
  if (!rgb) return ff__error_set(err, FF_ENOMEM, "%s: out of memory for %dx%d pixels", name, w, h);
  if (cfg.input.has_animation) {
    st = decode_first_frame(data, size_bytes, name, rgb, w, h, err);
  } else {
    cfg.output.colorspace = MODE_RGB;
    cfg.output.is_external_memory = 1;
    cfg.output.u.RGBA.rgba = rgb;
    cfg.output.u.RGBA.stride = (int)stride;
    cfg.output.u.RGBA.size = size;
    VP8StatusCode rc = WebPDecode(data, size_bytes, &cfg);
    WebPFreeDecBuffer(&cfg.output);
    if (rc != VP8_STATUS_OK) st = ff__error_set(err, FF_EDATA, "%s: corrupt WebP: %s", name, status_text(rc));
  }
  if (!st) *out = ff__codec_rgb_region(rgb, w, &r);
  return st;
}
