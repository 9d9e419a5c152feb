/* clock.h — the monotonic clock every timing in fusionflow uses. */
#ifndef FF_CORE_CLOCK_H
#define FF_CORE_CLOCK_H

#include <stdint.h>

/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t ff__now_ns(void);

/* Sleeps ms milliseconds (whole, signals notwithstanding). */
void ff__sleep_ms(int ms);

#endif
