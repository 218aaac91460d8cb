/* mig/plan.c: the plan object. */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/array.h"
#include "mig/internal.h"

tsr_status_t tsr_plan_new(const tsr_mig_model_t *model, const char *algorithm, int ntasks, tsr_mig_plan_t **out_plan) {
  *out_plan = NULL;
  tsr_mig_plan_t *p = calloc(1, sizeof(*p));
  if (!p) return tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory");
  p->model = *model;
  snprintf(p->algorithm, sizeof(p->algorithm), "%s", algorithm);
  p->ntasks = ntasks;
  p->placements = calloc(ntasks ? (size_t)ntasks : 1, sizeof(*p->placements));
  if (!p->placements) {
    free(p);
    return tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory");
  }
  for (int i = 0; i < ntasks; i++) {
    p->placements[i].task = i;
    p->placements[i].instance = -1;
  }
  p->nbatches = 1;
  *out_plan = p;
  return NULL;
}

/* The capacity of plan->instances while it holds n instances. Instances
 * are only added by tsr_plan_add_instance, which grows the array from 8 by
 * doubling, so the capacity follows from the count and the public plan
 * needs no field for it. */
static size_t tsr__instances_cap(int n) {
  size_t cap = n > 0 ? 8 : 0;
  while (cap < (size_t)n) cap *= 2;
  return cap;
}

int tsr_plan_add_instance(tsr_mig_plan_t *plan, const tsr_mig_instance_t *inst) {
  int n = plan->ninstances;
  if (n == INT_MAX) return -1;
  size_t cap = tsr__instances_cap(n);
  tsr_mig_instance_t *ni = tsr_array_grow(plan->instances, &cap, (size_t)n + 1, sizeof(*ni), 8);
  if (!ni) return -1;
  plan->instances = ni;
  plan->instances[n] = *inst;
  plan->ninstances = n + 1;
  return n;
}

void tsr_plan_finish(tsr_mig_plan_t *plan, const tsr_mig_tasks_t *tasks) {
  double ms = 0;
  for (int i = 0; i < plan->ntasks; i++)
    if (plan->placements[i].end > ms) ms = plan->placements[i].end;
  plan->makespan = ms;
  plan->lower_bound = tsr_mig_lower_bound(&plan->model, tasks);
}

void tsr_mig_plan_free(tsr_mig_plan_t *plan) {
  if (!plan) return;
  free(plan->instances);
  free(plan->placements);
  free(plan);
}
