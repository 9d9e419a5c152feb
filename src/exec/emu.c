/* emu.c — the host-emulated device `emu:N`: the device interface on host
 * memory, for machines without a GPU and for tests.
 *
 * One emulator thread plays the GPU: every stream's copies, launches and
 * event records go into one FIFO that the thread works through in order (so
 * each stream's order holds), and an event completes when the thread passes
 * it. A launch runs ff__dstage_elem — the function each CUDA thread runs —
 * for every element of every sample's stage, so the emulator computes what
 * the kernels compute, bit for bit. "Device" memory is host memory counted
 * against a fixed size (2 GiB, or `?mem=`), so the pool's budget behaves as
 * on a GPU. Faults can be injected — raw allocations failing after N, the
 * launch numbered N failing — from the options or FF_EMU_FAULTS
 * ("alloc:3,kernel:5"); a failed launch surfaces at the next event query or
 * wait, as a CUDA kernel error does, and the device stays usable.
 * Its decoder decodes JPEG on the emulator thread through the codec layer
 * (libjpeg-turbo, the same region and DCT-scale decode as the CPU), so a
 * device-decoded sample is bit-identical to a CPU-decoded one; with
 * `?decode=nvjpeg` it uses nvJPEG's arithmetic instead (no fancy
 * upsampling, the IFAST IDCT), so that what depends on bit identity can be
 * shown to. Like nvJPEG it leaves PNG to the CPU; CMYK/YCCK JPEG it
 * decodes as the CPU does (Pillow's conversion), unlike nvJPEG. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/bytes.h"
#include "core/clock.h"
#include "exec/device_impl.h"
#include "kernels/stage.h"

enum { CMD_COPY, CMD_LAUNCH, CMD_RECORD, CMD_DECODE };

typedef struct emu_event {
  uint64_t seq;     /* the record command's number; 0 = never recorded (complete) */
  uint64_t time_ns; /* when the emulator passed it */
} emu_event;

typedef struct emu_cmd {
  int kind;
  uint64_t seq;
  void *dst;
  const void *src;
  size_t size_bytes;
  int n, stride, k;
  unsigned launch_no;
  emu_event *event;
  ff__device_decode_job *job;
} emu_cmd;

typedef struct emu {
  int ordinal;
  pthread_t thread;
  pthread_mutex_t lock;
  pthread_cond_t work, done;
  emu_cmd *queue; /* ring of cap commands from head */
  size_t head, count, cap;
  uint64_t submitted, completed;
  int stop;
  size_t mem_bytes, used_bytes;
  unsigned allocs, launches, fail_alloc_after, fail_kernel_at;
  uint64_t fault_seq; /* a failed command not yet reported; 0 = none */
  char fault_msg[128];
  ff__jpeg_variant variant; /* the decoder's arithmetic */
  ff__buf decoded;          /* the emulator thread's decode buffer */
} emu;

#define HEADER 256 /* bytes before each block: its size, and 256-byte alignment */

/* ------------------------------------------------------------ the thread */

FF_FMA_CLONES static void run_launch(const emu_cmd *c) {
  const ff__dstage *table = c->src;
  for (int s = 0; s < c->n; s++) {
    const ff__dstage *st = &table[(size_t)s * c->stride + c->k];
    for (uint32_t e = 0; e < st->count; e++)
      ff__dstage_elem(st, e);
  }
}

/* A decode on the emulator thread: the codec's decode, then the region
 * packed into the job's device memory. */
static void run_decode(emu *m, ff__device_decode_job *job) {
  ff__image img;
  job->status =
      ff__codec_decode_as(job->src, job->size_bytes, job->name, &job->req, m->variant, &m->decoded, &img, &job->err);
  if (job->status) return;
  size_t row = (size_t)img.width * 3;
  if (row * (size_t)img.height > job->dst_bytes) {
    job->status = ff__error_set(&job->err, FF_EINTERNAL, "%s: emu:%d: decoded %dx%d does not fit %zu bytes",
                                job->name, m->ordinal, img.width, img.height, job->dst_bytes);
    return;
  }
  for (int y = 0; y < img.height; y++)
    memcpy((uint8_t *)job->d_dst + (size_t)y * row, img.data + (size_t)y * img.stride, row);
  job->width = img.width, job->height = img.height, job->offset_bytes = 0, job->pitch_bytes = row;
}

