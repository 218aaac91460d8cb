/* fuzz_mig_csv.c: libFuzzer target for the MIG planner's CSV loaders
 * (src/mig/tasks.c, model.c): a job list is a file a user hands `tessera
 * mig plan`, and the reconfiguration times one an admin does. The first
 * byte picks the GPU model (A30, A100, H100, H200, B200) and, by its high
 * bit, the loader (tasks or reconfiguration times); the rest is the file,
 * given through a memfd's /proc/self/fd path. Each must answer a status or
 * a result, never crash (ASan, UBSan). Beyond the sanitizers, for tasks
 * that load (mig.h):
 *  - a refusal hands out nothing and names the file;
 *  - every task has a name and can run on at least one size, and every
 *    time is a number not below 0 (INFINITY: cannot run on that size);
 *  - written back as CSV (tsr_mig_tasks_write_csv) they load again to the
 *    same names, commands and times.
 * Built and run by run.sh (registered with ctest as fuzz.mig_csv). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "mig/mig.h"

#include "../check.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

/* `len` bytes as a file: its path in path[], the fd to close */
static int as_file(const void *bytes, size_t len, char *path, size_t cap) {
  int fd = memfd_create("fuzz_mig_csv", MFD_CLOEXEC);
  FUZZ_CHECK(fd >= 0);
  FUZZ_CHECK(len == 0 || write(fd, bytes, len) == (ssize_t)len);
  snprintf(path, cap, "/proc/self/fd/%d", fd);
  return fd;
}

static bool same_tasks(const tsr_mig_tasks_t *a, const tsr_mig_tasks_t *b) {
  if (a->n != b->n || a->nsizes != b->nsizes) return false;
  for (int i = 0; i < a->n; i++) {
    if (strcmp(a->names[i], b->names[i]) != 0) return false;
    if ((a->commands[i] == NULL) != (b->commands[i] == NULL)) return false;
    if (a->commands[i] && strcmp(a->commands[i], b->commands[i]) != 0) return false;
    for (int k = 0; k < a->nsizes; k++) {
      double x = tsr_mig_tasks_time(a, i, k), y = tsr_mig_tasks_time(b, i, k);
      if (x != y) return false;
    }
  }
  return true;
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
  static const char *const models[] = {"A30", "A100", "H100", "H200", "B200"};
  if (size < 1) return 0;
  tsr_mig_model_t m;
  FUZZ_CHECK(tsr_mig_model_get(models[(data[0] & 0x7f) % 5], &m) == NULL);
  char path[64];
  int fd = as_file(data + 1, size - 1, path, sizeof(path));
  if (data[0] & 0x80) {
    tsr_status_t st = tsr_mig_model_load_reconfig_csv(&m, path);
    if (st) {
      FUZZ_CHECK(strstr(tsr_status_message(st), "fd") != NULL); /* the message names the file */
      tsr_status_free(st);
    }
    close(fd);
    return 0;
  }
  tsr_mig_tasks_t *t = (tsr_mig_tasks_t *)1;
  tsr_status_t st = tsr_mig_tasks_load_csv(&m, path, &t);
  close(fd);
  if (st) {
    FUZZ_CHECK(t == NULL);
    FUZZ_CHECK(strstr(tsr_status_message(st), "fd") != NULL);
    tsr_status_free(st);
    return 0;
  }
  FUZZ_CHECK(t != NULL);
  for (int i = 0; i < t->n; i++) {
    FUZZ_CHECK(t->names[i] != NULL);
    bool runs = false;
    for (int k = 0; k < t->nsizes; k++) {
      double x = tsr_mig_tasks_time(t, i, k);
      FUZZ_CHECK(!isnan(x) && x >= 0);
      if (isfinite(x)) runs = true;
    }
    FUZZ_CHECK(runs);
  }
  char *text = NULL;
  size_t len = 0;
  FILE *out = open_memstream(&text, &len);
  FUZZ_CHECK(out != NULL);
  FUZZ_CHECK(tsr_mig_tasks_write_csv(t, out) == NULL);
  fclose(out);
  fd = as_file(text, len, path, sizeof(path));
  tsr_mig_tasks_t *u = NULL;
  st = tsr_mig_tasks_load_csv(&m, path, &u);
  close(fd);
  if (st) fprintf(stderr, "fuzz_mig_csv: written back, refused: %s\n%s\n", tsr_status_message(st), text);
  FUZZ_CHECK(st == NULL);
  FUZZ_CHECK(same_tasks(t, u));
  free(text);
  tsr_mig_tasks_free(u);
  tsr_mig_tasks_free(t);
  return 0;
}
