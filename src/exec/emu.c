/* emu.c — the host-emulated device `emu:N`: the device interface on host
 * memory, for machines without a GPU and for tests.
 *
 * One thread per engine plays the GPU, as a GPU has engines of its own: the
 * copy engine in (host to device, device to device), the copy engine out
 * (device to host), the SMs (launches) and the JPEG decoder. Each stream is
 * its own FIFO of commands; an engine takes the head command of its kind of
 * a stream picked at random among those whose head it can run, so work on
 * different streams completes in an order no caller may rely on — only each
 * stream's order and the waits between streams hold, as on a GPU. Event
 * records and waits take no engine: they settle as soon as they reach the
 * head of their stream (a wait once its event has completed). The engines'
 * delays overlap; their work itself runs one command at a time (one lock),
 * so the emulator's memory accesses stay ordered. `?delay=` (or
 * opt.emu_delay_us) adds a random delay of up to that many microseconds
 * before each command, so completion comes late too; FF_EMU_DELAYS
 * ("decode:80000,kernel:60000,h2d:40000,d2h:40000", µs per command of that
 * engine) makes each command of an engine take that long, so a test can
 * show which delays of a pipeline add up and which overlap. An event
 * completes when its last record settles; which stream waited on which
 * event is recorded (ff__emu_waited). A launch runs the CUDA kernel of its
 * kind block after block with the functions each CUDA thread runs
 * (ff__dstage_elem_as, and for the block-wide sums, histograms and table
 * builds kernels/stage_block.h's), so the emulator computes what the
 * kernels compute, bit for bit, fast paths included. A consumer's NULL
 * stream handle names the emulator's default stream (as 0 names CUDA's
 * legacy one); a retire record waits, on a stream of its own, for every
 * one of our streams' work queued before it.
 * "Device" memory is host memory counted against a fixed size (2 GiB, or
 * `?mem=`), so the pool's budget behaves as on a GPU: over it the device
 * says out of memory (FF__EBUDGET). Faults can be injected — raw
 * allocations failing as out of memory after N, the raw allocation numbered
 * N failing with a device error, the launch numbered N failing — from the
 * options or FF_EMU_FAULTS ("alloc:3,allocerr:2,kernel:5"); a failed launch
 * surfaces at the next query or wait of an event recorded after it on its
 * stream, as a CUDA kernel error does, and the device stays usable.
 *
 * Like CUDA's current device, each thread has a current emulated device
 * (none at first). Every backend call checks that the device layer made
 * this device current around it, and counts the calls that ran without it
 * and the times the current device was switched (ff__emu_probe), so tests
 * can prove that the calling thread's current device is left as it was.
 *
 * Its decoder decodes a batch of JPEGs on the decoder engine through the
 * codec layer (libjpeg-turbo, the same region and DCT-scale decode as the
 * CPU), so a device-decoded sample is bit-identical to a CPU-decoded one;
 * with `?decode=nvjpeg` it uses nvJPEG's arithmetic instead (no fancy
 * upsampling, the IFAST IDCT), so that what depends on bit identity can be
 * shown to. Like nvJPEG it leaves PNG to the CPU; CMYK/YCCK JPEG it decodes
 * as the CPU does (Pillow's conversion), unlike nvJPEG. With
 * `?decode=libnvjpeg` it has none of its own: the device layer loads
 * libnvjpeg as on CUDA (FF_NVJPEG_LIBRARY: the tests' stub, which decodes
 * on the host into the emulator's host memory). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/bytes.h"
#include "core/clock.h"
#include "exec/device_impl.h"
#include "kernels/stage_block.h"

enum { CMD_COPY, CMD_COPY_BATCH, CMD_LAUNCH, CMD_RECORD, CMD_WAIT, CMD_DECODE, CMD_WAIT_STREAM };

/* The engines, each played by its own thread. */
enum { ENGINE_COPY_IN, ENGINE_COPY_OUT, ENGINE_KERNELS, ENGINE_DECODER, ENGINES, ENGINE_NONE = ENGINES };

typedef struct emu_event {
  int id;
  uint64_t recorded; /* records queued so far */
  uint64_t reached;  /* the last record settled: complete when == recorded */
  uint64_t time_ns;  /* when it settled */
  int failed;        /* a launch before that record on its stream failed; reported once */
  char fault_msg[128];
} emu_event;

typedef struct emu_cmd {
  int kind, engine;
  void *dst;
  const void *src;
  size_t size_bytes;
  int n, stage_kind; /* launch: records, and their kind; wait_stream: n is the stream's id */
  unsigned launch_no;
  emu_event *event;
  ff__device_decode_job *jobs; /* decode: n of them */
  void **dsts;                 /* copy batch: n copies, one allocation for the three arrays */
  const void **srcs;
  size_t *sizes;
  uint64_t event_no; /* record: this record's number; wait: the record waited for; wait_stream: the
                        stream's commands that must have completed */
} emu_cmd;

typedef struct emu_stream {
  int id;
  emu_cmd *queue; /* ring of cap commands from head */
  size_t head, count, cap;
  int running; /* an engine is executing its head */
  uint64_t queued, completed; /* commands queued on it, and completed, since it was made */
  int failed;  /* a launch failed since the last record */
  char fault_msg[128];
  struct emu_stream *next;
} emu_stream;

typedef struct emu_wait_rec {
  int stream_id, event_id;
} emu_wait_rec;

typedef struct emu emu;

typedef struct emu_engine {
  emu *m;
  int kind;
  pthread_t thread;
  int started;
} emu_engine;

