/* _fusionflow.c — the C extension under the `fusionflow` Python package: a thin
 * layer over the public header (include/fusionflow/fusionflow.h) and nothing
 * else of the library (but for the tests' stand-in for a trainer's late GPU
 * copy on the emulator: ffpy_late_copy.c).
 *
 * Three objects:
 *   Loader  one ff_loader plus a "fetch thread". The consumer's wait for the
 *           next batch (ff_loader_next) runs on that thread while the Python
 *           thread waits on a condition variable in short slices with the GIL
 *           released and runs the signal handlers between them, so Ctrl-C
 *           interrupts a wait for a slow batch at once. A batch that arrives
 *           after the interruption is kept and handed out by the next call, so
 *           nothing is lost. Only one of the two threads calls into the
 *           ff_loader at a time (the header's one-consumer rule): the Python
 *           thread touches it only while no request is in flight. The open
 *           itself runs on the Python thread with the GIL released; a
 *           streamed source's open takes it back every 100 ms or so
 *           (open_progress) to run the signal handlers, so Ctrl-C gives up
 *           an open waiting for a stalled server too.
 *   Tensor  a view of one tensor (images, labels, or an augment_image
 *           result) exporting `__dlpack__` / `__dlpack_device__` (the Python
 *           protocol of DLPack v0.8) and, in host memory, `__array_interface__`.
 *           The structs are DLPack's own header (<dlpack/dlpack.h>, Debian's
 *           libdlpack-dev: the unversioned DLManagedTensor, whose layout is the
 *           same from 0.6 to 0.8). A producer hands a DLManagedTensor to a
 *           consumer inside a PyCapsule named "dltensor"; the consumer renames
 *           the capsule "used_dltensor" and calls the deleter exactly once when
 *           it no longer needs the memory. A capsule nobody consumed still has
 *           its name "dltensor", and its destructor calls the deleter instead.
 *           Images of a loader with output_device "cuda:N" are kDLCUDA: the
 *           consumer's stream (DLPack's `stream`: 1 the legacy default
 *           stream, also for None, 2 the per-thread default, -1 no wait, else
 *           a cudaStream_t) waits for the batch's ready event
 *           (ff_batch_wait_on), and the batch goes back to the ring after
 *           that stream's work queued by the time the last reference dies
 *           (ff_batch_release_after): the deleter runs when the consumer's
 *           tensor dies, not when its kernels finish.
 *   owner   (C only) the memory behind tensors, reference-counted atomically:
 *           one count per Tensor object and one per DLManagedTensor handed to a
 *           consumer. The last count gives the batch back to the ring
 *           (ff_batch_release, any thread, GIL not needed) or frees the image
 *           (ff_free). So a torch.Tensor made by torch.from_dlpack keeps its
 *           batch alive after the Loader is closed or collected, until the
 *           consumer drops it.
 *
 * Errors: a failing call raises the exception that fusionflow._errors builds
 * for (status, library message); the factory is registered by __init__.py. */
#define PY_SSIZE_T_CLEAN
#ifndef Py_LIMITED_API
#define Py_LIMITED_API 0x03090000 /* the stable ABI of CPython 3.9: one abi3 build serves every later CPython */
#endif
#include <Python.h>

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <dlpack/dlpack.h>

#include "ffpy_augmenter.h"
#include "ffpy_common.h"
#include "ffpy_dataset.h"
#include "ffpy_remote.h"
#include "ffpy_late_copy.h"
#include "fusionflow/fusionflow.h"

/* How long the Python thread waits before it looks at signals again. */
#define WAIT_SLICE_NS 50000000L
#define MSG_MAX FFPY_MSG_MAX

static PyObject *exception_factory; /* callable (status, message) -> exception instance */

/* Raises the library's error as a Python exception; returns NULL. */
PyObject *ffpy_raise_status(ff_status st, const char *msg) {
  if (!exception_factory) {
    PyErr_Format(PyExc_RuntimeError, "fusionflow: %s (%s)", msg, ff_status_str(st));
    return NULL;
  }
  PyObject *text = PyUnicode_DecodeFSDefault(msg); /* paths may not be UTF-8 */
  if (!text) return NULL;
  PyObject *exc = PyObject_CallFunction(exception_factory, "iO", (int)st, text);
  Py_DECREF(text);
  if (!exc) return NULL;
  PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
  Py_DECREF(exc);
  return NULL;
}

/* ---------------------------------------------------------------- core */

/* State shared by the Loader object, its fetch thread and the owners of the
 * batches it handed out; freed by the last of them. */
typedef struct core {
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
} core;

static void core_decref(core *c) {
  if (atomic_fetch_sub(&c->refs, 1) != 1) return;
  pthread_mutex_destroy(&c->mu);
  pthread_cond_destroy(&c->cv);
  free(c);
}

/* Takes the kept answer's batch (NULL if none) and clears the answer. Under mu. */
static ff_batch *take_answer(core *c) {
  ff_batch *b = c->done ? c->batch : NULL;
  c->done = 0;
  c->batch = NULL;
  return b;
}

/* Gives back a batch that was counted as held and never reached an owner. */
static void give_back(core *c, ff_batch *b) {
  if (!b) return;
  ff_batch_release(b);
  atomic_fetch_sub(&c->held, 1);
}

