/* ffpy_remote.c — RemoteQueue, the C end of fusionflow.ray.Workers.
 *
 *   RemoteQueue(workers, max_in_flight=0, microbatch_size=0, reads_source=True, timeout_ms=0)
 *   .take(timeout_s) -> [(id, epoch, [index], [bytes] or None, sample_bytes)]  (waits up to timeout_s)
 *   .wake()     the take waiting now, or the next one, returns at once (a result came back)
 *   .complete(id, address, size_bytes, statuses or None, attempts=1, worker_cpu_ns=0) -> bool
 *   .refuse()   from now on the loader's submits are refused (the pool is gone: the rest runs locally)
 *   .closed     the loader stopped it (ff_loader_close): take returns [] and complete does nothing
 *
 * The loader's worker threads call submit, which copies the microbatch into
 * a list under this object's mutex and signals: no GIL, no Ray. The
 * dispatcher thread takes them (GIL released while it waits) and, once a
 * result is in its hands, completes it: address is the first byte of the
 * uint8 samples (a NumPy array's), read during the call only, with the GIL
 * released. The loader's stop (ff_loader_close) waits for a complete in
 * progress and cuts the queue from the loader; the state is freed when
 * both the Python object and the loader have let go. */
#include "ffpy_remote.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct rtask {
  uint64_t id, epoch;
  size_t n, sample_bytes;
  uint64_t *indices;
  void **data; /* NULL when the workers read the source */
  size_t *sizes;
  struct rtask *next;
} rtask;

struct ffpy_remote {
  atomic_int refs; /* the Python object, and the loader until its stop */
  ff_remote_executor ex;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  /* under mu */
  rtask *head, *tail;
  ff_loader *loader; /* NULL before attach and after the stop */
  int stopped, refused, completing, woken;
};

typedef struct RemoteQueueObject {
  PyObject_HEAD
  ffpy_remote *r;
} RemoteQueueObject;

static PyTypeObject *RemoteQueueType;

static void rtask_free(rtask *t) {
  for (size_t i = 0; t->data && i < t->n; i++) free(t->data[i]);
  free(t->data), free(t->sizes), free(t->indices), free(t);
}

static void remote_decref(ffpy_remote *r) {
  if (atomic_fetch_sub(&r->refs, 1) != 1) return;
  while (r->head) {
    rtask *t = r->head;
    r->head = t->next;
    rtask_free(t);
  }
  pthread_mutex_destroy(&r->mu);
  pthread_cond_destroy(&r->cv);
  free(r);
}

/* ff_remote_executor.submit: a copy into the list. Any thread, no GIL. */
static int remote_submit(void *ctx, const ff_remote_task *task) {
  ffpy_remote *r = ctx;
  rtask *t = calloc(1, sizeof *t);
  int ok = t && (t->indices = malloc(task->n * sizeof *t->indices));
  if (ok && task->data) {
    ok = (t->data = calloc(task->n, sizeof *t->data)) && (t->sizes = malloc(task->n * sizeof *t->sizes));
    for (size_t i = 0; ok && i < task->n; i++) {
      ok = (t->data[i] = malloc(task->size_bytes[i] ? task->size_bytes[i] : 1)) != NULL;
      if (ok) memcpy(t->data[i], task->data[i], task->size_bytes[i]), t->sizes[i] = task->size_bytes[i];
    }
  }
  if (!ok) { /* no memory: these samples run locally */
    if (t) t->n = task->n, rtask_free(t);
    return 1;
  }
  t->id = task->id, t->epoch = task->epoch, t->n = task->n, t->sample_bytes = task->sample_bytes;
  memcpy(t->indices, task->indices, task->n * sizeof *t->indices);
  pthread_mutex_lock(&r->mu);
  int refused = r->refused || r->stopped;
  if (!refused) {
    if (r->tail) r->tail->next = t;
    else r->head = t;
    r->tail = t;
    pthread_cond_broadcast(&r->cv);
  }
  pthread_mutex_unlock(&r->mu);
  if (refused) rtask_free(t);
  return refused;
}