struct emu {
  int ordinal;
  emu_engine engines[ENGINES];
  pthread_mutex_t lock;
  pthread_mutex_t exec; /* the engines' work, one command at a time */
  pthread_cond_t work, done;
  emu_stream *streams;
  emu_stream *null_stream; /* what a consumer's NULL stream handle names (cuda: the legacy default stream) */
  emu_stream *retire;      /* retire records wait here for every stream's work (emu_retire_record) */
  uint64_t pending; /* commands queued and not yet completed, over all streams */
  int stop, next_id;
  uint32_t rng;
  unsigned delay_us;             /* random, up to this, before each command */
  unsigned engine_us[ENGINES];   /* fixed, per command of the engine (FF_EMU_DELAYS) */
  size_t mem_bytes, used_bytes;
  unsigned allocs, launches, fail_alloc_after, alloc_error_at, fail_kernel_at;
  emu_wait_rec *waits;
  size_t num_waits, cap_waits;
  void **host; /* live host allocations (ff__emu_host_owns) */
  size_t num_host, cap_host;
  atomic_ulong misplaced_calls, device_switches;
  atomic_ulong copy_calls[3], trims, decodes;
  atomic_ulong shape_launches[FF__DSHAPES];
  atomic_ullong copy_bytes[3];
  ff__jpeg_variant variant; /* the decoder's arithmetic */
  int libnvjpeg;            /* ?decode=libnvjpeg: no decoder of its own, the device layer loads libnvjpeg */
  ff__buf decoded;          /* the decoder engine's buffer */
};

#define HEADER 256 /* bytes before each block: its size, and 256-byte alignment */

/* ------------------------------------------------------------ current device */

static _Thread_local int current_device = -1; /* -1: none, as on a fresh CUDA thread */

int ff__emu_current_device(void) { return current_device; }
void ff__emu_set_current_device(int ordinal) { current_device = ordinal; }

static void check_current(emu *m) {
  if (current_device != m->ordinal) atomic_fetch_add(&m->misplaced_calls, 1);
}

static ff_status emu_enter(void *impl, ff__dguard *g, ff__error *err) {
  (void)err;
  emu *m = impl;
  g->prev_device = current_device;
  if (current_device != m->ordinal) {
    current_device = m->ordinal;
    atomic_fetch_add(&m->device_switches, 1);
  }
  return FF_OK;
}

static void emu_leave(void *impl, const ff__dguard *g) {
  (void)impl;
  current_device = g->prev_device;
}

/* ------------------------------------------------------------ the engines */

static uint32_t next_rand(emu *m) {
  m->rng ^= m->rng << 13, m->rng ^= m->rng >> 17, m->rng ^= m->rng << 5;
  return m->rng;
}

static void pop(emu *m, emu_stream *s) {
  s->head = (s->head + 1) % s->cap, s->count--, s->completed++;
  m->pending--;
}

/* Whether stream `id` (a destroyed one has finished) completed event_no commands. Locked. */
static int stream_reached(const emu *m, int id, uint64_t event_no) {
  for (const emu_stream *t = m->streams; t; t = t->next)
    if (t->id == id) return t->completed >= event_no;
  return 1;
}

/* Settles the records and waits at the heads of the streams, until none
 * can: a record completes its event (with the stream's pending fault), a
 * wait goes once its event has passed the record it waits for. Locked. */
static void settle(emu *m) {
  uint64_t now = 0;
  for (int changed = 1; changed;) {
    changed = 0;
    for (emu_stream *s = m->streams; s; s = s->next)
      while (s->count && !s->running) {
        emu_cmd *c = &s->queue[s->head];
        if (c->kind == CMD_RECORD) {
          if (!now) now = ff__now_ns();
          if (c->event_no > c->event->reached) c->event->reached = c->event_no, c->event->time_ns = now;
          if (s->failed) {
            c->event->failed = 1, s->failed = 0;
            memcpy(c->event->fault_msg, s->fault_msg, sizeof s->fault_msg);
          }
        } else if (c->kind == CMD_WAIT_STREAM ? !stream_reached(m, c->n, c->event_no)
                                              : c->kind != CMD_WAIT || c->event->reached < c->event_no) {
          break;
        }
        pop(m, s);
        changed = 1;
      }
  }
}

static int can_run(const emu_stream *s, int engine) {
  return s->count && !s->running && s->queue[s->head].engine == engine;
}

/* A stream whose head the engine can run, picked at random; NULL when none. Locked. */
static emu_stream *pick(emu *m, int engine) {
  unsigned runnable = 0;
  for (emu_stream *s = m->streams; s; s = s->next)
    runnable += (unsigned)can_run(s, engine);
  if (!runnable) return NULL;
  unsigned k = next_rand(m) % runnable;
  for (emu_stream *s = m->streams; s; s = s->next)
    if (can_run(s, engine) && !k--) return s;
  return NULL;
}

/* A sum stage block by block: each block's terms, then its total once. */
static inline void run_sum(const ff__dstage *st, int kind) {
  for (uint32_t b0 = 0; b0 < st->count; b0 += FF__DBLOCK) {
    unsigned long long part = 0;
    for (uint32_t e = b0; e < st->count && e - b0 < FF__DBLOCK; e++)
      part += ff__dstage_sum_term(st, kind, e);
    if (part) *FF__DPTR(uint64_t, st->a) += part;
  }
}

