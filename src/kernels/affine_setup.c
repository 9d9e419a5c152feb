/* affine_setup.c — which rounding torch's affine grid takes on this host
 * (ff__affine_torch_fused, kernels/affine_setup.h): a CPU probe and MKL's
 * settings, read once. Host only; it sits beside the setup it serves, so
 * that kernels/ calls nothing above it. */
#include "kernels/affine_setup.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* Whether `name` is one of the words in `list` (a NULL-terminated list). */
static int is_one_of(const char *name, size_t len, const char *const *list) {
  for (; *list; list++)
    if (strlen(*list) == len && !strncmp(name, *list, len)) return 1;
  return 0;
}

/* MKL's branch under MKL_ENABLE_INSTRUCTIONS and MKL_CBWR, as torch's MKL
 * (2024.2) took it in a probe of its grid on an Intel CPU with AVX-512:
 * 1 fused, 0 not, -1 the setting does not decide (unset, or a value MKL
 * ignores: names are case-sensitive). MKL_ENABLE_INSTRUCTIONS decides
 * first; MKL_CBWR is "[BRANCH=]NAME[,STRICT]", and its AVX2 branch fuses
 * only when strict. On an AMD CPU with AVX-512 (Zen 4) no setting fused. */
static int mkl_setting_fuses(const char *isa, const char *cbwr) {
  static const char *const isa_fused[] = {"AVX512", "AVX512_E1", "AVX512_E2", "AVX512_E3", "AVX512_E4", 0};
  static const char *const isa_plain[] = {"SSE4_2", "AVX", "AVX2", "AVX2_E1", 0};
  static const char *const cbwr_fused[] = {"AUTO", "AVX512", "AVX512_E1", 0};
  static const char *const cbwr_plain[] = {"COMPATIBLE", "SSE2",       "SSE3",          "SSSE3", "SSE4_1",
                                           "SSE4_2",     "AVX512_MIC", "AVX512_MIC_E1", "AVX",   0};
  if (isa && is_one_of(isa, strlen(isa), isa_fused)) return 1;
  if (isa && is_one_of(isa, strlen(isa), isa_plain)) return 0;
  if (!cbwr) return -1;
  if (!strncmp(cbwr, "BRANCH=", 7)) cbwr += 7;
  const char *comma = strchr(cbwr, ',');
  size_t len = comma ? (size_t)(comma - cbwr) : strlen(cbwr);
  int strict = comma && !strcmp(comma, ",STRICT");
  if (is_one_of(cbwr, len, cbwr_fused)) return 1;
  if (is_one_of(cbwr, len, cbwr_plain)) return 0;
  if (len == 4 && !strncmp(cbwr, "AVX2", 4)) return strict;
  return -1; /* MKL falls back to AUTO */
}

int ff__affine_torch_fused(void) {
  static _Atomic int known = -1; /* read once: MKL too reads its settings when it starts */
  int fused = atomic_load_explicit(&known, memory_order_relaxed);
  if (fused >= 0) return fused;
#if defined(__x86_64__) && defined(__GNUC__)
  fused = __builtin_cpu_is("intel") && ff__cpu_has_avx512() && __builtin_cpu_supports("avx512cd") &&
          __builtin_cpu_supports("avx512dq");
#else
  fused = 0;
#endif
  int setting = mkl_setting_fuses(getenv("MKL_ENABLE_INSTRUCTIONS"), getenv("MKL_CBWR"));
  if (setting >= 0) fused = fused && setting;
  atomic_store_explicit(&known, fused, memory_order_relaxed);
  return fused;
}
