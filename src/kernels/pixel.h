/* pixel.h — per-pixel arithmetic shared by the CPU ops and the device kernels.
 *
 * torchvision's uint8 tensor ops run in float32 with one rounding per
 * operator, except where PyTorch's compiled kernels fuse a multiply-add
 * (spec section 0). Those places call ff__fma_f32: a correctly rounded fused
 * multiply-add, the same on every host and device (fmaf; one instruction
 * where the function is compiled for FMA — see FF_FMA_CLONES — and
 * __fmaf_rn on CUDA). Nowhere else may the compiler fuse
 * (-ffp-contract=off, --fmad=false). */
#ifndef FF_KERNELS_PIXEL_H
#define FF_KERNELS_PIXEL_H

#include <math.h>
#include <stdint.h>

#include "kernels/hd.h"

FF_HD static inline float ff__fma_f32(float a, float b, float c) {
#ifdef __CUDA_ARCH__
  return __fmaf_rn(a, b, c);
#else
  return fmaf(a, b, c);
#endif
}

/* Compiles a host function for CPUs with FMA and for the rest, chosen at
 * load time, so that ff__fma_f32 is one instruction where it can be. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__CUDACC__)
#define FF_FMA_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define FF_FMA_CLONES
#endif

/* Round half to even and saturate to uint8 (torchvision's round() then
 * cast); NaN gives 0. Branch-free, so loops over it vectorise. */
FF_HD static inline uint8_t ff__round_u8(float v) {
  v = v > 0.0f ? v : 0.0f;
  v = v < 255.0f ? v : 255.0f;
  return (uint8_t)(int)rintf(v);
}

#endif