static void *fetch_main(void *p) {
  core *c = p;
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

/* ---------------------------------------------------------------- owner */

typedef struct owner {
  atomic_long refs;
  atomic_intptr_t release_stream; /* 0, or the last consumer stream a device batch was exported to */
  ff_batch *batch; /* given back with ff_batch_release(_after), or */
  void *mem;       /* freed with ff_free */
  core *core;      /* for batches: counts them as held */
} owner;

static owner *owner_new(ff_batch *batch, void *mem, core *c) {
  owner *o = malloc(sizeof *o);
  if (!o) return NULL;
  atomic_init(&o->refs, 1);
  atomic_init(&o->release_stream, 0);
  o->batch = batch;
  o->mem = mem;
  o->core = c;
  if (c) atomic_fetch_add(&c->refs, 1);
  return o;
}

static void owner_incref(owner *o) { atomic_fetch_add(&o->refs, 1); }

/* Any thread, with or without the GIL. */
static void owner_decref(owner *o) {
  if (atomic_fetch_sub(&o->refs, 1) != 1) return;
  intptr_t stream = atomic_load(&o->release_stream);
  if (o->batch && stream)
    ff_batch_release_after(o->batch, (void *)stream);
  else if (o->batch)
    ff_batch_release(o->batch);
  ff_free(o->mem);
  if (o->core) {
    atomic_fetch_sub(&o->core->held, 1);
    core_decref(o->core);
  }
  free(o);
}

/* ---------------------------------------------------------------- Tensor */

typedef struct {
  PyObject_HEAD
  owner *owner;
  void *data;
  ff_dtype dtype;
  int ndim;
  int64_t shape[4];
  int64_t strides[4]; /* elements */
  int dev_type, dev_id; /* DLPack device: kDLCPU 0, or kDLCUDA N (images of a cuda:N output_device) */
} TensorObject;

static PyTypeObject *TensorType; /* heap types (PyType_FromSpec): the stable ABI has no static ones */

static const char *dtype_name(ff_dtype d) {
  return d == FF_UINT8 ? "uint8" : d == FF_FLOAT32 ? "float32" : d == FF_BFLOAT16 ? "bfloat16" : d == FF_FLOAT16 ? "float16" : "int64";
}
static int dtype_bits(ff_dtype d) {
  return d == FF_UINT8 ? 8 : d == FF_FLOAT32 ? 32 : d == FF_BFLOAT16 || d == FF_FLOAT16 ? 16 : 64;
}
static uint8_t dtype_code(ff_dtype d) {
  return (uint8_t)(d == FF_FLOAT32 || d == FF_FLOAT16 ? kDLFloat : d == FF_BFLOAT16 ? kDLBfloat : d == FF_INT64 ? kDLInt : kDLUInt);
}

/* A new Tensor over t's memory, holding one count of o. */
static PyObject *tensor_new(owner *o, const ff_tensor *t) {
  TensorObject *self = PyObject_New(TensorObject, TensorType);
  if (!self) return NULL;
  owner_incref(o);
  self->owner = o;
  self->data = t->data;
  self->dtype = t->dtype;
  self->ndim = t->ndim;
  memcpy(self->shape, t->shape, sizeof self->shape);
  memcpy(self->strides, t->strides, sizeof self->strides);
  self->dev_type = kDLCPU, self->dev_id = 0;
  return (PyObject *)self;
}

/* The images of batch b: kDLCUDA when they are on a CUDA output_device. */
static PyObject *images_new(owner *o, ff_batch *b, const ff_tensor *t) {
  TensorObject *self = (TensorObject *)tensor_new(o, t);
  const char *dev = ff_batch_device(b);
  if (self && !strncmp(dev, "cuda:", 5)) self->dev_type = kDLCUDA, self->dev_id = atoi(dev + 5);
  else if (self && ff_batch_sync(b) != FF_OK) { /* emu: host memory, read from the host */
    PyErr_SetString(PyExc_RuntimeError, "the batch's upload to its output device failed");
    Py_DECREF(self);
    return NULL;
  }
  return (PyObject *)self;
}

static void tensor_dealloc(TensorObject *self) {
  PyTypeObject *type = Py_TYPE(self); /* an instance of a heap type holds a reference to it */
  if (self->owner) owner_decref(self->owner);
  PyObject_Free(self);
  Py_DECREF(type);
}

typedef struct export_ctx {
  DLManagedTensor managed;
  owner *owner;
  int64_t shape[4], strides[4];
} export_ctx;

static void export_deleter(DLManagedTensor *m) {
  export_ctx *e = m->manager_ctx;
  owner_decref(e->owner);
  free(e);
}

/* A capsule still named "dltensor" was never consumed: its memory is ours. */
static void capsule_destructor(PyObject *capsule) {
  if (!PyCapsule_IsValid(capsule, "dltensor")) return;
  DLManagedTensor *m = PyCapsule_GetPointer(capsule, "dltensor");
  if (m && m->deleter) m->deleter(m);
}

static PyObject *make_capsule(TensorObject *self);

/* DLPack's stream protocol for images on a CUDA output_device. */
static PyObject *device_export(TensorObject *self, PyObject *stream, PyObject *dl_device, PyObject *copy) {
  long long s = 1; /* None: the legacy default stream */
  if (stream != Py_None) {
    s = PyLong_Check(stream) ? PyLong_AsLongLong(stream) : 0;
    if (s == -1 && PyErr_Occurred()) return NULL;
    if (!PyLong_Check(stream) || s == 0 || s < -1) {
      PyErr_SetString(PyExc_BufferError, "stream must be None, -1, 1, 2 or a cudaStream_t (0 is ambiguous)");
      return NULL;
    }
  }
  if (dl_device != Py_None) {
    int type = 0, id = 0;
    if (!PyArg_ParseTuple(dl_device, "ii", &type, &id)) return NULL;
    if (type != self->dev_type || id != self->dev_id) {
      PyErr_Format(PyExc_BufferError, "these images are on kDLCUDA device %d: no other dl_device", self->dev_id);
      return NULL;
    }
  }
  if (copy != Py_None && PyObject_IsTrue(copy) == 1) {
    PyErr_SetString(PyExc_BufferError, "fusionflow exports without copying: pass copy=None or False");
    return NULL;
  }
  if (s != -1) {
    if (ff_batch_wait_on(self->owner->batch, (void *)(intptr_t)s) != FF_OK) {
      PyErr_SetString(PyExc_BufferError, "cannot make the consumer's stream wait for the batch (CUDA error)");
      return NULL;
    }
    atomic_store(&self->owner->release_stream, (intptr_t)s);
  }
  return make_capsule(self);
}

static PyObject *tensor_dlpack(TensorObject *self, PyObject *args, PyObject *kwargs) {
  static char *kwlist[] = {"stream", "max_version", "dl_device", "copy", NULL};
  PyObject *stream = Py_None, *max_version = Py_None, *dl_device = Py_None, *copy = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|$OOOO:__dlpack__", kwlist, &stream, &max_version, &dl_device,
                                   &copy))
    return NULL;
  if (self->dev_type == kDLCUDA) return device_export(self, stream, dl_device, copy);
  /* Host memory: no stream applies (the array API asks for None; -1 means "no sync"). */
  if (stream != Py_None) {
    int overflow = 0;
    long s = PyLong_Check(stream) ? PyLong_AsLongAndOverflow(stream, &overflow) : 0;
    if (s == -1 && PyErr_Occurred()) return NULL;
    if (!PyLong_Check(stream) || overflow || s != -1) {
      PyErr_SetString(PyExc_BufferError, "fusionflow tensors are in host memory: stream must be None");
      return NULL;
    }
  }
  if (dl_device != Py_None) {
    int type = 0, id = 0;
    if (!PyTuple_Check(dl_device) || PyTuple_Size(dl_device) != 2) {
      PyErr_SetString(PyExc_TypeError, "__dlpack__: dl_device must be a (device_type, device_id) tuple of ints");
      return NULL;
    }
    if (!PyArg_ParseTuple(dl_device, "ii", &type, &id)) return NULL;
    if (type != kDLCPU) {
      PyErr_SetString(PyExc_BufferError, "fusionflow tensors are in host memory (kDLCPU): no other dl_device");
      return NULL;
    }
  }
  if (copy != Py_None && PyObject_IsTrue(copy) == 1) {
    PyErr_SetString(PyExc_BufferError, "fusionflow exports without copying: pass copy=None or False");
    return NULL;
  }
  /* max_version: only the unversioned (v0.x) capsule is produced, which the
   * protocol allows for any max_version. */
  (void)max_version;

  return make_capsule(self);
}

