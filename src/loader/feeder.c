/* feeder.c — the device feeder (offload_impl.h): the microbatches of the
 * batches whose workers are done go through the device, overlapped, and
 * each batch is reported back to the loader (done()).
 *
 * Two threads per loader. The feeder takes a ring entry from the queue and
 * queues all of its device work without waiting for any of it: the decoder's
 * batch on the decode stream (nvJPEG: one batched call, with the entry's own
 * decoder state), the microbatch's upload on the upload stream, its stages
 * on the stage stream once the decode and the upload have passed (event
 * waits, no host wait), and with host output the download of its slots on
 * the download stream once its stages have; then it takes the next entry.
 * So one microbatch decodes while the one before runs its stages and the
 * one before that downloads (FEED_DEPTH on the device at once, which also
 * bounds what a close waits for), and the host lowers the next meanwhile. The
 * completer waits for the entries in flight, oldest first (blocking-sync
 * events: the wait sleeps), gives their device memory back and reports
 * them. Host output goes through two output tensors in turn: the stages of
 * a microbatch wait for the download that last read theirs.
 *
 * Nothing is prepared on the CPU here: a sample the device did not decode
 * (the decoder refused or failed it, its batch was smaller than the decoder
 * takes, no memory) or could not prepare (memory, a device error) is handed
 * back to the CPU workers (ff__offload_result.redo), which read, decode and
 * prepare it as any CPU sample, with the CPU's messages and on_error. A
 * microbatch whose decode failed on most of its images counts toward
 * DECODE_MAX_FAILURES in a row, which turn device decode off for the run
 * (one line on stderr); device errors toward DEVICE_MAX_ERRORS in a row,
 * which turn offload off; a refusal of memory backs offload off for a few
 * batches, doubling. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "loader/offload_impl.h"

#define MAX_BACKOFF_BATCHES 64
#define DEVICE_MAX_ERRORS 3
#define DECODE_MAX_FAILURES 3
#define FEED_DEPTH 3 /* microbatches on the device at once: one decoding, one in its stages, one downloading */

/* Slot goes back to the CPU workers (why: FF__REDO_*; a decode the device
 * did not do wins over a sample it could not run). */
static void hand_back(entry *e, int slot, int why) {
  if (e->redo[slot] == FF__REDO_NONE) e->r.num_redo++;
  if (why > e->redo[slot]) e->redo[slot] = (unsigned char)why;
  e->placement[slot] = NOT_ADDED;
}

/* The staged sample of slot, or NULL. */
static const staged *staged_of(const entry *e, int slot) {
  for (int i = 0; i < e->num_dec; i++)
    if (e->dec[i].slot == slot) return &e->dec[i];
  return NULL;
}

/* ------------------------------------------------------------ queueing (the feeder) */

/* The staged samples' decodes: pool memory for each, one call of the
 * device's decoder on the decode stream with the entry's decoder state,
 * its event. A sample without memory, or in a batch too small for the
 * decoder, goes back to the workers; nvJPEG's failures are known at once
 * (the jobs' status), the backend's own decoder's when the event passed. */
