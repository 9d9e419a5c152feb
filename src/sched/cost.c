/* cost.c — the cost model (see cost.h): a sample's predicted saving from
 * its plan and the measured per-op costs, moving averages of the ops time
 * per sample and of device memory, and the batch split that sends the
 * samples saving the most to the device within the memory the pool can
 * give. Pure: no clock, no I/O; the runtime measures and calls in. */
#include "sched/cost.h"

#include <stdlib.h>

#include "sched/policy.h"

void ff__cost_init(ff__cost_model *m) { *m = (ff__cost_model){.alpha = 0.05, .device_bytes_per_byte = 32}; }

/* The first measurement replaces the default; later ones are averaged in. */
static void ewma(double *v, double x, double a, long *n) { *v = (*n)++ ? *v + a * (x - *v) : x; }

void ff__cost_observe_ops(ff__cost_model *m, uint64_t ns) {
  ewma(&m->ops_ns_per_sample, (double)ns, m->alpha, &m->ops_obs);
}

void ff__cost_observe_device(ff__cost_model *m, uint64_t encoded_bytes, size_t device_bytes) {
  /* one observation per microbatch: weigh it more than a single sample */
  double a = m->alpha * 4 < 1 ? m->alpha * 4 : 1;
  if (encoded_bytes)
    ewma(&m->device_bytes_per_byte, (double)device_bytes / (double)encoded_bytes, a, &m->device_obs);
}

/* bit 63: set; 62-59: format; 58: progressive; 57-29: height; 28-0: width */
#define SIDE_BITS 29

uint64_t ff__cost_header_pack(const ff__image_info *info) {
  uint64_t lim = (uint64_t)1 << SIDE_BITS;
  if (info->width <= 0 || info->height <= 0 || (uint64_t)info->width >= lim || (uint64_t)info->height >= lim ||
      (unsigned)info->format > 15)
    return 0; /* not cached: predicted as unknown */
  return (uint64_t)1 << 63 | (uint64_t)info->format << 59 | (uint64_t)(info->progressive != 0) << 58 |
         (uint64_t)info->height << SIDE_BITS | (uint64_t)info->width;
}

int ff__cost_header_unpack(uint64_t packed, ff__image_info *info) {
  if (!packed) return 0;
  uint64_t mask = ((uint64_t)1 << SIDE_BITS) - 1;
  *info = (ff__image_info){(ff__format)(packed >> 59 & 15), (int)(packed & mask),
                           (int)(packed >> SIDE_BITS & mask), (int)(packed >> 58 & 1)};
  return 1;
}

/* Exponential forgetting of the decode fit: about the last 200 decodes count. */
#define DECODE_KEEP 0.995

void ff__cost_observe_decode(ff__cost_model *m, uint64_t encoded_bytes, uint64_t pixels, uint64_t ns) {
  double b = (double)encoded_bytes, p = (double)pixels, t = (double)ns;
  m->dec_bb = DECODE_KEEP * m->dec_bb + b * b, m->dec_bp = DECODE_KEEP * m->dec_bp + b * p;
  m->dec_pp = DECODE_KEEP * m->dec_pp + p * p;
  m->dec_bt = DECODE_KEEP * m->dec_bt + b * t, m->dec_pt = DECODE_KEEP * m->dec_pt + p * t;
  ewma(&m->decode_ns_per_sample, t, m->alpha, &m->decode_obs);
}

double ff__cost_decode_ns(const ff__cost_model *m, uint64_t encoded_bytes, uint64_t pixels) {
  if (!m->decode_obs) return 0;
  double b = (double)encoded_bytes, p = (double)pixels;
  double det = m->dec_bb * m->dec_pp - m->dec_bp * m->dec_bp;
  double a, c;
  if (det > 1e-9 * m->dec_bb * m->dec_pp) { /* both terms: solve the 2x2 normal equations */
    a = (m->dec_bt * m->dec_pp - m->dec_pt * m->dec_bp) / det;
    c = (m->dec_pt * m->dec_bb - m->dec_bt * m->dec_bp) / det;
  } else { /* bytes and pixels proportional so far: pixels alone */
    a = 0, c = m->dec_pp > 0 ? m->dec_pt / m->dec_pp : 0;
  }
  double ns = a * b + c * p;
  return ns > 0 ? ns : 0;
}

void ff__cost_observe_host_decode(ff__cost_model *m, uint64_t host_ns, double predicted_cpu_ns) {
  if (predicted_cpu_ns <= 0) return;
  double share = (double)host_ns / predicted_cpu_ns;
  ewma(&m->host_decode_share, share > 1 ? 1 : share, m->alpha * 4 < 1 ? m->alpha * 4 : 1, &m->host_obs);
}