/* A histogram block by block: each block's own counts, then the non-zero ones added. */
static inline void run_histogram(const ff__dstage *st) {
  uint32_t local[3 * 256], *out = FF__DPTR(uint32_t, st->a);
  for (uint32_t b0 = 0; b0 < st->count; b0 += FF__DBLOCK) {
    memset(local, 0, sizeof local);
    for (uint32_t e = b0; e < st->count && e - b0 < FF__DBLOCK; e++) {
      const uint8_t *p = ff__dstage_src_px(st, e);
      for (int c = 0; c < 3; c++) local[c * 256 + p[c]]++;
    }
    for (int i = 0; i < 3 * 256; i++)
      if (local[i]) out[i] += local[i];
  }
}

/* The table builder's block, its 256 threads one step at a time: for each
 * channel and op, the histogram pushed through the tables so far, its
 * lowest, highest, total and running counts, then every entry. */
static inline void run_lut_build(const ff__dstage *st) {
  const ff__aug *ops = FF__DPTR(const ff__aug, st->b);
  const uint32_t *hist = FF__DPTR(const uint32_t, st->a);
  uint8_t lut[256], t[256];
  unsigned long long now[256], scan[256];
  for (int c = 0; c < 3; c++) {
    for (int v = 0; v < 256; v++) lut[v] = (uint8_t)v;
    for (int i = 0; i < st->p.lut.n; i++) {
      int lo = 256, hi = -1;
      unsigned long long total = 0;
      if (ff__lut_needs_histogram(ops[i].op)) {
        memset(now, 0, sizeof now);
        for (int v = 0; v < 256; v++) now[lut[v]] += hist[c * 256 + v];
        for (int v = 0; v < 256; v++) {
          if (now[v]) lo = v < lo ? v : lo, hi = v > hi ? v : hi;
          total += now[v];
          scan[v] = now[v] + (v ? scan[v - 1] : 0);
        }
      }
      for (int v = 0; v < 256; v++) t[v] = ff__lut_block_entry(&ops[i], v, now, scan, lo, hi, total);
      for (int v = 0; v < 256; v++) lut[v] = t[lut[v]];
    }
    memcpy(FF__DPTR(uint8_t, st->p.lut.luts) + c * 256, lut, 256);
  }
}

/* A launch as the CUDA backend runs it (kernels/stage_block.h): its
 * blocks one after another, with the functions its kernels call. */
FF_FMA_CLONES static void run_launch(emu *m, const emu_cmd *c) {
  const ff__dstage *table = c->src;
  ff__dshape shape = ff__dstage_shape(c->stage_kind, 1);
  atomic_fetch_add(&m->shape_launches[shape], 1);
  for (int s = 0; s < c->n; s++) {
    const ff__dstage *st = &table[s];
    if (st->kind != c->stage_kind) continue; /* a placeholder (FF__DS_NONE) */
    if (shape == FF__SHAPE_SUM)
      run_sum(st, st->kind);
    else if (shape == FF__SHAPE_HISTOGRAM)
      run_histogram(st);
    else if (shape == FF__SHAPE_LUT_BUILD)
      run_lut_build(st);
    else
      for (uint32_t e = 0; e < st->count; e++) ff__dstage_elem_as(st, c->stage_kind, e);
  }
}

/* A decode on the decoder engine: the codec's decode, then the region
 * packed into the job's device memory at the size the device layer
 * expects (it gave the job's width, height and pitch when it queued it). */
static void run_decode(emu *m, ff__device_decode_job *job) {
  ff__image img;
  job->result =
      ff__codec_decode_as(job->src, job->size_bytes, job->name, &job->req, m->variant, &m->decoded, &img, &job->err);
  if (job->result) return;
  size_t row = (size_t)img.width * 3;
  if (img.width != job->width || img.height != job->height || job->offset_bytes ||
      job->pitch_bytes < row || job->pitch_bytes * (size_t)img.height > job->dst_bytes) {
    job->result = ff__error_set(&job->err, FF_EINTERNAL,
                                "%s: emu:%d: decoded %dx%d, expected %dx%d in %zu bytes", job->name, m->ordinal,
                                img.width, img.height, job->width, job->height, job->dst_bytes);
    return;
  }
  for (int y = 0; y < img.height; y++)
    memcpy((uint8_t *)job->d_dst + (size_t)y * job->pitch_bytes, img.data + (size_t)y * img.stride, row);
}

static void sleep_us(unsigned us) {
  struct timespec t = {us / 1000000, (long)(us % 1000000) * 1000};
  nanosleep(&t, NULL);
}

/* The command's work; fault: the launch was to fail. */
static void execute(emu *m, const emu_cmd *c, int fault) {
  pthread_mutex_lock(&m->exec);
  if (c->kind == CMD_COPY)
    memcpy(c->dst, c->src, c->size_bytes);
  else if (c->kind == CMD_COPY_BATCH)
    for (int i = 0; i < c->n; i++)
      memcpy(c->dsts[i], c->srcs[i], c->sizes[i]);
  else if (c->kind == CMD_LAUNCH && !fault)
    run_launch(m, c);
  else if (c->kind == CMD_DECODE)
    for (int i = 0; i < c->n; i++)
      run_decode(m, &c->jobs[i]);
  pthread_mutex_unlock(&m->exec);
}

