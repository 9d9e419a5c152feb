/* ffpy_loader.c — CLoader, the C loader under fusionflow.Loader: one
 * ff_loader plus a "fetch thread".
 *
 * The consumer's wait for the next batch (ff_loader_next) runs on the fetch
 * thread while the Python thread waits on a condition variable in short
 * slices with the GIL released and runs the signal handlers between them, so
 * Ctrl-C interrupts a wait for a slow batch at once. A batch that arrives
 * after the interruption is kept and handed out by the next call, so nothing
 * is lost. Only one of the two threads calls into the ff_loader at a time (the
 * header's one-consumer rule): the Python thread touches it only while no
 * request is in flight. The state both threads share (ffpy_core) lives until
 * the last batch handed out is dropped. The open itself is ffpy_open.c's. */
#include "ffpy_loader.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <structmember.h> /* PyMemberDef, after Python.h (ffpy_loader.h) */
#include <unistd.h>

#include "ffpy_late_copy.h"
#include "ffpy_stats.h"
#include "ffpy_tensor.h"

/* How long the Python thread waits before it looks at signals again. */
#define WAIT_SLICE_NS 50000000L
#define MSG_MAX FFPY_MSG_MAX

/* ---------------------------------------------------------------- core */

/* ---------------------------------------------------------------- ffpy_core */

/* State shared by the Loader object, its fetch thread and the owners of the
 * batches it handed out; freed by the last of them. */
struct ffpy_core {
  atomic_long refs;
  atomic_long held; /* batches handed out and not yet given back */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  pthread_t thread;
  ff_loader *loader;
  int ring_size; /* prefetch + 1: the most batches that can be held */
  /* Under mu: */
  int requested; /* the consumer asked for a batch; the fetch thread has not answered */
  int done;      /* an answer waits in st / batch / msg */
  int quit;      /* close: the fetch thread closes the loader and exits */
  int consuming; /* a Python thread is inside a consumer call (next, set_epoch, seek, position, stats) */
  ff_status st;
  ff_batch *batch;
  char msg[MSG_MAX];
  ffpy_dataset *dataset; /* the source, for a Python dataset (else NULL) */
  int dataset_orphan;    /* under mu: the fetch thread frees dataset after closing the loader */
};

static void core_decref(ffpy_core *c) {
  if (atomic_fetch_sub(&c->refs, 1) != 1) return;
  pthread_mutex_destroy(&c->mu);
  pthread_cond_destroy(&c->cv);
  free(c);
}

/* Takes the kept answer's batch (NULL if none) and clears the answer. Under mu. */
static ff_batch *take_answer(ffpy_core *c) {
  ff_batch *b = c->done ? c->batch : NULL;
  c->done = 0;
  c->batch = NULL;
  return b;
}

/* Gives back a batch that was counted as held and never reached an owner. */
static void give_back(ffpy_core *c, ff_batch *b) {
  if (!b) return;
  ff_batch_release(b);
  atomic_fetch_sub(&c->held, 1);
}

static void *fetch_main(void *p) {
  ffpy_core *c = p;
  pthread_mutex_lock(&c->mu);
  for (;;) {
    while (!c->quit && !(c->requested && !c->done)) pthread_cond_wait(&c->cv, &c->mu);
    if (c->quit) break;
    pthread_mutex_unlock(&c->mu);
    ff_batch *b = NULL;
    ff_status st = ff_loader_next(c->loader, &b);
    pthread_mutex_lock(&c->mu);
    c->st = st;
    c->batch = st == FF_OK ? b : NULL;
    if (st == FF_OK) atomic_fetch_add(&c->held, 1);
    if (st < 0) snprintf(c->msg, sizeof c->msg, "%s", ff_loader_errmsg(c->loader));
    c->requested = 0;
    c->done = 1;
    pthread_cond_broadcast(&c->cv);
  }
  ff_batch *unclaimed = take_answer(c);
  ffpy_dataset *orphan = c->dataset_orphan ? c->dataset : NULL;
  pthread_mutex_unlock(&c->mu);
  give_back(c, unclaimed);
  ff_loader_close(c->loader); /* batches still held stay valid */
  c->loader = NULL;
  ffpy_dataset_free_without_gil(orphan);
  core_decref(c);
  return NULL;
}

