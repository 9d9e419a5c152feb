/* cpu.c — a CPU worker's sample path: read the file, read its header, plan,
 * decode the region of interest, run the steps, write the batch slot. The
 * device executor takes the same path up to the decode
 * (ff__sample_decode) and runs the steps as batched kernels.
 * Time spent in each phase is summed per worker for the loader's stats. */
#include "exec/cpu.h"

#include "core/clock.h"
#include "source/stream.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void ff__worker_free(ff__worker *w) {
  ff__buf_free(&w->file);
  ff__buf_free(&w->pixels);
  ff__op_scratch_free(&w->ops);
}

/* Opened with O_NONBLOCK: a FIFO or device named like an image must not
 * block a worker (and with it ff_loader_close); only regular files are read.
 * A shard member is read with pread at its indexed offset. */
ff_status ff__sample_bytes(ff__worker *w, const ff__sample_job *job, size_t *size_bytes, ff__error *err) {
  w->label = -1;
  if (job->data) {
    uint8_t *buf = ff__buf_reserve(&w->file, job->data_bytes ? job->data_bytes : 1);
    if (!buf) return ff__error_set(err, FF_ENOMEM, "%s: out of memory for %zu bytes", job->path, job->data_bytes);
    memcpy(buf, job->data, job->data_bytes);
    *size_bytes = job->data_bytes;
    return FF_OK;
  }
  if (job->reader)
    return ff__reader_read(job->reader, job->index, &job->hint, job->path, &w->file, size_bytes, &w->label, err);
  if (job->stream)
    return ff__stream_take(job->stream, job->stream_gen, job->epoch, (int64_t)job->index, &w->file, size_bytes, err);
  const char *path = job->path, *file = job->shard ? job->shard : path;
  int fd = open(file, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return ff__error_set(err, FF_EIO, "%s: cannot open: %s", path, strerror(errno));
  struct stat sb;
  ff_status st = FF_OK;
  if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
    st = ff__error_set(err, FF_EIO, "%s: not a regular file", path);
  } else if (job->shard && job->offset + job->length > (uint64_t)sb.st_size) {
    st = ff__error_set(err, FF_EIO, "%s: the shard is shorter (%lld bytes) than when it was indexed", path,
                       (long long)sb.st_size);
  } else {
    size_t n = job->shard ? (size_t)job->length : (size_t)sb.st_size, got = 0;
    uint8_t *buf = ff__buf_reserve(&w->file, n ? n : 1);
    if (!buf) st = ff__error_set(err, FF_ENOMEM, "%s: out of memory reading %zu bytes", path, n);
    while (!st && got < n) {
      ssize_t r = pread(fd, buf + got, n - got, (off_t)(job->offset + got));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) st = ff__error_set(err, FF_EIO, "%s: read error: %s", path, r < 0 ? strerror(errno) : "file shrank");
      else got += (size_t)r;
    }
    if (!st) *size_bytes = n;
  }
  close(fd);
  return st;
}