static void *engine_main(void *arg) {
  emu_engine *g = arg;
  emu *m = g->m;
  pthread_mutex_lock(&m->lock);
  for (;;) {
    emu_stream *s;
    while (!(s = pick(m, g->kind)) && !(m->stop && !m->pending))
      pthread_cond_wait(&m->work, &m->lock);
    if (!s) break;
    if (m->delay_us) { /* late, and choosing among what was queued meanwhile */
      unsigned delay = next_rand(m) % (m->delay_us + 1);
      pthread_mutex_unlock(&m->lock);
      sleep_us(delay);
      pthread_mutex_lock(&m->lock);
      s = pick(m, g->kind); /* only this engine takes work of its kind: something still runs */
    }
    emu_cmd c = s->queue[s->head];
    s->running = 1;
    int fault = c.kind == CMD_LAUNCH && c.launch_no == m->fail_kernel_at;
    unsigned busy_us = m->engine_us[g->kind];
    pthread_mutex_unlock(&m->lock);
    if (busy_us) sleep_us(busy_us);
    execute(m, &c, fault);
    if (c.kind == CMD_COPY_BATCH) free(c.dsts);
    pthread_mutex_lock(&m->lock);
    if (fault && !s->failed) {
      s->failed = 1;
      snprintf(s->fault_msg, sizeof s->fault_msg, "emu:%d: kernel launch %u failed (injected fault)",
               m->ordinal, c.launch_no);
    }
    s->running = 0;
    pop(m, s);
    settle(m);
    pthread_cond_broadcast(&m->work);
    pthread_cond_broadcast(&m->done);
  }
  pthread_mutex_unlock(&m->lock);
  return NULL;
}

static int engine_of(const emu_cmd *c, int copy_kind) {
  switch (c->kind) {
  case CMD_COPY: return copy_kind == FF__COPY_D2H ? ENGINE_COPY_OUT : ENGINE_COPY_IN;
  case CMD_COPY_BATCH: return ENGINE_COPY_OUT;
  case CMD_LAUNCH: return ENGINE_KERNELS;
  case CMD_DECODE: return ENGINE_DECODER;
  default: return ENGINE_NONE;
  }
}

/* Queues c on s (the caller settles and wakes the engines). Locked. */
static ff_status enqueue(emu *m, emu_stream *s, emu_cmd c, ff__error *err) {
  if (s->count == s->cap) {
    size_t cap = s->cap ? 2 * s->cap : 64;
    emu_cmd *q = malloc(cap * sizeof *q);
    if (!q) return ff__error_set(err, FF_ENOMEM, "emu:%d: out of memory queueing work", m->ordinal);
    for (size_t i = 0; i < s->count; i++)
      q[i] = s->queue[(s->head + i) % s->cap];
    free(s->queue);
    s->queue = q, s->head = 0, s->cap = cap;
  }
  if (c.kind == CMD_LAUNCH) c.launch_no = ++m->launches;
  if (c.kind == CMD_RECORD) c.event_no = ++c.event->recorded;
  if (c.kind == CMD_WAIT) {
    c.event_no = c.event->recorded; /* what was recorded by now, as cudaStreamWaitEvent */
    if (m->num_waits == m->cap_waits) {
      size_t cap = m->cap_waits ? 2 * m->cap_waits : 64;
      emu_wait_rec *w = realloc(m->waits, cap * sizeof *w);
      if (!w) return ff__error_set(err, FF_ENOMEM, "emu:%d: out of memory queueing work", m->ordinal);
      m->waits = w, m->cap_waits = cap;
    }
    m->waits[m->num_waits++] = (emu_wait_rec){s->id, c.event->id};
  }
  s->queue[(s->head + s->count++) % s->cap] = c;
  s->queued++;
  m->pending++;
  return FF_OK;
}

/* What was queued may settle now; the engines and the waiters look again. Locked. */
static void kick(emu *m) {
  settle(m);
  pthread_cond_broadcast(&m->work);
  pthread_cond_broadcast(&m->done);
}

static ff_status submit(emu *m, emu_stream *s, emu_cmd c, ff__error *err) {
  check_current(m);
  pthread_mutex_lock(&m->lock);
  ff_status st = enqueue(m, s, c, err);
  if (!st) kick(m);
  pthread_mutex_unlock(&m->lock);
  return st;
}

/* ------------------------------------------------------------ backend */

static void emu_synchronize(void *impl) {
  emu *m = impl;
  check_current(m);
  pthread_mutex_lock(&m->lock);
  while (m->pending)
    pthread_cond_wait(&m->done, &m->lock);
  pthread_mutex_unlock(&m->lock);
}

/* Stops and joins the engines that were started; frees what is left. */
static void emu_free(emu *m) {
  pthread_mutex_lock(&m->lock);
  m->stop = 1;
  pthread_cond_broadcast(&m->work);
  pthread_mutex_unlock(&m->lock);
  for (int k = 0; k < ENGINES; k++)
    if (m->engines[k].started) pthread_join(m->engines[k].thread, NULL);
  while (m->streams) { /* streams the caller did not destroy */
    emu_stream *s = m->streams;
    m->streams = s->next;
    free(s->queue);
    free(s);
  }
  pthread_cond_destroy(&m->work);
  pthread_cond_destroy(&m->done);
  pthread_mutex_destroy(&m->lock);
  pthread_mutex_destroy(&m->exec);
  ff__buf_free(&m->decoded);
  free(m->waits);
  free(m->host);
  free(m);
}

static void emu_close(void *impl) { emu_free(impl); }