void ffpy_core_incref(ffpy_core *c) { atomic_fetch_add(&c->refs, 1); }

void ffpy_core_batch_gone(ffpy_core *c) {
  atomic_fetch_sub(&c->held, 1);
  core_decref(c);
}

/* ---------------------------------------------------------------- Loader */

typedef struct {
  PyObject_HEAD
  ffpy_core *core;  /* NULL once closed */
  pid_t pid;   /* the process that opened it: a forked child has no threads */
  size_t num_batches, num_samples, dataset_size;
  int prefetch;
  PyObject *classes; /* tuple of the class folders' names (imagefolder), or None */
  char pinned_device[32]; /* ff_loader_pinned_device */
  int pinned_cuda_device;  /* ff_loader_pinned_cuda_device */
  int rank, world_size;   /* ff_loader_shard: as the open resolved them */
} LoaderObject;

static PyTypeObject *LoaderType;

static int check_open(LoaderObject *self) {
  if (!self->core) {
    PyErr_SetString(PyExc_ValueError, "fusionflow: the loader is closed");
    return -1;
  }
  if (self->pid != getpid()) {
    PyErr_SetString(PyExc_RuntimeError,
                    "fusionflow: this loader was opened in another process (fork): its threads do not exist "
                    "here; open a new Loader in this process");
    return -1;
  }
  return 0;
}

/* The source's class names as a tuple of str (file-system encoding, as
 * os.scandir gives them), None when its labels have no names. */
static PyObject *class_names(const ff_loader *loader) {
  size_t n = ff_loader_num_classes(loader);
  if (!n || !ff_loader_class_name(loader, 0)) Py_RETURN_NONE;
  PyObject *t = PyTuple_New((Py_ssize_t)n);
  for (size_t i = 0; t && i < n; i++) {
    PyObject *name = PyUnicode_DecodeFSDefault(ff_loader_class_name(loader, i));
    if (!name || PyTuple_SetItem(t, (Py_ssize_t)i, name)) Py_CLEAR(t); /* SetItem takes name, also on failure */
  }
  return t;
}

void ffpy_close_opened(ff_loader *loader, ffpy_dataset *dataset) {
  ffpy_dataset_closing(dataset);
  Py_BEGIN_ALLOW_THREADS
  ff_loader_close(loader);
  Py_END_ALLOW_THREADS
  ffpy_dataset_free(dataset);
}
PyObject *ffpy_loader_new(ff_loader *loader, ffpy_dataset *dataset, int prefetch) {
  ffpy_core *c = calloc(1, sizeof *c);
  if (!c) {
    ffpy_close_opened(loader, dataset);
    return PyErr_NoMemory();
  }
  atomic_init(&c->refs, 2); /* the Loader object and the fetch thread */
  atomic_init(&c->held, 0);
  pthread_mutex_init(&c->mu, NULL);
  pthread_condattr_t attr;
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  pthread_cond_init(&c->cv, &attr);
  pthread_condattr_destroy(&attr);
  c->loader = loader;
  c->ring_size = prefetch + 1;

  LoaderObject *self = PyObject_New(LoaderObject, LoaderType);
  if (!self) {
    ffpy_close_opened(loader, dataset);
    c->refs = 1;
    core_decref(c);
    return NULL;
  }
  self->core = NULL;
  self->classes = class_names(loader);
  self->pid = getpid();
  self->num_batches = ff_loader_num_batches(loader);
  self->num_samples = ff_loader_num_samples(loader);
  self->dataset_size = ff_loader_dataset_size(loader);
  self->prefetch = prefetch;
  ff_loader_shard(loader, &self->rank, &self->world_size);
  snprintf(self->pinned_device, sizeof self->pinned_device, "%s", ff_loader_pinned_device(loader));
  self->pinned_cuda_device = ff_loader_pinned_cuda_device(loader);
  if (!self->classes) {
    ffpy_close_opened(loader, dataset);
    c->refs = 1;
    core_decref(c);
    Py_DECREF(self);
    return NULL;
  }
  c->dataset = dataset;
  int rc = pthread_create(&c->thread, NULL, fetch_main, c);
  if (rc) {
    c->dataset = NULL;
    ffpy_close_opened(loader, dataset);
    c->refs = 1;
    core_decref(c);
    Py_DECREF(self);
    errno = rc;
    return PyErr_SetFromErrno(PyExc_OSError);
  }
  self->core = c;
  return (PyObject *)self;
}

