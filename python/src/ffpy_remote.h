/* ffpy_remote.h — the RemoteQueue type: a remote executor
 * (ff_remote_executor) whose submit only queues the microbatch in C, with
 * no GIL, for the one Python thread that makes the engine's calls
 * (fusionflow.ray.Workers' dispatcher) to take, and whose results that
 * thread hands back (ff_loader_remote_complete, GIL released). */
#ifndef FFPY_REMOTE_H
#define FFPY_REMOTE_H

#include "ffpy_common.h"

typedef struct ffpy_remote ffpy_remote;

/* Adds the type RemoteQueue to module. 0, or -1 with an exception set. */
int ffpy_remote_add(PyObject *module);

/* The executor of a RemoteQueue object for ff_config.remote, with a
 * reference the loader gives back through its stop (ff_loader_close): call
 * ffpy_remote_attach once the loader is open, or ffpy_remote_detach when
 * ff_loader_open returned no loader. NULL with TypeError set for another
 * object. With the GIL. */
const ff_remote_executor *ffpy_remote_executor(PyObject *queue, ffpy_remote **out);
void ffpy_remote_attach(ffpy_remote *r, ff_loader *loader);
void ffpy_remote_detach(ffpy_remote *r);

/* The remote figures and samples per placement of s as a dict. New reference, or NULL. */
PyObject *ffpy_remote_stats(const ff_stats *s);

#endif
