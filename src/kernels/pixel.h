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

/* ThreadSanitizer builds: gcc says so with __SANITIZE_THREAD__, clang only
 * through __has_feature (which gcc 12's preprocessor cannot parse). */
#if defined(__SANITIZE_THREAD__)
#define FF__TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define FF__TSAN 1
#endif
#endif

/* Compiles a host function for CPUs with FMA and for the rest, chosen at
 * load time, so that ff__fma_f32 is one instruction where it can be. Under
 * ThreadSanitizer only the default version is built: the clones' ifunc
 * resolvers would be instrumented and run during relocation, before the
 * TSan runtime is initialised. (fmaf is correctly rounded either way, so
 * the results are the same.)
 * FF_FMA_CLONES_NOINLINE is the same for a function its callers must not
 * inline: gcc inlines a clone into a caller of the same target; clang never
 * inlines a multiversioned function and refuses noinline on one. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__CUDACC__) && !defined(FF__TSAN)
#define FF_FMA_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#if defined(__clang__)
#define FF_FMA_CLONES_NOINLINE FF_FMA_CLONES
#else
#define FF_FMA_CLONES_NOINLINE FF_FMA_CLONES __attribute__((noinline))
#endif
#else
#define FF_FMA_CLONES
#define FF_FMA_CLONES_NOINLINE __attribute__((noinline))
#endif

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__CUDACC__)
#include "core/cpu.h"

/* Whether this CPU has AVX-512 F, BW and VL, whatever $FF_CPU_ISA says:
 * for what this decides besides a path (which rounding torch's MKL takes). */
static inline int ff__cpu_has_avx512(void) {
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl");
}

/* Whether the host kernels run their AVX-512 paths: AVX-512 F, BW and VL
 * (each path that needs more, VBMI say, checks that too) within the cap of
 * core/cpu.h. */
static inline int ff__cpu_avx512(void) { return ff__isa_allows(FF__ISA_AVX512) && ff__cpu_has_avx512(); }

/* Whether they run their AVX2 paths (AVX2 with FMA; the SSSE3 ones too), within the cap. */
static inline int ff__cpu_avx2(void) {
  return ff__isa_allows(FF__ISA_AVX2) && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}
#endif

/* Round half to even and saturate to uint8 (torchvision's round() then
 * cast); NaN gives 0. Branch-free, so loops over it vectorise. */
FF_HD static inline uint8_t ff__round_u8(float v) {
  v = v > 0.0f ? v : 0.0f;
  v = v < 255.0f ? v : 255.0f;
  return (uint8_t)(int)rintf(v);
}

#endif
