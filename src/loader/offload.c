/* offload.c — the offload runtime (see offload.h): the device, the split of
 * each batch into placements, the microbatches and the device feeder.
 *
 * A batch is split when its first sample is taken (ff__offload_split): the
 * policy's share gives k samples, the cost model picks the k costliest and
 * trims them to what the device memory budget admits; each goes to the
 * device decoder (placement `device`) when device decode is on and its
 * header, once seen, is one the decoder takes, else placement `split`.
 * Workers read `device` samples and stage their encoded bytes; they read
 * and decode `split` samples and add the pixels to the batch's microbatch
 * (one ff__dev_batch per ring entry, so a batch can fill while the previous
 * one runs). When the last of them is in, the batch goes to the feeder's
 * queue. The feeder — one thread per loader — first has the device decode
 * the staged bytes into pool memory (a decode the device cannot do is done
 * on the CPU from the same bytes, so that a corrupt file fails with the
 * CPU's own message), adds the decoded images to the microbatch, submits it
 * on its stream into the output tensor (a batch's samples, from the pool),
 * waits, downloads the finished slots into the host batch and reports the
 * batch to the loader (done()). When the pool refuses the memory, the device
 * fails, or the device was turned off, the feeder runs those samples on the
 * CPU itself — from the staged decoded images, or decoding the staged bytes —
 * so a batch always completes and, with device decode off, stays
 * bit-identical (the kernels do the CPU's arithmetic). A refusal backs
 * offload off for a few batches, doubling; DEVICE_MAX_ERRORS device
 * errors in a row turn it off for good. The device's free memory is re-read
 * once per batch on the consumer thread, so a trainer whose memory grows
 * pushes work back to the CPU. Everything here is guarded by the runtime's
 * own mutex `mu`; a microbatch is filled under `add_mu` (the workers of one
 * batch add to it concurrently). */
#include "loader/offload.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "exec/dev_batch.h"
#include "sched/cost.h"
#include "sched/policy.h"

#define MAX_BACKOFF_BATCHES 64
#define DEVICE_MAX_ERRORS 3
#define NOT_ADDED 255 /* entry.placement[slot] of a slot not in the microbatch */

/* A sample staged for the device decoder. */
typedef struct staged {
  int slot;
  size_t offset, size_bytes; /* its encoded bytes in the entry's staging */
  const char *path;
  ff__image_info info;
  ff__plan plan;
  ff__device_decode_job job;
  void *d_image; /* pool memory the decoder writes, NULL: none taken */
} staged;

/* The runtime's part of one ring entry. */
typedef struct entry {
  ff__dev_batch *mb;
  void *images;            /* the batch's host buffer */
  int device_left;         /* device-placed samples whose worker has not come back */
  unsigned char *placement;/* per slot: the placement of a sample the feeder finishes, or NOT_ADDED */
  const char **paths;      /* per slot: the file, for messages */
  uint64_t *cpu_ns, *read_ns; /* per slot: CPU time spent on it so far, of which reading */
  uint64_t encoded_bytes;  /* of the samples in the microbatch */
  size_t decode_fallbacks; /* of them, placed for device decode and decoded by a worker */
  staged *dec;             /* samples for the device decoder */
  int num_dec, cap_dec;
  uint8_t *bytes;          /* pinned staging of their encoded bytes */
  size_t bytes_used, bytes_cap;
  ff__offload_failure *failed; /* batch_cap */
  int num_failed;
  void *d_direct;          /* the output ring's device images for this batch (ff__offload_direct), or NULL */
  ff__devent *after;       /* the consumer's release of them, for the device to wait for, or NULL */
  unsigned char *on_device;/* per slot: the device wrote it into d_direct */
} entry;

struct ff__offload {
  ff__offload_config cfg;
  ff__device *dev;
  ff__dstream *stream;
  ff__devent *download_done, *decode_start, *decoded;
  const char *decoder;     /* NULL: device decode off */
  char note[200];          /* why it is off */
  pthread_mutex_t mu, add_mu;
  pthread_cond_t feed_cv;
  pthread_t feeder;
  int feeder_started, stop;
  entry *entries;
  int *queue, head, count; /* entries whose microbatch is complete, cfg.entries from head */
  void *d_out;             /* batch_cap output samples, taken by the feeder at its first microbatch */
  ff__op_scratch feed_ops; /* the feeder's scratch for what it runs on the CPU */
  ff__buf feed_pixels;
  size_t device_free_bytes;/* pool limit - used at the last refresh */
  int device_errors;       /* consecutive device errors; at DEVICE_MAX_ERRORS offload stops */
  int device_off;          /* offload stopped for good (errors) */
  int backoff, backoff_len;/* splits left without offload after a refusal; the next refusal's length */
  int refused;             /* the device refused work since the last ff__offload_take_refused */
  ff__cost_model cost;
  uint64_t *headers;       /* each sample's header once seen (ff__cost_header_pack), 0: not yet */
  uint64_t *split_sizes;   /* batch_cap: scratch of the split */
  ff__device_decode_job *jobs; /* batch_cap: the feeder's decode call */
  int *job_of;             /* batch_cap: each job's staged sample */
  double *split_saving;
  ff__plan split_plan;
  void **dl_dst;           /* batch_cap: the feeder's batched download (runs of finished slots) */
  const void **dl_src;
  size_t *dl_size;
  unsigned char *dl_slot;  /* batch_cap: the slots the device finished, for the runs */
};

