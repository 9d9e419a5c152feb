/* output_simd.h — the vectorised paths of ops/output.c (output_simd.c):
 * a sample's planes written from a per-channel table of element bits, and
 * the streaming copy of NHWC uint8 rows. They give the scalar loops'
 * bytes; they differ in how they store (streaming or not), never in what. */
#ifndef FF_OPS_OUTPUT_SIMD_H
#define FF_OPS_OUTPUT_SIMD_H

#include <stddef.h>
#include <stdint.h>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__CUDACC__)
#define FF__OUTPUT_SIMD 1

/* A sample's pixels: interleaved RGB rows (rows, stride), or, when planes
 * is set, three planes of w x h values one after the other. */
typedef struct ff__output_src {
  const uint8_t *rows;
  size_t stride;
  const uint8_t *planes;
  int w, h;
} ff__output_src;

/* The three planes of table[c][v]'s low elem bytes (1, 2 or 4) at dst (plane
 * c at c * w * h elements); stream: with streaming stores (then fenced). */
void ff__output_planes_avx512(const uint32_t table[3][256], int elem, const ff__output_src *src, void *dst,
                              int stream);
void ff__output_planes_avx2(const uint32_t table[3][256], int elem, const ff__output_src *src, void *dst,
                            int stream);

/* n bytes from src to dst; stream: with streaming stores where aligned
 * (not fenced: ff__output_fence after the last). */
void ff__output_copy(void *dst, const void *src, size_t n, int stream);

/* Orders the streaming stores before what follows (the slot's hand-over). */
void ff__output_fence(void);
#endif

#endif
