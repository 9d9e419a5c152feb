/* accounting.c — what the loader counts and learns from: each sample's
 * figures as a worker commits it (ff_stats, op costs, the workers' CPU time
 * the node coordinator hears, the offload cost model's observation, the
 * trace), a batch's device samples as the feeder reports them, and a batch
 * as it is handed out (ff_stats, the policy's observation that sets the
 * device share of the next splits, the coordinator's next report); the
 * messages of skipped, replaced and warned samples; the stats getters.
 *
 * Invariants: everything is under the loader's mutex; a batch's figures
 * reach ff_stats when it is handed out, not when a worker meets them (that
 * may be an epoch ahead); nothing here waits or calls above ring.c. */
#include <stdlib.h>
#include <string.h>

#include "loader/worker.h"

void ff__account_keep_msg(char **list, size_t *kept, char **msg) {
  int known = 0; /* a file that fails in every epoch is listed once */
  for (size_t i = 0; i < *kept && !known; i++) known = !strcmp(list[i], *msg);
  if (!known && *kept < FF__MESSAGES_KEPT) list[(*kept)++] = *msg;
  else free(*msg);
  *msg = NULL;
}

void ff__account_skips(ff_loader *l, ff_batch *e) {
  for (int s = 0; s < l->batch_cap; s++) {
    if (e->skip_msg[s]) l->stats.skipped++, ff__account_keep_msg(l->skipped, &l->skipped_kept, &e->skip_msg[s]);
    if (e->replace_msg[s])
      l->stats.replaced++, ff__account_keep_msg(l->skipped, &l->skipped_kept, &e->replace_msg[s]);
    if (e->warn_msg[s]) l->stats.warnings++, ff__account_keep_msg(l->warnings, &l->warnings_kept, &e->warn_msg[s]);
  }
}

static void add_costs(ff_loader *l, ff__op_costs *costs) {
  for (int k = 0; k < FF__COST_COUNT; k++) {
    l->costs.calls[k] += costs->calls[k], l->costs.ns[k] += costs->ns[k];
    l->costs.pixels[k] += costs->pixels[k];
  }
  memset(costs, 0, sizeof *costs);
}

/* The spans of the sample a worker just ran, laid end to end from t0. */
static void trace_sample(ff_loader *l, int worker, const ff__worker *w, uint64_t t0, int64_t sample) {
  int track = FF__TRACK_WORKER + worker;
  ff__trace_span(l->trace, track, "read", t0, w->read_ns, "sample", sample);
  ff__trace_span(l->trace, track, "decode", t0 + w->read_ns, w->decode_ns, "sample", sample);
  if (w->ops_ns) ff__trace_span(l->trace, track, "ops", t0 + w->read_ns + w->decode_ns, w->ops_ns, "sample", sample);
}

void ff__account_sample(ff_loader *l, ff__worker *w, int worker, const ff__ran *r) {
  l->worker_cpu_ns += r->cpu_ns, l->worker_samples++;
  ff__coord_publish_cpu(l->coord, l->worker_cpu_ns, 0); /* its CPU between reports: the reserve, live cores */
  if (l->trace) trace_sample(l, worker, w, r->t0, r->sample);
  int here = !r->st && !r->took.added; /* prepared here, not added to the device's microbatch */
  if (!r->replace_msg) { /* after substitutes the worker's figures mix several samples */
    ff__offload_obs obs = {r->used, &w->header, here, w->ops_ns, w->decode_ns, l->index.size_bytes[r->used],
                           w->decoded_pixels};
    ff__offload_observe(l->offload, &obs);
  }
  l->stats.read_ns += w->read_ns, l->stats.decode_ns += w->decode_ns, l->stats.ops_ns += w->ops_ns;
  l->stats.read_bytes += w->read_bytes;
  if (here && r->took.placement == FF_PLACEMENT_CPU && !r->replace_msg) /* one sample, all here */
    l->stats.thread_cpu_samples++, l->stats.thread_cpu_ns += r->cpu_ns,
        l->stats.thread_decode_cpu_ns += w->decode_cpu_ns;
  w->read_ns = w->decode_ns = w->ops_ns = w->read_bytes = w->decode_cpu_ns = 0;
  add_costs(l, &w->ops.costs);
}