/* Waits with the GIL released until the fetch thread has an answer; runs
 * the signal handlers every WAIT_SLICE_NS. Returns 0, or -1 with the
 * handler's exception (KeyboardInterrupt) set; the request stays in flight. */
static int wait_answer(ffpy_core *c) {
  for (;;) {
    int done;
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(&c->mu);
    if (!c->done) {
      struct timespec ts;
      clock_gettime(CLOCK_MONOTONIC, &ts);
      ts.tv_nsec += WAIT_SLICE_NS;
      if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
      while (!c->done && pthread_cond_timedwait(&c->cv, &c->mu, &ts) != ETIMEDOUT) {
      }
    }
    done = c->done;
    pthread_mutex_unlock(&c->mu);
    Py_END_ALLOW_THREADS
    if (done) return 0;
    if (PyErr_CheckSignals() < 0) return -1;
  }
}

/* Waits for a request in flight (after an interrupted next()), keeping its answer. */
static int settle(ffpy_core *c) {
  pthread_mutex_lock(&c->mu);
  int pending = c->requested;
  pthread_mutex_unlock(&c->mu);
  return pending ? wait_answer(c) : 0;
}

/* Gives back a kept answer that will not be handed out (set_epoch, seek). */
static void drop_answer(ffpy_core *c) {
  pthread_mutex_lock(&c->mu);
  ff_batch *b = take_answer(c);
  pthread_mutex_unlock(&c->mu);
  give_back(c, b);
}

/* ff_loader_fence on the consumer's stream handle (a Python int: a
 * cudaStream_t, 0 the legacy default stream), on this thread: the one that
 * queued the copies. Safe while the fetch thread waits in ff_loader_next.
 * 0, or -1 with the exception set. */
static int fence(ffpy_core *c, PyObject *stream) {
  void *handle = PyLong_AsVoidPtr(stream);
  if (!handle && PyErr_Occurred()) return -1;
  ff_status st;
  Py_BEGIN_ALLOW_THREADS
  st = ff_loader_fence(c->loader, handle);
  Py_END_ALLOW_THREADS
  if (st != FF_OK) {
    ffpy_raise_status(st, ff_loader_errmsg(c->loader));
    return -1;
  }
  return 0;
}

