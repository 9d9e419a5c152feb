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

#endif
