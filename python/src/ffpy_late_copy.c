/* ffpy_late_copy.c — the emulator's late copy for Python tests (ffpy_late_copy.h). */
#include "ffpy_late_copy.h"

#include "loader/late_copy.h"

#define CAPSULE "fusionflow.late_copy"

typedef struct late {
  ff__late_copy *copy;
  size_t bytes;
} late;

static void late_destroy(PyObject *capsule) {
  late *x = PyCapsule_GetPointer(capsule, CAPSULE);
  if (!x) return;
  Py_BEGIN_ALLOW_THREADS
  ff__late_copy_free(x->copy); /* opens the gate and waits for the copy */
  Py_END_ALLOW_THREADS
  PyMem_Free(x);
}

PyObject *ffpy_late_copy_queue(ff_loader *l, PyObject *args) {
  unsigned long long address;
  Py_ssize_t bytes;
  if (!PyArg_ParseTuple(args, "Kn:_late_copy", &address, &bytes)) return NULL;
  if (bytes < 0) return PyErr_Format(PyExc_ValueError, "_late_copy: nbytes must be >= 0");
  late *x = PyMem_Malloc(sizeof *x);
  if (!x) return PyErr_NoMemory();
  char msg[256] = "";
  ff_status st;
  Py_BEGIN_ALLOW_THREADS
  st = ff__late_copy_queue(l, (const void *)(uintptr_t)address, (size_t)bytes, &x->copy, msg, sizeof msg);
  Py_END_ALLOW_THREADS
  if (st) {
    PyMem_Free(x);
    return PyErr_Format(st == FF_EINVAL ? PyExc_ValueError : PyExc_RuntimeError, "_late_copy: %s (%s)", msg,
                        ff_status_str(st));
  }
  x->bytes = (size_t)bytes;
  PyObject *capsule = PyCapsule_New(x, CAPSULE, late_destroy);
  if (!capsule) {
    ff__late_copy_free(x->copy);
    PyMem_Free(x);
  }
  return capsule;
}

static PyObject *late_open(PyObject *module, PyObject *capsule) {
  (void)module;
  late *x = PyCapsule_GetPointer(capsule, CAPSULE);
  if (!x) return NULL;
  ff__late_copy_open(x->copy);
  Py_RETURN_NONE;
}

static PyObject *late_read(PyObject *module, PyObject *capsule) {
  (void)module;
  late *x = PyCapsule_GetPointer(capsule, CAPSULE);
  if (!x) return NULL;
  PyObject *out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)x->bytes);
  if (!out) return NULL;
  char *dst = PyBytes_AsString(out);
  ff_status st;
  Py_BEGIN_ALLOW_THREADS
  st = ff__late_copy_read(x->copy, dst);
  Py_END_ALLOW_THREADS
  if (st) {
    Py_DECREF(out);
    return PyErr_Format(PyExc_RuntimeError, "_late_copy_read: %s", ff_status_str(st));
  }
  return out;
}

PyMethodDef ffpy_late_copy_methods[] = {
    {"_late_copy_open", late_open, METH_O, "_late_copy_open(copy): opens the gate in front of a late copy"},
    {"_late_copy_read", late_read, METH_O, "_late_copy_read(copy) -> bytes the late copy read (waits for it)"},
    {NULL, NULL, 0, NULL},
};