static PyObject *make_capsule(TensorObject *self) {
  export_ctx *e = calloc(1, sizeof *e);
  if (!e) return PyErr_NoMemory();
  memcpy(e->shape, self->shape, sizeof e->shape);
  memcpy(e->strides, self->strides, sizeof e->strides);
  DLTensor *t = &e->managed.dl_tensor;
  t->data = self->data;
  t->device = (DLDevice){(DLDeviceType)self->dev_type, self->dev_id};
  t->ndim = self->ndim;
  t->dtype = (DLDataType){dtype_code(self->dtype), (uint8_t)dtype_bits(self->dtype), 1};
  t->shape = e->shape;
  t->strides = e->strides;
  t->byte_offset = 0;
  e->managed.manager_ctx = e;
  e->managed.deleter = export_deleter;
  e->owner = self->owner;
  owner_incref(self->owner);
  PyObject *capsule = PyCapsule_New(&e->managed, "dltensor", capsule_destructor);
  if (!capsule) export_deleter(&e->managed);
  return capsule;
}

static PyObject *tensor_dlpack_device(TensorObject *self, PyObject *unused) {
  (void)unused;
  return Py_BuildValue("(ii)", self->dev_type, self->dev_id);
}

static PyObject *int64_tuple(const int64_t *v, int n) {
  PyObject *t = PyTuple_New(n);
  for (int i = 0; t && i < n; i++) {
    PyObject *x = PyLong_FromLongLong(v[i]);
    if (!x) {
      Py_DECREF(t);
      return NULL;
    }
    PyTuple_SetItem(t, i, x); /* steals x */
  }
  return t;
}

static PyObject *tensor_get_shape(TensorObject *self, void *unused) {
  (void)unused;
  return int64_tuple(self->shape, self->ndim);
}

static PyObject *tensor_get_strides(TensorObject *self, void *unused) {
  (void)unused;
  return int64_tuple(self->strides, self->ndim);
}

static PyObject *tensor_get_dtype(TensorObject *self, void *unused) {
  (void)unused;
  return PyUnicode_FromString(dtype_name(self->dtype));
}

static int64_t tensor_numel(const TensorObject *self) {
  int64_t n = 1;
  for (int i = 0; i < self->ndim; i++) n *= self->shape[i];
  return n;
}

static PyObject *tensor_get_nbytes(TensorObject *self, void *unused) {
  (void)unused;
  return PyLong_FromLongLong(tensor_numel(self) * dtype_bits(self->dtype) / 8);
}

static PyObject *tensor_get_data_ptr(TensorObject *self, void *unused) {
  (void)unused;
  return PyLong_FromVoidPtr(self->data);
}

/* NumPy's array interface (v3): the array keeps this object, so the memory. */
static PyObject *tensor_get_array_interface(TensorObject *self, void *unused) {
  (void)unused;
  if (self->dev_type != kDLCPU) {
    PyErr_SetString(PyExc_AttributeError, "__array_interface__: these images are in GPU memory (use __dlpack__)");
    return NULL;
  }
  if (self->dtype == FF_BFLOAT16) {
    PyErr_SetString(PyExc_AttributeError, "__array_interface__: NumPy has no bfloat16 (use __dlpack__ with torch)");
    return NULL;
  }
  const char *typestr = self->dtype == FF_UINT8     ? "|u1"
                        : self->dtype == FF_FLOAT32 ? "<f4"
                        : self->dtype == FF_FLOAT16 ? "<f2"
                                                    : "<i8";
  int64_t byte_strides[4];
  for (int i = 0; i < self->ndim; i++) byte_strides[i] = self->strides[i] * dtype_bits(self->dtype) / 8;
  PyObject *shape = int64_tuple(self->shape, self->ndim);
  PyObject *strides = shape ? int64_tuple(byte_strides, self->ndim) : NULL;
  if (!strides) {
    Py_XDECREF(shape);
    return NULL;
  }
  PyObject *r = Py_BuildValue("{s:N,s:s,s:(NO),s:N,s:i}", "shape", shape, "typestr", typestr, "data",
                              PyLong_FromVoidPtr(self->data), Py_False, "strides", strides, "version", 3);
  return r;
}