ff_status ff__sample_read(ff__worker *w, const ff__pipeline *pipe, const ff__sample_job *job, size_t *size_bytes,
                          ff__plan *plan, ff__error *err) {
  uint64_t t0 = ff__now_ns();
  *size_bytes = 0;
  w->header = (ff__image_info){0};
  w->decoded_pixels = 0;
  w->warning.status = FF_OK;
  ff_status st = ff__sample_bytes(w, job, size_bytes, err);
  if (!st) {
    w->read_bytes += *size_bytes;
    ff__image_info info;
    st = ff__codec_probe(w->file.data, *size_bytes, job->path, job->max_pixels, &info, err);
    if (!st) {
      w->header = info;
      ff__plan_make(pipe, job->seed, job->epoch, ff__draw_index(job->index, job->repeat), &info, job->max_pixels, plan);
      plan->decode.max_scans = job->max_scans;
      plan->decode.max_metadata_bytes = job->max_metadata_bytes;
      plan->decode.strict = job->strict;
      plan->decode.warning = &w->warning;
      st = ff__plan_check(plan, &info, job->max_pixels, job->path, err);
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
  uint64_t t0 = ff__now_ns(), cpu0 = ff__thread_cpu_ns();
  st = ff__codec_decode(w->file.data, size_bytes, job->path, &plan->decode, &w->pixels, out, err);
  w->decode_ns += ff__now_ns() - t0;
  w->decode_cpu_ns += ff__thread_cpu_ns() - cpu0;
  if (!st) w->decoded_pixels = (uint64_t)out->width * (uint64_t)out->height;
  return st;
}

/* The plan's steps before `end` on *img (wall time into w->ops_ns); an
 * error names the file, which the ops do not know. */
static ff_status run_ops(ff__worker *w, const ff__sample_job *job, const ff__plan *plan, int end, ff__image *img,
                         ff__error *err) {
  uint64_t t0 = ff__now_ns();
  ff_status st = ff__ops_run_until(plan, end, &w->ops, img, err);
  w->ops_ns += ff__now_ns() - t0;
  if (st && err) {
    char reason[FF__ERRMSG_MAX];
    snprintf(reason, sizeof reason, "%s", err->msg);
    ff__error_set(err, st, "%s: %s", job->path, reason);
  }
  return st;
}

ff_status ff__sample_image(ff__worker *w, const ff__pipeline *pipe, const ff__sample_job *job, ff__image *out,
                           ff__plan *plan_out, ff__error *err) {
  ff__plan local, *plan = plan_out ? plan_out : &local;
  ff_status st = ff__sample_decode(w, pipe, job, out, plan, err);
  return st ? st : run_ops(w, job, plan, plan->num_steps, out, err);
}

/* The sample into its slot: the plan's steps, then the output stage; a
 * plan that ends with a resize (and a flip) into planar output leaves them
 * to the output stage, which writes the resize's planes into the slot. */
ff_status ff__sample_run(ff__worker *w, const ff__pipeline *pipe, const ff__sample_job *job,
                         void *batch_data, int slot, ff__error *err) {
  ff__image img;
  ff__plan plan;
  ff_status st = ff__sample_decode(w, pipe, job, &img, &plan, err);
  int tail = st ? -1 : ff__ops_output_tail(&plan, pipe);
  if (!st) st = run_ops(w, job, &plan, tail >= 0 ? tail : plan.num_steps, &img, err);
  if (st) return st;
  int width = tail >= 0 ? plan.steps[tail].w : img.width, height = tail >= 0 ? plan.steps[tail].h : img.height;
  if (width != pipe->out_width || height != pipe->out_height)
    return ff__error_set(err, FF_EINTERNAL, "%s: pipeline gave %dx%d instead of %dx%d", job->path, width, height,
                         pipe->out_width, pipe->out_height);
  uint64_t t0 = ff__now_ns(), dt;
  if (tail >= 0) {
    if ((st = ff__ops_resize_to_output(pipe, &plan, tail, &w->ops, &img, batch_data, slot, &dt)))
      return ff__error_set(err, st, "%s: out of memory running the ops", job->path);
    w->ops_ns += ff__now_ns() - t0 - dt; /* the resize's part; the output's follows */
  } else {
    ff__op_write_output(pipe, &img, batch_data, slot);
    dt = ff__now_ns() - t0;
  }
  if (pipe->output == FF__OUTPUT_NCHW_F32 && (st = ff__op_erase(pipe, &plan, batch_data, slot, &w->ops)))
    return ff__error_set(err, st, "%s: out of memory erasing", job->path);
  w->ops.costs.calls[FF__COST_OUTPUT]++;
  w->ops.costs.pixels[FF__COST_OUTPUT] += (uint64_t)width * height;
  w->ops.costs.ns[FF__COST_OUTPUT] += dt;
  w->ops_ns += dt;
  return FF_OK;
}
