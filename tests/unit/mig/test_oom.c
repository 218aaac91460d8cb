/* Running out of memory while a multi-batch builder copies a batch
 * (tsr__tasks_append in far.c): the copies made so far are freed and the
 * builder is as it was. This program replaces strdup, so that one call can
 * fail on demand, and wraps free (linked with --wrap=free), so that the
 * copies strdup made and nobody freed can be counted. */
#include <errno.h>

#include "common.h"

static int strdup_calls_left = -1; /* successful calls before one fails; -1: never fail */
static void *copies[64];           /* strdup's results while counting, not yet freed */
static int ncopies;
static bool counting;

char *strdup(const char *s) {
  if (strdup_calls_left == 0) {
    strdup_calls_left = -1;
    errno = ENOMEM;
    return NULL;
  }
  if (strdup_calls_left > 0) strdup_calls_left--;
  size_t n = strlen(s) + 1;
  char *copy = malloc(n);
  if (copy) memcpy(copy, s, n);
  if (copy && counting && ncopies < 64) copies[ncopies++] = copy;
  return copy;
}

void __real_free(void *p);
void __wrap_free(void *p);
void __wrap_free(void *p) {
  for (int i = 0; i < ncopies; i++)
    if (copies[i] == p) {
      copies[i] = copies[--ncopies];
      break;
    }
  __real_free(p);
}

/* Four tasks, each with a command, runnable on one slice. */
static tsr_mig_tasks_t *batch_of_four(const tsr_mig_model_t *m) {
  tsr_mig_tasks_t *t;
  cr_assert_null(tsr_mig_tasks_create(m, 4, &t));
  for (int i = 0; i < 4; i++) {
    cr_assert_null(tsr_mig_tasks_set_time(t, i, 1, 1.0 + i));
    cr_assert_null(tsr_mig_tasks_set_command(t, i, "true"));
  }
  return t;
}

/* A builder holding `batch` once. */
static tsr_mig_multi_t *builder_with(const tsr_mig_model_t *m, const tsr_mig_tasks_t *batch) {
  tsr_mig_multi_t *mb;
  cr_assert_null(tsr_mig_multi_create(m, TSR_MIG_CONCAT_REVERSE_MOVES, NULL, &mb));
  cr_assert_null(tsr_mig_multi_add(mb, batch, NULL, NULL));
  return mb;
}

Test(mig_multi_oom, copies_made_before_a_failed_strdup_are_freed) {
  tsr_mig_model_t m = mig_model("A30");
  tsr_mig_tasks_t *batch = batch_of_four(&m);
  tsr_mig_multi_t *mb = builder_with(&m, batch);
  /* name and command of tasks 0 and 1, the name of task 2, then its command fails */
  counting = true;
  strdup_calls_left = 5;
  tsr_status_t st = tsr_mig_multi_add(mb, batch, NULL, NULL);
  counting = false;
  cr_assert_eq(tsr_status_code(st), TSR_OUT_OF_MEMORY, "%s", tsr_status_message(st));
  tsr_status_free(st);
  cr_assert_eq(strdup_calls_left, -1, "the failure was not reached");
  cr_assert_eq(ncopies, 0, "%d copies of the failed batch leaked", ncopies);
  tsr_mig_multi_free(mb);
  tsr_mig_tasks_free(batch);
}

Test(mig_multi_oom, builder_unchanged_after_a_failed_copy) {
  tsr_mig_model_t m = mig_model("A30");
  tsr_mig_tasks_t *batch = batch_of_four(&m);
  tsr_mig_multi_t *mb = builder_with(&m, batch);
  strdup_calls_left = 3;
  tsr_status_t st = tsr_mig_multi_add(mb, batch, NULL, NULL);
  strdup_calls_left = -1;
  cr_assert_eq(tsr_status_code(st), TSR_OUT_OF_MEMORY);
  tsr_status_free(st);
  cr_assert_null(tsr_mig_multi_add(mb, batch, NULL, NULL)); /* goes on as if nothing happened */
  tsr_mig_plan_t *p;
  tsr_mig_tasks_t *all;
  cr_assert_null(tsr_mig_multi_result(mb, &p, &all));
  cr_assert_eq(all->n, 8);
  cr_assert_eq(p->nbatches, 2);
  mig_assert_valid(p, all);
  tsr_mig_plan_free(p);
  tsr_mig_tasks_free(all);
  tsr_mig_multi_free(mb);
  tsr_mig_tasks_free(batch);
}
