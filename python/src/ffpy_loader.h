/* ffpy_loader.h — CLoader, the object fusionflow.Loader drives (ffpy_loader.c):
 * an open ff_loader, the fetch thread that waits in ff_loader_next for it, and
 * the state they share with the batches handed out (ffpy_core). */
#ifndef FFPY_LOADER_H
#define FFPY_LOADER_H

#include "ffpy_common.h"
#include "ffpy_dataset.h"

typedef struct ffpy_core ffpy_core;

/* One more reference to c (a batch's owner holds one). Any thread. */
void ffpy_core_incref(ffpy_core *c);
/* A batch handed out went back: one fewer held, and the owner's reference dropped. Any thread. */
void ffpy_core_batch_gone(ffpy_core *c);

/* A CLoader over loader, just opened (FF_OK), with its Python dataset source
 * (or NULL) and prefetch as configured; starts the fetch thread. On failure
 * closes the loader and frees the dataset, and returns NULL with an exception
 * set. With the GIL. */
PyObject *ffpy_loader_new(ff_loader *loader, ffpy_dataset *dataset, int prefetch);

/* Closes a loader that was just opened, with the GIL released (its workers
 * may be waiting for it, fetching from a Python dataset), then frees the
 * dataset source. With the GIL. */
void ffpy_close_opened(ff_loader *loader, ffpy_dataset *dataset);

/* Adds the type CLoader to module. 0, or -1 with an exception set. */
int ffpy_loader_add(PyObject *module);

#endif
