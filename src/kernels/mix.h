/* mix.h — AugMix's float32 mixture (torchvision's AugMix, spec 4.4):
 * mix = m0*X + sum(w_i * chain_i(X)), each product and sum rounded on its
 * own (no fma), truncated to uint8 at the end. Shared by the CPU step runner
 * (ops/run.c) and the device kernels. */
#ifndef FF_KERNELS_MIX_H
#define FF_KERNELS_MIX_H

#include <stdint.h>

#include "kernels/hd.h"

/* The first term: weight * x. */
FF_HD static inline float ff__mix_scale(float weight, uint8_t x) { return weight * (float)x; }

/* One more term: mix + weight * x. */
FF_HD static inline float ff__mix_add(float mix, float weight, uint8_t x) { return mix + weight * (float)x; }

/* trunc(mix), no rounding (the weights are convex; the clamp only guards
 * the last bit). */
FF_HD static inline uint8_t ff__mix_trunc_u8(float mix) { return (uint8_t)(int)(mix < 255.0f ? mix : 255.0f); }

#endif