static void *feeder_main(void *arg);

/* Whether device decode is on for o, and if not, why (o->note). */
static void resolve_decoder(ff__offload *o) {
  const char *why = "";
  const char *name = ff__device_decoder(o->dev, &why);
  const ff__offload_config *c = &o->cfg;
  if (c->deterministic) why = "deterministic=1", name = NULL;
  else if (c->replace_errors) why = "on_error=replace (substitutes are decoded on the CPU)", name = NULL;
  else if (c->strict_decode && name && !strncmp(name, "nvjpeg", 6))
    why = "strict_decode=1 (nvJPEG does not report the damage it repairs)", name = NULL;
  else if (c->device_decode == FF_DEVICE_DECODE_OFF) why = "device_decode=off", name = NULL;
  else if (c->device_decode == FF_DEVICE_DECODE_AUTO && name && strncmp(c->device, "cuda", 4) &&
           strcmp(c->device, "auto"))
    why = "device_decode=auto is on for CUDA devices only", name = NULL;
  o->decoder = name;
  snprintf(o->note, sizeof o->note, "%s", name ? "" : why);
}

static ff_status alloc_entries(ff__offload *o, ff__error *err) {
  const ff__offload_config *c = &o->cfg;
  size_t cap = (size_t)c->batch_cap;
  o->entries = calloc((size_t)c->entries, sizeof *o->entries);
  o->queue = calloc((size_t)c->entries, sizeof *o->queue);
  o->headers = calloc(c->num_samples ? c->num_samples : 1, sizeof *o->headers);
  o->split_sizes = malloc(cap * sizeof *o->split_sizes);
  o->split_saving = malloc(cap * sizeof *o->split_saving);
  o->jobs = malloc(cap * sizeof *o->jobs);
  o->job_of = malloc(cap * sizeof *o->job_of);
  o->dl_dst = malloc(cap * sizeof *o->dl_dst);
  o->dl_src = malloc(cap * sizeof *o->dl_src);
  o->dl_size = malloc(cap * sizeof *o->dl_size);
  o->dl_slot = malloc(cap);
  if (!o->entries || !o->queue || !o->headers || !o->split_sizes || !o->split_saving || !o->jobs || !o->job_of ||
      !o->dl_dst || !o->dl_src || !o->dl_size || !o->dl_slot)
    return ff__error_set(err, FF_ENOMEM, "out of memory");
  for (int i = 0; i < c->entries; i++) {
    entry *e = &o->entries[i];
    e->placement = malloc(cap);
    e->paths = calloc(cap, sizeof *e->paths);
    e->cpu_ns = calloc(cap, sizeof *e->cpu_ns);
    e->read_ns = calloc(cap, sizeof *e->read_ns);
    e->failed = calloc(cap, sizeof *e->failed);
    e->on_device = calloc(cap, 1);
    if (!e->placement || !e->paths || !e->cpu_ns || !e->read_ns || !e->failed || !e->on_device)
      return ff__error_set(err, FF_ENOMEM, "out of memory");
    ff_status st = ff__dev_batch_create(o->dev, &e->mb, err);
    if (st) return st;
  }
  return FF_OK;
}

ff_status ff__offload_open(const ff__offload_config *c, ff__offload **out, char *name, size_t cap,
                           ff__error *err) {
  *out = NULL;
  snprintf(name, cap, "cpu");
  if (!strcmp(c->device, "cpu")) return FF_OK;
  int is_auto = !strcmp(c->device, "auto");
  ff__offload *o = calloc(1, sizeof *o);
  if (!o) return ff__error_set(err, FF_ENOMEM, "out of memory");
  o->cfg = *c;
  pthread_mutex_init(&o->mu, NULL);
  pthread_mutex_init(&o->add_mu, NULL);
  pthread_cond_init(&o->feed_cv, NULL);
  ff__cost_init(&o->cost);
  ff__device_options opt;
  ff__device_options_init(&opt);
  opt.limit_bytes = c->limit_bytes;
  opt.headroom_bytes = c->headroom_bytes;
  opt.alloc_hook = c->alloc_hook, opt.free_hook = c->free_hook, opt.hook_ctx = c->hook_ctx;
  opt.decoder = 1;
  ff__error derr = {0};
  ff_status st = ff__device_open(c->device, &opt, &o->dev, &derr);
  ff__device_info info;
  if (!st) st = ff__device_query(o->dev, &info, &derr);
  if (!st) st = ff__device_stream_create(o->dev, &o->stream, &derr);
  if (!st) st = ff__device_event_create(o->dev, &o->download_done, &derr);
  if (!st) st = ff__device_event_create(o->dev, &o->decoded, &derr);
  if (!st) st = ff__device_event_create(o->dev, &o->decode_start, &derr);
  if (!st) st = alloc_entries(o, &derr);
  if (!st) {
    int rc = pthread_create(&o->feeder, NULL, feeder_main, o);
    if (rc) st = ff__error_set(&derr, FF_ENOMEM, "cannot start the device feeder thread: %s", strerror(rc));
    o->feeder_started = !rc;
  }
  if (st) {
    ff__offload_close(o);
    if (is_auto) return FF_OK; /* auto: the CPU alone, quietly */
    return ff__error_set(err, st, "%s", derr.msg); /* the device's message names it */
  }
  resolve_decoder(o);
  snprintf(name, cap, "%s", info.name);
  o->device_free_bytes = info.pool.limit_bytes;
  *out = o;
  return FF_OK;
}