static PyObject *loader_next_body(LoaderObject *self, PyObject *args) {
  PyObject *stream = Py_None;
  if (!PyArg_ParseTuple(args, "|O:next", &stream)) return NULL;
  if (check_open(self)) return NULL;
  ffpy_core *c = self->core;
  if (stream != Py_None && fence(c, stream)) return NULL;
  pthread_mutex_lock(&c->mu);
  if (!c->requested && !c->done) {
    c->requested = 1;
    pthread_cond_broadcast(&c->cv);
  }
  pthread_mutex_unlock(&c->mu);
  if (wait_answer(c)) return NULL;

  pthread_mutex_lock(&c->mu);
  ff_status st = c->st;
  ff_batch *b = c->batch;
  char msg[MSG_MAX];
  memcpy(msg, c->msg, sizeof msg);
  c->done = 0;
  c->batch = NULL;
  pthread_mutex_unlock(&c->mu);

  if (st == FF_END) Py_RETURN_NONE;
  if (st != FF_OK) {
    if (st == FF_EINVAL && atomic_load(&c->held) >= c->ring_size)
      snprintf(msg, sizeof msg,
               "%d batches are still referenced, the most a loader with prefetch=%d can hand out "
               "(prefetch + 1): drop the images and labels of earlier batches (del them, or keep copies: "
               "tensor.clone() / numpy.array(a)) before asking for the next, or raise prefetch",
               c->ring_size, self->prefetch);
    return ffpy_raise_status(st, msg);
  }

  ffpy_owner *o = ffpy_owner_new(b, NULL, c);
  if (!o) {
    give_back(c, b);
    return PyErr_NoMemory();
  }
  ff_tensor ti, tl;
  ff_batch_images(b, &ti);
  ff_batch_labels(b, &tl);
  ff_tensor soft;
  if (ff_batch_soft_labels(b, &soft) == FF_OK) tl = soft; /* mixup_cutmix: (N, num_classes) float32 */
  size_t n = ff_batch_size(b);
  const int64_t *idx = ff_batch_sample_indices(b);
  PyObject *images = ffpy_images_new(o, b, &ti);
  size_t views = ff_loader_num_views(c->loader);
  if (images && views > 1) { /* views: a list of per-view tensors */
    PyObject *list = PyList_New((Py_ssize_t)views);
    if (list) PyList_SetItem(list, 0, images);
    else Py_DECREF(images);
    for (size_t v = 1; list && v < views; v++) {
      ff_tensor tv;
      ff_batch_view_images(b, v, &tv);
      PyObject *t = ffpy_images_new(o, b, &tv); /* on the batch's device, as view 0 */
      if (!t) Py_CLEAR(list);
      else PyList_SetItem(list, (Py_ssize_t)v, t);
    }
    images = list;
  }
  PyObject *labels = images ? ffpy_tensor_new(o, &tl) : NULL;
  PyObject *indices = labels ? PyList_New((Py_ssize_t)n) : NULL;
  for (size_t i = 0; indices && i < n; i++) {
    PyObject *x = PyLong_FromLongLong(idx[i]);
    if (!x) Py_CLEAR(indices);
    else PyList_SetItem(indices, (Py_ssize_t)i, x); /* steals x */
  }
  PyObject *r = NULL;
  if (indices)
    r = Py_BuildValue("(OOOKn)", images, labels, indices, (unsigned long long)ff_batch_epoch(b),
                      (Py_ssize_t)ff_batch_index(b));
  Py_XDECREF(images);
  Py_XDECREF(labels);
  Py_XDECREF(indices);
  ffpy_owner_decref(o); /* the tensors hold it now (or it goes back if they failed) */
  return r;
}

static PyObject *loader_close(LoaderObject *self, PyObject *args) {
  PyObject *stream = Py_None;
  if (args && !PyArg_ParseTuple(args, "|O:close", &stream)) return NULL;
  ffpy_core *c = self->core;
  if (!c) Py_RETURN_NONE;
  if (self->pid != getpid()) { /* forked child: the threads are not here; leave it */
    self->core = NULL;
    Py_RETURN_NONE;
  }
  pthread_mutex_lock(&c->mu);
  int consuming = c->consuming;
  pthread_mutex_unlock(&c->mu);
  /* the batches released so far are refilled only after the copies queued before now */
  if (stream != Py_None && !consuming && fence(c, stream)) PyErr_Clear(); /* closing anyway */
  pthread_mutex_lock(&c->mu);
  if (c->consuming) { /* its wait would outlive the ffpy_core */
    pthread_mutex_unlock(&c->mu);
    PyErr_SetString(PyExc_RuntimeError,
                    "fusionflow: another thread is using this Loader right now; close it when that call returns");
    return NULL;
  }
  self->core = NULL;
  int in_flight = c->requested;
  ffpy_dataset_closing(c->dataset); /* a worker must not wait for the GIL from now on */
  c->dataset_orphan = in_flight;
  c->quit = 1;
  pthread_cond_broadcast(&c->cv);
  pthread_mutex_unlock(&c->mu);
  if (in_flight) {
    /* An interrupted wait: the fetch thread closes the loader as soon as
     * ff_loader_next returns; nobody needs to wait for that. */
    pthread_detach(c->thread);
  } else {
    Py_BEGIN_ALLOW_THREADS
    pthread_join(c->thread, NULL);
    Py_END_ALLOW_THREADS
    ffpy_dataset_free(c->dataset); /* the loader is closed: no fetch runs any more */
    c->dataset = NULL;
  }
  core_decref(c);
  Py_RETURN_NONE;
}

