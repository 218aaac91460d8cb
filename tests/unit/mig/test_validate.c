/* The validator rejects each kind of broken plan. */
#include "common.h"

static tsr_mig_model_t m;
static tsr_mig_tasks_t *t;
static tsr_mig_plan_t *p;

static void setup(void) {
  m = mig_model("A100");
  cr_assert_null(tsr_mig_tasks_load_csv(&m, mig_data("rodinia_times_mean.csv"), &t));
  cr_assert_null(tsr_mig_far_plan(&m, t, NULL, &p));
  mig_assert_valid(p, t);
}

static void teardown(void) {
  tsr_mig_plan_free(p);
  tsr_mig_tasks_free(t);
}

static void expect(const char *needle) {
  tsr_status_t st = tsr_mig_plan_validate(p, t);
  cr_assert_not_null(st, "expected a violation with '%s'", needle);
  cr_assert(strstr(tsr_status_message(st), needle), "'%s' lacks '%s'", tsr_status_message(st), needle);
  tsr_status_free(st);
}

/* An instance that is destroyed, and one after it on the same slices. */
static void find_pair(int *out_a, int *out_b) {
  for (int a = 0; a < p->ninstances; a++)
    for (int b = 0; b < p->ninstances; b++)
      if (a != b && (p->instances[a].mask & p->instances[b].mask) && p->instances[a].destroy_end >= 0 &&
          p->instances[b].create_start >= p->instances[a].destroy_end - 1e-9) {
        *out_a = a;
        *out_b = b;
        return;
      }
  cr_assert_fail("no reconfiguration in the plan");
}

TestSuite(mig_validate, .init = setup, .fini = teardown);

Test(mig_validate, overlapping_instances) {
  int a, b;
  find_pair(&a, &b);
  (void)b;
  /* a is destroyed long after b was created over its slices */
  p->instances[a].destroy_start += 1000;
  p->instances[a].destroy_end += 1000;
  expect("live at the same time");
}

Test(mig_validate, creation_time_wrong) {
  p->instances[0].create_end += 0.05;
  expect("creation takes");
}

Test(mig_validate, destruction_time_wrong) {
  int a, b;
  find_pair(&a, &b);
  p->instances[a].destroy_end -= 0.05;
  expect("destruction takes");
}

Test(mig_validate, reconfigurations_overlap) {
  /* two creations at the same moment on disjoint slices */
  tsr_mig_plan_t *q = p;
  int x = -1, y = -1;
  for (int a = 0; a < q->ninstances && x < 0; a++)
    for (int b = a + 1; b < q->ninstances; b++)
      if (!(q->instances[a].mask & q->instances[b].mask) && q->instances[a].create_start > 0 &&
          q->instances[b].create_start > 0) {
        x = a;
        y = b;
        break;
      }
  cr_assert_geq(x, 0);
  double d = q->instances[y].create_end - q->instances[y].create_start;
  q->instances[y].create_start = q->instances[x].create_start + d / 4;
  q->instances[y].create_end = q->instances[y].create_start + d;
  expect("overlap");
}

Test(mig_validate, task_before_its_instance) {
  int i = 0;
  double d = p->placements[i].end - p->placements[i].start;
  p->placements[i].start = p->instances[p->placements[i].instance].create_start;
  p->placements[i].end = p->placements[i].start + d;
  expect("before its instance exists");
}

Test(mig_validate, wrong_time_or_size) {
  p->placements[3].end += 1;
  expect("runs");
}

Test(mig_validate, wrong_size) {
  p->placements[2].size = p->placements[2].size == 1 ? 2 : 1;
  expect("instance");
}

Test(mig_validate, task_missing) {
  p->placements[5].instance = -1;
  expect("not placed");
}

Test(mig_validate, tasks_overlap_on_instance) {
  /* two tasks on one instance: move the second onto the first */
  for (int i = 0; i < p->ntasks; i++)
    for (int j = 0; j < p->ntasks; j++)
      if (i != j && p->placements[i].instance == p->placements[j].instance &&
          p->placements[j].start > p->placements[i].start) {
        double d = p->placements[j].end - p->placements[j].start;
        p->placements[j].start = p->placements[i].start;
        p->placements[j].end = p->placements[j].start + d;
        expect("overlap on instance");
        return;
      }
  cr_assert_fail("no instance with two tasks");
}

Test(mig_validate, makespan_wrong) {
  p->makespan += 1;
  expect("makespan");
}

Test(mig_validate, node_not_in_model) {
  p->instances[0].node = 99;
  expect("no node");
}
