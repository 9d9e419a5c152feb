/* limits.c — the checks every format decoder shares (see limits.h). Pure
 * functions: any number of workers may decode at once. */
#include "codec/limits.h"

ff_status ff__codec_check_pixels(const char *name, int width, int height, uint64_t max_pixels,
                                 ff__error *err) {
  uint64_t n = (uint64_t)width * (uint64_t)height;
  if (max_pixels && n > max_pixels)
    return ff__error_set(err, FF_ETOOBIG,
                         "%s: image is %dx%d = %llu pixels, over the limit of %llu "
                         "(max_image_pixels)",
                         name, width, height, (unsigned long long)n,
                         (unsigned long long)max_pixels);
  return FF_OK;
}

ff_status ff__codec_region(const ff__decode_req *req, int width, int height, const char *name,
                           ff__region *out, ff__error *err) {
  if (req->crop_width == 0) {
    *out = (ff__region){0, 0, width, height};
    return FF_OK;
  }
  const ff__region r = {req->crop_x, req->crop_y, req->crop_width, req->crop_height};
  if (r.x < 0 || r.y < 0 || r.width <= 0 || r.height <= 0 || r.x > width - r.width ||
      r.y > height - r.height)
    return ff__error_set(err, FF_EINVAL,
                         "%s: region %dx%d at (%d, %d) is not inside the %dx%d image", name,
                         r.width, r.height, r.x, r.y, width, height);
  *out = r;
  return FF_OK;
}

ff__image ff__codec_rgb_region(uint8_t *rgb, int width, const ff__region *r) {
  size_t stride = (size_t)width * 3;
  return (ff__image){rgb + (size_t)r->y * stride + (size_t)r->x * 3, r->width, r->height, 3, stride};
}

ff_status ff__codec_check_scans(const ff__decode_req *req, int scans, const char *name, ff__error *err) {
  if (req->max_scans > 0 && scans > req->max_scans)
    return ff__error_set(err, FF_EDATA,
                         "%s: JPEG with more than %d scans (max_jpeg_scans): refused before decoding, "
                         "decoding it would take seconds",
                         name, req->max_scans);
  return FF_OK;
}

ff_status ff__codec_damage(const ff__decode_req *req, const char *name, const char *what, ff__error *err) {
  if (req->strict)
    return ff__error_set(err, FF_EDATA, "%s: %s (strict_decode)", name, what);
  if (req->warning && !req->warning->status)
    ff__error_set(req->warning, FF_EDATA, "%s: %s (decoded anyway)", name, what);
  return FF_OK;
}

void ff__codec_gray_to_rgb(const uint8_t *gray, uint8_t *rgb, size_t count) {
  for (size_t i = 0; i < count; i++) {
    uint8_t g = gray[i]; /* read before the writes, which may reach it */
    rgb[3 * i] = rgb[3 * i + 1] = rgb[3 * i + 2] = g;
  }
}
