/* Helpers shared by the lease store tests. */
#ifndef TSR_TEST_LEASE_HELPERS_H
#define TSR_TEST_LEASE_HELPERS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A fresh directory (mode 0700) under /dev/shm when there is one (fast),
 * else $TMPDIR or /tmp, its path in `path`; NULL on failure. */
static inline char *tsr_test_mkdtemp_in(char *path, size_t cap) {
  const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : getenv("TMPDIR");
  if (!base) base = "/tmp";
  snprintf(path, cap, "%s/tsr-test-XXXXXX", base);
  return mkdtemp(path);
}

/* The same in a static buffer: each call reuses it. */
static inline char *tsr_test_mkdtemp(void) {
  static char path[256];
  return tsr_test_mkdtemp_in(path, sizeof path);
}

static inline void tsr_test_rmtree(const char *dir) {
  char cmd[512];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
}

#endif