void ff__account_batch_sample(ff_batch *e, const ff__offload_took *took, uint64_t cpu_ns, uint64_t read_ns) {
  int p = took->placement; /* FF_PLACEMENT_CPU: here, or fallen back */
  e->stats.cpu_samples++, e->stats.cpu_ns += cpu_ns;
  e->stats.placement_samples[p]++, e->stats.placement_cpu_ns[p] += cpu_ns;
  e->stats.placement_read_ns[p] += read_ns;
  e->stats.device_fallbacks += (size_t)took->fell_back;
  e->stats.device_decode_fallbacks += (size_t)took->decode_fallback;
}

void ff__account_device_samples(ff_batch *e, const ff__offload_result *r) {
  ff_batch_info *b = &e->stats;
  size_t on_device = r->placed[FF_PLACEMENT_SPLIT] + r->placed[FF_PLACEMENT_DEVICE];
  b->device_samples += on_device, b->cpu_samples += r->placed[FF_PLACEMENT_CPU];
  b->device_decode_fallbacks += r->decode_fallbacks;
  for (int p = 0; p < FF_PLACEMENTS; p++) {
    b->placement_samples[p] += r->placed[p];
    b->placement_cpu_ns[p] += r->placed_cpu_ns[p], b->placement_read_ns[p] += r->placed_read_ns[p];
  }
  b->cpu_ns += r->placed_cpu_ns[FF_PLACEMENT_CPU];
  if (r->device_ran) b->device_ns += r->device_ns;
  b->device_bytes = r->device_bytes;
  b->device_downloads += r->downloads, b->device_download_bytes += r->download_bytes;
  b->feeder_cpu_ns += r->feeder_cpu_ns;
  e->decodes.device += r->device_decoded, e->decodes.failures += r->decode_failures;
  e->decodes.failed_batches += (uint64_t)r->decode_batch_failed;
  e->decodes.small_batches += (uint64_t)r->decode_small_batch;
}

/* Batch e's figures into the loader's ff_stats. */
static void fold_batch(ff_loader *l, const ff_batch *e) {
  const ff_batch_info *b = &e->stats;
  l->stats.device_samples += b->device_samples;
  l->stats.device_ns += b->device_ns;
  l->stats.device_fallbacks += b->device_fallbacks;
  l->stats.device_decode_fallbacks += b->device_decode_fallbacks;
  l->stats.cpu_decodes += e->decodes.cpu, l->stats.device_decodes += e->decodes.device;
  l->stats.device_decode_failures += e->decodes.failures;
  l->stats.device_decode_failed_batches += e->decodes.failed_batches;
  l->stats.device_decode_small_batches += e->decodes.small_batches;
  l->stats.device_download_bytes += b->device_download_bytes, l->stats.feeder_cpu_ns += b->feeder_cpu_ns;
  for (int p = 0; p < FF_PLACEMENTS; p++) {
    l->stats.placement_samples[p] += b->placement_samples[p];
    l->stats.placement_cpu_ns[p] += b->placement_cpu_ns[p], l->stats.placement_read_ns[p] += b->placement_read_ns[p];
  }
}

/* What the interval since the previous batch tells the node coordinator at its next report. */
static void coord_interval(ff_loader *l, const ff__sched_obs *o, int ring_ready) {
  double busy_s = (double)(l->worker_cpu_ns - l->reported_cpu_ns) * 1e-9;
  l->reported_cpu_ns = l->worker_cpu_ns;
  l->report = (ff__coord_report_data){o->wait_s / o->interval_s, (double)ring_ready / l->cfg.prefetch,
                                      busy_s / ((l->active_threads > 0 ? l->active_threads : 1) * o->interval_s),
                                      l->worker_cpu_ns, l->worker_samples};
  l->report_pending = 1;
}