double ff__cost_device_decode_saving_ns(const ff__cost_model *m, uint64_t encoded_bytes, uint64_t pixels) {
  return ff__cost_decode_ns(m, encoded_bytes, pixels) * (1 - m->host_decode_share);
}

/* ns per pixel of one cost kind so far; 0 before it was measured. */
static double per_pixel(const ff__op_costs *c, int kind) {
  return c->pixels[kind] ? (double)c->ns[kind] / (double)c->pixels[kind] : 0;
}

/* The decoded size of the plan's region: a JPEG at the smallest scale n/8
 * (n = 1, 2, 4) that keeps the region at least the requested minimum, as
 * the decoder chooses it (to a pixel). */
static void decoded_size(const ff__plan *plan, const ff__image_info *info, int64_t *w, int64_t *h) {
  const ff__decode_req *r = &plan->decode;
  *w = r->crop_width ? r->crop_width : info->width;
  *h = r->crop_width ? r->crop_height : info->height;
  if (info->format != FF__FORMAT_JPEG || r->min_width <= 0 || r->min_height <= 0) return;
  for (int n = 1; n < 8; n *= 2)
    if (*w * n / 8 >= r->min_width && *h * n / 8 >= r->min_height) {
      *w = *w * n / 8, *h = *h * n / 8;
      return;
    }
}

uint64_t ff__cost_decoded_pixels(const ff__plan *plan, const ff__image_info *info) {
  int64_t w, h;
  decoded_size(plan, info, &w, &h);
  return (uint64_t)w * (uint64_t)h;
}

double ff__cost_plan_ns(const ff__plan *plan, const ff__image_info *info, const ff__op_costs *costs,
                        int out_width, int out_height) {
  int64_t w, h;
  decoded_size(plan, info, &w, &h);
  double ns = 0;
  for (int i = 0; i < plan->num_steps; i++) {
    const ff__step *st = &plan->steps[i];
    double px = (double)w * (double)h; /* the step's input, as the step runner counts it */
    switch (st->kind) {
    case FF__STEP_CROP:
    case FF__STEP_RESIZE:
      ns += per_pixel(costs, st->kind == FF__STEP_CROP ? FF__COST_CROP : FF__COST_RESIZE) * px;
      w = st->w, h = st->h;
      break;
    case FF__STEP_HFLIP:
    case FF__STEP_VFLIP: ns += per_pixel(costs, FF__COST_FLIP) * px; break;
    case FF__STEP_BLUR: ns += per_pixel(costs, FF__COST_BLUR) * px; break;
    case FF__STEP_ERASE: ns += per_pixel(costs, FF__COST_ERASE) * (double)st->w * (double)st->h; break;
    case FF__STEP_AUG: {
      if (ff__aug_is_noop(&st->aug, (int)w, (int)h)) break;
      int kind = st->aug.op;
      if (ff__aug_is_lut(st->aug.op)) { /* one fused pass, as the runner does it */
        ff__aug run[FF__PLAN_MAX_STEPS];
        int n = ff__plan_lut_run(plan, i, run);
        if (n > 1) kind = FF__COST_LUT;
        i += n - 1;
      }
      ns += per_pixel(costs, kind) * px;
      break;
    }
    case FF__STEP_PIL: ns += per_pixel(costs, FF__COST_PIL + (int)st->pil.op) * px; break;
    default: ns += per_pixel(costs, FF__COST_MIX) * px; break; /* AugMix's keeping and mixing */
    }
  }
  return ns + per_pixel(costs, FF__COST_OUTPUT) * (double)out_width * (double)out_height;
}

double ff__cost_unknown_ns(const ff__cost_model *m, uint64_t encoded_bytes) {
  return m->ops_ns_per_sample + 1e-9 * (double)encoded_bytes;
}

size_t ff__cost_device_bytes(const ff__cost_model *m, uint64_t encoded_bytes) {
  return (size_t)(m->device_bytes_per_byte * (double)encoded_bytes) + 1;
}

int ff__cost_split(const ff__cost_model *m, const double *saving_ns, const uint64_t *size_bytes, int n, int k,
                   size_t free_bytes, unsigned char *to_device) {
  for (;;) {
    ff__sched_pick_costliest(saving_ns, n, k, to_device);
    if (k <= 0) break;
    size_t need = 0;
    for (int i = 0; i < n; i++)
      if (to_device[i]) need += ff__cost_device_bytes(m, size_bytes[i]);
    need += need / 4; /* the pool rounds each block up to its size class, by up to 25% */
    if (need <= free_bytes) break;
    /* shrink in proportion, at least by one: a few rounds at most */
    int fit = (int)((double)k * (double)free_bytes / (double)need);
    k = fit < k ? fit : k - 1;
  }
  return k > 0 ? k : 0;
}
