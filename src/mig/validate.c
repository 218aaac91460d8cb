/* mig/validate.c: checks any plan. Shares no code with the planners: it reads
 * only the plan, the task set and the model's node table. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "mig/mig.h"

typedef struct {
  double s, e;
  int who;
} tsr__iv_t;

static int tsr__cmp_iv(const void *a, const void *b) {
  const tsr__iv_t *x = a, *y = b;
  if (x->s != y->s) return x->s < y->s ? -1 : 1;
  return x->who < y->who ? -1 : (x->who > y->who);
}

#define TSR__FAIL(...)                                          \
  do {                                                          \
    st = tsr_status_make(TSR_FAILED_PRECONDITION, __VA_ARGS__); \
    goto out;                                                   \
  } while (0)

tsr_status_t tsr_mig_plan_validate(const tsr_mig_plan_t *plan, const tsr_mig_tasks_t *tasks) {
  const tsr_mig_model_t *m = &plan->model;
  tsr_status_t st = NULL;
  tsr__iv_t *iv = NULL;
  double max_end = 0;
  for (int i = 0; i < plan->ntasks; i++)
    if (plan->placements[i].end > max_end) max_end = plan->placements[i].end;
  const double eps = 1e-7 + 1e-10 * max_end;
  if (plan->ntasks != tasks->n)
    return tsr_status_make(TSR_FAILED_PRECONDITION, "plan has %d tasks, the task set %d", plan->ntasks, tasks->n);
  if (tasks->nsizes != m->nsizes || memcmp(tasks->sizes, m->sizes, sizeof(m->sizes)))
    return tsr_status_make(TSR_FAILED_PRECONDITION, "task set made for another GPU model");
  size_t cap = (size_t)plan->ninstances * 2 + (size_t)plan->ntasks + 1;
  iv = malloc(sizeof(*iv) * cap);
  if (!iv) return tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory");

  /* 1. instances are tree nodes; reconfigurations take their listed times */
  for (int x = 0; x < plan->ninstances; x++) {
    const tsr_mig_instance_t *in = &plan->instances[x];
    if (in->node < 0 || in->node >= m->nnodes) TSR__FAIL("instance %d: no node %d", x, in->node);
    const tsr_mig_node_t *nd = &m->nodes[in->node];
    if (in->size != nd->size || in->mask != nd->mask)
      TSR__FAIL("instance %d: size/slices do not match node %d", x, in->node);
    int k = -1;
    for (int q = 0; q < m->nsizes; q++)
      if (m->sizes[q] == in->size) k = q;
    if (k < 0) TSR__FAIL("instance %d: size %d unknown to %s", x, in->size, m->name);
    double c = plan->reconfig_free ? 0 : m->create_s[k];
    double d = plan->reconfig_free ? 0 : m->destroy_s[k];
    if (!(in->create_start >= -eps)) TSR__FAIL("instance %d created before time 0", x);
    if (fabs(in->create_end - in->create_start - c) > eps)
      TSR__FAIL("instance %d: creation takes %.9g s, %s lists %.9g s", x, in->create_end - in->create_start, m->name,
                c);
    if (in->destroy_start >= 0 || in->destroy_end >= 0) {
      if (fabs(in->destroy_end - in->destroy_start - d) > eps)
        TSR__FAIL("instance %d: destruction takes %.9g s, %s lists %.9g s", x, in->destroy_end - in->destroy_start,
                  m->name, d);
      if (in->destroy_start < in->create_end - eps) TSR__FAIL("instance %d destroyed before it was created", x);
    }
  }

  /* 2. creations and destructions one at a time */
  int nv = 0;
  for (int x = 0; x < plan->ninstances; x++) {
    const tsr_mig_instance_t *in = &plan->instances[x];
    if (in->create_end - in->create_start > eps) iv[nv++] = (tsr__iv_t){in->create_start, in->create_end, x};
    if (in->destroy_start >= 0 && in->destroy_end - in->destroy_start > eps)
      iv[nv++] = (tsr__iv_t){in->destroy_start, in->destroy_end, x};
  }
  qsort(iv, (size_t)nv, sizeof(*iv), tsr__cmp_iv);
  for (int v = 1; v < nv; v++)
    if (iv[v].s < iv[v - 1].e - eps)
      TSR__FAIL("reconfigurations overlap: instance %d at %.6f s while instance %d until %.6f s", iv[v].who, iv[v].s,
                iv[v - 1].who, iv[v - 1].e);

  /* 3. instances over the same slice never live at the same time, so the
   * live ones are always pairwise disjoint tree nodes: a valid partition */
  for (int s = 0; s < m->nslices; s++) {
    nv = 0;
    for (int x = 0; x < plan->ninstances; x++) {
      const tsr_mig_instance_t *in = &plan->instances[x];
      if (!(in->mask >> s & 1u)) continue;
      double end = in->destroy_end >= 0 ? in->destroy_end : INFINITY;
      iv[nv++] = (tsr__iv_t){in->create_start, end, x};
    }
    qsort(iv, (size_t)nv, sizeof(*iv), tsr__cmp_iv);
    for (int v = 1; v < nv; v++)
      if (iv[v].s < iv[v - 1].e - eps)
        TSR__FAIL("slice %d: instances %d and %d live at the same time (%.6f s)", s, iv[v - 1].who, iv[v].who, iv[v].s);
  }

  /* 4. every task once, for its time, on a live instance of its size */
  for (int i = 0; i < plan->ntasks; i++) {
    const tsr_mig_placement_t *p = &plan->placements[i];
    if (p->task != i) TSR__FAIL("placement %d is for task %d", i, p->task);
    if (p->instance < 0 || p->instance >= plan->ninstances) TSR__FAIL("task '%s' is not placed", tasks->names[i]);
    const tsr_mig_instance_t *in = &plan->instances[p->instance];
    if (p->size != in->size)
      TSR__FAIL("task '%s' given %d slices but placed on a %d-slice instance", tasks->names[i], p->size, in->size);
    int k = -1;
    for (int q = 0; q < tasks->nsizes; q++)
      if (tasks->sizes[q] == p->size) k = q;
    double t = k >= 0 ? tasks->times[(size_t)i * tasks->nsizes + k] : INFINITY;
    if (!isfinite(t)) TSR__FAIL("task '%s' cannot run on %d slices", tasks->names[i], p->size);
    if (fabs(p->end - p->start - t) > eps)
      TSR__FAIL("task '%s' runs %.9g s, its time on %d slices is %.9g s", tasks->names[i], p->end - p->start, p->size,
                t);
    if (p->start < in->create_end - eps)
      TSR__FAIL("task '%s' starts at %.6f s, before its instance exists (%.6f s)", tasks->names[i], p->start,
                in->create_end);
    if (in->destroy_start >= 0 && p->end > in->destroy_start + eps)
      TSR__FAIL("task '%s' ends at %.6f s, after its instance's destruction began (%.6f s)", tasks->names[i], p->end,
                in->destroy_start);
  }
  /* no instance runs two tasks at once */
  nv = 0;
  for (int i = 0; i < plan->ntasks; i++) iv[nv++] = (tsr__iv_t){plan->placements[i].start, plan->placements[i].end, i};
  qsort(iv, (size_t)nv, sizeof(*iv), tsr__cmp_iv);
  {
    double *last_end = malloc(sizeof(double) * (size_t)(plan->ninstances ? plan->ninstances : 1));
    int *last_task = malloc(sizeof(int) * (size_t)(plan->ninstances ? plan->ninstances : 1));
    if (!last_end || !last_task) {
      free(last_end);
      free(last_task);
      TSR__FAIL("out of memory");
    }
    for (int x = 0; x < plan->ninstances; x++) last_end[x] = -INFINITY, last_task[x] = -1;
    for (int v = 0; v < nv; v++) {
      int x = plan->placements[iv[v].who].instance;
      if (iv[v].s < last_end[x] - eps) {
        int a = last_task[x], b = iv[v].who;
        free(last_end);
        free(last_task);
        TSR__FAIL("tasks '%s' and '%s' overlap on instance %d", tasks->names[a], tasks->names[b], x);
      }
      if (iv[v].e > last_end[x]) {
        last_end[x] = iv[v].e;
        last_task[x] = iv[v].who;
      }
    }
    free(last_end);
    free(last_task);
  }
  if (fabs(plan->makespan - max_end) > eps)
    TSR__FAIL("makespan %.9g s, but the last task ends at %.9g s", plan->makespan, max_end);
out:
  free(iv);
  return st;
}