static void queue_decodes(ff__offload *o, int entry_no, entry *e) {
  ff__error err;
  int n = 0;
  for (int i = 0; i < e->num_dec; i++) {
    staged *d = &e->dec[i];
    size_t bytes = ff__device_decode_bytes(o->dev, &d->info, &d->plan.decode);
    if (ff__device_alloc(o->dev, bytes, &d->d_image, &err)) {
      d->d_image = NULL, e->decode_refused = 1;
      hand_back(e, d->slot, FF__REDO_DECODE);
      continue;
    }
    e->r.device_bytes += ff__pool_class_bytes(bytes);
    e->jobs[n] = (ff__device_decode_job){.src = e->bytes + d->offset, .size_bytes = d->size_bytes, .name = d->path,
                                         .info = d->info, .req = d->plan.decode, .d_dst = d->d_image,
                                         .dst_bytes = bytes};
    e->job_of[n++] = i;
  }
  if (n && n < ff__device_decode_min_batch(o->dev)) { /* nvJPEG hybrid would decode them on this thread */
    e->r.decode_small_batch = 1;
    for (int k = 0; k < n; k++) hand_back(e, e->dec[e->job_of[k]].slot, FF__REDO_DECODE);
    n = 0;
  }
  if (!n) return;
  ff__device_range_push(o->dev, "fusionflow: device decode");
  int calls_failed = 0;
  uint64_t t0 = ff__thread_cpu_ns(); /* nvJPEG's host phase runs inside the call */
  ff_status st = ff__device_event_record(o->dev, e->decode_start, o->s_decode, &err);
  if (!st) st = ff__device_decode(o->dev, o->s_decode, entry_no, e->jobs, n, &calls_failed, &err);
  e->host_decode_ns = ff__thread_cpu_ns() - t0;
  if (!st && (st = ff__device_event_record(o->dev, e->decoded, o->s_decode, &err)))
    ff__device_synchronize(o->dev); /* queued, but no event to wait for: nothing may write the jobs after */
  ff__device_range_pop(o->dev);
  e->r.decode_batch_failed = calls_failed > 0;
  e->num_jobs = n; /* their memory goes back only once e->decoded has passed */
  for (int k = 0; k < n && st; k++) {
    e->jobs[k].status = e->jobs[k].result = st;
    e->jobs[k].err = err;
  }
}

/* The images the decoder took into the microbatch; the others go back. */
static void add_decoded(entry *e) {
  for (int k = 0; k < e->num_jobs; k++) {
    const ff__device_decode_job *j = &e->jobs[k];
    const staged *d = &e->dec[e->job_of[k]];
    if (!j->status && !ff__dev_batch_add_device(e->mb, (uint8_t *)d->d_image + j->offset_bytes, j->width, j->height,
                                                j->pitch_bytes, &d->plan, d->slot, NULL))
      continue;
    hand_back(e, d->slot, FF__REDO_DECODE);
  }
}

/* Queues the download of the slots the microbatch wrote into d_out to the
 * host batch: runs of consecutive slots, in one batched call. */
static ff_status download_slots(ff__offload *o, entry *e, const void *d_out, ff__error *err) {
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
  ff_status st = ff__device_download_batch(o->dev, o->s_down, runs, o->dl_dst, o->dl_src, o->dl_size, err);
  if (!st) e->r.downloads += runs > 0, e->r.download_bytes += (uint64_t)n * sb;
  return st;
}

/* The output tensor for a microbatch with host output: the one whose turn
 * it is, or the other when the pool cannot give a second (its stages then
 * wait for its last download). -1 with the pool's status when there is none. */
static int output_tensor(ff__offload *o, ff_status *st, ff__error *err) {
  int b = o->next_out;
  if (o->d_out[b]) return b;
  void *p = NULL;
  *st = ff__device_alloc(o->dev, (size_t)o->cfg.batch_cap * o->cfg.host_sample_bytes, &p, err);
  if (*st) return o->d_out[b ^ 1] ? (*st = FF_OK, b ^ 1) : -1;
  pthread_mutex_lock(&o->mu); /* the split reads it for admission */
  o->d_out[b] = p;
  pthread_mutex_unlock(&o->mu);
  return b;
}

/* Queues e's microbatch: its upload, its stages after the decode (and the
 * consumer's release of the output batch, or the last download from the
 * output tensor), and with host output its download. Returns the device's
 * status: FF_OK, FF__EBUDGET (nothing queued), FF_EDEVICE. */