static void loader_dealloc(LoaderObject *self) {
  PyTypeObject *type = Py_TYPE(self);
  if (self->core) {
    PyObject *r = loader_close(self, NULL);
    Py_XDECREF(r);
  }
  Py_XDECREF(self->classes);
  PyObject_Free(self);
  Py_DECREF(type);
}

static PyObject *loader_set_epoch_body(LoaderObject *self, PyObject *args) {
  unsigned long long epoch;
  if (!PyArg_ParseTuple(args, "K:set_epoch", &epoch)) return NULL;
  if (check_open(self) || settle(self->core)) return NULL;
  drop_answer(self->core);
  ff_status st;
  Py_BEGIN_ALLOW_THREADS /* waits for the samples in flight */
  st = ff_loader_set_epoch(self->core->loader, epoch);
  Py_END_ALLOW_THREADS
  if (st != FF_OK) return ffpy_raise_status(st, ff_loader_errmsg(self->core->loader));
  Py_RETURN_NONE;
}

static PyObject *loader_seek_body(LoaderObject *self, PyObject *args) {
  unsigned long long epoch;
  Py_ssize_t batch;
  if (!PyArg_ParseTuple(args, "Kn:seek", &epoch, &batch)) return NULL;
  if (batch < 0) {
    PyErr_SetString(PyExc_ValueError, "fusionflow: seek: batch must be >= 0");
    return NULL;
  }
  if (check_open(self) || settle(self->core)) return NULL;
  drop_answer(self->core);
  ff_status st;
  Py_BEGIN_ALLOW_THREADS
  st = ff_loader_seek(self->core->loader, epoch, (size_t)batch);
  Py_END_ALLOW_THREADS
  if (st != FF_OK) return ffpy_raise_status(st, ff_loader_errmsg(self->core->loader));
  Py_RETURN_NONE;
}

/* The JSON text of ff_loader_plan for (index, epoch). */
static PyObject *loader_plan(LoaderObject *self, PyObject *args) {
  unsigned long long index, epoch;
  if (!PyArg_ParseTuple(args, "KK:plan", &index, &epoch)) return NULL;
  if (check_open(self)) return NULL;
  char *json = NULL;
  ff_status st;
  Py_BEGIN_ALLOW_THREADS
  st = ff_loader_plan(self->core->loader, index, epoch, &json);
  Py_END_ALLOW_THREADS
  if (st != FF_OK) return ffpy_raise_status(st, ff_loader_errmsg(self->core->loader));
  PyObject *text = PyUnicode_DecodeFSDefault(json); /* paths may not be UTF-8 */
  ff_free(json);
  return text;
}

/* The JSON text of ff_loader_mix_plan for (epoch, batch). */
static PyObject *loader_mix_plan(LoaderObject *self, PyObject *args) {
  unsigned long long epoch;
  Py_ssize_t batch;
  if (!PyArg_ParseTuple(args, "Kn:mix_plan", &epoch, &batch)) return NULL;
  if (check_open(self)) return NULL;
  if (batch < 0) return ffpy_raise_status(FF_EINVAL, "batch must be >= 0");
  char *json = NULL;
  ff_status st = ff_loader_mix_plan(self->core->loader, epoch, (size_t)batch, &json);
  if (st != FF_OK) return ffpy_raise_status(st, ff_loader_errmsg(self->core->loader));
  PyObject *text = PyUnicode_FromString(json);
  ff_free(json);
  return text;
}

/* ff_loader_sample_info(i) as (path, label): path as str (file-system
 * encoding), label an int (-1: it comes with the bytes). */
static PyObject *loader_sample_info(LoaderObject *self, PyObject *args) {
  Py_ssize_t i;
  if (!PyArg_ParseTuple(args, "n:sample_info", &i)) return NULL;
  if (check_open(self)) return NULL;
  if (i < 0) return ffpy_raise_status(FF_EINVAL, "the sample index must be >= 0");
  const char *path = NULL;
  int64_t label = -1;
  ff_status st = ff_loader_sample_info(self->core->loader, (size_t)i, &path, &label);
  if (st != FF_OK) return ffpy_raise_status(st, ff_loader_errmsg(self->core->loader));
  return Py_BuildValue("(NL)", PyUnicode_DecodeFSDefault(path), (long long)label);
}