/* ff_remote_executor.stop: no complete after it returns. ff_loader_close's thread, no GIL. */
static void remote_stop(void *ctx) {
  ffpy_remote *r = ctx;
  pthread_mutex_lock(&r->mu);
  r->stopped = 1;
  while (r->completing) pthread_cond_wait(&r->cv, &r->mu);
  r->loader = NULL;
  pthread_cond_broadcast(&r->cv);
  pthread_mutex_unlock(&r->mu);
  remote_decref(r); /* the loader's reference */
}

const ff_remote_executor *ffpy_remote_executor(PyObject *queue, ffpy_remote **out) {
  if (!RemoteQueueType || !PyObject_TypeCheck(queue, RemoteQueueType)) {
    PyErr_SetString(PyExc_TypeError, "fusionflow: remote must be a RemoteQueue (fusionflow.ray.Workers makes it)");
    return NULL;
  }
  ffpy_remote *r = ((RemoteQueueObject *)queue)->r;
  pthread_mutex_lock(&r->mu);
  int used = r->stopped || r->loader;
  pthread_mutex_unlock(&r->mu);
  if (used) {
    PyErr_SetString(PyExc_ValueError, "fusionflow: this RemoteQueue served a loader already");
    return NULL;
  }
  atomic_fetch_add(&r->refs, 1); /* the loader's, given back by its stop */
  *out = r;
  return &r->ex;
}

void ffpy_remote_attach(ffpy_remote *r, ff_loader *loader) {
  pthread_mutex_lock(&r->mu);
  if (!r->stopped) r->loader = loader;
  pthread_mutex_unlock(&r->mu);
}

void ffpy_remote_detach(ffpy_remote *r) { remote_stop(r); }

static PyObject *queue_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
  static char *kwlist[] = {"workers", "max_in_flight", "microbatch_size", "reads_source", "timeout_ms", NULL};
  int workers, max_in_flight = 0, microbatch = 0, reads_source = 1;
  unsigned long long timeout_ms = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "i|iipO&:RemoteQueue", kwlist, &workers, &max_in_flight,
                                   &microbatch, &reads_source, ffpy_to_u64, &timeout_ms))
    return NULL;
  RemoteQueueObject *self = (RemoteQueueObject *)PyType_GenericAlloc(type, 0);
  if (!self) return NULL;
  ffpy_remote *r = calloc(1, sizeof *r);
  if (!r) {
    Py_DECREF(self);
    return PyErr_NoMemory();
  }
  atomic_init(&r->refs, 1);
  pthread_mutex_init(&r->mu, NULL);
  pthread_cond_init(&r->cv, NULL);
  r->ex = (ff_remote_executor){remote_submit, remote_stop, r, workers, max_in_flight, microbatch, reads_source,
                               (uint64_t)timeout_ms};
  self->r = r;
  return (PyObject *)self;
}

static void queue_dealloc(PyObject *obj) {
  RemoteQueueObject *self = (RemoteQueueObject *)obj;
  if (self->r) {
    pthread_mutex_lock(&self->r->mu);
    self->r->refused = 1; /* nobody takes work any more */
    pthread_mutex_unlock(&self->r->mu);
    remote_decref(self->r);
  }
  PyTypeObject *tp = Py_TYPE(obj);
  freefunc f = (freefunc)PyType_GetSlot(tp, Py_tp_free);
  f(obj);
  Py_DECREF(tp);
}

/* The task as (id, epoch, [index], [bytes] or None, sample_bytes). */
static PyObject *task_tuple(const rtask *t) {
  PyObject *indices = PyList_New((Py_ssize_t)t->n), *datas = NULL;
  for (size_t i = 0; indices && i < t->n; i++) {
    PyObject *v = PyLong_FromUnsignedLongLong(t->indices[i]);
    if (!v) Py_CLEAR(indices);
    else PyList_SetItem(indices, (Py_ssize_t)i, v);
  }
  if (indices && t->data) {
    datas = PyList_New((Py_ssize_t)t->n);
    for (size_t i = 0; datas && i < t->n; i++) {
      PyObject *b = PyBytes_FromStringAndSize(t->data[i], (Py_ssize_t)t->sizes[i]);
      if (!b) Py_CLEAR(datas);
      else PyList_SetItem(datas, (Py_ssize_t)i, b);
    }
    if (!datas) Py_CLEAR(indices);
  } else if (indices) {
    datas = Py_None;
    Py_INCREF(datas);
  }
  if (!indices) return NULL;
  return Py_BuildValue("(KKNNn)", (unsigned long long)t->id, (unsigned long long)t->epoch, indices, datas,
                       (Py_ssize_t)t->sample_bytes);
}

