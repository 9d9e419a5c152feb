/* error.h — the internal error record: a status plus the message of the code
 * that detected the failure. Callers only pass the status up. */
#ifndef FF_CORE_ERROR_H
#define FF_CORE_ERROR_H

#include "fusionflow/fusionflow.h"

#define FF__PATH_MAX 4096 /* Linux's PATH_MAX, terminating NUL included */
/* Room for a path of FF__PATH_MAX bytes and the reason after it. */
#define FF__ERRMSG_MAX (FF__PATH_MAX + 512)

typedef struct ff__error {
  ff_status status;
  char msg[FF__ERRMSG_MAX];
} ff__error;

/* Records status and a printf-style message in err (if err is not NULL) and
 * returns status, so that detection reads `return ff__error_set(err, ...)`. */
ff_status ff__error_set(ff__error *err, ff_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The status of a system call that failed with errnum: FF_ENOMEM for
 * ENOMEM (opendir, fopen and the like allocate), else FF_EIO. */
ff_status ff__errno_status(int errnum);

#endif
