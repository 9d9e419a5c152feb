/* emu_probe.h — what tests (and the late-copy gate of the Python tests)
 * read and steer in the emulated device: counts of its calls, its host
 * allocations, queued waits, gates held by hand and the thread's current
 * emulated device. Not part of the device interface (device.h,
 * device_impl.h); defined in exec/emu.c. */
#ifndef FF_EXEC_EMU_PROBE_H
#define FF_EXEC_EMU_PROBE_H

#include "exec/device.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The emulator's records, for tests. misplaced_calls: backend calls made
 * while the device was not current on the calling thread (0 when the device
 * layer brackets every call); device_switches: times a bracket made it
 * current. */
typedef struct ff__emu_counts {
  unsigned long misplaced_calls, device_switches;
  /* copy calls queued, by ff__copy_kind (a batched download is one call), and their bytes */
  unsigned long copy_calls[3];
  unsigned long long copy_bytes[3];
  unsigned long trims; /* mem_trim calls (the pool gave memory back to a shrinking budget) */
  unsigned long shape_launches[4]; /* launches by shape (kernels/stage_block.h's ff__dshape) */
  unsigned long launches, decodes; /* launches queued; decode calls queued (a batch is one) */
} ff__emu_counts;
ff_status ff__emu_probe(ff__device *d, ff__emu_counts *out); /* FF_EINVAL when d is not emu */
/* Whether ptr is a live allocation of d's host allocator (d emu). */
int ff__emu_host_owns(ff__device *d, const void *ptr);
/* How many waits of stream s on event e were queued. */
int ff__emu_waited(ff__device *d, const ff__dstream *s, const ff__devent *e);
/* A gate a test opens by hand: after hold, work queued behind a wait on e
 * (ff__device_stream_wait, ff__device_foreign_wait) does not run, and e
 * does not complete, until signal — as if e were recorded on a stream that
 * has not got there yet (a trainer's, busy). */
void ff__emu_event_hold(ff__device *d, ff__devent *e);
void ff__emu_event_signal(ff__device *d, ff__devent *e);
/* The calling thread's current emulated device (-1: none), and setting it
 * (as a program that made a device current would). */
int ff__emu_current_device(void);
void ff__emu_set_current_device(int ordinal);

#ifdef __cplusplus
}
#endif

#endif
