/* trace.c — the loader's timeline (see trace.h): a fixed array of complete
 * ("X") events filled in order, and a writer that names the tracks with
 * metadata events. Times are written in microseconds from the first event
 * recorded, as the format expects. */
#include "loader/trace.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct event {
  uint64_t start_ns, dur_ns;
  const char *name, *arg_name;
  int64_t arg;
  int track;
} event;

struct ff__trace {
  event *events;
  size_t cap, count, dropped;
  uint64_t origin_ns;
};

ff__trace *ff__trace_create(size_t max_events) {
  ff__trace *t = calloc(1, sizeof *t);
  if (!t) return NULL;
  t->cap = max_events ? max_events : 1;
  t->events = malloc(t->cap * sizeof *t->events);
  if (!t->events) {
    free(t);
    return NULL;
  }
  return t;
}

void ff__trace_destroy(ff__trace *t) {
  if (!t) return;
  free(t->events);
  free(t);
}

void ff__trace_span(ff__trace *t, int track, const char *name, uint64_t start_ns, uint64_t dur_ns,
                    const char *arg_name, int64_t arg) {
  if (t->count == t->cap) {
    t->dropped++;
    return;
  }
  if (!t->count || start_ns < t->origin_ns) t->origin_ns = start_ns;
  t->events[t->count++] = (event){start_ns, dur_ns, name, arg_name, arg, track};
}

void ff__trace_counts(const ff__trace *t, size_t *kept, size_t *dropped) {
  *kept = t->count, *dropped = t->dropped;
}

static void track_name(FILE *f, int track, const char *name) {
  fprintf(f, ",\n{\"ph\": \"M\", \"pid\": 1, \"tid\": %d, \"name\": \"thread_name\", \"args\": {\"name\": \"%s\"}},\n{\"ph\": \"M\", \"pid\": 1, \"tid\": %d, \"name\": \"thread_sort_index\", "
             "\"args\": {\"sort_index\": %d}}", track, name, track, track);
}

ff_status ff__trace_write(const ff__trace *t, const char *path, int num_workers, ff__error *err) {
  FILE *f = fopen(path, "w");
  if (!f) return ff__error_set(err, FF_EIO, "%s: cannot write the trace: %s", path, strerror(errno));
  fprintf(f, "[{\"ph\": \"M\", \"pid\": 1, \"name\": \"process_name\", \"args\": {\"name\": \"fusionflow "
             "loader%s\"}}", t->dropped ? " (trace capped: later events dropped)" : "");
  track_name(f, FF__TRACK_CONSUMER, "consumer (waits)");
  track_name(f, FF__TRACK_DEVICE, "device stream (microbatches)");
  track_name(f, FF__TRACK_FEEDER, "device feeder (batches it handed back)");
  track_name(f, FF__TRACK_REMOTE, "remote workers (microbatches, submit to complete)");
  for (int i = 0; i < num_workers; i++) {
    char name[32];
    snprintf(name, sizeof name, "CPU worker %d", i);
    track_name(f, FF__TRACK_WORKER + i, name);
  }
  for (size_t i = 0; i < t->count; i++) {
    const event *e = &t->events[i];
    fprintf(f, ",\n{\"ph\": \"X\", \"pid\": 1, \"tid\": %d, \"name\": \"%s\", \"ts\": %.3f, \"dur\": %.3f",
            e->track, e->name, (double)(e->start_ns - t->origin_ns) / 1e3, (double)e->dur_ns / 1e3);
    if (e->arg_name) fprintf(f, ", \"args\": {\"%s\": %lld}", e->arg_name, (long long)e->arg);
    fputc('}', f);
  }
  fprintf(f, "\n]\n");
  if (fclose(f)) return ff__error_set(err, FF_EIO, "%s: cannot write the trace: %s", path, strerror(errno));
  return FF_OK;
}
