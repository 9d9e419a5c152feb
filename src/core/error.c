/* error.c — status names and the per-handle error record. */
#include "core/error.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

ff_status ff__error_set(ff__error *err, ff_status status, const char *fmt, ...) {
  if (err) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    err->status = status;
  }
  return status;
}

ff_status ff__errno_status(int errnum) { return errnum == ENOMEM ? FF_ENOMEM : FF_EIO; }

const char *ff_status_str(ff_status status) {
  switch (status) {
  case FF_OK: return "ok";
  case FF_END: return "end of epoch";
  case FF_EINVAL: return "invalid argument";
  case FF_EPIPELINE: return "bad pipeline";
  case FF_EDATA: return "corrupt or unsupported image";
  case FF_ETOOBIG: return "image too large";
  case FF_EEMPTY: return "empty source";
  case FF_EIO: return "I/O error";
  case FF_ENOMEM: return "out of memory";
  case FF_EDEVICE: return "device error";
  case FF_EBUDGET: return "device memory not available now";
  case FF_EINTERNAL: return "internal error";
  }
  return "unknown status";
}

const char *ff_version(void) { return FF_VERSION_STRING; }
