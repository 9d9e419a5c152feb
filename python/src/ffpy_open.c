/* ffpy_open.c — open_loader(): the keyword arguments fusionflow.Loader
 * converted (names to enums, objects to C values) into an ff_config, and
 * ff_loader_open run with the GIL released. The library checks the values
 * (ranges, combinations, $RANK and $WORLD_SIZE) and its message comes back
 * as the exception fusionflow._errors maps its status to.
 *
 * The open of a streamed tar: source takes the GIL back every 100 ms or so
 * (open_progress) to run the signal handlers, so Ctrl-C gives up an open
 * waiting for a stalled server too. */
#include "ffpy_open.h"

#include <stdio.h>

#include "ffpy_dataset.h"
#include "ffpy_loader.h"
#include "ffpy_remote.h"

#define MSG_MAX FFPY_MSG_MAX

/* The open of a streamed tar: source (ff_config.open_progress) runs on the
 * Python thread that opens the loader, with the GIL released; about every
 * 100 ms each call takes the GIL back for as long as it runs the signal
 * handlers (PyErr_CheckSignals: Ctrl-C's KeyboardInterrupt, or whatever a
 * handler raises) and then, when given, hook(progress) with the
 * ff_open_progress as a dict. An exception from either stays set, gives the
 * open up, and is what open_loader raises. */
typedef struct opening {
  PyThreadState *saved; /* the opening thread's, while the GIL is released */
  PyObject *hook;       /* callable(dict) or NULL */
  int raised;           /* an exception is set in the opening thread */
} opening;

static int on_open_progress(void *ctx, const ff_open_progress *p) {
  opening *o = ctx;
  if (o->raised) return 1;
  PyEval_RestoreThread(o->saved);
  int raised = PyErr_CheckSignals() < 0;
  if (!raised && o->hook) {
    PyObject *shard = PyUnicode_DecodeFSDefault(p->shard), *why = PyUnicode_DecodeFSDefault(p->last_error);
    PyObject *d =
        shard && why
            ? Py_BuildValue("{s:O,s:n,s:n,s:i,s:i,s:O,s:O,s:d,s:d,s:O,s:K,s:n}", "shard", shard, "shard_index",
                            (Py_ssize_t)p->shard_index, "num_shards", (Py_ssize_t)p->num_shards, "attempt",
                            p->attempt, "max_attempts", p->max_attempts, "backing_off",
                            p->backing_off ? Py_True : Py_False, "last_error", why, "shard_s", p->shard_s,
                            "elapsed_s", p->elapsed_s, "due", p->due ? Py_True : Py_False, "shard_bytes",
                            (unsigned long long)p->shard_bytes, "shard_samples", (Py_ssize_t)p->shard_samples)
            : NULL;
    PyObject *r = d ? PyObject_CallFunctionObjArgs(o->hook, d, NULL) : NULL;
    raised = !r;
    Py_XDECREF(r);
    Py_XDECREF(d);
    Py_XDECREF(why);
    Py_XDECREF(shard);
  }
  o->raised = raised;
  o->saved = PyEval_SaveThread();
  return raised;
}