static ff_status queue_microbatch(ff__offload *o, entry *e, ff__error *err) {
  pthread_mutex_lock(&o->mu);
  void *d_out = e->d_direct;
  ff__devent *waits[3] = {e->num_jobs ? e->decoded : NULL, e->after, NULL};
  pthread_mutex_unlock(&o->mu);
  ff_status st = FF_OK;
  int b = d_out ? -1 : output_tensor(o, &st, err);
  if (st) return st;
  if (b >= 0) d_out = o->d_out[b], waits[2] = o->out_free[b];
  e->r.device_bytes += ff__dev_batch_device_bytes(e->mb) + (b >= 0 ? ff__offload_out_class_bytes(o) : 0);
  ff__device_range_push(o->dev, b < 0 ? "fusionflow: microbatch into the output batch" : "fusionflow: microbatch");
  st = ff__dev_batch_submit_on(e->mb, o->s_up, o->s_stages, waits, 3, d_out, err);
  e->ran = !st;
  if (!st && b >= 0) {
    e->host_out = 1, o->next_out = b ^ 1;
    st = ff__device_stream_wait(o->dev, o->s_down, ff__dev_batch_done_event(e->mb), err);
    if (!st) st = download_slots(o, e, d_out, err);
    if (!st) st = ff__device_event_record(o->dev, o->out_free[b], o->s_down, err);
    if (!st) st = ff__device_event_record(o->dev, e->downloaded, o->s_down, err);
  }
  ff__device_range_pop(o->dev);
  return st;
}

/* Queues all of entry_no's device work. Feeder thread, unlocked. */
static void start_entry(ff__offload *o, int entry_no) {
  entry *e = &o->entries[entry_no];
  uint64_t cpu0 = ff__thread_cpu_ns();
  e->r = (ff__offload_result){.entry = entry_no, .start_ns = ff__now_ns(), .decode_fallbacks = e->decode_fallbacks,
                              .decode_small_batch = e->small_batch};
  e->num_jobs = e->ran = e->host_out = e->decode_refused = 0, e->host_decode_ns = 0;
  e->device_status = FF_OK;
  memset(e->redo, FF__REDO_NONE, (size_t)o->cfg.batch_cap);
  for (int i = 0; i < e->num_dec; i++) e->dec[i].d_image = NULL;
  pthread_mutex_lock(&o->mu);
  e->device_was_off = o->device_off;
  int decode = o->decoder != NULL;
  pthread_mutex_unlock(&o->mu);
  if (e->device_was_off) {
    e->device_status = FF_EDEVICE;
  } else {
    if (decode) queue_decodes(o, entry_no, e);
    else /* turned off since the split */
      for (int i = 0; i < e->num_dec; i++) hand_back(e, e->dec[i].slot, FF__REDO_DECODE);
    add_decoded(e);
    ff__error err;
    if (ff__dev_batch_count(e->mb)) e->device_status = queue_microbatch(o, e, &err);
  }
  e->r.feeder_cpu_ns = ff__thread_cpu_ns() - cpu0;
}

/* ------------------------------------------------------------ completing (the completer) */

/* Folds a batch's device status into the device's health. Locked. */
static void account_device(ff__offload *o, ff_status device_status) {
  if (!device_status) {
    o->device_errors = 0, o->backoff_len = 0;
  } else if (device_status == FF__EBUDGET) {
    o->refused = 1, o->budget_refusals++;
    o->backoff_len = o->backoff_len ? 2 * o->backoff_len : 2;
    if (o->backoff_len > MAX_BACKOFF_BATCHES) o->backoff_len = MAX_BACKOFF_BATCHES;
    o->backoff = o->backoff_len;
  } else {
    o->refused = 1;
    if (++o->device_errors >= DEVICE_MAX_ERRORS) o->device_off = 1;
  }
}

/* Folds a microbatch's decodes (n, of which failed failed; why: the last
 * failure) into the decoder's health: DECODE_MAX_FAILURES microbatches in a
 * row that failed on most of their images turn device decode off for the
 * run, with one line on stderr. Locked. */