static PyObject *queue_take(PyObject *obj, PyObject *args) {
  ffpy_remote *r = ((RemoteQueueObject *)obj)->r;
  double timeout_s;
  if (!PyArg_ParseTuple(args, "d:take", &timeout_s)) return NULL;
  rtask *got = NULL;
  Py_BEGIN_ALLOW_THREADS
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  long long ns = (long long)ts.tv_nsec + (long long)(timeout_s > 0 ? timeout_s * 1e9 : 0);
  ts.tv_sec += (time_t)(ns / 1000000000), ts.tv_nsec = (long)(ns % 1000000000);
  pthread_mutex_lock(&r->mu);
  while (!r->head && !r->stopped && !r->woken && timeout_s > 0 && pthread_cond_timedwait(&r->cv, &r->mu, &ts) == 0) {
  }
  r->woken = 0;
  got = r->head;
  r->head = r->tail = NULL;
  pthread_mutex_unlock(&r->mu);
  Py_END_ALLOW_THREADS
  PyObject *list = PyList_New(0);
  for (rtask *t = got; t;) {
    PyObject *tuple = list ? task_tuple(t) : NULL;
    if (list && (!tuple || PyList_Append(list, tuple))) Py_CLEAR(list);
    Py_XDECREF(tuple);
    rtask *next = t->next;
    rtask_free(t);
    t = next;
  }
  return list;
}

static PyObject *queue_complete(PyObject *obj, PyObject *args, PyObject *kwargs) {
  static char *kwlist[] = {"id", "address", "size_bytes", "statuses", "attempts", "worker_cpu_ns", NULL};
  ffpy_remote *r = ((RemoteQueueObject *)obj)->r;
  unsigned long long id, address = 0, cpu_ns = 0;
  Py_ssize_t size = 0;
  PyObject *statuses_obj = Py_None;
  int attempts = 1;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "KK|nOiK:complete", kwlist, &id, &address, &size, &statuses_obj,
                                   &attempts, &cpu_ns))
    return NULL;
  ff_status *statuses = NULL;
  if (statuses_obj != Py_None) {
    Py_ssize_t n = PyList_Check(statuses_obj) ? PyList_Size(statuses_obj) : -1;
    if (n < 0) {
      PyErr_SetString(PyExc_TypeError, "fusionflow: statuses must be a list of ints or None");
      return NULL;
    }
    statuses = malloc(((size_t)n + 1) * sizeof *statuses);
    if (!statuses) return PyErr_NoMemory();
    for (Py_ssize_t i = 0; i < n; i++) {
      long v = PyLong_AsLong(PyList_GetItem(statuses_obj, i));
      if (v == -1 && PyErr_Occurred()) {
        free(statuses);
        return NULL;
      }
      statuses[i] = (ff_status)v;
    }
  }
  int taken = 0;
  ff_status st = FF_OK;
  char msg[FFPY_MSG_MAX] = "";
  Py_BEGIN_ALLOW_THREADS
  pthread_mutex_lock(&r->mu);
  ff_loader *l = r->stopped ? NULL : r->loader;
  if (l) r->completing++;
  pthread_mutex_unlock(&r->mu);
  if (l) {
    st = ff_loader_remote_complete(l, id, address ? (const void *)(uintptr_t)address : NULL, (size_t)size, statuses,
                                   attempts, cpu_ns);
    if (st) snprintf(msg, sizeof msg, "%s", ff_loader_errmsg(l));
    taken = 1;
    pthread_mutex_lock(&r->mu);
    r->completing--;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
  }
  Py_END_ALLOW_THREADS
  free(statuses);
  if (st) return ffpy_raise_status(st, msg);
  return PyBool_FromLong(taken);
}

