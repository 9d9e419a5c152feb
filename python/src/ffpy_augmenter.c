/* ffpy_augmenter.c — CAugmenter, a thin object over one ff_augmenter.
 *
 *   CAugmenter(pipeline, seed=0, num_threads=0, output_dtype=0, memory_format=0, semantics=0,
 *              max_image_pixels=DEFAULT, strict_decode=False, source=None, allow_empty=False)
 *   .run(epoch, datas, indices, names=None) -> (bytearray, statuses, messages)
 *   .sample_shape -> (shape, strides in elements, dtype name); .sample_bytes; .dataset_size
 *   .samples() -> [(path, member or None, label)] of the source's index
 *   .close()
 *
 * run hands the encoded bytes (bytes objects, or None: read sample `index`
 * from the source) to the library with the GIL released; the lists hold
 * the bytes objects, which nothing can change, until it returns. The output
 * is a new bytearray of len(datas) samples, each sample_bytes long, which
 * NumPy wraps without a copy. One run at a time per object: a second
 * thread's call while one runs raises (the library's rule), as does a call
 * in a forked child (the threads stay in the parent). */
#include "ffpy_augmenter.h"

#include <stdlib.h>
#include <unistd.h>

typedef struct AugmenterObject {
  PyObject_HEAD
  ff_augmenter *aug;
  pid_t pid;
  int busy; /* a run is in progress (the GIL released): under the GIL */
} AugmenterObject;

static const char *dtype_names[] = {"uint8", "float32", "int64", "bfloat16", "float16"};

static int usable(AugmenterObject *self) {
  if (!self->aug) {
    PyErr_SetString(PyExc_ValueError, "fusionflow: the augmenter is closed");
    return 0;
  }
  if (self->pid != getpid()) {
    PyErr_SetString(PyExc_RuntimeError, "fusionflow: this augmenter was opened in another process (fork): "
                                        "open a new one in this process");
    return 0;
  }
  if (self->busy) {
    PyErr_SetString(PyExc_RuntimeError, "fusionflow: the augmenter is running in another thread (one run at a time)");
    return 0;
  }
  return 1;
}

static PyObject *augmenter_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
  static char *kwlist[] = {"pipeline", "seed", "num_threads", "output_dtype", "memory_format", "semantics",
                           "max_image_pixels", "strict_decode", "source", "allow_empty", NULL};
  ff_config cfg;
  ff_config_init(&cfg);
  PyObject *pipeline_obj, *source_arg = Py_None, *source_obj = NULL;
  unsigned long long seed = 0, max_pixels = cfg.max_image_pixels;
  int semantics = FF_SEMANTICS_V1;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "U|O&iiiiO&pOp:CAugmenter", kwlist, &pipeline_obj, ffpy_to_u64,
                                   &seed, &cfg.num_threads, &cfg.output_dtype, &cfg.memory_format, &semantics,
                                   ffpy_to_u64, &max_pixels, &cfg.strict_decode, &source_arg, &cfg.allow_empty))
    return NULL;
  if (source_arg != Py_None && !PyUnicode_FSConverter(source_arg, &source_obj)) return NULL;
  PyObject *pipeline = ffpy_pipeline_text(pipeline_obj);
  AugmenterObject *self = pipeline ? (AugmenterObject *)PyType_GenericNew(type, NULL, NULL) : NULL;
  if (!self) {
    Py_XDECREF(pipeline);
    Py_XDECREF(source_obj);
    return NULL;
  }
  cfg.pipeline = PyBytes_AsString(pipeline);
  cfg.source = source_obj ? PyBytes_AsString(source_obj) : NULL;
  cfg.seed = seed;
  cfg.semantics = (ff_semantics)semantics;
  cfg.max_image_pixels = max_pixels;
  ff_augmenter *aug = NULL;
  ff_status st;
  Py_BEGIN_ALLOW_THREADS /* a source's index reads folders or shards */
  st = ff_augmenter_open(&cfg, &aug);
  Py_END_ALLOW_THREADS
  Py_DECREF(pipeline);
  Py_XDECREF(source_obj);
  if (st != FF_OK) {
    if (aug) ffpy_raise_status(st, ff_augmenter_errmsg(aug));
    else PyErr_NoMemory();
    ff_augmenter_close(aug);
    Py_DECREF(self);
    return NULL;
  }
  self->aug = aug;
  self->pid = getpid();
  return (PyObject *)self;
}

static void augmenter_free(AugmenterObject *self) {
  if (self->aug && self->pid == getpid()) ff_augmenter_close(self->aug); /* a forked child leaves the parent's */
  self->aug = NULL;
}

