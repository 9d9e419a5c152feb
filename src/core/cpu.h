/* cpu.h — which instruction sets the CPU kernels' hand-written vector paths
 * may use in this process: the CPU's own, capped by $FF_CPU_ISA. Every path
 * gives the bytes of the scalar code, so the cap changes speed, never
 * pixels; it lets a test run one process on another path than its peers. */
#ifndef FF_CORE_CPU_H
#define FF_CORE_CPU_H

typedef enum ff__isa {
  FF__ISA_SCALAR = 0, /* no hand-written vector path (the compiler's x86-64 baseline code only) */
  FF__ISA_AVX2 = 1,   /* AVX2 with FMA (and the SSSE3 paths) */
  FF__ISA_AVX512 = 2, /* AVX-512 F, BW and VL (a path that needs more checks that too) */
} ff__isa;

/* Whether the vector paths of `isa` may run: the CPU has it and
 * $FF_CPU_ISA ("scalar", "avx2" or "avx512"; unset or empty: no cap) does
 * not cap below it (ff_cpu_isa in fusionflow.h names the widest allowed). The variable is read once, at the first call; an
 * unknown value is named on stderr once and ignored. Thread-safe. */
int ff__isa_allows(ff__isa isa);

/* The cores this process may run on (its CPU affinity), at least 1: the
 * default number of worker threads. */
int ff__cpu_cores(void);

#endif