/* ff_loader_sample_images(i, epoch) as (images, label): images a Tensor, or
 * a list of one per view; the tensors own the sample's memory. */
static PyObject *loader_sample_images(LoaderObject *self, PyObject *args) {
  Py_ssize_t i;
  unsigned long long epoch;
  if (!PyArg_ParseTuple(args, "nK:sample_images", &i, &epoch)) return NULL;
  if (check_open(self)) return NULL;
  if (i < 0) return ffpy_raise_status(FF_EINVAL, "the sample index must be >= 0");
  ff_loader *l = self->core->loader;
  size_t views = ff_loader_num_views(l);
  ff_tensor *t = calloc(views, sizeof *t);
  if (!t) return PyErr_NoMemory();
  int64_t label = -1;
  ff_status st;
  Py_BEGIN_ALLOW_THREADS
  st = ff_loader_sample_images(l, (size_t)i, epoch, t, views, &label);
  Py_END_ALLOW_THREADS
  if (st != FF_OK) {
    free(t);
    return ffpy_raise_status(st, ff_loader_errmsg(l));
  }
  ffpy_owner *o = ffpy_owner_new(NULL, t[0].data, NULL);
  if (!o) {
    ff_free(t[0].data);
    free(t);
    return PyErr_NoMemory();
  }
  PyObject *images = views > 1 ? PyList_New((Py_ssize_t)views) : ffpy_tensor_new(o, &t[0]);
  for (size_t v = 0; views > 1 && images && v < views; v++) {
    PyObject *x = ffpy_tensor_new(o, &t[v]);
    if (!x) Py_CLEAR(images);
    else PyList_SetItem(images, (Py_ssize_t)v, x); /* steals x */
  }
  ffpy_owner_decref(o); /* the tensors hold it now */
  free(t);
  return images ? Py_BuildValue("(NL)", images, (long long)label) : NULL;
}

/* ff_loader_epoch_order(epoch) as a list of int. */
static PyObject *loader_epoch_order(LoaderObject *self, PyObject *args) {
  unsigned long long epoch;
  if (!PyArg_ParseTuple(args, "K:epoch_order", &epoch)) return NULL;
  if (check_open(self)) return NULL;
  size_t n = self->num_samples;
  int64_t *order = malloc((n ? n : 1) * sizeof *order);
  if (!order) return PyErr_NoMemory();
  ff_status st;
  Py_BEGIN_ALLOW_THREADS
  st = ff_loader_epoch_order(self->core->loader, epoch, order, n);
  Py_END_ALLOW_THREADS
  if (st != FF_OK) {
    free(order);
    return ffpy_raise_status(st, ff_loader_errmsg(self->core->loader));
  }
  PyObject *list = PyList_New((Py_ssize_t)n);
  for (size_t k = 0; list && k < n; k++) {
    PyObject *x = PyLong_FromLongLong(order[k]);
    if (!x) Py_CLEAR(list);
    else PyList_SetItem(list, (Py_ssize_t)k, x); /* steals x */
  }
  free(order);
  return list;
}

/* ff_loader_set_mix_enabled(enabled). */
static PyObject *loader_set_mix_enabled(LoaderObject *self, PyObject *args) {
  int enabled;
  if (!PyArg_ParseTuple(args, "p:set_mix_enabled", &enabled)) return NULL;
  if (check_open(self)) return NULL;
  ff_status st = ff_loader_set_mix_enabled(self->core->loader, enabled);
  if (st != FF_OK) return ffpy_raise_status(st, ff_loader_errmsg(self->core->loader));
  Py_RETURN_NONE;
}

/* (epoch, batch) of the batch the next next() hands out. */
static PyObject *loader_position_body(LoaderObject *self, PyObject *unused) {
  (void)unused;
  if (check_open(self) || settle(self->core)) return NULL;
  ffpy_core *c = self->core;
  uint64_t epoch;
  size_t batch;
  ff_loader_position(c->loader, &epoch, &batch);
  pthread_mutex_lock(&c->mu);
  if (c->done && c->st == FF_OK) { /* kept from an interrupted wait: still to be handed out */
    epoch = ff_batch_epoch(c->batch);
    batch = ff_batch_index(c->batch);
  } else if (c->done && c->st == FF_END && epoch > 0) {
    epoch -= 1;
    batch = self->num_batches;
  }
  pthread_mutex_unlock(&c->mu);
  return Py_BuildValue("(Kn)", (unsigned long long)epoch, (Py_ssize_t)batch);
}