static void *emu_main(void *arg) {
  emu *m = arg;
  pthread_mutex_lock(&m->lock);
  for (;;) {
    while (!m->count && !m->stop)
      pthread_cond_wait(&m->work, &m->lock);
    if (!m->count) break;
    emu_cmd c = m->queue[m->head];
    m->head = (m->head + 1) % m->cap, m->count--;
    pthread_mutex_unlock(&m->lock);
    int fault = 0;
    if (c.kind == CMD_COPY)
      memcpy(c.dst, c.src, c.size_bytes);
    else if (c.kind == CMD_LAUNCH && c.launch_no == m->fail_kernel_at)
      fault = 1;
    else if (c.kind == CMD_LAUNCH)
      run_launch(&c);
    else if (c.kind == CMD_DECODE)
      run_decode(m, c.job);
    uint64_t now = ff__now_ns();
    pthread_mutex_lock(&m->lock);
    if (c.kind == CMD_RECORD) c.event->time_ns = now;
    if (fault && !m->fault_seq) {
      m->fault_seq = c.seq;
      snprintf(m->fault_msg, sizeof m->fault_msg, "emu:%d: kernel launch %u failed (injected fault)",
               m->ordinal, c.launch_no);
    }
    m->completed = c.seq;
    pthread_cond_broadcast(&m->done);
  }
  pthread_mutex_unlock(&m->lock);
  return NULL;
}

static ff_status submit(emu *m, emu_cmd c, ff__error *err) {
  pthread_mutex_lock(&m->lock);
  if (m->count == m->cap) {
    size_t cap = m->cap ? 2 * m->cap : 64;
    emu_cmd *q = malloc(cap * sizeof *q);
    if (!q) {
      pthread_mutex_unlock(&m->lock);
      return ff__error_set(err, FF_ENOMEM, "emu:%d: out of memory queueing work", m->ordinal);
    }
    for (size_t i = 0; i < m->count; i++)
      q[i] = m->queue[(m->head + i) % m->cap];
    free(m->queue);
    m->queue = q, m->head = 0, m->cap = cap;
  }
  c.seq = ++m->submitted;
  if (c.kind == CMD_LAUNCH) c.launch_no = ++m->launches;
  if (c.kind == CMD_RECORD) c.event->seq = c.seq;
  m->queue[(m->head + m->count++) % m->cap] = c;
  pthread_cond_signal(&m->work);
  pthread_mutex_unlock(&m->lock);
  return FF_OK;
}

/* ------------------------------------------------------------ backend */

static void emu_synchronize(void *impl) {
  emu *m = impl;
  pthread_mutex_lock(&m->lock);
  while (m->completed != m->submitted)
    pthread_cond_wait(&m->done, &m->lock);
  pthread_mutex_unlock(&m->lock);
}

static void emu_close(void *impl) {
  emu *m = impl;
  pthread_mutex_lock(&m->lock);
  m->stop = 1;
  pthread_cond_signal(&m->work);
  pthread_mutex_unlock(&m->lock);
  pthread_join(m->thread, NULL);
  pthread_cond_destroy(&m->work);
  pthread_cond_destroy(&m->done);
  pthread_mutex_destroy(&m->lock);
  ff__buf_free(&m->decoded);
  free(m->queue);
  free(m);
}

static ff_status emu_mem_alloc(void *impl, size_t size_bytes, void **out) {
  emu *m = impl;
  pthread_mutex_lock(&m->lock);
  int ok = !(m->fail_alloc_after && m->allocs >= m->fail_alloc_after) &&
           size_bytes <= m->mem_bytes - m->used_bytes;
  m->allocs++;
  char *p = ok ? aligned_alloc(HEADER, (size_bytes + HEADER + HEADER - 1) / HEADER * HEADER) : NULL;
  if (p) m->used_bytes += size_bytes;
  pthread_mutex_unlock(&m->lock);
  if (!p) return FF_EDEVICE;
  memcpy(p, &size_bytes, sizeof size_bytes);
  *out = p + HEADER;
  return FF_OK;
}

static void emu_mem_free(void *impl, void *ptr) {
  emu *m = impl;
  char *p = (char *)ptr - HEADER;
  size_t size_bytes;
  memcpy(&size_bytes, p, sizeof size_bytes);
  free(p);
  pthread_mutex_lock(&m->lock);
  m->used_bytes -= size_bytes;
  pthread_mutex_unlock(&m->lock);
}

