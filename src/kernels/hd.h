/* hd.h — FF_HD marks inline functions compiled for both the host (C) and the
 * device (CUDA), so the per-pixel arithmetic is written once and bit-identical
 * on both. */
#ifndef FF_KERNELS_HD_H
#define FF_KERNELS_HD_H

#ifdef __CUDACC__
#define FF_HD __host__ __device__
#else
#define FF_HD
#endif

/* Before a loop: on the device, run it as a loop rather than unrolled, so
 * that its iterations do not hold registers at once (a kernel's register
 * count sets how many of its threads an SM runs); nothing on the host. */
#ifdef __CUDA_ARCH__
#define FF_DEVICE_NO_UNROLL _Pragma("unroll 1")
#else
#define FF_DEVICE_NO_UNROLL
#endif

#endif
