/* cpu.c — the instruction-set cap of the CPU kernels (cpu.h): what the CPU
 * has, from its feature bits, lowered by $FF_CPU_ISA. The compiler's
 * function clones (FF_FMA_CLONES, picked when the library loads) are not
 * capped: they compute the same results by construction. */
#include "core/cpu.h"

#include "fusionflow/fusionflow.h"

#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cpu_best(void) {
#if defined(__x86_64__) && defined(__GNUC__)
  int avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl"))
    return FF__ISA_AVX512;
  if (avx2) return FF__ISA_AVX2;
#endif
  return FF__ISA_SCALAR;
}

static int isa_cap(void) {
  static _Atomic int known = -1;
  int cap = atomic_load_explicit(&known, memory_order_relaxed);
  if (cap >= 0) return cap;
  cap = cpu_best();
  const char *want = getenv("FF_CPU_ISA");
  static const char *const names[] = {"scalar", "avx2", "avx512"};
  int asked = -1;
  for (int i = 0; want && i < 3; i++)
    if (!strcmp(want, names[i])) asked = i;
  if (asked >= 0 && asked < cap) cap = asked;
  int expected = -1; /* the first caller tells about a bad value, once */
  if (atomic_compare_exchange_strong(&known, &expected, cap) && want && *want && asked < 0)
    fprintf(stderr, "fusionflow: FF_CPU_ISA='%s' is not scalar, avx2 or avx512: ignored\n", want);
  return atomic_load_explicit(&known, memory_order_relaxed);
}

int ff__isa_allows(ff__isa isa) { return isa_cap() >= (int)isa; }

const char *ff_cpu_isa(void) {
  int cap = isa_cap();
  return cap == FF__ISA_AVX512 ? "avx512" : cap == FF__ISA_AVX2 ? "avx2" : "scalar";
}

int ff__cpu_cores(void) {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
  return 1;
}