static ff_status emu_mem_info(void *impl, size_t *free_bytes, size_t *total_bytes) {
  emu *m = impl;
  pthread_mutex_lock(&m->lock);
  *free_bytes = m->mem_bytes - m->used_bytes, *total_bytes = m->mem_bytes;
  pthread_mutex_unlock(&m->lock);
  return FF_OK;
}

static ff_status emu_host_alloc(void *impl, size_t size_bytes, void **out, ff__error *err) {
  emu *m = impl;
  void *p = malloc(size_bytes);
  if (!p) return ff__error_set(err, FF_ENOMEM, "emu:%d: no %zu bytes of host memory", m->ordinal, size_bytes);
  *out = p;
  return FF_OK;
}

static void emu_host_free(void *impl, void *ptr) {
  (void)impl;
  free(ptr);
}

static ff_status emu_stream_create(void *impl, void **out, ff__error *err) {
  emu *m = impl;
  void *s = malloc(1); /* streams share the FIFO: a stream is only a handle */
  if (!s) return ff__error_set(err, FF_ENOMEM, "emu:%d: out of memory", m->ordinal);
  *out = s;
  return FF_OK;
}

static void emu_stream_destroy(void *impl, void *stream) {
  (void)impl;
  free(stream);
}

static ff_status emu_copy(void *impl, void *stream, void *dst, const void *src, size_t size_bytes,
                          int to_device, ff__error *err) {
  (void)stream, (void)to_device;
  return submit(impl, (emu_cmd){.kind = CMD_COPY, .dst = dst, .src = src, .size_bytes = size_bytes}, err);
}

static ff_status emu_event_create(void *impl, void **out, ff__error *err) {
  emu *m = impl;
  emu_event *e = calloc(1, sizeof *e);
  if (!e) return ff__error_set(err, FF_ENOMEM, "emu:%d: out of memory", m->ordinal);
  *out = e;
  return FF_OK;
}

static void emu_event_destroy(void *impl, void *event) {
  (void)impl;
  free(event);
}

static ff_status emu_event_record(void *impl, void *event, void *stream, ff__error *err) {
  (void)stream;
  return submit(impl, (emu_cmd){.kind = CMD_RECORD, .event = event}, err);
}

/* FF_EDEVICE (once) when a command up to the event failed. Called locked. */
static ff_status take_fault(emu *m, const emu_event *e, ff__error *err) {
  if (!m->fault_seq || m->fault_seq > e->seq) return FF_OK;
  m->fault_seq = 0;
  return ff__error_set(err, FF_EDEVICE, "%s", m->fault_msg);
}

static ff_status emu_event_query(void *impl, void *event, int *done, ff__error *err) {
  emu *m = impl;
  emu_event *e = event;
  pthread_mutex_lock(&m->lock);
  *done = m->completed >= e->seq;
  ff_status st = *done ? take_fault(m, e, err) : FF_OK;
  pthread_mutex_unlock(&m->lock);
  return st;
}

static ff_status emu_event_wait(void *impl, void *event, ff__error *err) {
  emu *m = impl;
  emu_event *e = event;
  pthread_mutex_lock(&m->lock);
  while (m->completed < e->seq)
    pthread_cond_wait(&m->done, &m->lock);
  ff_status st = take_fault(m, e, err);
  pthread_mutex_unlock(&m->lock);
  return st;
}

static ff_status emu_event_elapsed_ms(void *impl, void *start, void *end, float *ms, ff__error *err) {
  emu *m = impl;
  emu_event *a = start, *b = end;
  pthread_mutex_lock(&m->lock);
  int ready = a->seq && b->seq && m->completed >= a->seq && m->completed >= b->seq;
  uint64_t t0 = a->time_ns, t1 = b->time_ns;
  pthread_mutex_unlock(&m->lock);
  if (!ready)
    return ff__error_set(err, FF_EINVAL, "emu:%d: elapsed time of events not completed", m->ordinal);
  *ms = (float)((double)(int64_t)(t1 - t0) / 1e6);
  return FF_OK;
}

static ff_status emu_launch(void *impl, void *stream, const void *d_table, int n, int stride, int k,
                            uint32_t max_count, ff__error *err) {
  (void)stream, (void)max_count;
  return submit(impl, (emu_cmd){.kind = CMD_LAUNCH, .src = d_table, .n = n, .stride = stride, .k = k}, err);
}

static const char *emu_decoder(void *impl, const char **why) {
  (void)why;
  return ((emu *)impl)->variant == FF__JPEG_EXACT ? "libjpeg-turbo" : "nvjpeg-like";
}

