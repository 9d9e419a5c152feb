/* ffpy_common.h — helpers of the extension's objects, defined in
 * _fusionflow.c: the library's errors as Python exceptions, and argument
 * conversions every object takes the same way. */
#ifndef FFPY_COMMON_H
#define FFPY_COMMON_H

#define PY_SSIZE_T_CLEAN
#ifndef Py_LIMITED_API
#define Py_LIMITED_API 0x03090000 /* the stable ABI, as _fusionflow.c */
#endif
#include <Python.h>

#include "fusionflow/fusionflow.h"

/* Room for a path of PATH_MAX bytes and the reason, as the library's messages. */
#define FFPY_MSG_MAX (4096 + 512)

/* Raises the library's error (status, message) as the exception
 * fusionflow._errors builds for it; returns NULL. With the GIL. */
PyObject *ffpy_raise_status(ff_status st, const char *msg);

/* The UTF-8 of a pipeline text as a new bytes object; NULL with ValueError
 * when it holds a NUL. */
PyObject *ffpy_pipeline_text(PyObject *text);

/* "O&" converter: a Python int in [0, 2**64) into an unsigned long long. */
int ffpy_to_u64(PyObject *obj, void *out);

/* Makes the heap type of spec (the stable ABI has no static types) and adds it
 * to module under the last dotted part of its name; *out (may be NULL) gets a
 * reference of its own. 0, or -1 with an exception set. */
int ffpy_add_type(PyObject *module, PyType_Spec *spec, PyTypeObject **out);

#endif
