/* ffpy_stats.h — a loader's counters (ff_loader_stats, ff_loader_op_costs and
 * the lists of skipped and repaired samples) as the dict Loader.stats() shows. */
#ifndef FFPY_STATS_H
#define FFPY_STATS_H

#include "ffpy_common.h"

/* The dict of l's counters. New reference, or NULL with an exception set. With the GIL. */
PyObject *ffpy_stats_dict(ff_loader *l);

#endif