static void account_decoder(ff__offload *o, int n, int failed, const char *why) {
  if (!n) return;
  if (2 * failed <= n) {
    o->decode_failures = 0;
    return;
  }
  if (++o->decode_failures < DECODE_MAX_FAILURES || !o->decoder) return;
  snprintf(o->off_note, sizeof o->off_note,
           "%s turned off after %d batches in a row whose decode failed on most images (last: %.240s)", o->decoder,
           DECODE_MAX_FAILURES, why);
  fprintf(stderr, "fusionflow: device decode is off for the rest of the run: %s; the CPU workers decode\n",
          o->off_note);
  o->decoder = NULL, o->note = o->off_note;
}

/* Waits for entry_no's device work, gives its memory back and reports it.
 * Completer thread, unlocked. */
static void finish_entry(ff__offload *o, int entry_no) {
  entry *e = &o->entries[entry_no];
  ff__offload_result *r = &e->r;
  uint64_t cpu0 = ff__thread_cpu_ns();
  ff__error err;
  ff_status st = e->device_status;
  float ms = 0;
  if (e->ran) {
    ff_status down = e->host_out ? ff__device_event_wait(o->dev, e->downloaded, &err) : FF_OK;
    ff_status stages = ff__dev_batch_wait(e->mb, &ms, &err);
    if (!st) st = stages ? stages : down;
  }
  int failed = 0, decoded = 0;
  const char *why = "";
  if (e->num_jobs) { /* also what the stages read: its memory goes back after this */
    ff_status passed = ff__device_event_wait(o->dev, e->decoded, &err);
    float dms = 0;
    if (!passed && !ff__device_decoder_beside_kernels(o->dev) &&
        !ff__device_event_elapsed_ms(o->dev, e->decode_start, e->decoded, &dms, NULL))
      r->device_ns += (uint64_t)((double)dms * 1e6); /* the decode's time on the SMs */
    for (int k = 0; k < e->num_jobs; k++) {
      const ff__device_decode_job *j = &e->jobs[k];
      ff_status res = j->status ? j->status : j->result ? j->result : passed;
      if (!res) {
        decoded++;
        continue;
      }
      failed++, why = j->err.msg;
      hand_back(e, e->dec[e->job_of[k]].slot, FF__REDO_DECODE); /* the stages ran on garbage there */
    }
  }
  int n = ff__dev_batch_count(e->mb);
  for (int i = 0; i < n && st; i++) { /* the device did not prepare them */
    ff__image img;
    const ff__plan *plan;
    int slot;
    ff__dev_batch_sample(e->mb, i, &img, &plan, &slot);
    hand_back(e, slot, staged_of(e, slot) ? FF__REDO_DECODE : FF__REDO_SAMPLE);
  }
  for (int i = 0; i < e->num_dec; i++) {
    ff__device_free(o->dev, e->dec[i].d_image);
    e->dec[i].d_image = NULL;
  }
  if (!st) r->device_ns += (uint64_t)((double)ms * 1e6);
  r->device_ran = e->ran && !st;
  r->decode_failures = (size_t)failed;

  double predicted_ns = 0; /* what the decodes the device did would have cost the CPU */
  pthread_mutex_lock(&o->mu);
  if (!e->device_was_off) account_device(o, st ? st : e->decode_refused ? FF__EBUDGET : FF_OK);
  account_decoder(o, e->num_jobs, failed, why);
  for (int k = 0; k < e->num_jobs; k++) {
    const staged *d = &e->dec[e->job_of[k]];
    if (e->placement[d->slot] != NOT_ADDED)
      predicted_ns += ff__cost_decode_ns(&o->cost, d->size_bytes, ff__cost_decoded_pixels(&d->plan, &d->info));
  }
  if (decoded && predicted_ns > 0) ff__cost_observe_host_decode(&o->cost, e->host_decode_ns, predicted_ns);
  if (r->device_bytes) /* what it needed, also when the pool refused it */
    ff__cost_observe_device(&o->cost, e->encoded_bytes,
                            r->device_bytes - (e->host_out ? ff__offload_out_class_bytes(o) : 0));
  pthread_mutex_unlock(&o->mu);

  for (int k = 0; k < e->num_jobs; k++) { /* the host's part of the decodes, charged to the samples decoded */
    int slot = e->dec[e->job_of[k]].slot;
    if (e->placement[slot] == NOT_ADDED) continue;
    r->device_decoded++;
    e->cpu_ns[slot] += e->host_decode_ns / (uint64_t)(decoded ? decoded : 1);
  }
  for (int s = 0; s < o->cfg.batch_cap; s++) {
    int p = e->placement[s];
    if (p == NOT_ADDED) continue;
    r->samples++;
    r->placed[p]++, r->placed_cpu_ns[p] += e->cpu_ns[s], r->placed_read_ns[p] += e->read_ns[s];
    if (e->d_direct && r->device_ran) e->on_device[s] = 1;
  }
  r->on_device = e->d_direct && r->device_ran ? e->on_device : NULL;
  r->redo = e->redo;
  r->end_ns = ff__now_ns();
  r->feeder_cpu_ns += ff__thread_cpu_ns() - cpu0;
  o->cfg.done(o->cfg.ctx, r);
}