void ff__offload_close(ff__offload *o) {
  if (!o) return;
  if (o->feeder_started) {
    pthread_mutex_lock(&o->mu);
    o->stop = 1;
    pthread_cond_broadcast(&o->feed_cv);
    pthread_mutex_unlock(&o->mu);
    pthread_join(o->feeder, NULL);
  }
  for (int i = 0; o->entries && i < o->cfg.entries; i++) {
    entry *e = &o->entries[i];
    ff__dev_batch_destroy(e->mb);
    ff__device_host_free(o->dev, e->bytes);
    free(e->placement), free(e->paths), free(e->cpu_ns), free(e->read_ns), free(e->failed), free(e->dec);
    free(e->on_device);
  }
  if (o->dev) {
    ff__device_free(o->dev, o->d_out);
    ff__device_event_destroy(o->dev, o->download_done);
    ff__device_event_destroy(o->dev, o->decoded);
    ff__device_event_destroy(o->dev, o->decode_start);
    ff__device_stream_destroy(o->dev, o->stream);
    ff__device_close(o->dev);
  }
  ff__op_scratch_free(&o->feed_ops);
  ff__buf_free(&o->feed_pixels);
  free(o->entries), free(o->queue), free(o->headers), free(o->split_sizes), free(o->split_saving);
  free(o->jobs), free(o->job_of), free(o->dl_dst), free(o->dl_src), free(o->dl_size), free(o->dl_slot);
  pthread_mutex_destroy(&o->mu);
  pthread_mutex_destroy(&o->add_mu);
  pthread_cond_destroy(&o->feed_cv);
  free(o);
}

int ff__offload_usable(ff__offload *o) {
  if (!o) return 0;
  pthread_mutex_lock(&o->mu);
  int ok = !o->device_off;
  pthread_mutex_unlock(&o->mu);
  return ok;
}

int ff__offload_take_refused(ff__offload *o) {
  if (!o) return 0;
  pthread_mutex_lock(&o->mu);
  int r = o->refused;
  o->refused = 0;
  pthread_mutex_unlock(&o->mu);
  return r;
}

ff__device *ff__offload_device(const ff__offload *o) { return o ? o->dev : NULL; }

const char *ff__offload_decoder(const ff__offload *o, const char **note) {
  *note = o ? o->note : "no device";
  return o && o->decoder ? o->decoder : "none";
}

/* The pool's block for the feeder's output tensor (batch_cap samples in the host batch's format). */
static size_t out_class_bytes(const ff__offload *o) {
  return ff__pool_class_bytes((size_t)o->cfg.batch_cap * o->cfg.host_sample_bytes);
}

/* What entry e's microbatch takes for its output: nothing when it writes
 * into the output ring (direct aggregation), else the feeder's tensor. */
static size_t out_bytes_of(const ff__offload *o, const entry *e) { return e->d_direct ? 0 : out_class_bytes(o); }

void ff__offload_direct(ff__offload *o, int entry_no, void *d_images, ff__devent *after) {
  if (!o) return;
  pthread_mutex_lock(&o->mu);
  o->entries[entry_no].d_direct = d_images, o->entries[entry_no].after = d_images ? after : NULL;
  pthread_mutex_unlock(&o->mu);
}

/* The placement of a device-bound sample: the decoder's when device
 * decode is on and it takes the image (a header not seen yet is tried). */
static int device_placement(ff__offload *o, uint64_t header) {
  if (!o->decoder) return FF_PLACEMENT_SPLIT;
  ff__image_info info;
  const char *why;
  if (ff__cost_header_unpack(header, &info) && !ff__device_decode_takes(o->dev, &info, NULL, 0, &why))
    return FF_PLACEMENT_SPLIT;
  return FF_PLACEMENT_DEVICE;
}

