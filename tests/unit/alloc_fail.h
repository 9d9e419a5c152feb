/* alloc_fail.h — making the Nth host allocation fail, for tests of the
 * out-of-memory paths. alloc_fail.c interposes malloc, calloc, realloc,
 * reallocarray, free, posix_memalign, aligned_alloc, memalign, valloc, strdup and strndup
 * in the test executable (the library and the libraries it uses included),
 * forwarding to glibc's __libc_malloc family, and counts the blocks alive so
 * that a test sees a leak. Not under AddressSanitizer or ThreadSanitizer,
 * whose runtimes own malloc: there ff_test_alloc_hooked() is 0. */
#ifndef FF_TEST_ALLOC_FAIL_H
#define FF_TEST_ALLOC_FAIL_H

/* 1 when the allocation functions are this file's, 0 under a sanitizer. */
int ff_test_alloc_hooked(void);

/* Arms the hook: the nth allocation from now on (n >= 1) returns NULL with
 * errno ENOMEM, once; counted on the calling thread only, or on every
 * thread with all_threads 1. */
void ff_test_alloc_fail_at(long n, int all_threads);

/* Disarms it; returns 1 if the armed allocation failed, else 0. */
int ff_test_alloc_disarm(void);

/* Blocks allocated and not freed, process-wide, since the process started. */
long ff_test_alloc_live(void);

#endif