static PyObject *tensor_repr(TensorObject *self) {
  PyObject *shape = int64_tuple(self->shape, self->ndim);
  if (!shape) return NULL;
  PyObject *r = self->dev_type == kDLCPU
                    ? PyUnicode_FromFormat("<fusionflow.Tensor shape=%R dtype=%s device=cpu>", shape,
                                           dtype_name(self->dtype))
                    : PyUnicode_FromFormat("<fusionflow.Tensor shape=%R dtype=%s device=cuda:%d>", shape,
                                           dtype_name(self->dtype), self->dev_id);
  Py_DECREF(shape);
  return r;
}

static PyMethodDef tensor_methods[] = {
    {"__dlpack__", (PyCFunction)(void (*)(void))tensor_dlpack, METH_VARARGS | METH_KEYWORDS,
     "__dlpack__(*, stream=None, max_version=None, dl_device=None, copy=None) -> PyCapsule\n\n"
     "A DLPack capsule (\"dltensor\", v0.8 DLManagedTensor) over the same memory, no copy.\n"
     "Each call makes a new capsule that keeps the memory alive until its consumer\n"
     "calls the deleter (or the capsule is collected unconsumed).\n"
     "Host memory: raises BufferError for a stream other than None/-1, a non-CPU dl_device\n"
     "or copy=True. CUDA images (output_device=\"cuda:N\"): stream None or 1 (legacy default),\n"
     "2 (per-thread default) or a cudaStream_t waits for the batch there; -1 does not wait."},
    {"__dlpack_device__", (PyCFunction)tensor_dlpack_device, METH_NOARGS,
     "__dlpack_device__() -> (1, 0) kDLCPU, or (2, N) kDLCUDA for images on cuda:N."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef tensor_getset[] = {
    {"shape", (getter)tensor_get_shape, NULL, "tuple of ints: the extents, in elements", NULL},
    {"strides", (getter)tensor_get_strides, NULL, "tuple of ints: the strides, in elements", NULL},
    {"dtype", (getter)tensor_get_dtype, NULL, "'uint8', 'float32', 'bfloat16', 'float16' or 'int64'", NULL},
    {"nbytes", (getter)tensor_get_nbytes, NULL, "int: size of the data in bytes", NULL},
    {"data_ptr", (getter)tensor_get_data_ptr, NULL, "int: address of the first element", NULL},
    {"__array_interface__", (getter)tensor_get_array_interface, NULL, "NumPy array interface v3", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot tensor_slots[] = {
    {Py_tp_dealloc, (void *)tensor_dealloc},
    {Py_tp_repr, (void *)tensor_repr},
    {Py_tp_doc, (void *)"A host tensor of fusionflow's memory (a batch's images or labels, or an augmented image).\n\n"
                "Convert it without copying with torch.from_dlpack(t) or numpy.from_dlpack(t)\n"
                "(or numpy.asarray(t)); the memory stays valid while this object or anything\n"
                "made from it is alive."},
    {Py_tp_methods, tensor_methods},
    {Py_tp_getset, tensor_getset},
    {0, NULL},
};

static PyType_Spec tensor_spec = {"fusionflow.Tensor", sizeof(TensorObject), 0, Py_TPFLAGS_DEFAULT, tensor_slots};

/* ---------------------------------------------------------------- Loader */

typedef struct {
  PyObject_HEAD
  core *core;  /* NULL once closed */
  pid_t pid;   /* the process that opened it: a forked child has no threads */
  size_t num_batches, num_samples, dataset_size;
  int prefetch;
  PyObject *classes; /* tuple of the class folders' names (imagefolder), or None */
  char pinned_device[32]; /* ff_loader_pinned_device */
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

/* The UTF-8 of a pipeline text as a new bytes object; NULL with ValueError
 * when it holds a NUL (C would read the text only up to it and ignore the rest). */
PyObject *ffpy_pipeline_text(PyObject *text) {
  PyObject *utf8 = PyUnicode_AsUTF8String(text);
  if (utf8 && strlen(PyBytes_AsString(utf8)) != (size_t)PyBytes_Size(utf8)) {
    Py_DECREF(utf8);
    PyErr_SetString(PyExc_ValueError, "fusionflow: the pipeline text contains a NUL character");
    return NULL;
  }
  return utf8;
}

/* "O&" converter: a Python int in [0, 2**64) into unsigned long long
 * (the "K" format would wrap 2**64 to 0, which means no limit). */
int ffpy_to_u64(PyObject *obj, void *out) {
  if (!PyLong_Check(obj)) {
    PyObject *name = PyObject_GetAttrString((PyObject *)Py_TYPE(obj), "__name__");
    if (name) PyErr_Format(PyExc_TypeError, "fusionflow: expected an int (got %S)", name);
    Py_XDECREF(name);
    return 0;
  }
  unsigned long long v = PyLong_AsUnsignedLongLong(obj);
  if (v == (unsigned long long)-1 && PyErr_Occurred()) {
    PyErr_Clear();
    PyErr_SetString(PyExc_ValueError, "fusionflow: the value must be in [0, 2**64)");
    return 0;
  }
  *(unsigned long long *)out = v;
  return 1;
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

/* Closes a loader that was just opened, with the GIL released (its workers
 * may be waiting for it, fetching from a Python dataset), then frees the
 * dataset source. */
static void close_opened(ff_loader *loader, ffpy_dataset *dataset) {
  ffpy_dataset_closing(dataset);
  Py_BEGIN_ALLOW_THREADS
  ff_loader_close(loader);
  Py_END_ALLOW_THREADS
  ffpy_dataset_free(dataset);
}

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

static PyObject *loader_open(PyObject *module, PyObject *args, PyObject *kwargs) {
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
    close_opened(loader, dataset);
    return NULL;
  }
  if (st != FF_OK) {
    if (!loader) { /* out of memory: no handle */
      ffpy_dataset_free(dataset);
      return ffpy_raise_status(st, ff_loader_errmsg(NULL));
    }
    char msg[MSG_MAX];
    snprintf(msg, sizeof msg, "%s", ff_loader_errmsg(loader));
    close_opened(loader, dataset);
    return ffpy_raise_status(st, msg);
  }

  core *c = calloc(1, sizeof *c);
  if (!c) {
    close_opened(loader, dataset);
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
  c->ring_size = cfg.prefetch + 1;

  LoaderObject *self = PyObject_New(LoaderObject, LoaderType);
  if (!self) {
    close_opened(loader, dataset);
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
  self->prefetch = cfg.prefetch;
  snprintf(self->pinned_device, sizeof self->pinned_device, "%s", ff_loader_pinned_device(loader));
  if (!self->classes) {
    close_opened(loader, dataset);
    c->refs = 1;
    core_decref(c);
    Py_DECREF(self);
    return NULL;
  }
  c->dataset = dataset;
  int rc = pthread_create(&c->thread, NULL, fetch_main, c);
  if (rc) {
    c->dataset = NULL;
    close_opened(loader, dataset);
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
static int wait_answer(core *c) {
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
static int settle(core *c) {
  pthread_mutex_lock(&c->mu);
  int pending = c->requested;
  pthread_mutex_unlock(&c->mu);
  return pending ? wait_answer(c) : 0;
}

/* Gives back a kept answer that will not be handed out (set_epoch, seek). */
static void drop_answer(core *c) {
  pthread_mutex_lock(&c->mu);
  ff_batch *b = take_answer(c);
  pthread_mutex_unlock(&c->mu);
  give_back(c, b);
}

/* ff_loader_fence on the consumer's stream handle (a Python int: a
 * cudaStream_t, 0 the legacy default stream), on this thread: the one that
 * queued the copies. Safe while the fetch thread waits in ff_loader_next.
 * 0, or -1 with the exception set. */
static int fence(core *c, PyObject *stream) {
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
  core *c = self->core;
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

  owner *o = owner_new(b, NULL, c);
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
  PyObject *images = images_new(o, b, &ti);
  size_t views = ff_loader_num_views(c->loader);
  if (images && views > 1) { /* views: a list of per-view tensors */
    PyObject *list = PyList_New((Py_ssize_t)views);
    if (list) PyList_SetItem(list, 0, images);
    else Py_DECREF(images);
    for (size_t v = 1; list && v < views; v++) {
      ff_tensor tv;
      ff_batch_view_images(b, v, &tv);
      PyObject *t = images_new(o, b, &tv); /* on the batch's device, as view 0 */
      if (!t) Py_CLEAR(list);
      else PyList_SetItem(list, (Py_ssize_t)v, t);
    }
    images = list;
  }
  PyObject *labels = images ? tensor_new(o, &tl) : NULL;
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
  owner_decref(o); /* the tensors hold it now (or it goes back if they failed) */
  return r;
}

static PyObject *loader_close(LoaderObject *self, PyObject *args) {
  PyObject *stream = Py_None;
  if (args && !PyArg_ParseTuple(args, "|O:close", &stream)) return NULL;
  core *c = self->core;
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
  if (c->consuming) { /* its wait would outlive the core */
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
  owner *o = owner_new(NULL, t[0].data, NULL);
  if (!o) {
    ff_free(t[0].data);
    free(t);
    return PyErr_NoMemory();
  }
  PyObject *images = views > 1 ? PyList_New((Py_ssize_t)views) : tensor_new(o, &t[0]);
  for (size_t v = 0; views > 1 && images && v < views; v++) {
    PyObject *x = tensor_new(o, &t[v]);
    if (!x) Py_CLEAR(images);
    else PyList_SetItem(images, (Py_ssize_t)v, x); /* steals x */
  }
  owner_decref(o); /* the tensors hold it now */
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
  core *c = self->core;
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

/* The first n messages of a loader list (ff_loader_skipped, ff_loader_warning) as a list of str. */
static PyObject *messages(const ff_loader *l, const char *(*get)(const ff_loader *, size_t), uint64_t n) {
  PyObject *list = PyList_New(0);
  for (size_t i = 0; list && i < n; i++) {
    const char *m = get(l, i);
    if (!m) break;
    PyObject *x = PyUnicode_DecodeFSDefault(m);
    if (!x || PyList_Append(list, x)) Py_CLEAR(list);
    Py_XDECREF(x);
  }
  return list;
}

static PyObject *loader_stats_body(LoaderObject *self, PyObject *unused) {
  (void)unused;
  if (check_open(self) || settle(self->core)) return NULL;
  ff_loader *l = self->core->loader;
  ff_stats s;
  ff_loader_stats(l, &s);
  size_t n = ff_loader_op_costs(l, NULL, 0);
  ff_op_cost *costs = calloc(n ? n : 1, sizeof *costs);
  if (!costs) return PyErr_NoMemory();
  n = ff_loader_op_costs(l, costs, n);
  PyObject *ops = PyList_New(0);
  for (size_t i = 0; ops && i < n; i++) {
    PyObject *d = Py_BuildValue("{s:s,s:K,s:K,s:K}", "op", costs[i].op, "calls",
                                (unsigned long long)costs[i].calls, "ns", (unsigned long long)costs[i].ns,
                                "pixels", (unsigned long long)costs[i].pixels);
    if (!d || PyList_Append(ops, d)) Py_CLEAR(ops);
    Py_XDECREF(d);
  }
  free(costs);
  PyObject *skipped = ops ? messages(l, ff_loader_skipped, s.skipped + s.replaced) : NULL;
  PyObject *warned = skipped ? messages(l, ff_loader_warning, s.warnings) : NULL;
  if (!warned) {
    Py_XDECREF(ops);
    Py_XDECREF(skipped);
    return NULL;
  }
  PyObject *remote = ffpy_remote_stats(&s);
  if (!remote) {
    Py_XDECREF(ops);
    Py_XDECREF(skipped);
    Py_XDECREF(warned);
    return NULL;
  }
  return Py_BuildValue("{s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:i,s:N,s:N,s:s,s:K,s:K,s:K,s:n,s:n,s:d,s:K,s:K,s:N,s:s,s:s,s:K,s:K,s:K,s:K,s:K,s:K,s:s,"
                       "s:s,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:N,s:K,s:K,s:K,s:K,s:N}",
                       "batches", (unsigned long long)s.batches,
                       "samples", (unsigned long long)s.samples, "read_ns", (unsigned long long)s.read_ns,
                       "decode_ns", (unsigned long long)s.decode_ns, "ops_ns", (unsigned long long)s.ops_ns,
                       "wait_ns", (unsigned long long)s.wait_ns, "read_bytes", (unsigned long long)s.read_bytes,
                       "skipped", (unsigned long long)s.skipped, "num_threads", s.num_threads, "op_costs", ops,
                       "skipped_samples", skipped, "device", s.device, "device_samples",
                       (unsigned long long)s.device_samples, "device_ns", (unsigned long long)s.device_ns,
                       "device_fallbacks", (unsigned long long)s.device_fallbacks, "device_pool_limit_bytes",
                       (Py_ssize_t)s.device_pool_limit_bytes, "device_pool_peak_bytes",
                       (Py_ssize_t)s.device_pool_peak_bytes, "offload_share", s.offload_share, "replaced",
                       (unsigned long long)s.replaced, "warnings", (unsigned long long)s.warnings,
                       "warning_samples", warned, "device_decoder", s.device_decoder ? s.device_decoder : "none",
                       "device_decoder_note", s.device_decoder_note ? s.device_decoder_note : "",
                       "output_upload_bytes", (unsigned long long)s.output_upload_bytes,
                       "device_download_bytes", (unsigned long long)s.device_download_bytes,
                       "host_round_trips", (unsigned long long)s.host_round_trips,
                       "feeder_cpu_ns", (unsigned long long)s.feeder_cpu_ns,
                       "batch_stage_ns", (unsigned long long)s.batch_stage_ns,
                       "source_ignored_files", (unsigned long long)s.source_ignored_files,
                       "node_group", s.node_group ? s.node_group : "",
                       "decoders", s.decoders ? s.decoders : "none",
                       "cpu_decodes", (unsigned long long)s.cpu_decodes,
                       "device_decodes", (unsigned long long)s.device_decodes,
                       "device_decode_failures", (unsigned long long)s.device_decode_failures,
                       "device_decode_failed_batches", (unsigned long long)s.device_decode_failed_batches,
                       "device_decode_small_batches", (unsigned long long)s.device_decode_small_batches,
                       "fences", (unsigned long long)s.fences, "fence_wait_ns", (unsigned long long)s.fence_wait_ns,
                       "device_budget_refusals", (unsigned long long)s.device_budget_refusals,
                       "host_memory_pinned", PyBool_FromLong(s.host_memory_pinned),
                       "thread_cpu_samples", (unsigned long long)s.thread_cpu_samples,
                       "thread_cpu_ns", (unsigned long long)s.thread_cpu_ns,
                       "thread_decode_cpu_ns", (unsigned long long)s.thread_decode_cpu_ns,
                       "source_ignored_members", (unsigned long long)s.source_ignored_members,
                       "remote", remote);
}


/* The header allows one consumer thread per loader. A second Python thread
 * inside a consumer call while the first waits would take the first one's
 * answer (two threads, one batch: a NULL batch for one of them): it raises
 * instead. */
static int enter(LoaderObject *self) {
  if (check_open(self)) return -1;
  core *c = self->core;
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

static void leave(core *c) {
  pthread_mutex_lock(&c->mu);
  c->consuming = 0;
  pthread_mutex_unlock(&c->mu);
}

#define CONSUMER_CALL(name)                                                 \
  static PyObject *name(LoaderObject *self, PyObject *args) {               \
    if (enter(self)) return NULL;                                           \
    core *c = self->core;                                                   \
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
static PyObject *loader_get_num_batches(LoaderObject *self, void *unused) {
  (void)unused;
  return PyLong_FromSize_t(self->num_batches);
}
static PyObject *loader_get_num_samples(LoaderObject *self, void *unused) {
  (void)unused;
  return PyLong_FromSize_t(self->num_samples);
}
static PyObject *loader_get_dataset_size(LoaderObject *self, void *unused) {
  (void)unused;
  return PyLong_FromSize_t(self->dataset_size);
}
static PyObject *loader_get_pinned_device(LoaderObject *self, void *unused) {
  (void)unused;
  return PyUnicode_FromString(self->pinned_device);
}
static PyObject *loader_get_classes(LoaderObject *self, void *unused) {
  (void)unused;
  Py_INCREF(self->classes);
  return self->classes;
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
    {"num_batches", (getter)loader_get_num_batches, NULL, NULL, NULL},
    {"num_samples", (getter)loader_get_num_samples, NULL, NULL, NULL},
    {"dataset_size", (getter)loader_get_dataset_size, NULL, NULL, NULL},
    {"classes", (getter)loader_get_classes, NULL, "tuple of str (class folders) or None", NULL},
    {"pinned_device", (getter)loader_get_pinned_device, NULL,
     "the device that pinned the host batches (\"cuda:0\", \"emu:0\"), or \"cpu\" (ff_loader_pinned_device)", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot loader_slots[] = {
    {Py_tp_dealloc, (void *)loader_dealloc},
    {Py_tp_doc, (void *)"The C loader under fusionflow.Loader (made by open_loader)."},
    {Py_tp_methods, loader_methods},
    {Py_tp_getset, loader_getset},
    {0, NULL},
};

static PyType_Spec loader_spec = {"fusionflow._fusionflow.CLoader", sizeof(LoaderObject), 0, Py_TPFLAGS_DEFAULT,
                                  loader_slots};

/* ---------------------------------------------------------------- module */

/* The arguments augment_image and image_plan share: (path, pipeline, seed=0, epoch=0, index=0,
 * semantics=0); format names the function. 1, with a->path and a->pipeline bytes to release
 * (image_args_release), or 0 with the exception set. */
typedef struct image_args {
  PyObject *path, *pipeline;
  unsigned long long seed, epoch, index;
  int semantics;
} image_args;

static int image_args_parse(PyObject *args, PyObject *kwargs, const char *format, image_args *a) {
  static char *kwlist[] = {"path", "pipeline", "seed", "epoch", "index", "semantics", NULL};
  PyObject *pipeline_obj;
  *a = (image_args){.semantics = FF_SEMANTICS_V1};
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, format, kwlist, PyUnicode_FSConverter, &a->path, &pipeline_obj,
                                   &a->seed, &a->epoch, &a->index, &a->semantics))
    return 0;
  a->pipeline = ffpy_pipeline_text(pipeline_obj);
  if (a->pipeline) return 1;
  Py_DECREF(a->path);
  return 0;
}

static void image_args_release(image_args *a) {
  Py_DECREF(a->path);
  Py_DECREF(a->pipeline);
}

static PyObject *mod_augment_image(PyObject *module, PyObject *args, PyObject *kwargs) {
  (void)module;
  image_args a;
  if (!image_args_parse(args, kwargs, "O&U|KKKi:augment_image", &a)) return NULL;
  uint8_t *pixels = NULL;
  int h = 0, w = 0;
  char err[MSG_MAX] = "";
  ff_status st;
  Py_BEGIN_ALLOW_THREADS
  st = ff_image_augment_as(PyBytes_AsString(a.path), PyBytes_AsString(a.pipeline), (ff_semantics)a.semantics, a.seed,
                           a.epoch, a.index, &pixels, &h, &w, err, sizeof err);
  Py_END_ALLOW_THREADS
  image_args_release(&a);
  if (st != FF_OK) return ffpy_raise_status(st, err);
  owner *o = owner_new(NULL, pixels, NULL);
  if (!o) {
    ff_free(pixels);
    return PyErr_NoMemory();
  }
  ff_tensor t = {pixels, FF_UINT8, FF_NHWC, 3, {h, w, 3, 0}, {(int64_t)w * 3, 3, 1, 0}};
  PyObject *r = tensor_new(o, &t);
  owner_decref(o);
  return r;
}

/* ff_image_plan_as: what augment_image draws for that sample, as JSON text (fusionflow.check replays it). */
static PyObject *mod_image_plan(PyObject *module, PyObject *args, PyObject *kwargs) {
  (void)module;
  image_args a;
  if (!image_args_parse(args, kwargs, "O&U|KKKi:image_plan", &a)) return NULL;
  char *json = NULL, err[MSG_MAX] = "";
  ff_status st;
  Py_BEGIN_ALLOW_THREADS
  st = ff_image_plan_as(PyBytes_AsString(a.path), PyBytes_AsString(a.pipeline), (ff_semantics)a.semantics, a.seed,
                        a.epoch, a.index, &json, err, sizeof err);
  Py_END_ALLOW_THREADS
  image_args_release(&a);
  if (st != FF_OK) return ffpy_raise_status(st, err);
  PyObject *r = PyUnicode_FromString(json);
  ff_free(json);
  return r;
}

static PyObject *mod_set_exception_factory(PyObject *module, PyObject *f) {
  (void)module;
  Py_INCREF(f);
  PyObject *old = exception_factory;
  exception_factory = f;
  Py_XDECREF(old);
  Py_RETURN_NONE;
}

static PyObject *mod_version(PyObject *module, PyObject *unused) {
  (void)module, (void)unused;
  return PyUnicode_FromString(ff_version());
}

static PyObject *mod_cpu_isa(PyObject *module, PyObject *unused) {
  (void)module, (void)unused;
  return PyUnicode_FromString(ff_cpu_isa());
}

static PyObject *mod_status_str(PyObject *module, PyObject *arg) {
  (void)module;
  long v = PyLong_AsLong(arg);
  if (v == -1 && PyErr_Occurred()) return NULL;
  return PyUnicode_FromString(ff_status_str((ff_status)v));
}

/* The recipe presets: a list of (name, source, pipeline, repeated_augmentations, needs, why), why
 * None when this build runs the recipe, else ff_recipe_check's message. */
static PyObject *mod_recipes(PyObject *module, PyObject *unused) {
  (void)module, (void)unused;
  PyObject *list = PyList_New(0);
  for (size_t i = 0; list && ff_recipe_at(i); i++) {
    const ff_recipe *r = ff_recipe_at(i);
    char why[1024];
    int ok = ff_recipe_check(r, why, sizeof why) == FF_OK;
    PyObject *t = Py_BuildValue("(sssisz)", r->name, r->source, r->pipeline, r->repeated_augmentations, r->needs,
                                ok ? NULL : why);
    if (!t || PyList_Append(list, t)) Py_CLEAR(list);
    Py_XDECREF(t);
  }
  return list;
}

/* recipe_pipeline(name, num_classes) -> str: ff_recipe_pipeline's text (num_classes 0: as published);
 * ValueError for num_classes and a recipe without a batch stage, an unknown name, a num_classes outside
 * [0, FF_MAX_NUM_CLASSES]. */
static PyObject *mod_recipe_pipeline(PyObject *module, PyObject *args) {
  (void)module;
  const char *name;
  int num_classes;
  size_t len = 0;
  if (!PyArg_ParseTuple(args, "si", &name, &num_classes)) return NULL;
  const ff_recipe *r = ff_recipe_find(name);
  ff_status st = ff_recipe_pipeline(r, num_classes, NULL, 0, &len);
  if (st == FF_EPIPELINE)
    return PyErr_Format(PyExc_ValueError, "fusionflow: recipe '%s' has no batch stage: num_classes does not apply",
                        name);
  if (st)
    return PyErr_Format(PyExc_ValueError, "fusionflow: no recipe '%s', or num_classes %d outside [0, %d]", name,
                        num_classes, FF_MAX_NUM_CLASSES);
  char *text = PyMem_Malloc(len + 1);
  if (!text) return PyErr_NoMemory();
  ff_recipe_pipeline(r, num_classes, text, len + 1, NULL); /* FF_OK, as the first call */
  PyObject *out = PyUnicode_FromStringAndSize(text, (Py_ssize_t)len);
  PyMem_Free(text);
  return out;
}

/* _interpreter_exiting(): called at exit (atexit, before finalization): no
 * worker thread may take the GIL from now on (Python datasets). */
static PyObject *mod_interpreter_exiting(PyObject *module, PyObject *unused) {
  (void)module, (void)unused;
  ffpy_dataset_exiting();
  Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"recipes", mod_recipes, METH_NOARGS,
     "recipes() -> [(name, source, pipeline, repeated_augmentations, needs, why_not_runnable or None)]"},
    {"recipe_pipeline", mod_recipe_pipeline, METH_VARARGS,
     "recipe_pipeline(name, num_classes) -> the recipe's pipeline text, its mixup_cutmix's num_classes set\n"
     "(0: as published)"},
    {"_interpreter_exiting", mod_interpreter_exiting, METH_NOARGS, NULL},
    {"open_loader", (PyCFunction)(void (*)(void))loader_open, METH_VARARGS | METH_KEYWORDS,
     "open_loader(source, pipeline, batch_size=64, shuffle=1, drop_last=0, seed=0, num_threads=0, prefetch=2,\n"
     "            rank=-1, world_size=-1, on_error=0, max_image_pixels=89478485, device=\"cpu\",\n"
     "            device_memory_limit_bytes=0, strict_decode=False, allow_empty=False, sampler_drop_last=False,\n"
     "            torch_permutation=False, pin_memory=-1, output_device=\"cpu\", device_decode=0,\n"
     "            deterministic=False, output_dtype=0, memory_format=0, semantics=0,\n"
     "            repeated_augmentations=0, shuffle_buffer=1000, dataset=None, dataset_size=0,\n"
     "            open_progress=None, remote=None) -> CLoader\n"
     "            (output_dtype: ff_output_dtype, memory_format: ff_memory_format, semantics: ff_semantics;\n"
     "            open_progress: callable(dict of ff_open_progress) while a streamed source opens)"},
    {"augment_image", (PyCFunction)(void (*)(void))mod_augment_image, METH_VARARGS | METH_KEYWORDS,
     "augment_image(path, pipeline, seed=0, epoch=0, index=0, semantics=0) -> Tensor (H, W, 3) uint8"},
    {"image_plan", (PyCFunction)(void (*)(void))mod_image_plan, METH_VARARGS | METH_KEYWORDS,
     "image_plan(path, pipeline, seed=0, epoch=0, index=0, semantics=0) -> JSON text of ff_image_plan_as"},
    {"_set_exception_factory", mod_set_exception_factory, METH_O, NULL},
    {"version", mod_version, METH_NOARGS, "version() -> the linked library's 'MAJOR.MINOR.PATCH'"},
    {"cpu_isa", mod_cpu_isa, METH_NOARGS, "cpu_isa() -> 'avx512', 'avx2' or 'scalar': the CPU ops' vector paths"},
    {"status_str", mod_status_str, METH_O, "status_str(status) -> the library's name of a status"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "fusionflow._fusionflow", "C extension of fusionflow (see the fusionflow package).", -1,
    module_methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__fusionflow(void) {
  TensorType = (PyTypeObject *)PyType_FromSpec(&tensor_spec);
  LoaderType = (PyTypeObject *)PyType_FromSpec(&loader_spec);
  if (!TensorType || !LoaderType) return NULL;
  PyObject *m = PyModule_Create(&module_def);
  if (!m) return NULL;
  Py_INCREF(TensorType);
  Py_INCREF(LoaderType);
  if (PyModule_AddObject(m, "Tensor", (PyObject *)TensorType) ||
      PyModule_AddObject(m, "CLoader", (PyObject *)LoaderType) || ffpy_augmenter_add(m) ||
      PyModule_AddFunctions(m, ffpy_late_copy_methods) || ffpy_remote_add(m))
    goto fail;
  static const struct {
    const char *name;
    int value;
  } statuses[] = {
      {"FF_OK", FF_OK},         {"FF_END", FF_END},       {"FF_EINVAL", FF_EINVAL},   {"FF_EPIPELINE", FF_EPIPELINE},
      {"FF_EDATA", FF_EDATA},   {"FF_ETOOBIG", FF_ETOOBIG}, {"FF_EEMPTY", FF_EEMPTY}, {"FF_EIO", FF_EIO},
      {"FF_ENOMEM", FF_ENOMEM}, {"FF_EDEVICE", FF_EDEVICE}, {"FF_EINTERNAL", FF_EINTERNAL},
  };
  for (size_t i = 0; i < sizeof statuses / sizeof *statuses; i++)
    if (PyModule_AddIntConstant(m, statuses[i].name, statuses[i].value)) goto fail;
  ff_config defaults;
  ff_config_init(&defaults);
  PyObject *max_pixels = PyLong_FromUnsignedLongLong(defaults.max_image_pixels);
  if (!max_pixels || PyModule_AddObject(m, "DEFAULT_MAX_IMAGE_PIXELS", max_pixels)) {
    Py_XDECREF(max_pixels);
    goto fail;
  }
  if (PyModule_AddStringConstant(m, "DLPACK_VERSION", "0.8")) goto fail;
  if (PyModule_AddIntConstant(m, "MAX_NUM_CLASSES", FF_MAX_NUM_CLASSES)) goto fail;
  return m;
fail:
  Py_DECREF(m);
  return NULL;
}
