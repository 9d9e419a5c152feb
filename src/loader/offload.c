/* offload.c — the offload runtime (see offload.h): the device, the split of
 * each batch into placements and the workers' side of the microbatches;
 * the device feeder that runs them is loader/feeder.c.
 *
 * A batch is split when its first sample is taken (ff__offload_split): the
 * policy's share gives k samples, the cost model picks the k costliest and
 * trims them to what the device memory budget admits; each goes to the
 * device decoder (placement `device`) when device decode is on and its
 * header, once seen, is one the decoder takes (and the batch has as many as
 * the decoder takes in one call), else placement `split`. Workers read
 * `device` samples and stage their encoded bytes when the decoder takes
 * them for the region the plan decodes (else they decode them themselves);
 * they read and decode `split` samples and add the pixels to the batch's
 * microbatch (one ff__dev_batch per ring entry, so a batch can fill while
 * the previous ones run). When the last of them is in, the batch goes to
 * the feeder's queue. The device's free memory is re-read once per batch
 * on the consumer thread, so a trainer whose memory grows pushes work back
 * to the CPU. The runtime's state is guarded by its mutex `mu`; a
 * microbatch is filled under its entry's `add_mu` (offload_impl.h). */
#include "loader/offload.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "exec/dev_batch.h"
#include "loader/offload_impl.h"
#include "sched/cost.h"
#include "sched/policy.h"

/* Whether device decode is on for o, and if not, why (o->note). */
static void resolve_decoder(ff__offload *o) {
  const char *why = "";
  const char *name = ff__device_decoder(o->dev, &why);
  const ff__offload_config *c = &o->cfg;
  ff__device_kind kind = ff__device_name_kind(c->device);
  if (c->deterministic) why = "deterministic=1", name = NULL;
  else if (c->replace_errors) why = "on_error=replace (substitutes are decoded on the CPU)", name = NULL;
  else if (c->strict_decode && name && !strncmp(name, "nvjpeg", 6))
    why = "strict_decode=1 (nvJPEG does not report the damage it repairs)", name = NULL;
  else if (c->device_decode == FF_DEVICE_DECODE_OFF) why = "device_decode=off", name = NULL;
  else if (c->device_decode == FF_DEVICE_DECODE_AUTO && name && kind != FF__DEVICE_KIND_CUDA &&
           kind != FF__DEVICE_KIND_AUTO)
    why = "device_decode=auto is on for CUDA devices only", name = NULL;
  o->decoder = name;
  o->note = name ? "" : why; /* static strings, or the device's message (owned by the device) */
}

/* Per entry: its microbatch, staging, events and the feeder's arrays. */
static ff_status alloc_entry(ff__offload *o, entry *e, ff__error *err) {
  size_t cap = (size_t)o->cfg.batch_cap;
  e->placement = malloc(cap);
  e->paths = calloc(cap, sizeof *e->paths);
  e->cpu_ns = calloc(cap, sizeof *e->cpu_ns);
  e->read_ns = calloc(cap, sizeof *e->read_ns);
  e->on_device = calloc(cap, 1);
  e->redo = calloc(cap, 1);
  e->jobs = calloc(cap, sizeof *e->jobs);
  e->job_of = calloc(cap, sizeof *e->job_of);
  if (!e->placement || !e->paths || !e->cpu_ns || !e->read_ns || !e->on_device || !e->redo || !e->jobs || !e->job_of)
    return ff__error_set(err, FF_ENOMEM, "out of memory");
  ff_status st = ff__dev_batch_create(o->dev, &e->mb, err);
  if (!st) st = ff__device_event_create(o->dev, &e->decode_start, err);
  if (!st) st = ff__device_event_create(o->dev, &e->decoded, err);
  if (!st) st = ff__device_event_create(o->dev, &e->downloaded, err);
  return st;
}

static ff_status alloc_entries(ff__offload *o, ff__error *err) {
  const ff__offload_config *c = &o->cfg;
  size_t cap = (size_t)c->batch_cap;
  o->entries = calloc((size_t)c->entries, sizeof *o->entries);
  for (int i = 0; o->entries && i < c->entries; i++) pthread_mutex_init(&o->entries[i].add_mu, NULL);
  o->queue = calloc((size_t)c->entries, sizeof *o->queue);
  o->flight = calloc((size_t)c->entries, sizeof *o->flight);
  o->headers = calloc(c->num_samples ? c->num_samples : 1, sizeof *o->headers);
  o->split_sizes = malloc(cap * sizeof *o->split_sizes);
  o->split_saving = malloc(cap * sizeof *o->split_saving);
  o->dl_dst = malloc(cap * sizeof *o->dl_dst);
  o->dl_src = malloc(cap * sizeof *o->dl_src);
  o->dl_size = malloc(cap * sizeof *o->dl_size);
  o->dl_slot = malloc(cap);
  if (!o->entries || !o->queue || !o->flight || !o->headers || !o->split_sizes || !o->split_saving || !o->dl_dst ||
      !o->dl_src || !o->dl_size || !o->dl_slot)
    return ff__error_set(err, FF_ENOMEM, "out of memory");
  ff_status st = FF_OK;
  for (int i = 0; i < c->entries && !st; i++) st = alloc_entry(o, &o->entries[i], err);
  return st;
}

