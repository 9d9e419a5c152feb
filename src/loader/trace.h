/* trace.h — a bounded timeline of the loader's work, written as a Chrome
 * trace (the JSON array format that Perfetto and chrome://tracing open):
 * one track per CPU worker (read / decode / ops spans of each sample), one
 * for the device stream (microbatch submit → complete), one for the
 * batches the feeder handed back to the workers and one for the consumer
 * (its waits, and a "threads" mark where the node coordinator changed the
 * allotment).
 *
 * Memory is bounded: events past max_events are counted and dropped. Not
 * thread-safe: the loader records and writes under its lock. */
#ifndef FF_LOADER_TRACE_H
#define FF_LOADER_TRACE_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

typedef struct ff__trace ff__trace;

/* Tracks: the consumer, the device stream, the feeder, remote microbatches, then worker i at
 * FF__TRACK_WORKER + i. */
enum { FF__TRACK_CONSUMER = 0, FF__TRACK_DEVICE = 1, FF__TRACK_FEEDER = 2, FF__TRACK_REMOTE = 3, FF__TRACK_WORKER = 4 };

/* A trace of at most max_events events; NULL when out of memory. */
ff__trace *ff__trace_create(size_t max_events);
void ff__trace_destroy(ff__trace *t);

/* A span on track from start_ns for dur_ns (ff__now_ns clock); name is a
 * static string; arg is shown as the span's "sample" or "batch" (arg_name,
 * static, NULL for none). */
void ff__trace_span(ff__trace *t, int track, const char *name, uint64_t start_ns, uint64_t dur_ns,
                    const char *arg_name, int64_t arg);

/* Events kept and dropped so far. */
void ff__trace_counts(const ff__trace *t, size_t *kept, size_t *dropped);

/* Writes the trace to path (num_workers names the worker tracks). FF_OK or
 * FF_EIO naming the path. */
ff_status ff__trace_write(const ff__trace *t, const char *path, int num_workers, ff__error *err);

#endif
