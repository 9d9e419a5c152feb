/* cpu.h — running one sample start to finish on a CPU worker thread. */
#ifndef FF_EXEC_CPU_H
#define FF_EXEC_CPU_H

#include <stdint.h>

#include "codec/codec.h"
#include "core/error.h"
#include "ops/ops.h"
#include "pipeline/pipeline.h"
#include "source/reader.h"

/* A worker's private memory, reused from sample to sample. */
typedef struct ff__worker {
  ff__buf file;      /* encoded bytes */
  ff__buf pixels;    /* decoded pixels */
  ff__op_scratch ops;
  uint64_t read_ns, decode_ns, ops_ns, read_bytes; /* this worker's sums */
  uint64_t decode_cpu_ns;  /* of its decodes, in its thread's CPU time (ff__thread_cpu_ns) */
  uint64_t decoded_pixels; /* of its last decode (0: none) */
  ff__image_info header; /* of its last sample, once read (width 0: not read) */
  ff__error warning;     /* of its last sample: damage the decoder repaired (status 0: none) */
  int64_t label;         /* of its last sample, from a reader's source (ff__sample_job.reader); else -1 */
} ff__worker;

void ff__worker_free(ff__worker *w);

/* What identifies a sample's work: where it is and how it is planned. */
typedef struct ff__sample_job {
  const char *path;          /* the file, the name of a member of a shard ("SHARD:MEMBER") or the sample's
                                name when a reader gives the bytes, in messages */
  const char *shard;         /* not NULL: the sample is `length` bytes at byte `offset` of this file */
  uint64_t offset, length;
  struct ff__stream *stream; /* not NULL: the sample's bytes come from this stream (source/stream.h) */
  uint64_t stream_gen;       /* the stream's restart count when the sample was handed out */
  uint64_t seed, epoch, index;
  uint64_t max_pixels;       /* the decoded image and every image the steps make */
  int max_scans;             /* see ff__decode_req */
  size_t max_metadata_bytes;
  int strict;
  uint32_t repeat;           /* which copy of the sample (repeated augmentation), 0 .. repeats - 1: keys
                                its draws together with index */
  ff__reader *reader;        /* not NULL: the reader gives the bytes (and the label) */
  const void *data;          /* not NULL: the sample's encoded bytes, data_bytes of them, in the caller's
                                memory (an augmenter's item) */
  size_t data_bytes;
  ff__read_hint hint;        /* for the reader: the batch the sample is read for */
} ff__sample_job;

/* Reads the sample's encoded bytes into w->file (*size_bytes of them): the
 * whole file job->path (a regular file only, opened without blocking),
 * job->length bytes at job->offset of job->shard, sample job->index of
 * epoch job->epoch from job->stream (waiting for it), the reader's bytes
 * (w->label gets the label that came with them; else -1), or job->data. Returns FF_OK,
 * FF_EIO or FF_ENOMEM naming job->path (FF_END: a stream gave the sample up). */
ff_status ff__sample_bytes(ff__worker *w, const ff__sample_job *job, size_t *size_bytes, ff__error *err);

/* Reads the sample's bytes (ff__sample_bytes) and its
 * header, plans the sample and checks that no step would make an image
 * over max_pixels (read_ns counts it all): what the CPU does for a sample
 * the device decodes, and what a plan printout needs. The encoded bytes are
 * w->file.data (*size_bytes of them, valid until the worker's next sample),
 * the header w->header. Returns FF_OK or FF_EIO / FF_EDATA (not a JPEG or
 * PNG, corrupt header) / FF_ETOOBIG (over max_pixels: no pixel memory
 * taken) / FF_ENOMEM naming the file. */
ff_status ff__sample_read(ff__worker *w, const ff__pipeline *pipe, const ff__sample_job *job, size_t *size_bytes,
                          ff__plan *plan, ff__error *err);

/* ff__sample_read, then decodes the sample's region of interest: *out is
 * the RGB uint8 decoded image in the worker's memory (valid until its next
 * sample), *plan the steps still to run on it; w->warning gets repaired
 * damage. What the device executor starts from. Returns FF_OK or FF_EIO /
 * FF_EDATA / FF_ETOOBIG / FF_ENOMEM naming the file. */
ff_status ff__sample_decode(ff__worker *w, const ff__pipeline *pipe, const ff__sample_job *job, ff__image *out,
                            ff__plan *plan, ff__error *err);

/* Reads, decodes and runs the pipeline's steps on one sample; *out is the
 * RGB uint8 result in the worker's memory (valid until its next sample);
 * *plan (unless NULL) the sample's plan, whose erasing steps are still to
 * run on the float output (ops.h, ff__op_erase).
 * Returns FF_OK or FF_EIO / FF_EDATA / FF_ETOOBIG / FF_ENOMEM naming the file. */
ff_status ff__sample_image(ff__worker *w, const ff__pipeline *pipe, const ff__sample_job *job, ff__image *out,
                           ff__plan *plan, ff__error *err);

/* Reads, decodes and runs the pipeline on one sample, writing it as `slot`
 * of batch_data. Returns FF_OK or FF_EIO / FF_EDATA / FF_ETOOBIG / FF_ENOMEM
 * with the message naming the file. */
ff_status ff__sample_run(ff__worker *w, const ff__pipeline *pipe, const ff__sample_job *job,
                         void *batch_data, int slot, ff__error *err);

#endif
