/* clock.h — the monotonic clock every timing in fusionflow uses, and the
 * thread CPU clock for what a thread itself ran. */
#ifndef FF_CORE_CLOCK_H
#define FF_CORE_CLOCK_H

#include <stdint.h>

/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t ff__now_ns(void);

/* The calling thread's CPU time (CLOCK_THREAD_CPUTIME_ID) in nanoseconds:
 * what it ran, not the time other processes held its core; 0 if the clock
 * cannot be read. */
uint64_t ff__thread_cpu_ns(void);

#endif
