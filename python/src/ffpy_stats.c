/* ffpy_stats.c — Loader.stats(): one ff_loader_stats snapshot, the op costs and
 * the skipped/repaired sample lists, as one dict whose keys are the ff_stats
 * field names (the remote figures nested under "remote", ffpy_remote.c). The
 * keys and units are documented on Loader.stats in fusionflow/_loader.py. */
#include "ffpy_stats.h"

#include <stdlib.h>

#include "ffpy_remote.h"

/* The first n messages of a loader list (ff_loader_skipped, ff_loader_warning) as a list of str. */
static PyObject *messages(const ff_loader *l, const char *(*get)(const ff_loader *, size_t), uint64_t n) {
  PyObject *list = PyList_New(0);
  for (size_t i = 0; list && i < n; i++) {
    const char *m = get(l, i);
    if (!m) break;
    PyObject *x = PyUnicode_DecodeFSDefault(m);
    if (!x || PyList_Append(list, x)) Py_CLEAR(list);
    Py_XDECREF(x);
  }
  return list;
}

PyObject *ffpy_stats_dict(ff_loader *l) {
  ff_stats s;
  ff_loader_stats(l, &s);
  size_t n = ff_loader_op_costs(l, NULL, 0);
  ff_op_cost *costs = calloc(n ? n : 1, sizeof *costs);
  if (!costs) return PyErr_NoMemory();
  n = ff_loader_op_costs(l, costs, n);
  PyObject *ops = PyList_New(0);
  for (size_t i = 0; ops && i < n; i++) {
    PyObject *d = Py_BuildValue("{s:s,s:K,s:K,s:K}", "op", costs[i].op, "calls",
                                (unsigned long long)costs[i].calls, "ns", (unsigned long long)costs[i].ns,
                                "pixels", (unsigned long long)costs[i].pixels);
    if (!d || PyList_Append(ops, d)) Py_CLEAR(ops);
    Py_XDECREF(d);
  }
  free(costs);
  PyObject *skipped = ops ? messages(l, ff_loader_skipped, s.skipped + s.replaced) : NULL;
  PyObject *warned = skipped ? messages(l, ff_loader_warning, s.warnings) : NULL;
  if (!warned) {
    Py_XDECREF(ops);
    Py_XDECREF(skipped);
    return NULL;
  }
  PyObject *remote = ffpy_remote_stats(&s);
  if (!remote) {
    Py_XDECREF(ops);
    Py_XDECREF(skipped);
    Py_XDECREF(warned);
    return NULL;
  }
  return Py_BuildValue("{s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:i,s:N,s:N,s:s,s:K,s:K,s:K,s:n,s:n,s:d,s:K,s:K,s:N,s:s,s:s,s:K,s:K,s:K,s:K,s:K,s:K,s:s,"
                       "s:s,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:N,s:K,s:K,s:K,s:K,s:N}",
                       "batches", (unsigned long long)s.batches,
                       "samples", (unsigned long long)s.samples, "read_ns", (unsigned long long)s.read_ns,
                       "decode_ns", (unsigned long long)s.decode_ns, "ops_ns", (unsigned long long)s.ops_ns,
                       "wait_ns", (unsigned long long)s.wait_ns, "read_bytes", (unsigned long long)s.read_bytes,
                       "skipped", (unsigned long long)s.skipped, "num_threads", s.num_threads, "op_costs", ops,
                       "skipped_samples", skipped, "device", s.device, "device_samples",
                       (unsigned long long)s.device_samples, "device_ns", (unsigned long long)s.device_ns,
                       "device_fallbacks", (unsigned long long)s.device_fallbacks, "device_pool_limit_bytes",
                       (Py_ssize_t)s.device_pool_limit_bytes, "device_pool_peak_bytes",
                       (Py_ssize_t)s.device_pool_peak_bytes, "offload_share", s.offload_share, "replaced",
                       (unsigned long long)s.replaced, "warnings", (unsigned long long)s.warnings,
                       "warning_samples", warned, "device_decoder", s.device_decoder ? s.device_decoder : "none",
                       "device_decoder_note", s.device_decoder_note ? s.device_decoder_note : "",
                       "output_upload_bytes", (unsigned long long)s.output_upload_bytes,
                       "device_download_bytes", (unsigned long long)s.device_download_bytes,
                       "host_round_trips", (unsigned long long)s.host_round_trips,
                       "feeder_cpu_ns", (unsigned long long)s.feeder_cpu_ns,
                       "batch_stage_ns", (unsigned long long)s.batch_stage_ns,
                       "source_ignored_files", (unsigned long long)s.source_ignored_files,
                       "node_group", s.node_group ? s.node_group : "",
                       "decoders", s.decoders ? s.decoders : "none",
                       "cpu_decodes", (unsigned long long)s.cpu_decodes,
                       "device_decodes", (unsigned long long)s.device_decodes,
                       "device_decode_failures", (unsigned long long)s.device_decode_failures,
                       "device_decode_failed_batches", (unsigned long long)s.device_decode_failed_batches,
                       "device_decode_small_batches", (unsigned long long)s.device_decode_small_batches,
                       "fences", (unsigned long long)s.fences, "fence_wait_ns", (unsigned long long)s.fence_wait_ns,
                       "device_budget_refusals", (unsigned long long)s.device_budget_refusals,
                       "host_memory_pinned", PyBool_FromLong(s.host_memory_pinned),
                       "thread_cpu_samples", (unsigned long long)s.thread_cpu_samples,
                       "thread_cpu_ns", (unsigned long long)s.thread_cpu_ns,
                       "thread_decode_cpu_ns", (unsigned long long)s.thread_decode_cpu_ns,
                       "source_ignored_members", (unsigned long long)s.source_ignored_members,
                       "remote", remote);
}