int ff__offload_split(ff__offload *o, int entry_no, void *images, uint64_t epoch, const int64_t *samples, int n,
                      double share, const ff__op_costs *costs, unsigned char *placement) {
  memset(placement, FF_PLACEMENT_CPU, (size_t)n);
  if (!o) return 0;
  pthread_mutex_lock(&o->mu);
  entry *e = &o->entries[entry_no];
  ff__sched_state s = {.share = o->device_off ? 0 : share};
  int k = ff__sched_device_count(&s, n);
  if (k && o->backoff) o->backoff--, k = 0;
  if (k) {
    for (int i = 0; i < n; i++) { /* what each sample would save the CPU at its placement (sched/cost.h) */
      ff__image_info info;
      uint64_t header = o->headers[samples[i]], bytes = o->cfg.size_bytes[samples[i]];
      int decodes = device_placement(o, header) == FF_PLACEMENT_DEVICE;
      o->split_sizes[i] = bytes;
      if (ff__cost_header_unpack(header, &info)) {
        ff__plan_make(o->cfg.pipe, o->cfg.seed, epoch, (uint64_t)samples[i], &info, o->cfg.max_pixels,
                      &o->split_plan);
        o->split_saving[i] = ff__cost_plan_ns(&o->split_plan, &info, costs, o->cfg.pipe->out_width,
                                              o->cfg.pipe->out_height);
        if (decodes)
          o->split_saving[i] +=
              ff__cost_device_decode_saving_ns(&o->cost, bytes, ff__cost_decoded_pixels(&o->split_plan, &info));
      } else {
        o->split_saving[i] = ff__cost_unknown_ns(&o->cost, bytes);
        if (decodes) o->split_saving[i] += o->cost.decode_ns_per_sample * (1 - o->cost.host_decode_share);
      }
    }
    /* the output tensor is taken at the first microbatch and kept */
    size_t out_bytes = o->d_out ? 0 : out_bytes_of(o, e);
    size_t avail = o->device_free_bytes > out_bytes ? o->device_free_bytes - out_bytes : 0;
    k = ff__cost_split(&o->cost, o->split_saving, o->split_sizes, n, k, avail, placement);
    if (!k) o->refused = 1;
    if (k && ff__dev_batch_begin(e->mb, e->d_direct ? o->cfg.pipe : o->cfg.host_pipe, NULL)) {
      memset(placement, FF_PLACEMENT_CPU, (size_t)n);
      k = 0;
    }
    for (int i = 0; i < n; i++)
      if (placement[i]) placement[i] = (unsigned char)device_placement(o, o->headers[samples[i]]);
  }
  e->images = images;
  e->device_left = k;
  e->encoded_bytes = 0, e->decode_fallbacks = 0;
  e->num_dec = 0, e->bytes_used = 0, e->num_failed = 0;
  memset(e->placement, NOT_ADDED, (size_t)o->cfg.batch_cap);
  memset(e->on_device, 0, (size_t)o->cfg.batch_cap);
  pthread_mutex_unlock(&o->mu);
  return k;
}

/* Runs the steps after decode on img and writes it as slot of images. */
static ff_status run_on_cpu(const ff__pipeline *pipe, ff__op_scratch *ops, ff__image *img, const ff__plan *plan,
                            void *images, int slot, const char *path, uint64_t *ops_ns, ff__error *err) {
  uint64_t t0 = ff__now_ns();
  ff_status st = ff__ops_run(plan, ops, img, err);
  if (!st && (img->width != pipe->out_width || img->height != pipe->out_height))
    st = ff__error_set(err, FF_EINTERNAL, "%s: pipeline gave %dx%d instead of %dx%d", path, img->width,
                       img->height, pipe->out_width, pipe->out_height);
  if (!st) ff__op_write_output(pipe, img, images, slot);
  if (!st && pipe->output == FF__OUTPUT_NCHW_F32 && (st = ff__op_erase(pipe, plan, images, slot, ops)))
    ff__error_set(err, st, "%s: out of memory erasing", path);
  *ops_ns += ff__now_ns() - t0;
  return st;
}

/* Stages a read sample's encoded bytes for the device decoder. Under add_mu. */
static ff_status stage_bytes(ff__offload *o, entry *e, const ff__worker *w, size_t size_bytes,
                             const ff__sample_job *job, const ff__plan *plan, int slot) {
  if (e->num_dec == e->cap_dec) {
    int cap = e->cap_dec ? 2 * e->cap_dec : 16;
    staged *d = realloc(e->dec, (size_t)cap * sizeof *d);
    if (!d) return FF_ENOMEM;
    e->dec = d, e->cap_dec = cap;
  }
  size_t need = e->bytes_used + size_bytes;
  if (need > e->bytes_cap) {
    size_t c = e->bytes_cap ? e->bytes_cap : 1 << 20;
    while (c < need) c *= 2;
    void *p;
    if (ff__device_host_alloc(o->dev, c, &p, NULL)) return FF_ENOMEM;
    if (e->bytes_used) memcpy(p, e->bytes, e->bytes_used);
    ff__device_host_free(o->dev, e->bytes);
    e->bytes = p, e->bytes_cap = c;
  }
  memcpy(e->bytes + e->bytes_used, w->file.data, size_bytes);
  staged *d = &e->dec[e->num_dec++];
  *d = (staged){.slot = slot, .offset = e->bytes_used, .size_bytes = size_bytes, .path = job->path,
                .info = w->header, .plan = *plan};
  d->plan.decode.warning = NULL; /* the worker's, and the feeder decodes later: repaired damage is not listed */
  e->bytes_used += (size_bytes + 255) / 256 * 256;
  return FF_OK;
}