static ff_status emu_mem_alloc(void *impl, size_t size_bytes, void **out, ff__error *err) {
  emu *m = impl;
  check_current(m);
  pthread_mutex_lock(&m->lock);
  unsigned no = ++m->allocs;
  if (no == m->alloc_error_at) {
    pthread_mutex_unlock(&m->lock);
    return ff__error_set(err, FF_EDEVICE, "emu:%d: allocation %u failed (injected device error)", m->ordinal,
                         no);
  }
  int ok = !(m->fail_alloc_after && no > m->fail_alloc_after) && size_bytes <= m->mem_bytes - m->used_bytes;
  char *p = ok ? aligned_alloc(HEADER, (size_bytes + HEADER + HEADER - 1) / HEADER * HEADER) : NULL;
  if (p) m->used_bytes += size_bytes;
  pthread_mutex_unlock(&m->lock);
  if (!p)
    return ff__error_set(err, FF__EBUDGET, "emu:%d: out of memory for %zu bytes", m->ordinal, size_bytes);
  memcpy(p, &size_bytes, sizeof size_bytes);
  *out = p + HEADER;
  return FF_OK;
}

static void emu_mem_free(void *impl, void *ptr) {
  emu *m = impl;
  check_current(m);
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
  check_current(m);
  pthread_mutex_lock(&m->lock);
  *free_bytes = m->mem_bytes - m->used_bytes, *total_bytes = m->mem_bytes;
  pthread_mutex_unlock(&m->lock);
  return FF_OK;
}

static void emu_mem_trim(void *impl) { atomic_fetch_add(&((emu *)impl)->trims, 1); }

static ff_status emu_host_alloc(void *impl, size_t size_bytes, void **out, ff__error *err) {
  emu *m = impl;
  check_current(m);
  void *p = malloc(size_bytes);
  pthread_mutex_lock(&m->lock);
  if (p && m->num_host == m->cap_host) {
    size_t cap = m->cap_host ? 2 * m->cap_host : 16;
    void **h = realloc(m->host, cap * sizeof *h);
    if (h) m->host = h, m->cap_host = cap;
  }
  int ok = p && m->num_host < m->cap_host;
  if (ok) m->host[m->num_host++] = p;
  pthread_mutex_unlock(&m->lock);
  if (!ok) {
    free(p);
    return ff__error_set(err, FF_ENOMEM, "emu:%d: no %zu bytes of host memory", m->ordinal, size_bytes);
  }
  *out = p;
  return FF_OK;
}

static void emu_host_free(void *impl, void *ptr) {
  emu *m = impl;
  check_current(m);
  pthread_mutex_lock(&m->lock);
  for (size_t i = 0; i < m->num_host; i++)
    if (m->host[i] == ptr) {
      m->host[i] = m->host[--m->num_host];
      break;
    }
  pthread_mutex_unlock(&m->lock);
  free(ptr);
}

static ff_status emu_stream_create(void *impl, void **out, ff__error *err) {
  emu *m = impl;
  check_current(m);
  emu_stream *s = calloc(1, sizeof *s);
  if (!s) return ff__error_set(err, FF_ENOMEM, "emu:%d: out of memory", m->ordinal);
  pthread_mutex_lock(&m->lock);
  s->id = ++m->next_id;
  s->next = m->streams, m->streams = s;
  pthread_mutex_unlock(&m->lock);
  *out = s;
  return FF_OK;
}

/* Its queued work still runs first (as cudaStreamDestroy lets it). */
static void emu_stream_destroy(void *impl, void *stream) {
  emu *m = impl;
  emu_stream *s = stream;
  check_current(m);
  pthread_mutex_lock(&m->lock);
  while (s->count)
    pthread_cond_wait(&m->done, &m->lock);
  for (emu_stream **p = &m->streams; *p; p = &(*p)->next)
    if (*p == s) {
      *p = s->next;
      break;
    }
  pthread_mutex_unlock(&m->lock);
  free(s->queue);
  free(s);
}

static ff_status emu_copy(void *impl, void *stream, void *dst, const void *src, size_t size_bytes, int kind,
                          ff__error *err) {
  emu *m = impl;
  atomic_fetch_add(&m->copy_calls[kind], 1);
  atomic_fetch_add(&m->copy_bytes[kind], size_bytes);
  emu_cmd c = {.kind = CMD_COPY, .dst = dst, .src = src, .size_bytes = size_bytes};
  c.engine = engine_of(&c, kind);
  return submit(m, stream, c, err);
}

/* One call, as cudaMemcpyBatchAsync: counted once, one command of the copy engine out. */
static ff_status emu_download_batch(void *impl, void *stream, int n, void *const *dsts, const void *const *srcs,
                                    const size_t *sizes, ff__error *err) {
  emu *m = impl;
  atomic_fetch_add(&m->copy_calls[FF__COPY_D2H], 1);
  char *mem = malloc((size_t)n * (2 * sizeof(void *) + sizeof(size_t)));
  if (!mem) return ff__error_set(err, FF_ENOMEM, "emu:%d: out of memory queueing work", m->ordinal);
  emu_cmd c = {.kind = CMD_COPY_BATCH, .n = n, .dsts = (void **)mem};
  c.srcs = (const void **)(mem + (size_t)n * sizeof(void *));
  c.sizes = (size_t *)(mem + 2 * (size_t)n * sizeof(void *));
  for (int i = 0; i < n; i++) {
    c.dsts[i] = dsts[i], c.srcs[i] = srcs[i], c.sizes[i] = sizes[i];
    atomic_fetch_add(&m->copy_bytes[FF__COPY_D2H], sizes[i]);
  }
  c.engine = engine_of(&c, FF__COPY_D2H);
  ff_status st = submit(m, stream, c, err);
  if (st) free(mem);
  return st;
}

static ff_status emu_event_create(void *impl, void **out, ff__error *err) {
  emu *m = impl;
  check_current(m);
  emu_event *e = calloc(1, sizeof *e);
  if (!e) return ff__error_set(err, FF_ENOMEM, "emu:%d: out of memory", m->ordinal);
  pthread_mutex_lock(&m->lock);
  e->id = ++m->next_id;
  pthread_mutex_unlock(&m->lock);
  *out = e;
  return FF_OK;
}

