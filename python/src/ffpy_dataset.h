/* ffpy_dataset.h — a Python dataset as a callback source (ff_source_callbacks):
 * the library's worker threads ask a Python callable for a batch's encoded
 * images, taking the GIL once per batch. */
#ifndef FFPY_DATASET_H
#define FFPY_DATASET_H

#define PY_SSIZE_T_CLEAN
#ifndef Py_LIMITED_API
#define Py_LIMITED_API 0x03090000 /* the stable ABI, as _fusionflow.c */
#endif
#include <Python.h>

#include "fusionflow/fusionflow.h"

typedef struct ffpy_dataset ffpy_dataset;

/* A source of count samples from fetch, a callable taking a list of indices
 * and returning a list of as many results, each (bytes, int label) or a str
 * saying why that sample cannot be given. *cb is filled to go into
 * ff_config.source_callbacks (it points into the returned object). NULL with
 * MemoryError set. With the GIL. */
ffpy_dataset *ffpy_dataset_new(PyObject *fetch, size_t count, const char *name, ff_source_callbacks **cb);

/* From now on fetches fail at once ("the loader is closing") instead of
 * waiting for the GIL: call before closing the loader. Any thread. */
void ffpy_dataset_closing(ffpy_dataset *d);

/* Frees d once the loader using it is closed (no callback runs any more).
 * With the GIL. NULL: nothing. */
void ffpy_dataset_free(ffpy_dataset *d);

/* The interpreter is shutting down (its atexit hooks run): from now on no
 * fetch and no free takes the GIL. */
void ffpy_dataset_exiting(void);

/* ffpy_dataset_free from a thread without the GIL: takes it for the free,
 * or leaves d (a leak at exit) once the interpreter is finalizing, when the
 * GIL can no longer be taken. */
void ffpy_dataset_free_without_gil(ffpy_dataset *d);

#endif
