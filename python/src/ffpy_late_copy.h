/* ffpy_late_copy.h — the emulator's late copy (src/loader/late_copy.h) for
 * Python tests: a stand-in for torch's images.cuda(non_blocking=True) on a
 * busy stream, where no GPU is. Private (underscore names); refused unless
 * the loader's batches are pinned by an emulated device. */
#ifndef FFPY_LATE_COPY_H
#define FFPY_LATE_COPY_H

#define PY_SSIZE_T_CLEAN
#ifndef Py_LIMITED_API
#define Py_LIMITED_API 0x03090000 /* the stable ABI, as _fusionflow.c */
#endif
#include <Python.h>

#include "fusionflow/fusionflow.h"

/* CLoader._late_copy(address, nbytes) -> a late copy (a capsule) of nbytes
 * at address (inside a batch of loader l), queued behind a shut gate on
 * the loader's emulator, ordered before the emulator's default stream. */
PyObject *ffpy_late_copy_queue(ff_loader *l, PyObject *args);
/* Module functions: _late_copy_open(c) opens the gate; _late_copy_read(c)
 * -> bytes waits for the copy (the GIL released) and returns what it read. */
extern PyMethodDef ffpy_late_copy_methods[];

#endif