/* Waits for its pending records: the thread must not write a freed event. */
static void emu_event_destroy(void *impl, void *event) {
  emu *m = impl;
  emu_event *e = event;
  check_current(m);
  pthread_mutex_lock(&m->lock);
  while (e->reached < e->recorded)
    pthread_cond_wait(&m->done, &m->lock);
  pthread_mutex_unlock(&m->lock);
  free(e);
}

static ff_status emu_event_record(void *impl, void *event, void *stream, ff__error *err) {
  return submit(impl, stream, (emu_cmd){.kind = CMD_RECORD, .engine = ENGINE_NONE, .event = event}, err);
}

static ff_status emu_stream_wait(void *impl, void *stream, void *event, ff__error *err) {
  return submit(impl, stream, (emu_cmd){.kind = CMD_WAIT, .engine = ENGINE_NONE, .event = event}, err);
}

/* event completes once every one of our streams' work queued so far has:
 * a wait for each stream's count of commands on the retire stream, then
 * the record. Waits for nothing itself. */
static ff_status emu_retire_record(void *impl, void *event, ff__error *err) {
  emu *m = impl;
  check_current(m);
  pthread_mutex_lock(&m->lock);
  ff_status st = FF_OK;
  for (emu_stream *s = m->streams; s && !st; s = s->next)
    if (s != m->retire && s != m->null_stream && s->queued > s->completed) /* ours, not a consumer's */
      st = enqueue(m, m->retire,
                   (emu_cmd){.kind = CMD_WAIT_STREAM, .engine = ENGINE_NONE, .n = s->id, .event_no = s->queued},
                   err);
  if (!st) st = enqueue(m, m->retire, (emu_cmd){.kind = CMD_RECORD, .engine = ENGINE_NONE, .event = event}, err);
  kick(m);
  pthread_mutex_unlock(&m->lock);
  return st;
}

/* A consumer's stream on emu is one of the emulator's own streams; NULL
 * names the emulator's default stream, as 0 names CUDA's legacy one. */
static void *emu_stream_handle(void *impl, void *stream) {
  (void)impl;
  return stream;
}

static ff_status emu_foreign_wait(void *impl, void *handle, void *event, ff__error *err) {
  return emu_stream_wait(impl, handle ? handle : ((emu *)impl)->null_stream, event, err);
}

static ff_status emu_foreign_record(void *impl, void *event, void *handle, ff__error *err) {
  return emu_event_record(impl, event, handle ? handle : ((emu *)impl)->null_stream, err);
}

/* FF_EDEVICE (once) when a launch before the event's record failed. Locked. */
static ff_status take_fault(emu_event *e, ff__error *err) {
  if (!e->failed) return FF_OK;
  e->failed = 0;
  return ff__error_set(err, FF_EDEVICE, "%s", e->fault_msg);
}

static ff_status emu_event_query(void *impl, void *event, int *done, ff__error *err) {
  emu *m = impl;
  emu_event *e = event;
  check_current(m);
  pthread_mutex_lock(&m->lock);
  *done = e->reached >= e->recorded;
  ff_status st = *done ? take_fault(e, err) : FF_OK;
  pthread_mutex_unlock(&m->lock);
  return st;
}

static ff_status emu_event_wait(void *impl, void *event, ff__error *err) {
  emu *m = impl;
  emu_event *e = event;
  check_current(m);
  pthread_mutex_lock(&m->lock);
  uint64_t target = e->recorded;
  while (e->reached < target)
    pthread_cond_wait(&m->done, &m->lock);
  ff_status st = take_fault(e, err);
  pthread_mutex_unlock(&m->lock);
  return st;
}

static ff_status emu_event_elapsed_ms(void *impl, void *start, void *end, float *ms, ff__error *err) {
  emu *m = impl;
  emu_event *a = start, *b = end;
  check_current(m);
  pthread_mutex_lock(&m->lock);
  int ready = a->recorded && b->recorded && a->reached >= a->recorded && b->reached >= b->recorded;
  uint64_t t0 = a->time_ns, t1 = b->time_ns;
  pthread_mutex_unlock(&m->lock);
  if (!ready)
    return ff__error_set(err, FF_EINVAL, "emu:%d: elapsed time of events not completed", m->ordinal);
  *ms = (float)((double)(int64_t)(t1 - t0) / 1e6);
  return FF_OK;
}

static ff_status emu_launch(void *impl, void *stream, const void *d_table, int n, int kind, uint32_t max_count,
                            ff__error *err) {
  (void)max_count;
  return submit(impl, stream,
                (emu_cmd){.kind = CMD_LAUNCH, .engine = ENGINE_KERNELS, .src = d_table, .n = n, .stage_kind = kind},
                err);
}

static const char *emu_decoder(void *impl, const char **why) {
  emu *m = impl;
  if (m->libnvjpeg) return NULL; /* the device layer's libnvjpeg, or none (*why: the device layer's reason) */
  (void)why;
  return m->variant == FF__JPEG_EXACT ? "libjpeg-turbo" : "nvjpeg-like";
}

static int emu_decode_takes(void *impl, const ff__image_info *info, const char **why) {
  (void)impl;
  if (info->format != FF__FORMAT_JPEG) return *why = "not a JPEG", 0;
  return 1;
}