ff_status ff__offload_sample(ff__offload *o, ff__worker *w, int entry_no, const ff__sample_job *job, int slot,
                             int placement, ff__offload_took *took, ff__error *err) {
  entry *e = &o->entries[entry_no];
  ff__image img;
  ff__plan plan;
  ff_status st;
  *took = (ff__offload_took){0};
  if (placement == FF_PLACEMENT_DEVICE) {
    size_t size_bytes;
    if ((st = ff__sample_read(w, o->cfg.pipe, job, &size_bytes, &plan, err))) return st;
    const char *why;
    if (ff__device_decode_takes(o->dev, &w->header, w->file.data, size_bytes, &why)) {
      pthread_mutex_lock(&o->add_mu);
      ff_status add = stage_bytes(o, e, w, size_bytes, job, &plan, slot);
      pthread_mutex_unlock(&o->add_mu);
      if (!add) {
        e->placement[slot] = FF_PLACEMENT_DEVICE, e->paths[slot] = job->path;
        e->cpu_ns[slot] = e->read_ns[slot] = w->read_ns;
        __atomic_add_fetch(&e->encoded_bytes, size_bytes, __ATOMIC_RELAXED);
        return took->added = 1, FF_OK;
      }
    }
    took->decode_fallback = 1; /* the decoder does not take it: decode it here, the device runs the ops */
    uint64_t t0 = ff__now_ns();
    st = ff__codec_decode(w->file.data, size_bytes, job->path, &plan.decode, &w->pixels, &img, err);
    w->decode_ns += ff__now_ns() - t0;
    if (st) return st;
    w->decoded_pixels = (uint64_t)img.width * (uint64_t)img.height;
  } else if ((st = ff__sample_decode(w, o->cfg.pipe, job, &img, &plan, err))) {
    return st;
  }
  plan.decode.warning = NULL; /* the worker's: the microbatch's copy outlives this sample */
  pthread_mutex_lock(&o->add_mu);
  ff_status add = ff__dev_batch_add(e->mb, &img, &plan, slot, NULL);
  pthread_mutex_unlock(&o->add_mu);
  if (!add) {
    e->placement[slot] = FF_PLACEMENT_SPLIT, e->paths[slot] = job->path;
    e->cpu_ns[slot] = w->read_ns + w->decode_ns, e->read_ns[slot] = w->read_ns;
    __atomic_add_fetch(&e->encoded_bytes, (uint64_t)o->cfg.size_bytes[job->index], __ATOMIC_RELAXED);
    if (took->decode_fallback) __atomic_add_fetch(&e->decode_fallbacks, 1, __ATOMIC_RELAXED);
    took->decode_fallback = 0; /* the feeder reports it with the sample */
    return took->added = 1, FF_OK;
  }
  took->fell_back = 1, took->placement = FF_PLACEMENT_CPU; /* no pinned staging for it: the CPU finishes it now */
  return run_on_cpu(o->cfg.host_pipe, &w->ops, &img, &plan, e->images, slot, job->path, &w->ops_ns, err);
}

int ff__offload_sample_done(ff__offload *o, int entry_no) {
  pthread_mutex_lock(&o->mu);
  entry *e = &o->entries[entry_no];
  int queued = !--e->device_left && (ff__dev_batch_count(e->mb) || e->num_dec);
  if (queued) {
    o->queue[(o->head + o->count++) % o->cfg.entries] = entry_no;
    pthread_cond_signal(&o->feed_cv);
  }
  pthread_mutex_unlock(&o->mu);
  return queued;
}

void ff__offload_observe(ff__offload *o, const ff__offload_obs *obs) {
  if (!o) return;
  pthread_mutex_lock(&o->mu);
  if (obs->header->width) o->headers[obs->sample] = ff__cost_header_pack(obs->header);
  if (obs->ran_ops) ff__cost_observe_ops(&o->cost, obs->ops_ns);
  if (obs->decoded_pixels) ff__cost_observe_decode(&o->cost, obs->encoded_bytes, obs->decoded_pixels, obs->decode_ns);
  pthread_mutex_unlock(&o->mu);
}

int ff__offload_reset(ff__offload *o) {
  if (!o) return 0;
  pthread_mutex_lock(&o->mu);
  int dropped = o->count;
  o->head = o->count = 0;
  pthread_mutex_unlock(&o->mu);
  return dropped;
}

void ff__offload_refresh(ff__offload *o, size_t *limit_bytes, size_t *peak_bytes) {
  if (!o) return;
  ff__pool_stats pool;
  int ok = !ff__device_refresh(o->dev, &pool, NULL);
  pthread_mutex_lock(&o->mu);
  o->device_free_bytes = ok && pool.limit_bytes > pool.used_bytes ? pool.limit_bytes - pool.used_bytes : 0;
  pthread_mutex_unlock(&o->mu);
  if (ok) *limit_bytes = pool.limit_bytes, *peak_bytes = pool.peak_bytes;
}

