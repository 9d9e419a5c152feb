/* fixtures.h — helpers shared by the unit tests: scratch folders and files. */
#ifndef FF_TEST_FIXTURES_H
#define FF_TEST_FIXTURES_H

#include <stddef.h>
#include <stdint.h>

/* A fresh empty folder $FF_TEST_TMP/<name> (or /tmp/ff-test/<name>); returns
 * its path in a static buffer of the caller's test. */
const char *ff_test_dir(const char *name);
/* Writes size_bytes bytes to path; aborts the test on failure. */
void ff_test_write(const char *path, const void *data, size_t size_bytes);
/* Reads a whole file into malloc'd memory; *size_bytes gets its length. */
uint8_t *ff_test_read(const char *path, size_t *size_bytes);

#endif
