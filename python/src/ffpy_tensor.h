/* ffpy_tensor.h — fusionflow.Tensor, the DLPack view of a batch's images or
 * labels (or of one augment_image result), and the reference-counted owner of
 * the memory behind it (ffpy_tensor.c). */
#ifndef FFPY_TENSOR_H
#define FFPY_TENSOR_H

#include "ffpy_common.h"

typedef struct ffpy_core ffpy_core; /* ffpy_loader.h */
typedef struct ffpy_owner ffpy_owner;

/* An owner with one count of a batch (counted as held by c) or of memory
 * mem that ff_free frees (c NULL). NULL when out of memory. */
ffpy_owner *ffpy_owner_new(ff_batch *batch, void *mem, ffpy_core *c);
/* Drops one count; the last gives the batch back or frees the memory. Any thread, with or without the GIL. */
void ffpy_owner_decref(ffpy_owner *o);

/* A new Tensor over t's memory (host, kDLCPU), holding one count of o. NULL with an exception set. */
PyObject *ffpy_tensor_new(ffpy_owner *o, const ff_tensor *t);
/* The images of batch b: kDLCUDA when they are on a CUDA output_device. */
PyObject *ffpy_images_new(ffpy_owner *o, ff_batch *b, const ff_tensor *t);

/* Adds the type Tensor to module. 0, or -1 with an exception set. */
int ffpy_tensor_add(PyObject *module);

#endif
