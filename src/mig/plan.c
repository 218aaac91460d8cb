/* mig/plan.c: the plan object. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "mig/internal.h"

tsr_status_t tsr__plan_new(const tsr_mig_model_t *model, const char *algorithm, int ntasks,
                           tsr_mig_plan_t **out_plan) {
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

int tsr__plan_add_instance(tsr_mig_plan_t *plan, const tsr_mig_instance_t *inst) {
  /* capacity 8, then doubled whenever the count reaches a power of two */
  int n = plan->ninstances;
  if (n == 0 || (n >= 8 && (n & (n - 1)) == 0)) {
    size_t cap = n ? (size_t)n * 2 : 8;
    tsr_mig_instance_t *ni = realloc(plan->instances, cap * sizeof(*ni));
    if (!ni) return -1;
    plan->instances = ni;
  }
  plan->instances[n] = *inst;
  plan->ninstances = n + 1;
  return n;
}

void tsr__plan_finish(tsr_mig_plan_t *plan, const tsr_mig_tasks_t *tasks) {
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
