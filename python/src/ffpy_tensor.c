/* ffpy_tensor.c — fusionflow.Tensor and the memory behind it.
 *
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
 *           consumer drops it. */
#include "ffpy_tensor.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <dlpack/dlpack.h>

#include "ffpy_loader.h"

/* ---------------------------------------------------------------- owner */

/* ---------------------------------------------------------------- ffpy_owner */

struct ffpy_owner {
  atomic_long refs;
  atomic_intptr_t release_stream; /* 0, or the last consumer stream a device batch was exported to */
  ff_batch *batch; /* given back with ff_batch_release(_after), or */
  void *mem;       /* freed with ff_free */
  ffpy_core *core;      /* for batches: counts them as held */
};

ffpy_owner *ffpy_owner_new(ff_batch *batch, void *mem, ffpy_core *c) {
  ffpy_owner *o = malloc(sizeof *o);
  if (!o) return NULL;
  atomic_init(&o->refs, 1);
  atomic_init(&o->release_stream, 0);
  o->batch = batch;
  o->mem = mem;
  o->core = c;
  if (c) ffpy_core_incref(c);
  return o;
}

static void owner_incref(ffpy_owner *o) { atomic_fetch_add(&o->refs, 1); }

/* Any thread, with or without the GIL. */
void ffpy_owner_decref(ffpy_owner *o) {
  if (atomic_fetch_sub(&o->refs, 1) != 1) return;
  intptr_t stream = atomic_load(&o->release_stream);
  if (o->batch && stream)
    ff_batch_release_after(o->batch, (void *)stream);
  else if (o->batch)
    ff_batch_release(o->batch);
  ff_free(o->mem);
  if (o->core) ffpy_core_batch_gone(o->core);
  free(o);
}

/* ---------------------------------------------------------------- Tensor */

typedef struct {
  PyObject_HEAD
  ffpy_owner *owner;
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
PyObject *ffpy_tensor_new(ffpy_owner *o, const ff_tensor *t) {
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
PyObject *ffpy_images_new(ffpy_owner *o, ff_batch *b, const ff_tensor *t) {
  TensorObject *self = (TensorObject *)ffpy_tensor_new(o, t);
  int dev_type, dev_id;
  ff_batch_dlpack_device(b, &dev_type, &dev_id);
  if (self && dev_type == kDLCUDA) self->dev_type = kDLCUDA, self->dev_id = dev_id;
  else if (self && ff_batch_sync(b) != FF_OK) { /* emu: host memory, read from the host */
    PyErr_SetString(PyExc_RuntimeError, "the batch's upload to its output device failed");
    Py_DECREF(self);
    return NULL;
  }
  return (PyObject *)self;
}

static void tensor_dealloc(TensorObject *self) {
  PyTypeObject *type = Py_TYPE(self); /* an instance of a heap type holds a reference to it */
  if (self->owner) ffpy_owner_decref(self->owner);
  PyObject_Free(self);
  Py_DECREF(type);
}

typedef struct export_ctx {
  DLManagedTensor managed;
  ffpy_owner *owner;
  int64_t shape[4], strides[4];
} export_ctx;

static void export_deleter(DLManagedTensor *m) {
  export_ctx *e = m->manager_ctx;
  ffpy_owner_decref(e->owner);
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

int ffpy_tensor_add(PyObject *module) { return ffpy_add_type(module, &tensor_spec, &TensorType); }
