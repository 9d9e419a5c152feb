/* ffpy_dataset.c — a Python dataset as a callback source. The library's
 * worker threads call fetch with a batch's indices; it takes the GIL once
 * (PyGILState_Ensure: these threads are not Python's), calls the Python
 * fetcher (fusionflow._dataset_source.DatasetFetcher) with the whole list, and
 * keeps a reference to each bytes object it hands out, so the library
 * copies straight out of Python's memory. release runs without the GIL (the
 * library may call it on any thread, even one that waits for nothing
 * Python holds): it only queues the references, which the next fetch (GIL
 * held anyway) or the final free drops.
 *
 * Deadlock rules: a worker waiting for the GIL must never be joined by a
 * thread that holds it, so the Loader closes its ff_loader with the GIL
 * released, and ffpy_dataset_closing first makes new fetches fail without
 * touching Python (a fetch after interpreter finalization has begun does the
 * same: the GIL can no longer be taken then). Stable ABI (Py_LIMITED_API
 * 3.9), as the rest of the extension. */
#include "ffpy_dataset.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

struct ffpy_dataset {
  ff_source_callbacks cb;
  PyObject *fetch;
  atomic_int closing;
  pthread_mutex_t mu; /* guards pending */
  PyObject **pending; /* references released by the library, dropped with the GIL */
  size_t n_pending, cap_pending;
};

static char closing_msg[] = "the loader is closing";
static char nomem_msg[] = "out of memory";

static atomic_int exiting; /* the interpreter is shutting down (ffpy_dataset_exiting) */

void ffpy_dataset_exiting(void) { atomic_store(&exiting, 1); }

static int finalizing(void) { return atomic_load(&exiting) || !Py_IsInitialized(); }

/* Drops the queued references (GIL held). */
static void drain(ffpy_dataset *d) {
  pthread_mutex_lock(&d->mu);
  PyObject **objs = d->pending;
  size_t n = d->n_pending;
  d->pending = NULL, d->n_pending = d->cap_pending = 0;
  pthread_mutex_unlock(&d->mu);
  for (size_t i = 0; i < n; i++)
    Py_DECREF(objs[i]);
  free(objs);
}

static char *copy_text(const char *s) {
  char *t = strdup(s);
  return t ? t : nomem_msg;
}

/* The UTF-8 of str(obj) in buf (stable ABI: no PyUnicode_AsUTF8 before 3.10); GIL held. */
static void utf8_of(PyObject *obj, char *buf, size_t cap) {
  PyObject *s = obj ? PyObject_Str(obj) : NULL;
  PyObject *b = s ? PyUnicode_AsUTF8String(s) : NULL;
  const char *text = b ? PyBytes_AsString(b) : NULL;
  snprintf(buf, cap, "%s", text ? text : "?");
  Py_XDECREF(b), Py_XDECREF(s);
  PyErr_Clear();
}

/* The current exception as "Type: message" (cleared); GIL held. */
static char *exception_text(void) {
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  PyObject *name = type ? PyObject_GetAttrString(type, "__name__") : NULL;
  char kind[256], msg[760], buf[1024];
  utf8_of(name, kind, sizeof kind);
  utf8_of(value, msg, sizeof msg);
  snprintf(buf, sizeof buf, "%s: %s", kind, msg);
  Py_XDECREF(name), Py_XDECREF(type), Py_XDECREF(value), Py_XDECREF(tb);
  return copy_text(buf);
}

/* One result of the fetcher into *it (GIL held). */
static void take_result(PyObject *r, ff_source_item *it) {
  if (PyUnicode_Check(r)) {
    char text[1024];
    utf8_of(r, text, sizeof text);
    it->error = copy_text(text);
    return;
  }
  PyObject *bytes = PyTuple_Check(r) && PyTuple_Size(r) == 2 ? PyTuple_GetItem(r, 0) : NULL;
  PyObject *label_obj = bytes ? PyTuple_GetItem(r, 1) : NULL;
  if (!bytes || !PyBytes_Check(bytes) || !label_obj || !PyLong_Check(label_obj)) {
    PyErr_Clear();
    it->error = copy_text("the fetcher gave something other than (bytes, int) or str");
    return;
  }
  long long label = PyLong_AsLongLong(label_obj);
  if (label == -1 && PyErr_Occurred()) {
    it->error = exception_text();
    return;
  }
  Py_INCREF(bytes);
  *it = (ff_source_item){PyBytes_AsString(bytes), (size_t)PyBytes_Size(bytes), label, NULL, bytes};
}