/* The feeder's streams and output tensors' events. */
static ff_status open_streams(ff__offload *o, ff__error *err) {
  ff_status st = ff__device_stream_create(o->dev, &o->s_decode, err);
  if (!st) st = ff__device_stream_create(o->dev, &o->s_up, err);
  if (!st) st = ff__device_stream_create(o->dev, &o->s_stages, err);
  if (!st) st = ff__device_stream_create(o->dev, &o->s_down, err);
  for (int b = 0; b < 2 && !st; b++) st = ff__device_event_create(o->dev, &o->out_free[b], err);
  return st;
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
  o->note = "no device";
  pthread_mutex_init(&o->mu, NULL);
  pthread_cond_init(&o->feed_cv, NULL);
  pthread_cond_init(&o->done_cv, NULL);
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
  if (!st) st = open_streams(o, &derr);
  if (!st) st = alloc_entries(o, &derr);
  if (!st) resolve_decoder(o);
  if (!st) st = ff__offload_feeder_start(o, &derr);
  if (st) {
    ff__offload_close(o);
    if (is_auto) return FF_OK; /* auto: the CPU alone, quietly */
    return ff__error_set(err, st, "%s", derr.msg); /* the device's message names it */
  }
  snprintf(name, cap, "%s", info.name);
  o->device_free_bytes = info.pool.limit_bytes;
  *out = o;
  return FF_OK;
}

void ff__offload_close(ff__offload *o) {
  if (!o) return;
  ff__offload_feeder_stop(o);
  for (int i = 0; o->entries && i < o->cfg.entries; i++) {
    entry *e = &o->entries[i];
    ff__dev_batch_destroy(e->mb);
    ff__device_host_free(o->dev, e->bytes);
    if (o->dev) {
      ff__device_event_destroy(o->dev, e->decode_start);
      ff__device_event_destroy(o->dev, e->decoded);
      ff__device_event_destroy(o->dev, e->downloaded);
    }
    free(e->placement), free(e->paths), free(e->cpu_ns), free(e->read_ns), free(e->dec), free(e->on_device);
    free(e->redo), free(e->jobs), free(e->job_of);
    pthread_mutex_destroy(&e->add_mu);
  }
  if (o->dev) {
    ff__device_synchronize(o->dev);
    for (int b = 0; b < 2; b++) {
      ff__device_free(o->dev, o->d_out[b]);
      ff__device_event_destroy(o->dev, o->out_free[b]);
    }
    ff__device_stream_destroy(o->dev, o->s_decode);
    ff__device_stream_destroy(o->dev, o->s_up);
    ff__device_stream_destroy(o->dev, o->s_stages);
    ff__device_stream_destroy(o->dev, o->s_down);
    ff__device_close(o->dev);
  }
  free(o->entries), free(o->queue), free(o->flight), free(o->headers), free(o->split_sizes), free(o->split_saving);
  free(o->dl_dst), free(o->dl_src), free(o->dl_size), free(o->dl_slot);
  pthread_mutex_destroy(&o->mu);
  pthread_cond_destroy(&o->feed_cv);
  pthread_cond_destroy(&o->done_cv);
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
  if (!o) return *note = "no device", "none";
  pthread_mutex_lock((pthread_mutex_t *)&o->mu); /* the feeder may turn it off */
  const char *name = o->decoder ? o->decoder : "none";
  *note = o->note;
  pthread_mutex_unlock((pthread_mutex_t *)&o->mu);
  return name;
}

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
  if (ff__cost_header_unpack(header, &info) && !ff__device_decode_takes(o->dev, &info, NULL, 0, NULL, &why))
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
    /* an output tensor (host output) is taken at the first microbatch and kept */
    size_t out_bytes = o->d_out[0] || e->d_direct ? 0 : ff__offload_out_class_bytes(o);
    size_t avail = o->device_free_bytes > out_bytes ? o->device_free_bytes - out_bytes : 0;
    k = ff__cost_split(&o->cost, o->split_saving, o->split_sizes, n, k, avail, placement);
    if (!k) o->refused = 1, o->budget_refusals++;
    if (k && ff__dev_batch_begin(e->mb, e->d_direct ? o->cfg.pipe : o->cfg.host_pipe, NULL)) {
      memset(placement, FF_PLACEMENT_CPU, (size_t)n);
      k = 0;
    }
    int decodes = 0;
    for (int i = 0; i < n; i++)
      if (placement[i]) decodes += (placement[i] = (unsigned char)device_placement(o, o->headers[samples[i]])) ==
                                   FF_PLACEMENT_DEVICE;
    /* fewer than the decoder takes in one call (nvJPEG hybrid: it would decode them on the feeder's
     * thread): the workers decode them */
    e->small_batch = decodes && decodes < ff__device_decode_min_batch(o->dev);
    for (int i = 0; i < n && e->small_batch; i++)
      if (placement[i] == FF_PLACEMENT_DEVICE) placement[i] = FF_PLACEMENT_SPLIT;
  } else {
    e->small_batch = 0;
  }
  e->images = images;
  e->device_left = k;
  e->encoded_bytes = 0, e->decode_fallbacks = 0;
  e->num_dec = 0, e->bytes_used = 0;
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
    if (ff__device_decode_takes(o->dev, &w->header, w->file.data, size_bytes, &plan.decode, &why)) {
      pthread_mutex_lock(&e->add_mu);
      ff_status add = stage_bytes(o, e, w, size_bytes, job, &plan, slot);
      pthread_mutex_unlock(&e->add_mu);
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
  pthread_mutex_lock(&e->add_mu);
  ff_status add = ff__dev_batch_add(e->mb, &img, &plan, slot, NULL);
  pthread_mutex_unlock(&e->add_mu);
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

uint64_t ff__offload_budget_refusals(ff__offload *o) {
  if (!o) return 0;
  pthread_mutex_lock(&o->mu);
  uint64_t n = o->budget_refusals;
  pthread_mutex_unlock(&o->mu);
  return n;
}

void ff__offload_pool(ff__offload *o, size_t *limit_bytes, size_t *peak_bytes) {
  ff__device_info info;
  if (o && !ff__device_query(o->dev, &info, NULL)) *limit_bytes = info.pool.limit_bytes, *peak_bytes = info.pool.peak_bytes;
}
