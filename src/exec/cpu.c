/* cpu.c — a CPU worker's sample path: read the file, read its header, plan,
 * decode the region of interest, run the steps, write the batch slot. The
 * device executor takes the same path up to the decode
 * (ff__sample_decode) and runs the steps as batched kernels.
 * Time spent in each phase is summed per worker for the loader's stats. */
#include "exec/cpu.h"

#include "core/clock.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

void ff__worker_free(ff__worker *w) {
  ff__buf_free(&w->file);
  ff__buf_free(&w->pixels);
  ff__op_scratch_free(&w->ops);
}

static ff_status read_file(ff__worker *w, const char *path, size_t *size_bytes, ff__error *err) {
  FILE *f = fopen(path, "rb");
  if (!f) return ff__error_set(err, FF_EIO, "%s: cannot open: %s", path, strerror(errno));
  struct stat sb;
  ff_status st = FF_OK;
  if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
    st = ff__error_set(err, FF_EIO, "%s: not a regular file", path);
  } else {
    size_t n = (size_t)sb.st_size;
    uint8_t *buf = ff__buf_reserve(&w->file, n ? n : 1);
    if (!buf) st = ff__error_set(err, FF_ENOMEM, "%s: out of memory reading %zu bytes", path, n);
    else if (fread(buf, 1, n, f) != n)
      st = ff__error_set(err, FF_EIO, "%s: read error: %s", path, ferror(f) ? strerror(errno) : "file shrank");
    else *size_bytes = n;
  }
  fclose(f);
  return st;
}

ff_status ff__sample_read(ff__worker *w, const ff__pipeline *pipe, const ff__sample_job *job, size_t *size_bytes,
                          ff__plan *plan, ff__error *err) {
  uint64_t t0 = ff__now_ns();
  *size_bytes = 0;
  w->header = (ff__image_info){0};
  w->decoded_pixels = 0;
  ff_status st = read_file(w, job->path, size_bytes, err);
  if (!st) {
    w->read_bytes += *size_bytes;
    ff__image_info info;
    st = ff__codec_probe(w->file.data, *size_bytes, job->path, job->max_pixels, &info, err);
    if (!st) {
      w->header = info;
      ff__plan_make(pipe, job->seed, job->epoch, job->index, &info, job->max_pixels, plan);
    }
  }
  w->read_ns += ff__now_ns() - t0;
  return st;
}

ff_status ff__sample_decode(ff__worker *w, const ff__pipeline *pipe, const ff__sample_job *job, ff__image *out,
                            ff__plan *plan, ff__error *err) {
  size_t size_bytes;
  ff_status st = ff__sample_read(w, pipe, job, &size_bytes, plan, err);
  if (st) return st;
  uint64_t t0 = ff__now_ns();
  st = ff__codec_decode(w->file.data, size_bytes, job->path, &plan->decode, &w->pixels, out, err);
  w->decode_ns += ff__now_ns() - t0;
  if (!st) w->decoded_pixels = (uint64_t)out->width * (uint64_t)out->height;
  return st;
}

ff_status ff__sample_image(ff__worker *w, const ff__pipeline *pipe, const ff__sample_job *job, ff__image *out,
                           ff__error *err) {
  ff__plan plan;
  ff_status st = ff__sample_decode(w, pipe, job, out, &plan, err);
  if (st) return st;
  uint64_t t0 = ff__now_ns();
  st = ff__ops_run(&plan, &w->ops, out, err);
  w->ops_ns += ff__now_ns() - t0;
  return st;
}

ff_status ff__sample_run(ff__worker *w, const ff__pipeline *pipe, const ff__sample_job *job,
                         void *batch_data, int slot, ff__error *err) {
  ff__image img;
  ff_status st = ff__sample_image(w, pipe, job, &img, err);
  if (!st && (img.width != pipe->out_width || img.height != pipe->out_height))
    st = ff__error_set(err, FF_EINTERNAL, "%s: pipeline gave %dx%d instead of %dx%d", job->path,
                       img.width, img.height, pipe->out_width, pipe->out_height);
  if (st) return st;
  uint64_t t0 = ff__now_ns();
  ff__op_write_output(pipe, &img, batch_data, slot);
  uint64_t dt = ff__now_ns() - t0;
  w->ops.costs.calls[FF__COST_OUTPUT]++;
  w->ops.costs.pixels[FF__COST_OUTPUT] += (uint64_t)img.width * img.height;
  w->ops.costs.ns[FF__COST_OUTPUT] += dt;
  w->ops_ns += dt;
  return FF_OK;
}