static int emu_decode_takes(void *impl, const ff__image_info *info, const char **why) {
  (void)impl;
  if (info->format != FF__FORMAT_JPEG) return *why = "not a JPEG", 0;
  return 1;
}

static ff_status emu_decode(void *impl, void *stream, ff__device_decode_job *job, ff__error *err) {
  (void)stream;
  return submit(impl, (emu_cmd){.kind = CMD_DECODE, .job = job}, err);
}

static const ff__device_backend emu_backend = {
    emu_synchronize,      emu_close,         emu_mem_alloc,     emu_mem_free,       emu_mem_info,
    emu_host_alloc,       emu_host_free,     emu_stream_create, emu_stream_destroy, emu_copy,
    emu_event_create,     emu_event_destroy, emu_event_record,  emu_event_query,    emu_event_wait,
    emu_event_elapsed_ms, emu_launch,        emu_decoder,       emu_decode_takes,   emu_decode,
    NULL,
};

/* ------------------------------------------------------------ open */

/* FF_EMU_FAULTS="alloc:3,kernel:5"; 0 when malformed. */
static int parse_faults(const char *s, unsigned *alloc_after, unsigned *kernel_at) {
  while (*s) {
    unsigned *dst = !strncmp(s, "alloc:", 6) ? alloc_after : !strncmp(s, "kernel:", 7) ? kernel_at : NULL;
    if (!dst) return 0;
    s = strchr(s, ':') + 1;
    char *stop;
    unsigned long v = strtoul(s, &stop, 10);
    if (stop == s || (*stop && *stop != ',')) return 0;
    *dst = (unsigned)v;
    s = *stop ? stop + 1 : stop;
  }
  return 1;
}

ff_status ff__emu_open(int ordinal, const char *query, const ff__device_options *opt, ff__device_opened *out,
                       ff__error *err) {
  size_t mem = opt->emu_mem_bytes;
  ff__jpeg_variant variant = FF__JPEG_EXACT;
  for (const char *q = query; *q;) { /* "mem=256M&decode=nvjpeg" */
    size_t len = strcspn(q, "&"), bytes = 0;
    char item[64];
    snprintf(item, sizeof item, "%.*s", (int)len, q);
    if (!strcmp(item, "decode=nvjpeg")) variant = FF__JPEG_NVJPEG_LIKE;
    else if (!strcmp(item, "decode=exact")) variant = FF__JPEG_EXACT;
    else if (!strncmp(item, "mem=", 4) && ff__parse_bytes(item + 4, &bytes) && bytes) mem = mem ? mem : bytes;
    else
      return ff__error_set(err, FF_EINVAL, "emu:%d?%s: expected ?mem=SIZE (e.g. 256M) and/or decode=exact|nvjpeg",
                           ordinal, query);
    q += len + (q[len] == '&');
  }
  if (!mem) mem = (size_t)2 << 30;
  unsigned alloc_after = opt->emu_fail_alloc_after, kernel_at = opt->emu_fail_kernel_at;
  const char *faults = getenv("FF_EMU_FAULTS");
  if (faults && !alloc_after && !kernel_at && !parse_faults(faults, &alloc_after, &kernel_at))
    return ff__error_set(err, FF_EINVAL, "FF_EMU_FAULTS='%s': expected e.g. alloc:3,kernel:5", faults);

  emu *m = calloc(1, sizeof *m);
  if (!m) return ff__error_set(err, FF_ENOMEM, "emu:%d: out of memory", ordinal);
  m->ordinal = ordinal, m->mem_bytes = mem;
  m->fail_alloc_after = alloc_after, m->fail_kernel_at = kernel_at;
  m->variant = variant;
  pthread_mutex_init(&m->lock, NULL);
  pthread_cond_init(&m->work, NULL);
  pthread_cond_init(&m->done, NULL);
  if (pthread_create(&m->thread, NULL, emu_main, m)) {
    pthread_cond_destroy(&m->work);
    pthread_cond_destroy(&m->done);
    pthread_mutex_destroy(&m->lock);
    free(m);
    return ff__error_set(err, FF_ENOMEM, "emu:%d: cannot start the emulator thread", ordinal);
  }
  *out = (ff__device_opened){&emu_backend, m, 0, ""};
  snprintf(out->name, sizeof out->name, "emu:%d", ordinal);
  return FF_OK;
}