static PyObject *loader_stats_body(LoaderObject *self, PyObject *unused) {
  (void)unused;
  if (check_open(self) || settle(self->core)) return NULL;
  return ffpy_stats_dict(self->core->loader);
}

/* The header allows one consumer thread per loader. A second Python thread
 * inside a consumer call while the first waits would take the first one's
 * answer (two threads, one batch: a NULL batch for one of them): it raises
 * instead. */
static int enter(LoaderObject *self) {
  if (check_open(self)) return -1;
  ffpy_core *c = self->core;
  pthread_mutex_lock(&c->mu);
  int busy = c->consuming;
  c->consuming = 1;
  pthread_mutex_unlock(&c->mu);
  if (busy) {
    PyErr_SetString(PyExc_RuntimeError,
                    "fusionflow: another thread is using this Loader right now; a Loader has one consumer "
                    "thread at a time (iterate it from one thread, or open one Loader per thread)");
    return -1;
  }
  return 0;
}

static void leave(ffpy_core *c) {
  pthread_mutex_lock(&c->mu);
  c->consuming = 0;
  pthread_mutex_unlock(&c->mu);
}

#define CONSUMER_CALL(name)                                                 \
  static PyObject *name(LoaderObject *self, PyObject *args) {               \
    if (enter(self)) return NULL;                                           \
    ffpy_core *c = self->core;                                                   \
    PyObject *r = name##_body(self, args);                                  \
    leave(c);                                                               \
    return r;                                                               \
  }
CONSUMER_CALL(loader_next)
CONSUMER_CALL(loader_set_epoch)
CONSUMER_CALL(loader_seek)
CONSUMER_CALL(loader_position)
CONSUMER_CALL(loader_stats)

static PyObject *loader_held(LoaderObject *self, PyObject *unused) {
  (void)unused;
  return PyLong_FromLong(self->core ? atomic_load(&self->core->held) : 0);
}

/* ff_stats.device_budget_refusals alone: cheap enough for every batch. */
static PyObject *loader_budget_refusals(LoaderObject *self, PyObject *unused) {
  (void)unused;
  if (check_open(self)) return NULL;
  ff_stats s;
  ff_loader_stats(self->core->loader, &s);
  return PyLong_FromUnsignedLongLong(s.device_budget_refusals);
}

static PyObject *loader_late_copy(LoaderObject *self, PyObject *args) {
  if (check_open(self)) return NULL;
  return ffpy_late_copy_queue(self->core->loader, args);
}

static PyObject *loader_set_device_free_bytes(LoaderObject *self, PyObject *args) {
  long long free_bytes;
  if (!PyArg_ParseTuple(args, "L:set_device_free_bytes", &free_bytes)) return NULL;
  if (check_open(self)) return NULL;
  ff_status st = ff_loader_set_device_free_bytes(self->core->loader, (int64_t)free_bytes);
  if (st != FF_OK) return ffpy_raise_status(st, ff_loader_errmsg(self->core->loader));
  Py_RETURN_NONE;
}

static PyObject *loader_get_closed(LoaderObject *self, void *unused) {
  (void)unused;
  return PyBool_FromLong(self->core == NULL);
}