/* ------------------------------------------------------------ the threads */

static void *feeder_main(void *arg) {
  ff__offload *o = arg;
  pthread_mutex_lock(&o->mu);
  for (;;) {
    while (!o->stop && (!o->count || o->flight_count + o->finishing >= FEED_DEPTH))
      pthread_cond_wait(&o->feed_cv, &o->mu);
    if (o->stop) break;
    int entry_no = o->queue[o->head];
    o->head = (o->head + 1) % o->cfg.entries, o->count--;
    pthread_mutex_unlock(&o->mu);
    start_entry(o, entry_no);
    pthread_mutex_lock(&o->mu);
    o->flight[(o->flight_head + o->flight_count++) % o->cfg.entries] = entry_no;
    pthread_cond_signal(&o->done_cv);
  }
  o->feeder_exited = 1;
  pthread_cond_signal(&o->done_cv);
  pthread_mutex_unlock(&o->mu);
  return NULL;
}

static void *completer_main(void *arg) {
  ff__offload *o = arg;
  pthread_mutex_lock(&o->mu);
  for (;;) {
    while (!o->flight_count && !o->feeder_exited) pthread_cond_wait(&o->done_cv, &o->mu);
    if (!o->flight_count) break;
    int entry_no = o->flight[o->flight_head];
    o->flight_head = (o->flight_head + 1) % o->cfg.entries, o->flight_count--;
    o->finishing = 1; /* still on the device until its report: done() may hand the entry out again */
    pthread_mutex_unlock(&o->mu);
    finish_entry(o, entry_no);
    pthread_mutex_lock(&o->mu);
    o->finishing = 0;
    pthread_cond_signal(&o->feed_cv); /* room for the next */
  }
  pthread_mutex_unlock(&o->mu);
  return NULL;
}

ff_status ff__offload_feeder_start(ff__offload *o, ff__error *err) {
  int rc = pthread_create(&o->completer, NULL, completer_main, o);
  if (rc) return ff__error_set(err, FF_ENOMEM, "cannot start the device feeder's threads: %s", strerror(rc));
  o->completer_started = 1;
  rc = pthread_create(&o->feeder, NULL, feeder_main, o);
  if (!rc) {
    o->feeder_started = 1;
    return FF_OK;
  }
  pthread_mutex_lock(&o->mu);
  o->feeder_exited = 1;
  pthread_cond_signal(&o->done_cv);
  pthread_mutex_unlock(&o->mu);
  return ff__error_set(err, FF_ENOMEM, "cannot start the device feeder's threads: %s", strerror(rc));
}

void ff__offload_feeder_stop(ff__offload *o) {
  pthread_mutex_lock(&o->mu);
  o->stop = 1;
  pthread_cond_broadcast(&o->feed_cv);
  pthread_mutex_unlock(&o->mu);
  if (o->feeder_started) pthread_join(o->feeder, NULL);
  o->feeder_started = 0;
  if (o->completer_started) pthread_join(o->completer, NULL);
  o->completer_started = 0;
}
