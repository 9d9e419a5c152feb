/* alloc_fail.c — the allocation hook of alloc_fail.h. Built with
 * FF_ALLOC_HOOK (tests/CMakeLists.txt leaves it out under ASan and TSan).
 * Every function forwards to glibc's own allocator (__libc_malloc and
 * kin), which glibc exports for this purpose; the counters are atomics, so
 * that worker threads allocate through the hook at any time. */
#include "alloc_fail.h"

#ifdef FF_ALLOC_HOOK
#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>
#include <string.h>
#include <unistd.h>

extern void *__libc_malloc(size_t size);
extern void *__libc_calloc(size_t n, size_t size);
extern void *__libc_realloc(void *p, size_t size);
extern void __libc_free(void *p);
extern void *__libc_memalign(size_t alignment, size_t size);

static _Atomic long live;         /* blocks handed out and not freed */
static _Atomic long countdown;    /* allocations left up to the one that fails; 0: disarmed */
static _Atomic int every_thread;  /* count on every thread, not only the armed one */
static _Atomic int fired;         /* the armed allocation failed */
static _Thread_local int armed_here;

/* Whether this allocation is the armed one (and then disarms). */
static int fail_now(void) {
  if (!atomic_load(&countdown) || (!armed_here && !atomic_load(&every_thread))) return 0;
  long left = atomic_load(&countdown);
  while (left > 0 && !atomic_compare_exchange_weak(&countdown, &left, left - 1)) {
  }
  if (left != 1) return 0;
  atomic_store(&fired, 1);
  errno = ENOMEM;
  return 1;
}

static void *counted(void *p) {
  if (p) atomic_fetch_add(&live, 1);
  return p;
}

void *malloc(size_t size) { return fail_now() ? NULL : counted(__libc_malloc(size)); }

void *calloc(size_t n, size_t size) { return fail_now() ? NULL : counted(__libc_calloc(n, size)); }

void free(void *p) {
  if (p) atomic_fetch_sub(&live, 1);
  __libc_free(p);
}

void *realloc(void *p, size_t size) {
  if (!p) return malloc(size);
  if (!size) { /* glibc frees p and returns NULL */
    free(p);
    return NULL;
  }
  if (fail_now()) return NULL; /* p stays valid, as after a real failure */
  return __libc_realloc(p, size);
}

void *reallocarray(void *p, size_t n, size_t size) {
  if (size && n > (size_t)-1 / size) {
    errno = ENOMEM;
    return NULL;
  }
  return realloc(p, n * size);
}

void *memalign(size_t alignment, size_t size) {
  return fail_now() ? NULL : counted(__libc_memalign(alignment, size));
}

void *aligned_alloc(size_t alignment, size_t size) { return memalign(alignment, size); }

int posix_memalign(void **out, size_t alignment, size_t size) {
  if (!alignment || (alignment & (alignment - 1)) || alignment % sizeof(void *)) return EINVAL;
  void *p = memalign(alignment, size);
  if (!p) return ENOMEM;
  *out = p;
  return 0;
}

void *valloc(size_t size) { return memalign((size_t)sysconf(_SC_PAGESIZE), size); }

char *strdup(const char *s) {
  size_t n = strlen(s) + 1;
  char *d = malloc(n);
  return d ? memcpy(d, s, n) : NULL;
}

char *strndup(const char *s, size_t max) {
  size_t n = strnlen(s, max);
  char *d = malloc(n + 1);
  if (!d) return NULL;
  memcpy(d, s, n);
  d[n] = 0;
  return d;
}

int ff_test_alloc_hooked(void) { return 1; }

void ff_test_alloc_fail_at(long n, int all_threads) {
  atomic_store(&fired, 0);
  atomic_store(&every_thread, all_threads);
  armed_here = 1;
  atomic_store(&countdown, n > 0 ? n : 0);
}

int ff_test_alloc_disarm(void) {
  atomic_store(&countdown, 0);
  armed_here = 0;
  atomic_store(&every_thread, 0);
  return atomic_load(&fired);
}

long ff_test_alloc_live(void) { return atomic_load(&live); }

#else /* a sanitizer's runtime owns malloc */

int ff_test_alloc_hooked(void) { return 0; }
void ff_test_alloc_fail_at(long n, int all_threads) { (void)n, (void)all_threads; }
int ff_test_alloc_disarm(void) { return 0; }
long ff_test_alloc_live(void) { return 0; }

#endif