/* The n jobs as one command of the decoder engine, as a batched decode. */
static ff_status emu_decode(void *impl, void *stream, ff__device_decode_job *jobs, int n, ff__error *err) {
  atomic_fetch_add(&((emu *)impl)->decodes, 1);
  return submit(impl, stream, (emu_cmd){.kind = CMD_DECODE, .engine = ENGINE_DECODER, .jobs = jobs, .n = n}, err);
}

static int emu_loads_nvjpeg(void *impl) { return ((emu *)impl)->libnvjpeg; }

/* libnvjpeg's "CUDA stream" on emu is the emulator's stream (the stub ignores it). */
static void *emu_native_stream(void *impl, void *stream) {
  (void)impl;
  return stream;
}

static const ff__device_backend emu_backend = {
    .enter = emu_enter,
    .leave = emu_leave,
    .synchronize = emu_synchronize,
    .close = emu_close,
    .mem_alloc = emu_mem_alloc,
    .mem_free = emu_mem_free,
    .mem_info = emu_mem_info,
    .mem_trim = emu_mem_trim,
    .host_alloc = emu_host_alloc,
    .host_free = emu_host_free,
    .stream_create = emu_stream_create,
    .stream_destroy = emu_stream_destroy,
    .stream_wait = emu_stream_wait,
    .stream_handle = emu_stream_handle,
    .foreign_wait = emu_foreign_wait,
    .foreign_record = emu_foreign_record,
    .retire_record = emu_retire_record,
    .copy = emu_copy,
    .download_batch = emu_download_batch,
    .event_create = emu_event_create,
    .event_destroy = emu_event_destroy,
    .event_record = emu_event_record,
    .event_query = emu_event_query,
    .event_wait = emu_event_wait,
    .event_elapsed_ms = emu_event_elapsed_ms,
    .launch = emu_launch,
    .decoder = emu_decoder,
    .decode_takes = emu_decode_takes,
    .decode = emu_decode,
    .loads_nvjpeg = emu_loads_nvjpeg,
    .native_stream = emu_native_stream,
};

/* ------------------------------------------------------------ tests' view */

int ff__emu_waited(ff__device *d, const ff__dstream *s, const ff__devent *e) {
  emu *m = ff__device_impl(d, &emu_backend);
  if (!m) return 0;
  int n = 0;
  pthread_mutex_lock(&m->lock);
  for (size_t i = 0; i < m->num_waits; i++)
    n += m->waits[i].stream_id == ((const emu_stream *)s)->id &&
         m->waits[i].event_id == ((const emu_event *)e)->id;
  pthread_mutex_unlock(&m->lock);
  return n;
}

void ff__emu_event_hold(ff__device *d, ff__devent *e) {
  emu *m = ff__device_impl(d, &emu_backend);
  if (!m) return;
  pthread_mutex_lock(&m->lock);
  ((emu_event *)e)->recorded++; /* a record no stream has reached: waits queued from now on block */
  pthread_mutex_unlock(&m->lock);
}

void ff__emu_event_signal(ff__device *d, ff__devent *e) {
  emu *m = ff__device_impl(d, &emu_backend);
  if (!m) return;
  pthread_mutex_lock(&m->lock);
  emu_event *ev = (emu_event *)e;
  ev->reached = ev->recorded, ev->time_ns = ff__now_ns();
  kick(m); /* the waits on it settle, the host's waits return */
  pthread_mutex_unlock(&m->lock);
}

int ff__emu_host_owns(ff__device *d, const void *ptr) {
  emu *m = ff__device_impl(d, &emu_backend);
  int owns = 0;
  if (!m) return 0;
  pthread_mutex_lock(&m->lock);
  for (size_t i = 0; i < m->num_host && !owns; i++)
    owns = m->host[i] == ptr;
  pthread_mutex_unlock(&m->lock);
  return owns;
}

ff_status ff__emu_probe(ff__device *d, ff__emu_counts *out) {
  emu *m = ff__device_impl(d, &emu_backend);
  if (!m) return FF_EINVAL;
  *out = (ff__emu_counts){.misplaced_calls = atomic_load(&m->misplaced_calls),
                          .device_switches = atomic_load(&m->device_switches),
                          .trims = atomic_load(&m->trims), .decodes = atomic_load(&m->decodes)};
  pthread_mutex_lock(&m->lock);
  out->launches = m->launches;
  pthread_mutex_unlock(&m->lock);
  for (int k = 0; k < 3; k++)
    out->copy_calls[k] = atomic_load(&m->copy_calls[k]), out->copy_bytes[k] = atomic_load(&m->copy_bytes[k]);
  for (int k = 0; k < FF__DSHAPES; k++) out->shape_launches[k] = atomic_load(&m->shape_launches[k]);
  return FF_OK;
}

/* ------------------------------------------------------------ open */