void ff__offload_pool(ff__offload *o, size_t *limit_bytes, size_t *peak_bytes) {
  ff__device_info info;
  if (o && !ff__device_query(o->dev, &info, NULL)) *limit_bytes = info.pool.limit_bytes, *peak_bytes = info.pool.peak_bytes;
}

/* ------------------------------------------------------------ the feeder */

/* What the host spent in one device decode call, for the cost model. */
typedef struct host_decode {
  uint64_t host_ns;    /* the feeder's CPU time in the call (nvJPEG hybrid: its Huffman phase) */
  double predicted_ns; /* the CPU decode the same samples are predicted to cost */
} host_decode;

/* The samples of e the device decoder is to decode: pool memory for each,
 * the decodes queued, waited for. A sample the device did not decode keeps
 * a failed job status; the host's CPU time in the call is charged to the
 * samples decoded. Feeder only, unlocked. */
static void decode_on_device(ff__offload *o, entry *e, ff__offload_result *r, host_decode *hd) {
  ff__error err;
  int n = 0;
  for (int i = 0; i < e->num_dec; i++) { /* the decodes that get memory go first, in one call */
    staged *d = &e->dec[i];
    d->d_image = NULL;
    ff__device_decode_job job = {.src = e->bytes + d->offset, .size_bytes = d->size_bytes, .name = d->path,
                                 .info = d->info, .req = d->plan.decode, .status = FF_EDEVICE};
    job.dst_bytes = ff__device_decode_bytes(o->dev, &d->info, &d->plan.decode);
    if (ff__device_alloc(o->dev, job.dst_bytes, &d->d_image, &err)) {
      d->d_image = NULL, d->job = job;
      continue;
    }
    r->device_bytes += ff__pool_class_bytes(job.dst_bytes);
    job.d_dst = d->d_image;
    o->jobs[n] = job, o->job_of[n++] = i;
  }
  ff__device_range_push(o->dev, "fusionflow: device decode");
  uint64_t t0 = ff__thread_cpu_ns(); /* nvJPEG's host phase runs inside the call; the wait is idle */
  ff_status st = n ? ff__device_event_record(o->dev, o->decode_start, o->stream, &err) : FF_OK;
  if (!st && n) st = ff__device_decode(o->dev, o->stream, o->jobs, n, &err);
  uint64_t host = ff__thread_cpu_ns() - t0;
  if (!st && n) st = ff__device_event_record(o->dev, o->decoded, o->stream, &err);
  if (!st && n) st = ff__device_event_wait(o->dev, o->decoded, &err);
  ff__device_range_pop(o->dev);
  float ms = 0; /* the decode's time on the SMs counts as device time, beside the ops' */
  if (!st && n && !ff__device_decoder_beside_kernels(o->dev) &&
      !ff__device_event_elapsed_ms(o->dev, o->decode_start, o->decoded, &ms, NULL))
    r->device_ns += (uint64_t)((double)ms * 1e6);
  int decoded = 0;
  for (int k = 0; k < n; k++) {
    staged *d = &e->dec[o->job_of[k]];
    d->job = o->jobs[k];
    if (st) d->job.status = st;
    decoded += !d->job.status;
  }
  pthread_mutex_lock(&o->mu); /* the model's prediction for what was decoded */
  for (int k = 0; k < n; k++) {
    const staged *d = &e->dec[o->job_of[k]];
    if (d->job.status) continue;
    hd->predicted_ns += ff__cost_decode_ns(&o->cost, d->size_bytes, ff__cost_decoded_pixels(&d->plan, &d->info));
    e->cpu_ns[d->slot] += host / (uint64_t)decoded;
  }
  pthread_mutex_unlock(&o->mu);
  hd->host_ns += decoded ? host : 0;
}

static void release_decoded(ff__offload *o, entry *e) {
  for (int i = 0; i < e->num_dec; i++) {
    ff__device_free(o->dev, e->dec[i].d_image);
    e->dec[i].d_image = NULL;
  }
}

static void fail_sample(entry *e, int slot, const ff__error *err) {
  e->failed[e->num_failed++] = (ff__offload_failure){slot, *err};
  e->placement[slot] = NOT_ADDED;
}

/* Decodes staged sample d on the CPU into the feeder's buffer. */
static ff_status decode_on_cpu(ff__offload *o, entry *e, const staged *d, ff__image *img, ff__offload_result *r,
                               ff__error *err) {
  uint64_t t0 = ff__now_ns();
  ff_status st = ff__codec_decode(e->bytes + d->offset, d->size_bytes, d->path, &d->plan.decode, &o->feed_pixels,
                                  img, err);
  uint64_t dt = ff__now_ns() - t0;
  r->decode_ns += dt, e->cpu_ns[d->slot] += dt;
  return st;
}

/* The decoded samples into the microbatch: the device's images, and the
 * CPU's decode of the others (which fails a corrupt file as the CPU path
 * does). Feeder only, unlocked. */