void ff__account_hand_out(ff_loader *l, ff_batch *e, int ring_ready, uint64_t t0, uint64_t now) {
  ff_batch_info *b = &e->stats;
  b->wait_ns = now - t0;
  fold_batch(l, e);
  uint64_t last = l->last_out_ns;
  l->last_out_ns = now;
  if (!last) { /* the first batch after open or a restart: waiting for it is no stall */
    l->reported_cpu_ns = l->worker_cpu_ns; /* and the next report's busy share is of its interval only */
    return;
  }
  ff__sched_obs o = {
      .interval_s = (double)(now - last) * 1e-9,
      .wait_s = (double)b->wait_ns * 1e-9,
      .ring_ready = ring_ready,
      .batch_size = (int)e->size,
      .cpu_samples = (int)b->cpu_samples,
      /* with the CPU part of the device's samples (split: read and decode;
       * device: the read), so that 1 - C/D covers what offload leaves on the
       * CPU (as the simulator attributes it) */
      .cpu_busy_s = (double)(b->cpu_ns + b->placement_cpu_ns[FF_PLACEMENT_SPLIT] +
                             b->placement_cpu_ns[FF_PLACEMENT_DEVICE]) * 1e-9,
      .cpu_threads = l->active_threads + l->active_spares,
      .device_samples = (int)b->device_samples,
      .device_busy_s = (double)b->device_ns * 1e-9,
      .device_ok = ff__offload_usable(l->offload) && !ff__offload_take_refused(l->offload),
  };
  ff__sched_update(&l->sched_params, &l->sched, &o);
  ff__remote_observe(l, &o);
  if (l->coord) coord_interval(l, &o, ring_ready);
  l->stats.offload_share = ff__loader_device_share(l);
}

double ff__loader_device_share(ff_loader *l) {
  if (!ff__offload_usable(l->offload)) return 0;
  return l->forced_share >= 0 ? l->forced_share : l->sched.share;
}

/* Which decoders decoded the samples handed out (ff_stats.decoders): a static string. */
static const char *decoders_of(const char *device_decoder, uint64_t cpu, uint64_t device) {
  static const char *const both[][2] = {{"nvjpeg-hardware", "nvjpeg-hardware+libjpeg-turbo"},
                                        {"nvjpeg-hybrid", "nvjpeg-hybrid+libjpeg-turbo"},
                                        {"nvjpeg-like", "nvjpeg-like+libjpeg-turbo"}};
  if (!device || !device_decoder) return cpu ? "libjpeg-turbo" : "none";
  for (size_t i = 0; cpu && i < sizeof both / sizeof *both; i++)
    if (!strcmp(device_decoder, both[i][0])) return both[i][1];
  return device_decoder; /* alone, or the emulator's libjpeg-turbo beside the CPU's */
}

void ff_loader_stats(const ff_loader *l, ff_stats *out) {
  pthread_mutex_lock((pthread_mutex_t *)&l->mu);
  *out = l->stats;
  if (l->offload) /* the feeder turns device decode off when it keeps failing */
    out->device_decoder = ff__offload_decoder(l->offload, &out->device_decoder_note);
  out->decoders = decoders_of(l->device_decoder, out->samples > out->device_decodes, out->device_decodes);
  pthread_mutex_unlock((pthread_mutex_t *)&l->mu);
  /* the pool's figures now, not as of the last batch */
  ff__offload_pool(l->offload, &out->device_pool_limit_bytes, &out->device_pool_peak_bytes);
  out->device_budget_refusals = ff__offload_budget_refusals(l->offload);
  out->node_group = ff__coord_group(l->coord);
}

size_t ff_loader_op_costs(const ff_loader *l, ff_op_cost *out, size_t cap) {
  size_t n = 0;
  pthread_mutex_lock((pthread_mutex_t *)&l->mu);
  for (int k = 0; k < FF__COST_COUNT; k++) {
    if (!l->costs.calls[k]) continue;
    if (n < cap) out[n] = (ff_op_cost){ff__cost_name(k), l->costs.calls[k], l->costs.ns[k], l->costs.pixels[k]};
    n++;
  }
  pthread_mutex_unlock((pthread_mutex_t *)&l->mu);
  return n;
}

const char *ff_loader_skipped(const ff_loader *l, size_t i) { return i < l->skipped_kept ? l->skipped[i] : NULL; }

const char *ff_loader_warning(const ff_loader *l, size_t i) {
  return i < l->warnings_kept ? l->warnings[i] : NULL;
}