/* FF_EMU_FAULTS="alloc:3,allocerr:2,kernel:5"; 0 when malformed. */
static int parse_faults(const char *s, unsigned *alloc_after, unsigned *alloc_error_at, unsigned *kernel_at) {
  while (*s) {
    unsigned *dst = !strncmp(s, "alloc:", 6)      ? alloc_after
                    : !strncmp(s, "allocerr:", 9) ? alloc_error_at
                    : !strncmp(s, "kernel:", 7)   ? kernel_at
                                                  : NULL;
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

/* FF_EMU_DELAYS="decode:80000,kernel:60000,h2d:40000,d2h:40000": µs per
 * command of each engine; 0 when malformed. */
static int parse_delays(const char *s, unsigned us[ENGINES]) {
  static const char *const names[ENGINES] = {"h2d:", "d2h:", "kernel:", "decode:"};
  while (*s) {
    int k = 0;
    while (k < ENGINES && strncmp(s, names[k], strlen(names[k])))
      k++;
    if (k == ENGINES) return 0;
    s += strlen(names[k]);
    char *stop;
    unsigned long v = strtoul(s, &stop, 10);
    if (stop == s || (*stop && *stop != ',') || v > 10000000) return 0;
    us[k] = (unsigned)v;
    s = *stop ? stop + 1 : stop;
  }
  return 1;
}

/* "mem=SIZE&delay=US&decode=exact|nvjpeg|libnvjpeg" in any order; 0 when malformed. */
static int parse_query(const char *q, size_t *mem, unsigned *delay_us, ff__jpeg_variant *variant, int *libnvjpeg) {
  while (*q) {
    const char *end = strchr(q, '&');
    size_t len = end ? (size_t)(end - q) : strlen(q);
    char item[64];
    if (len >= sizeof item) return 0;
    memcpy(item, q, len), item[len] = 0;
    if (!strncmp(item, "mem=", 4)) {
      if (!ff__parse_bytes(item + 4, mem) || !*mem) return 0;
    } else if (!strncmp(item, "delay=", 6)) {
      char *stop;
      unsigned long v = strtoul(item + 6, &stop, 10);
      if (stop == item + 6 || *stop || v > 1000000) return 0;
      *delay_us = (unsigned)v;
    } else if (!strcmp(item, "decode=nvjpeg")) {
      *variant = FF__JPEG_NVJPEG_LIKE;
    } else if (!strcmp(item, "decode=exact")) {
      *variant = FF__JPEG_EXACT;
    } else if (!strcmp(item, "decode=libnvjpeg")) {
      *libnvjpeg = 1;
    } else {
      return 0;
    }
    q += len + (end != NULL);
  }
  return 1;
}

ff_status ff__emu_open(int ordinal, const char *query, const ff__device_options *opt, ff__device_opened *out,
                       ff__error *err) {
  size_t mem = 0;
  unsigned delay_us = 0, engine_us[ENGINES] = {0};
  ff__jpeg_variant variant = FF__JPEG_EXACT;
  int libnvjpeg = 0;
  if (!parse_query(query, &mem, &delay_us, &variant, &libnvjpeg))
    return ff__error_set(err, FF_EINVAL,
                         "emu:%d?%s: expected ?mem=SIZE (e.g. 256M), delay=US and/or decode=exact|nvjpeg|libnvjpeg, "
                         "joined by &",
                         ordinal, query);
  if (opt->emu_mem_bytes) mem = opt->emu_mem_bytes;
  if (!mem) mem = (size_t)2 << 30;
  if (opt->emu_delay_us) delay_us = opt->emu_delay_us;
  unsigned alloc_after = opt->emu_fail_alloc_after, alloc_error_at = opt->emu_alloc_error_at,
           kernel_at = opt->emu_fail_kernel_at;
  const char *faults = getenv("FF_EMU_FAULTS");
  if (faults && !alloc_after && !alloc_error_at && !kernel_at &&
      !parse_faults(faults, &alloc_after, &alloc_error_at, &kernel_at))
    return ff__error_set(err, FF_EINVAL, "FF_EMU_FAULTS='%s': expected e.g. alloc:3,allocerr:2,kernel:5",
                         faults);
  const char *delays = getenv("FF_EMU_DELAYS");
  if (delays && !parse_delays(delays, engine_us))
    return ff__error_set(err, FF_EINVAL,
                         "FF_EMU_DELAYS='%s': expected e.g. decode:80000,kernel:60000,h2d:40000,d2h:40000 (µs)",
                         delays);

  emu *m = calloc(1, sizeof *m);
  if (!m) return ff__error_set(err, FF_ENOMEM, "emu:%d: out of memory", ordinal);
  m->ordinal = ordinal, m->mem_bytes = mem, m->delay_us = delay_us, m->variant = variant;
  m->libnvjpeg = libnvjpeg;
  memcpy(m->engine_us, engine_us, sizeof engine_us);
  m->rng = 0x9e3779b9u ^ (uint32_t)ordinal;
  m->fail_alloc_after = alloc_after, m->alloc_error_at = alloc_error_at, m->fail_kernel_at = kernel_at;
  atomic_init(&m->misplaced_calls, 0);
  atomic_init(&m->device_switches, 0);
  m->null_stream = calloc(1, sizeof *m->null_stream);
  m->retire = calloc(1, sizeof *m->retire);
  if (!m->null_stream || !m->retire) {
    free(m->null_stream), free(m->retire), free(m);
    return ff__error_set(err, FF_ENOMEM, "emu:%d: out of memory", ordinal);
  }
  m->null_stream->id = ++m->next_id, m->retire->id = ++m->next_id;
  m->streams = m->null_stream, m->null_stream->next = m->retire; /* freed with the others at close */
  pthread_mutex_init(&m->lock, NULL);
  pthread_mutex_init(&m->exec, NULL);
  pthread_cond_init(&m->work, NULL);
  pthread_cond_init(&m->done, NULL);
  for (int k = 0; k < ENGINES; k++) {
    m->engines[k] = (emu_engine){.m = m, .kind = k};
    if (pthread_create(&m->engines[k].thread, NULL, engine_main, &m->engines[k])) {
      emu_free(m);
      return ff__error_set(err, FF_ENOMEM, "emu:%d: cannot start the emulator's engine threads", ordinal);
    }
    m->engines[k].started = 1;
  }
  *out = (ff__device_opened){&emu_backend, m, 0, ""};
  snprintf(out->name, sizeof out->name, "emu:%d", ordinal);
  return FF_OK;
}