static void add_decoded(ff__offload *o, entry *e, ff__offload_result *r) {
  ff__error err;
  for (int i = 0; i < e->num_dec; i++) {
    staged *d = &e->dec[i];
    if (!d->job.status &&
        !ff__dev_batch_add_device(e->mb, (uint8_t *)d->d_image + d->job.offset_bytes, d->job.width,
                                  d->job.height, d->job.pitch_bytes, &d->plan, d->slot, NULL))
      continue;
    r->decode_fallbacks++;
    ff__image img;
    if (decode_on_cpu(o, e, d, &img, r, &err)) {
      fail_sample(e, d->slot, &err);
      continue;
    }
    e->placement[d->slot] = FF_PLACEMENT_SPLIT;
    if (!ff__dev_batch_add(e->mb, &img, &d->plan, d->slot, NULL)) continue;
    uint64_t ops = 0; /* no staging for it: the CPU finishes it now */
    e->placement[d->slot] = FF_PLACEMENT_CPU, r->fallbacks++;
    if (run_on_cpu(o->cfg.host_pipe, &o->feed_ops, &img, &d->plan, e->images, d->slot, d->path, &ops, &err))
      fail_sample(e, d->slot, &err);
    r->ops_ns += ops, e->cpu_ns[d->slot] += ops;
  }
}

/* Queues the download of the slots the microbatch wrote into d_out to the
 * host batch: runs of consecutive slots, in one batched call. Feeder only. */
static ff_status download_slots(ff__offload *o, entry *e, const void *d_out, ff_status st, ff__offload_result *r,
                                ff__error *err) {
  size_t sb = o->cfg.host_sample_bytes;
  int n = ff__dev_batch_count(e->mb), runs = 0, cap = o->cfg.batch_cap;
  memset(o->dl_slot, 0, (size_t)cap);
  for (int i = 0; i < n; i++) {
    ff__image img;
    const ff__plan *plan;
    int slot;
    ff__dev_batch_sample(e->mb, i, &img, &plan, &slot);
    o->dl_slot[slot] = 1;
  }
  for (int s = 0; s < cap; s++) {
    if (!o->dl_slot[s]) continue;
    if (runs && (const char *)o->dl_src[runs - 1] + o->dl_size[runs - 1] == (const char *)d_out + (size_t)s * sb) {
      o->dl_size[runs - 1] += sb;
      continue;
    }
    o->dl_dst[runs] = (char *)e->images + (size_t)s * sb;
    o->dl_src[runs] = (const char *)d_out + (size_t)s * sb, o->dl_size[runs++] = sb;
  }
  if (!st) st = ff__device_download_batch(o->dev, o->stream, runs, o->dl_dst, o->dl_src, o->dl_size, err);
  if (!st) r->downloads += runs > 0, r->download_bytes += (uint64_t)n * sb;
  return st;
}

/* Submit and wait: into the output ring's device images (direct
 * aggregation, after the consumer's release of them), or into the feeder's
 * tensor and down to the host batch. Feeder only. */
static ff_status run_on_device(ff__offload *o, entry *e, ff__offload_result *r, ff__error *err) {
  size_t sb = o->cfg.host_sample_bytes;
  pthread_mutex_lock(&o->mu);
  void *d_out = e->d_direct ? e->d_direct : o->d_out;
  ff__devent *after = e->after;
  pthread_mutex_unlock(&o->mu);
  ff_status st = d_out ? FF_OK : ff__device_alloc(o->dev, (size_t)o->cfg.batch_cap * sb, &d_out, err);
  if (st) return st;
  if (!e->d_direct) {
    pthread_mutex_lock(&o->mu);
    o->d_out = d_out;
    pthread_mutex_unlock(&o->mu);
  }
  r->device_bytes += ff__dev_batch_device_bytes(e->mb) + out_bytes_of(o, e);
  float ms = 0;
  ff__device_range_push(o->dev, e->d_direct ? "fusionflow: microbatch into the output batch" : "fusionflow: microbatch");
  if (after) st = ff__device_stream_wait(o->dev, o->stream, after, err);
  if (!st) st = ff__dev_batch_submit(e->mb, o->stream, d_out, err);
  if (!st) st = ff__dev_batch_wait(e->mb, &ms, err);
  if (!e->d_direct) {
    ff__device_range_push(o->dev, "fusionflow: download to the host batch");
    st = download_slots(o, e, d_out, st, r, err);
    if (!st) st = ff__device_event_record(o->dev, o->download_done, o->stream, err);
    if (!st) st = ff__device_event_wait(o->dev, o->download_done, err);
    ff__device_range_pop(o->dev);
  }
  ff__device_range_pop(o->dev);
  int n = ff__dev_batch_count(e->mb);
  for (int i = 0; i < n && !st && e->d_direct; i++) {
    ff__image img;
    const ff__plan *plan;
    int slot;
    ff__dev_batch_sample(e->mb, i, &img, &plan, &slot);
    e->on_device[slot] = 1;
  }
  r->device_ns += (uint64_t)((double)ms * 1e6);
  return st;
}

