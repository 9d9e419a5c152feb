/* ffpy_augmenter.h — the CAugmenter type: one ff_augmenter (fusionflow.h)
 * for the Python package's worker side (fusionflow._augment). */
#ifndef FFPY_AUGMENTER_H
#define FFPY_AUGMENTER_H

#include "ffpy_common.h"

/* Adds the type CAugmenter to module. 0, or -1 with an exception set. */
int ffpy_augmenter_add(PyObject *module);

#endif