static void augmenter_dealloc(AugmenterObject *self) {
  PyTypeObject *type = Py_TYPE(self);
  augmenter_free(self);
  freefunc tp_free = (freefunc)PyType_GetSlot(type, Py_tp_free);
  tp_free(self);
  Py_DECREF(type);
}

static PyObject *augmenter_close(AugmenterObject *self, PyObject *unused) {
  (void)unused;
  if (self->busy) {
    PyErr_SetString(PyExc_RuntimeError, "fusionflow: the augmenter is running in another thread");
    return NULL;
  }
  augmenter_free(self);
  Py_RETURN_NONE;
}

/* Fills items from the sequences (the bytes stay owned by them; names' encodings go into *keep). 0 or -1. */
static int fill_items(PyObject *datas, PyObject *indices, PyObject *names, ff_augment_item *items, Py_ssize_t n,
                      PyObject *keep) {
  for (Py_ssize_t k = 0; k < n; k++) {
    PyObject *d = PyList_GetItem(datas, k), *i = PyList_GetItem(indices, k); /* borrowed */
    ff_augment_item *it = &items[k];
    if (d != Py_None) {
      char *data;
      Py_ssize_t size;
      if (!PyBytes_Check(d)) {
        PyErr_Format(PyExc_TypeError, "fusionflow: item %zd: expected bytes or None (got %R)", k, Py_TYPE(d));
        return -1;
      }
      if (PyBytes_AsStringAndSize(d, &data, &size)) return -1;
      it->data = data, it->size_bytes = (size_t)size;
    }
    unsigned long long index;
    if (!ffpy_to_u64(i, &index)) return -1;
    it->index = index;
    PyObject *name = names ? PyList_GetItem(names, k) : Py_None;
    if (name != Py_None) {
      PyObject *encoded = PyUnicode_EncodeFSDefault(name);
      if (!encoded || PyList_Append(keep, encoded)) {
        Py_XDECREF(encoded);
        return -1;
      }
      Py_DECREF(encoded); /* keep holds it */
      it->name = PyBytes_AsString(encoded);
    }
  }
  return 0;
}

/* (bytearray, [status], [message or None]) of one run. */
static PyObject *run_result(AugmenterObject *self, PyObject *out, const ff_status *statuses, Py_ssize_t n) {
  PyObject *sts = PyList_New(n), *msgs = PyList_New(n);
  for (Py_ssize_t k = 0; sts && msgs && k < n; k++) {
    const char *m = statuses[k] ? ff_augmenter_item_errmsg(self->aug, (size_t)k) : NULL;
    PyObject *msg = m ? PyUnicode_DecodeFSDefault(m) : (Py_INCREF(Py_None), Py_None);
    PyObject *st = PyLong_FromLong(statuses[k]);
    if (!msg || !st) {
      Py_XDECREF(msg), Py_XDECREF(st);
      Py_CLEAR(sts);
      break;
    }
    PyList_SetItem(sts, k, st); /* takes the references */
    PyList_SetItem(msgs, k, msg);
  }
  PyObject *r = sts && msgs ? PyTuple_Pack(3, out, sts, msgs) : NULL;
  Py_XDECREF(sts), Py_XDECREF(msgs);
  return r;
}

static PyObject *augmenter_run(AugmenterObject *self, PyObject *args, PyObject *kwargs) {
  static char *kwlist[] = {"epoch", "datas", "indices", "names", NULL};
  unsigned long long epoch;
  PyObject *datas, *indices, *names = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O&O!O!|O:run", kwlist, ffpy_to_u64, &epoch, &PyList_Type, &datas,
                                   &PyList_Type, &indices, &names) ||
      !usable(self))
    return NULL;
  if (names == Py_None) names = NULL;
  Py_ssize_t n = PyList_Size(datas);
  if (PyList_Size(indices) != n || (names && (!PyList_Check(names) || PyList_Size(names) != n))) {
    PyErr_SetString(PyExc_ValueError, "fusionflow: datas, indices and names must be lists of the same length");
    return NULL;
  }
  size_t sample_bytes = ff_augmenter_sample_bytes(self->aug);
  if ((size_t)n > PY_SSIZE_T_MAX / (sample_bytes ? sample_bytes : 1)) return PyErr_NoMemory();
  PyObject *keep = PyList_New(0), *result = NULL;
  PyObject *out = keep ? PyByteArray_FromStringAndSize(NULL, n * (Py_ssize_t)sample_bytes) : NULL;
  ff_augment_item *items = calloc(n ? (size_t)n : 1, sizeof *items);
  ff_status *statuses = calloc(n ? (size_t)n : 1, sizeof *statuses);
  if (out && (!items || !statuses)) PyErr_NoMemory();
  if (out && items && statuses && !fill_items(datas, indices, names, items, n, keep)) {
    void *dst = PyByteArray_AsString(out);
    ff_status st;
    self->busy = 1; /* the lists hold the bytes objects, which nothing can change, meanwhile */
    Py_BEGIN_ALLOW_THREADS
    st = ff_augmenter_run(self->aug, epoch, items, (size_t)n, dst, (size_t)n * sample_bytes, statuses);
    Py_END_ALLOW_THREADS
    self->busy = 0;
    if (st != FF_OK) ffpy_raise_status(st, ff_augmenter_errmsg(self->aug));
    else result = run_result(self, out, statuses, n);
  }
  free(items);
  free(statuses);
  Py_XDECREF(out);
  Py_XDECREF(keep);
  return result;
}