static void fetch(void *ctx, const uint64_t *indices, size_t n, ff_source_item *items) {
  ffpy_dataset *d = ctx;
  if (atomic_load(&d->closing) || finalizing()) {
    for (size_t k = 0; k < n; k++)
      items[k].error = closing_msg;
    return;
  }
  PyGILState_STATE gil = PyGILState_Ensure();
  drain(d);
  PyObject *list = PyList_New((Py_ssize_t)n);
  for (size_t k = 0; list && k < n; k++) {
    PyObject *i = PyLong_FromUnsignedLongLong(indices[k]);
    if (!i || PyList_SetItem(list, (Py_ssize_t)k, i)) Py_CLEAR(list); /* SetItem takes i, also on failure */
  }
  PyObject *res = list ? PyObject_CallFunctionObjArgs(d->fetch, list, NULL) : NULL;
  Py_XDECREF(list);
  if (res && (!PyList_Check(res) || PyList_Size(res) != (Py_ssize_t)n)) {
    Py_CLEAR(res);
    PyErr_SetString(PyExc_TypeError, "the fetcher did not give one result per index");
  }
  if (!res) {
    char *why = exception_text();
    for (size_t k = 0; k < n; k++)
      items[k].error = k ? copy_text(why) : why;
  }
  for (size_t k = 0; res && k < n; k++)
    take_result(PyList_GetItem(res, (Py_ssize_t)k), &items[k]);
  Py_XDECREF(res);
  PyGILState_Release(gil);
}

static void release(void *ctx, ff_source_item *items, size_t n) {
  ffpy_dataset *d = ctx;
  pthread_mutex_lock(&d->mu);
  for (size_t k = 0; k < n; k++) {
    if (items[k].error && items[k].error != closing_msg && items[k].error != nomem_msg)
      free((char *)items[k].error);
    if (!items[k].handle) continue;
    if (d->n_pending == d->cap_pending) {
      size_t cap = d->cap_pending ? 2 * d->cap_pending : 64;
      PyObject **grown = realloc(d->pending, cap * sizeof *grown);
      if (!grown) continue; /* the reference leaks rather than dropping it without the GIL */
      d->pending = grown, d->cap_pending = cap;
    }
    d->pending[d->n_pending++] = items[k].handle;
  }
  pthread_mutex_unlock(&d->mu);
}

ffpy_dataset *ffpy_dataset_new(PyObject *fetcher, size_t count, const char *name, ff_source_callbacks **cb) {
  ffpy_dataset *d = calloc(1, sizeof *d);
  char *name_copy = strdup(name);
  if (!d || !name_copy) {
    free(d), free(name_copy);
    PyErr_NoMemory();
    return NULL;
  }
  pthread_mutex_init(&d->mu, NULL);
  atomic_init(&d->closing, 0);
  Py_INCREF(fetcher);
  d->fetch = fetcher;
  d->cb = (ff_source_callbacks){count, fetch, release, d, name_copy};
  *cb = &d->cb;
  return d;
}

void ffpy_dataset_closing(ffpy_dataset *d) {
  if (d) atomic_store(&d->closing, 1);
}

void ffpy_dataset_free(ffpy_dataset *d) {
  if (!d) return;
  drain(d);
  Py_DECREF(d->fetch);
  pthread_mutex_destroy(&d->mu);
  free((char *)d->cb.name);
  free(d);
}

void ffpy_dataset_free_without_gil(ffpy_dataset *d) {
  if (!d || !Py_IsInitialized() || finalizing()) return;
  PyGILState_STATE gil = PyGILState_Ensure();
  ffpy_dataset_free(d);
  PyGILState_Release(gil);
}