static PyMethodDef loader_methods[] = {
    {"next", (PyCFunction)loader_next, METH_VARARGS,
     "next(stream=None) -> (images, labels, sample_indices, epoch, batch) or None at the end of the epoch;\n"
     "a stream (int: a cudaStream_t of pinned_device, 0 its default stream) is fenced first (ff_loader_fence)"},
    {"close", (PyCFunction)loader_close, METH_VARARGS,
     "close(stream=None): fence on stream (as next), stop and join the threads; idempotent"},
    {"set_epoch", (PyCFunction)loader_set_epoch, METH_VARARGS, "set_epoch(epoch)"},
    {"seek", (PyCFunction)loader_seek, METH_VARARGS, "seek(epoch, batch)"},
    {"position", (PyCFunction)loader_position, METH_NOARGS, "position() -> (epoch, batch)"},
    {"plan", (PyCFunction)loader_plan, METH_VARARGS, "plan(index, epoch) -> JSON text of ff_loader_plan"},
    {"mix_plan", (PyCFunction)loader_mix_plan, METH_VARARGS,
     "mix_plan(epoch, batch) -> JSON text of ff_loader_mix_plan (the batch stage's draws)"},
    {"stats", (PyCFunction)loader_stats, METH_NOARGS, "stats() -> dict"},
    {"sample_info", (PyCFunction)loader_sample_info, METH_VARARGS,
     "sample_info(i) -> (path, label) of ff_loader_sample_info"},
    {"sample_images", (PyCFunction)loader_sample_images, METH_VARARGS,
     "sample_images(i, epoch) -> (images, label) of ff_loader_sample_images"},
    {"epoch_order", (PyCFunction)loader_epoch_order, METH_VARARGS,
     "epoch_order(epoch) -> list of the dataset indices of ff_loader_epoch_order"},
    {"set_mix_enabled", (PyCFunction)loader_set_mix_enabled, METH_VARARGS, "set_mix_enabled(enabled)"},
    {"held", (PyCFunction)loader_held, METH_NOARGS, "held() -> batches handed out and still referenced"},
    {"set_device_free_bytes", (PyCFunction)loader_set_device_free_bytes, METH_VARARGS,
     "set_device_free_bytes(n): at most n bytes of the device's free memory count for the budget (-1: no "
     "cap); ff_loader_set_device_free_bytes"},
    {"_late_copy", (PyCFunction)loader_late_copy, METH_VARARGS,
     "_late_copy(address, nbytes) -> a late copy on the emulator, for tests (ffpy_late_copy.h)"},
    {"budget_refusals", (PyCFunction)loader_budget_refusals, METH_NOARGS,
     "budget_refusals() -> ff_stats.device_budget_refusals"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef loader_getset[] = {
    {"closed", (getter)loader_get_closed, NULL, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

/* Read-only fields set at open (size_t read as Py_ssize_t: the counts stay far below 2**63). */
#define LOADER_FIELD(name, type, field, doc) {name, type, offsetof(LoaderObject, field), READONLY, doc}
static PyMemberDef loader_members[] = {
    LOADER_FIELD("num_batches", T_PYSSIZET, num_batches, NULL),
    LOADER_FIELD("num_samples", T_PYSSIZET, num_samples, NULL),
    LOADER_FIELD("dataset_size", T_PYSSIZET, dataset_size, NULL),
    LOADER_FIELD("rank", T_INT, rank, "this process's shard, $RANK resolved (ff_loader_shard)"),
    LOADER_FIELD("world_size", T_INT, world_size, "the number of shards, $WORLD_SIZE resolved"),
    LOADER_FIELD("classes", T_OBJECT, classes, "tuple of str (class folders) or None"),
    LOADER_FIELD("pinned_device", T_STRING_INPLACE, pinned_device,
                 "the device that pinned the host batches (\"cuda:0\", \"emu:0\"), or \"cpu\" (ff_loader_pinned_device)"),
    LOADER_FIELD("pinned_cuda_device", T_INT, pinned_cuda_device,
                 "the CUDA ordinal of pinned_device, or -1 when no CUDA device pinned them (ff_loader_pinned_cuda_device)"),
    {NULL, 0, 0, 0, NULL},
};
#undef LOADER_FIELD

static PyType_Slot loader_slots[] = {
    {Py_tp_dealloc, (void *)loader_dealloc},
    {Py_tp_doc, (void *)"The C loader under fusionflow.Loader (made by open_loader)."},
    {Py_tp_methods, loader_methods},
    {Py_tp_getset, loader_getset},
    {Py_tp_members, loader_members},
    {0, NULL},
};

static PyType_Spec loader_spec = {"fusionflow._fusionflow.CLoader", sizeof(LoaderObject), 0, Py_TPFLAGS_DEFAULT,
                                  loader_slots};

int ffpy_loader_add(PyObject *module) { return ffpy_add_type(module, &loader_spec, &LoaderType); }