/* Any thread (Ray's, completing a result's future). */
static PyObject *queue_wake(PyObject *obj, PyObject *unused) {
  (void)unused;
  ffpy_remote *r = ((RemoteQueueObject *)obj)->r;
  pthread_mutex_lock(&r->mu);
  r->woken = 1;
  pthread_cond_broadcast(&r->cv);
  pthread_mutex_unlock(&r->mu);
  Py_RETURN_NONE;
}

static PyObject *queue_refuse(PyObject *obj, PyObject *unused) {
  (void)unused;
  ffpy_remote *r = ((RemoteQueueObject *)obj)->r;
  pthread_mutex_lock(&r->mu);
  r->refused = 1;
  pthread_mutex_unlock(&r->mu);
  Py_RETURN_NONE;
}

static PyObject *queue_closed(PyObject *obj, void *unused) {
  (void)unused;
  ffpy_remote *r = ((RemoteQueueObject *)obj)->r;
  pthread_mutex_lock(&r->mu);
  int stopped = r->stopped;
  pthread_mutex_unlock(&r->mu);
  return PyBool_FromLong(stopped);
}

static PyMethodDef queue_methods[] = {
    {"take", queue_take, METH_VARARGS, "take(timeout_s) -> [(id, epoch, [index], [bytes] or None, sample_bytes)]"},
    {"complete", (PyCFunction)(void (*)(void))queue_complete, METH_VARARGS | METH_KEYWORDS,
     "complete(id, address, size_bytes=0, statuses=None, attempts=1, worker_cpu_ns=0) -> bool (taken)"},
    {"wake", queue_wake, METH_NOARGS, "wake(): the take waiting now, or the next one, returns at once"},
    {"refuse", queue_refuse, METH_NOARGS, "refuse(): the loader's submits are refused from now on"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef queue_getset[] = {
    {"closed", queue_closed, NULL, "whether the loader stopped the queue", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot queue_slots[] = {
    {Py_tp_new, queue_new},         {Py_tp_dealloc, queue_dealloc}, {Py_tp_methods, queue_methods},
    {Py_tp_getset, queue_getset},   {Py_tp_doc, "the C end of fusionflow.ray.Workers"}, {0, NULL},
};

static PyType_Spec queue_spec = {"fusionflow._fusionflow.RemoteQueue", sizeof(RemoteQueueObject), 0,
                                 Py_TPFLAGS_DEFAULT, queue_slots};

int ffpy_remote_add(PyObject *module) {
  RemoteQueueType = (PyTypeObject *)PyType_FromSpec(&queue_spec);
  if (!RemoteQueueType) return -1;
  Py_INCREF(RemoteQueueType);
  if (PyModule_AddObject(module, "RemoteQueue", (PyObject *)RemoteQueueType)) {
    Py_DECREF(RemoteQueueType);
    return -1;
  }
  return 0;
}

PyObject *ffpy_remote_stats(const ff_stats *s) {
  static const char *const names[FF_PLACEMENTS] = {"cpu", "split", "device", "remote"};
  PyObject *placements = PyDict_New();
  for (int p = 0; placements && p < FF_PLACEMENTS; p++) {
    PyObject *v = PyLong_FromUnsignedLongLong(s->placement_samples[p]);
    if (!v || PyDict_SetItemString(placements, names[p], v)) Py_CLEAR(placements);
    Py_XDECREF(v);
  }
  if (!placements) return NULL;
  return Py_BuildValue("{s:N,s:i,s:d,s:K,s:K,s:d,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:s}", "placement_samples",
                       placements, "workers", s->remote_workers, "share", s->remote_share, "microbatches",
                       (unsigned long long)s->remote_microbatches, "latency_ns",
                       (unsigned long long)s->remote_latency_ns, "rtt_s", s->remote_rtt_s, "bytes_sent",
                       (unsigned long long)s->remote_bytes_sent, "bytes_received",
                       (unsigned long long)s->remote_bytes_received, "retries",
                       (unsigned long long)s->remote_retries, "worker_cpu_ns",
                       (unsigned long long)s->remote_worker_cpu_ns, "convert_ns",
                       (unsigned long long)s->remote_convert_ns, "fallbacks", (unsigned long long)s->remote_fallbacks,
                       "timeouts", (unsigned long long)s->remote_timeouts, "late", (unsigned long long)s->remote_late,
                       "note", s->remote_note ? s->remote_note : "");
}