/* The staged sample of slot, or NULL. */
static const staged *staged_of(const entry *e, int slot) {
  for (int i = 0; i < e->num_dec; i++)
    if (e->dec[i].slot == slot) return &e->dec[i];
  return NULL;
}

/* The microbatch's samples on the CPU after the device refused or failed:
 * from the staged decoded images, or decoding the staged bytes again. */
static void run_microbatch_on_cpu(ff__offload *o, entry *e, ff__offload_result *r) {
  ff__error err;
  int n = ff__dev_batch_count(e->mb);
  for (int i = 0; i < n; i++) {
    ff__image img;
    const ff__plan *plan;
    int slot;
    ff__dev_batch_sample(e->mb, i, &img, &plan, &slot);
    if (!img.data && decode_on_cpu(o, e, staged_of(e, slot), &img, r, &err)) {
      fail_sample(e, slot, &err); /* cannot happen on a sound decoder: it decoded it */
      continue;
    }
    uint64_t ops = 0;
    if (run_on_cpu(o->cfg.host_pipe, &o->feed_ops, &img, plan, e->images, slot, e->paths[slot], &ops, &err))
      fail_sample(e, slot, &err);
    else
      e->placement[slot] = FF_PLACEMENT_CPU, r->fallbacks++;
    r->ops_ns += ops, e->cpu_ns[slot] += ops;
  }
}

/* Prepares e's device samples: on the device or, failing that, on the CPU.
 * Feeder only, unlocked. Returns the device's status (FF_OK: it ran them). */
static ff_status run_entry(ff__offload *o, entry *e, int device_off, ff__offload_result *r, host_decode *hd) {
  ff__error err;
  if (e->num_dec && !device_off) decode_on_device(o, e, r, hd);
  add_decoded(o, e, r);
  ff_status st = device_off ? FF_EDEVICE : run_on_device(o, e, r, &err);
  if (st) run_microbatch_on_cpu(o, e, r);
  release_decoded(o, e);
  return st;
}

/* Folds a batch's device status into the device's health. Locked. */
static void account_device(ff__offload *o, ff_status device_status) {
  if (!device_status) {
    o->device_errors = 0, o->backoff_len = 0;
  } else if (device_status == FF__EBUDGET) {
    o->refused = 1;
    o->backoff_len = o->backoff_len ? 2 * o->backoff_len : 2;
    if (o->backoff_len > MAX_BACKOFF_BATCHES) o->backoff_len = MAX_BACKOFF_BATCHES;
    o->backoff = o->backoff_len;
  } else {
    o->refused = 1;
    if (++o->device_errors >= DEVICE_MAX_ERRORS) o->device_off = 1;
  }
}

static void *feeder_main(void *arg) {
  ff__offload *o = arg;
  pthread_mutex_lock(&o->mu);
  for (;;) {
    while (!o->stop && !o->count) pthread_cond_wait(&o->feed_cv, &o->mu);
    if (o->stop) break;
    int entry_no = o->queue[o->head];
    o->head = (o->head + 1) % o->cfg.entries, o->count--;
    int device_off = o->device_off;
    pthread_mutex_unlock(&o->mu);

    entry *e = &o->entries[entry_no];
    ff__offload_result r = {.entry = entry_no, .start_ns = ff__now_ns(), .decode_fallbacks = e->decode_fallbacks};
    uint64_t cpu0 = ff__thread_cpu_ns();
    int added = 0;
    for (int s = 0; s < o->cfg.batch_cap; s++) added += e->placement[s] != NOT_ADDED;
    host_decode hd = {0};
    ff_status st = run_entry(o, e, device_off, &r, &hd);
    r.device_ran = !st;
    r.samples = added;
    for (int s = 0; s < o->cfg.batch_cap; s++) {
      int p = e->placement[s];
      if (p == NOT_ADDED) continue;
      r.placed[p]++, r.placed_cpu_ns[p] += e->cpu_ns[s], r.placed_read_ns[p] += e->read_ns[s];
    }
    r.num_failed = e->num_failed, r.failed = e->failed, r.costs = &o->feed_ops.costs;
    r.on_device = st ? NULL : e->on_device;

    pthread_mutex_lock(&o->mu);
    if (!device_off) account_device(o, st);
    if (hd.host_ns) ff__cost_observe_host_decode(&o->cost, hd.host_ns, hd.predicted_ns);
    if (r.device_bytes) /* what it needed, also when the pool refused it */
      ff__cost_observe_device(&o->cost, e->encoded_bytes, r.device_bytes - out_bytes_of(o, e));
    pthread_mutex_unlock(&o->mu);
    r.end_ns = ff__now_ns(), r.feeder_cpu_ns = ff__thread_cpu_ns() - cpu0;
    o->cfg.done(o->cfg.ctx, &r);
    pthread_mutex_lock(&o->mu);
  }
  pthread_mutex_unlock(&o->mu);
  return NULL;
}