static PyObject *augmenter_samples(AugmenterObject *self, PyObject *unused) {
  (void)unused;
  if (!usable(self)) return NULL;
  size_t n = ff_augmenter_dataset_size(self->aug);
  PyObject *list = PyList_New((Py_ssize_t)n);
  for (size_t i = 0; list && i < n; i++) {
    const char *path, *member;
    int64_t label;
    ff_augmenter_sample(self->aug, i, &path, &member, &label);
    PyObject *p = PyUnicode_DecodeFSDefault(path);
    PyObject *m = member ? PyUnicode_DecodeFSDefault(member) : (Py_INCREF(Py_None), Py_None);
    PyObject *t = p && m ? Py_BuildValue("(OOL)", p, m, (long long)label) : NULL;
    Py_XDECREF(p), Py_XDECREF(m);
    if (!t) Py_CLEAR(list);
    else PyList_SetItem(list, (Py_ssize_t)i, t);
  }
  return list;
}

static PyObject *augmenter_get_sample_shape(AugmenterObject *self, void *unused) {
  (void)unused;
  if (!usable(self)) return NULL;
  ff_tensor t;
  ff_augmenter_sample_shape(self->aug, &t);
  return Py_BuildValue("((LLL)(LLL)s)", (long long)t.shape[0], (long long)t.shape[1], (long long)t.shape[2],
                       (long long)t.strides[0], (long long)t.strides[1], (long long)t.strides[2],
                       dtype_names[t.dtype]);
}

static PyObject *augmenter_get_sample_bytes(AugmenterObject *self, void *unused) {
  (void)unused;
  if (!usable(self)) return NULL;
  return PyLong_FromSize_t(ff_augmenter_sample_bytes(self->aug));
}

static PyObject *augmenter_get_dataset_size(AugmenterObject *self, void *unused) {
  (void)unused;
  if (!usable(self)) return NULL;
  return PyLong_FromSize_t(ff_augmenter_dataset_size(self->aug));
}

static PyMethodDef augmenter_methods[] = {
    {"run", (PyCFunction)(void (*)(void))augmenter_run, METH_VARARGS | METH_KEYWORDS,
     "run(epoch, datas, indices, names=None) -> (bytearray of len(datas) samples, [status], [message or None])"},
    {"samples", (PyCFunction)augmenter_samples, METH_NOARGS,
     "samples() -> [(path, member or None, label)]: the source's index, in order"},
    {"close", (PyCFunction)augmenter_close, METH_NOARGS, "close(): stops the threads (idempotent)"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef augmenter_getset[] = {
    {"sample_shape", (getter)augmenter_get_sample_shape, NULL, "(shape, strides in elements, dtype) of one sample",
     NULL},
    {"sample_bytes", (getter)augmenter_get_sample_bytes, NULL, "bytes of one sample", NULL},
    {"dataset_size", (getter)augmenter_get_dataset_size, NULL, "samples in the source's index (0: no source)", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot augmenter_slots[] = {
    {Py_tp_new, augmenter_new},         {Py_tp_dealloc, augmenter_dealloc},
    {Py_tp_methods, augmenter_methods}, {Py_tp_getset, augmenter_getset},
    {0, NULL},
};

static PyType_Spec augmenter_spec = {"fusionflow._fusionflow.CAugmenter", sizeof(AugmenterObject), 0,
                                     Py_TPFLAGS_DEFAULT, augmenter_slots};

int ffpy_augmenter_add(PyObject *module) {
  return ffpy_add_type(module, &augmenter_spec, NULL);
}
