/* ffpy_open.h — open_loader(**kwargs) -> CLoader (ffpy_open.c): the module
 * function fusionflow.Loader opens its C loader with. */
#ifndef FFPY_OPEN_H
#define FFPY_OPEN_H

#include "ffpy_common.h"

/* open_loader(source, pipeline, ...) (the keywords: see the module's method
 * table in _fusionflow.c). A new CLoader, or NULL with the library's error
 * (or KeyboardInterrupt while a streamed source opens) set. With the GIL. */
PyObject *ffpy_open_loader(PyObject *module, PyObject *args, PyObject *kwargs);

#endif
