/* tests/unit/mig/common.h: helpers for the libtessera-mig tests. */
#ifndef TESSERA_TEST_MIG_COMMON_H
#define TESSERA_TEST_MIG_COMMON_H

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mig/mig.h"

/* data/far/<name> in the source tree. */
static inline const char *mig_data(const char *name) {
  static char buf[4096];
  const char *src = getenv("TESSERA_SOURCE_DIR");
  if (!src) src = ".";
  snprintf(buf, sizeof(buf), "%s/data/far/%s", src, name);
  return buf;
}

static inline tsr_mig_model_t mig_model(const char *name) {
  tsr_mig_model_t m;
  tsr_status_t st = tsr_mig_model_get(name, &m);
  cr_assert_null(st, "%s", tsr_status_message(st));
  return m;
}

/* Asserts the plan is valid. */
static inline void mig_assert_valid(const tsr_mig_plan_t *p, const tsr_mig_tasks_t *t) {
  tsr_status_t st = tsr_mig_plan_validate(p, t);
  cr_assert_null(st, "%s: %s", p->algorithm, tsr_status_message(st));
}

/* Writes `text` to a temporary file; returns its path (static buffer). */
static inline const char *mig_tmp_csv(const char *text) {
  static char path[64];
  snprintf(path, sizeof(path), "/tmp/tsr_mig_test_XXXXXX");
  int fd = mkstemp(path);
  cr_assert_geq(fd, 0);
  FILE *f = fdopen(fd, "w");
  fputs(text, f);
  fclose(f);
  return path;
}

/* Loads `text` as a task CSV, expecting an error containing `needle`. */
static inline void mig_expect_csv_error(const char *model, const char *text, const char *needle) {
  tsr_mig_model_t m = mig_model(model);
  const char *path = mig_tmp_csv(text);
  tsr_mig_tasks_t *t = NULL;
  tsr_status_t st = tsr_mig_tasks_load_csv(&m, path, &t);
  unlink(path);
  cr_assert_not_null(st, "expected an error with '%s'", needle);
  cr_assert_null(t);
  cr_assert(strstr(tsr_status_message(st), needle), "message '%s' lacks '%s'", tsr_status_message(st), needle);
  tsr_status_free(st);
}

#endif
