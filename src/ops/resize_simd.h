/* resize_simd.h — the vectorised passes of ops/resize.c: the tables they
 * read and their entry points (AVX-512 in resize_avx512.c, AVX2 in
 * resize_avx2.c). Each lane of a vector computes one output value with
 * exactly the operations of kernels/resize.h's scalar sums, in their order:
 * the tables only say which input each lane reads at each tap, its weight,
 * and whether the lane adds that tap's rounded product or fuses it.
 *
 * Images travel as float32 planes: an input row becomes three planes (R,
 * G, B) of its width plus FF__RESIZE_PLANE_PAD zeros; a row of the
 * horizontal pass is three planes of out_pad floats (the output width
 * rounded up to a whole vector). */
#ifndef FF_OPS_RESIZE_SIMD_H
#define FF_OPS_RESIZE_SIMD_H

#include <stddef.h>
#include <stdint.h>

/* Zeros after each input plane: the widest window a block reads past its base. */
#define FF__RESIZE_PLANE_PAD 64

/* The most vertical taps the vector paths take (longer sums run scalar). */
#define FF__RESIZE_MAX_VTAPS 256

/* A block of `lanes` consecutive output positions of the horizontal pass
 * (the last one padded with lanes of weight 0). */
typedef struct ff__hblock {
  int base;  /* the first input pixel of the block's window */
  int taps;  /* taps to run: the most any of its lanes has; past its own, a lane's weight is 0 */
  int wide;  /* vector registers the window spans (AVX-512: 2 or 4, AVX2: 1, 2 or 4); 0: gathers */
  int plain; /* every lane adds taps 1 .. plain as rounded products and fuses the rest; -1: the lanes
                differ, the record's fuse mask says which lanes fuse */
  int rec;   /* the record of its first tap; tap t is record rec + t */
} ff__hblock;

/* The horizontal pass's tables for one resize. */
typedef struct ff__hpass {
  int lanes, blocks, out_pad;
  ff__hblock *block;
  int32_t *idx;   /* [record][lane]: the input pixel, relative to the block's base (absolute: gathers) */
  float *w;       /* [record][lane]: the weight */
  uint32_t *fuse; /* [record]: bit l set when lane l fuses the tap */
} ff__hpass;

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__CUDACC__)
#define FF__RESIZE_SIMD 1

/* One input row of w RGB pixels as three float planes (plane c at
 * planes[c]; the pad after each is left alone). */
void ff__resize_planes_avx512(const uint8_t *row, int w, float *const planes[3]);
void ff__resize_planes_avx2(const uint8_t *row, int w, float *const planes[3]);

/* The horizontal pass of one row: in[c] the input planes, out[c] the
 * out_pad floats of each output plane. */
void ff__resize_hrow_avx512(const ff__hpass *h, const float *const in[3], float *const out[3]);
/* The same for two rows: in[3 * r + c], out[3 * r + c] for row r. */
void ff__resize_hrow2_avx512(const ff__hpass *h, const float *const in[6], float *const out[6]);
void ff__resize_hrow_avx2(const ff__hpass *h, const float *const in[3], float *const out[3]);

/* The vertical pass of one output row over n rows of the horizontal pass
 * (rows[t]: plane 0 of the row tap t reads; plane c at + c * out_pad) with
 * weights w[t], taps 1 .. plain added as rounded products, the rest fused;
 * rounded half to even and clamped into out[c][0 .. width). */
void ff__resize_vrow_avx512(const float *const *rows, int n, const float *w, int plain, int out_pad, int width,
                            uint8_t *const out[3]);
void ff__resize_vrow_avx2(const float *const *rows, int n, const float *w, int plain, int out_pad, int width,
                          uint8_t *const out[3]);

/* Interleaves three planes' first n bytes into n RGB pixels at out. */
void ff__resize_interleave_avx512(const uint8_t *const in[3], int n, uint8_t *out);
#endif

#endif