PyObject *ffpy_open_loader(PyObject *module, PyObject *args, PyObject *kwargs) {
  (void)module;
  static char *kwlist[] = {"source",   "pipeline",   "batch_size", "shuffle",          "drop_last", "seed",
                           "num_threads", "prefetch", "rank",      "world_size", "on_error", "max_image_pixels",
                           "device", "device_memory_limit_bytes", "strict_decode", "allow_empty",
                           "sampler_drop_last", "torch_permutation", "pin_memory", "output_device",
                           "device_decode", "deterministic", "output_dtype", "memory_format", "semantics",
                           "repeated_augmentations", "shuffle_buffer", "dataset", "dataset_size", "open_progress",
                           "max_member_bytes", "remote", NULL};
  ff_config cfg;
  ff_config_init(&cfg);
  PyObject *source_obj, *pipeline_obj;
  int on_error = FF_ON_ERROR_RAISE, torch_permutation = 0;
  unsigned long long seed = 0, max_pixels = cfg.max_image_pixels, device_limit = 0;
  int device_decode = FF_DEVICE_DECODE_AUTO, semantics = FF_SEMANTICS_V1;
  unsigned long long shuffle_buffer = cfg.shuffle_buffer, member_bytes = cfg.max_member_bytes;
  PyObject *fetcher = Py_None, *progress = Py_None, *remote_obj = Py_None;
  Py_ssize_t dataset_size = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O&U|iiiKiiiiiO&sKppppisipiiiiO&OnOO&O:open_loader", kwlist,
                                   PyUnicode_FSConverter, &source_obj, &pipeline_obj, &cfg.batch_size, &cfg.shuffle,
                                   &cfg.drop_last, &seed, &cfg.num_threads, &cfg.prefetch, &cfg.rank,
                                   &cfg.world_size, &on_error, ffpy_to_u64, &max_pixels, &cfg.device, &device_limit,
                                   &cfg.strict_decode, &cfg.allow_empty, &cfg.sampler_drop_last, &torch_permutation,
                                   &cfg.pin_memory, &cfg.output_device, &device_decode, &cfg.deterministic,
                                   &cfg.output_dtype, &cfg.memory_format, &semantics, &cfg.repeated_augmentations,
                                   ffpy_to_u64, &shuffle_buffer, &fetcher, &dataset_size, &progress, ffpy_to_u64,
                                   &member_bytes, &remote_obj))
    return NULL;
  if (progress != Py_None && !PyCallable_Check(progress)) {
    PyErr_SetString(PyExc_TypeError, "fusionflow: open_progress must be callable or None");
    Py_DECREF(source_obj);
    return NULL;
  }
  cfg.semantics = (ff_semantics)semantics;
  cfg.shuffle_buffer = (size_t)shuffle_buffer;
  cfg.max_member_bytes = member_bytes;
  cfg.permutation = torch_permutation ? FF_PERMUTATION_TORCH : FF_PERMUTATION_PHILOX;
  cfg.device_decode = (ff_device_decode)device_decode;
  cfg.device_memory_limit_bytes = (size_t)device_limit;
  PyObject *pipeline = ffpy_pipeline_text(pipeline_obj);
  if (!pipeline) {
    Py_DECREF(source_obj);
    return NULL;
  }
  cfg.source = PyBytes_AsString(source_obj);
  cfg.pipeline = PyBytes_AsString(pipeline);
  ffpy_remote *remote = NULL; /* remote workers: the loader holds a reference until its close */
  if (remote_obj != Py_None && !(cfg.remote = ffpy_remote_executor(remote_obj, &remote))) {
    Py_DECREF(source_obj);
    Py_DECREF(pipeline);
    return NULL;
  }
  ffpy_dataset *dataset = NULL; /* a Python dataset: `source` names its samples in messages */
  if (fetcher != Py_None) {
    ff_source_callbacks *cb;
    dataset = ffpy_dataset_new(fetcher, dataset_size > 0 ? (size_t)dataset_size : 0, cfg.source, &cb);
    if (!dataset) {
      if (remote) ffpy_remote_detach(remote);
      Py_DECREF(source_obj);
      Py_DECREF(pipeline);
      return NULL;
    }
    cfg.source_callbacks = cb;
  }
  cfg.seed = seed;
  cfg.on_error = (ff_on_error)on_error;
  cfg.max_image_pixels = max_pixels;

  ff_loader *loader = NULL;
  opening watch = {NULL, progress != Py_None ? progress : NULL, 0};
  cfg.open_progress = on_open_progress, cfg.open_progress_ctx = &watch;
  watch.saved = PyEval_SaveThread();
  ff_status st = ff_loader_open(&cfg, &loader);
  PyEval_RestoreThread(watch.saved);
  if (remote && !loader) ffpy_remote_detach(remote); /* no loader to close it */
  else if (remote && st == FF_OK) ffpy_remote_attach(remote, loader);
  Py_DECREF(source_obj);
  Py_DECREF(pipeline);
  if (watch.raised) { /* the open was given up for the exception it left: KeyboardInterrupt, ... */
    ffpy_close_opened(loader, dataset);
    return NULL;
  }
  if (st != FF_OK) {
    if (!loader) { /* out of memory: no handle */
      ffpy_dataset_free(dataset);
      return ffpy_raise_status(st, ff_loader_errmsg(NULL));
    }
    char msg[MSG_MAX];
    snprintf(msg, sizeof msg, "%s", ff_loader_errmsg(loader));
    ffpy_close_opened(loader, dataset);
    return ffpy_raise_status(st, msg);
  }
  return ffpy_loader_new(loader, dataset, cfg.prefetch);
}
