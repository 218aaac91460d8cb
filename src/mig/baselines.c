/* mig/baselines.c: FixPart(P), FixPartBest and MISO-opt (Section 6.5). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "mig/internal.h"

tsr_status_t tsr_mig_fixpart_plan(const tsr_mig_model_t *m, const tsr_mig_tasks_t *T, uint32_t set,
                                  tsr_mig_plan_t **out_plan) {
  *out_plan = NULL;
  char part[64];
  tsr_mig_model_format_partition(m, set, part, sizeof(part));
  char name[96];
  snprintf(name, sizeof(name), "FixPart(%s)", part);
  tsr_mig_plan_t *p;
  TSR_RETURN_IF_ERROR(tsr_plan_new(m, name, T->n, &p));
  p->reconfig_free = true;
  int inst_of[TSR_MIG_MAX_NODES];
  double free_at[TSR_MIG_MAX_NODES];
  int nodes[TSR_MIG_MAX_NODES], nn = 0;
  for (int s = 0; s < m->nslices; s++) /* left to right */
    for (int j = 0; j < m->nnodes; j++)
      if ((set >> j & 1u) && m->nodes[j].first_slice == s) nodes[nn++] = j;
  for (int q = 0; q < nn; q++) {
    tsr_mig_instance_t in = {.node = nodes[q],
                             .size = m->nodes[nodes[q]].size,
                             .mask = m->nodes[nodes[q]].mask,
                             .destroy_start = -1,
                             .destroy_end = -1};
    inst_of[q] = tsr_plan_add_instance(p, &in);
    free_at[q] = 0;
    if (inst_of[q] < 0) {
      tsr_mig_plan_free(p);
      return tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory");
    }
  }
  for (int i = 0; i < T->n; i++) {
    int best = -1;
    for (int q = 0; q < nn; q++) {
      int k = tsr_mig_model_size_index(m, m->nodes[nodes[q]].size);
      if (isinf(tsr_mig_tasks_time(T, i, k))) continue;
      if (best < 0 || free_at[q] < free_at[best]) best = q;
    }
    if (best < 0) {
      tsr_mig_plan_free(p);
      return tsr_status_make(TSR_FAILED_PRECONDITION, "%s: task '%s' can run on none of its instances", name,
                             T->names[i]);
    }
    int k = tsr_mig_model_size_index(m, m->nodes[nodes[best]].size);
    tsr_mig_placement_t *pl = &p->placements[i];
    pl->instance = inst_of[best];
    pl->size = m->nodes[nodes[best]].size;
    pl->start = free_at[best];
    pl->end = pl->start + tsr_mig_tasks_time(T, i, k);
    free_at[best] = pl->end;
  }
  tsr_plan_finish(p, T);
  *out_plan = p;
  return NULL;
}

tsr_status_t tsr_mig_fixpart_best_plan(const tsr_mig_model_t *m, const tsr_mig_tasks_t *T, tsr_mig_plan_t **out_plan) {
  *out_plan = NULL;
  uint32_t sets[256];
  int ns = tsr_mig_model_partitions(m, sets, 256);
  if (ns > 256) ns = 256;
  tsr_mig_plan_t *best = NULL;
  for (int q = 0; q < ns; q++) {
    tsr_mig_plan_t *p;
    tsr_status_t st = tsr_mig_fixpart_plan(m, T, sets[q], &p);
    if (st) {
      if (tsr_status_code(st) != TSR_FAILED_PRECONDITION) {
        tsr_mig_plan_free(best);
        return st;
      }
      tsr_status_free(st);
      continue;
    }
    if (!best || p->makespan < best->makespan - TSR__EPS) {
      tsr_mig_plan_free(best);
      best = p;
    } else {
      tsr_mig_plan_free(p);
    }
  }
  if (!best) return tsr_status_make(TSR_FAILED_PRECONDITION, "no fixed partition can run every task");
  char name[sizeof(best->algorithm) + 16];
  snprintf(name, sizeof(name), "FixPartBest=%s", best->algorithm);
  memcpy(best->algorithm, name, sizeof(best->algorithm) - 1);
  best->algorithm[sizeof(best->algorithm) - 1] = 0;
  *out_plan = best;
  return NULL;
}

/* ---- MISO-opt ----------------------------------------------------------- */

typedef struct {
  const tsr_mig_model_t *m;
  const tsr_mig_tasks_t *T;
  int first, count; /* tasks first .. first+count-1 */
  int nodes[TSR_MIG_MAX_NODES], nn;
  bool taken[TSR_MIG_MAX_NODES];
  int cur[8], best[8];
  double best_sum;
} tsr__miso_t;

static double tsr__speedup(const tsr_mig_tasks_t *T, int i, int k) {
  double ref = INFINITY;
  for (int q = 0; q < T->nsizes && isinf(ref); q++) ref = tsr_mig_tasks_time(T, i, q);
  double t = tsr_mig_tasks_time(T, i, k);
  if (isinf(t)) return -INFINITY;
  return t > 0 ? ref / t : (ref > 0 ? 1e9 : 1);
}

/* Best assignment of tasks first.. to distinct instances of the partition. */
static void tsr__miso_search(tsr__miso_t *S, int depth, double sum) {
  if (depth == S->count) {
    if (sum > S->best_sum + TSR__EPS) {
      S->best_sum = sum;
      memcpy(S->best, S->cur, sizeof(S->cur));
    }
    return;
  }
  int tried_sizes = 0; /* instances of one size are interchangeable */
  for (int q = 0; q < S->nn; q++) {
    if (S->taken[q]) continue;
    int size = S->m->nodes[S->nodes[q]].size;
    if (tried_sizes >> size & 1) continue;
    tried_sizes |= 1 << size;
    double sp = tsr__speedup(S->T, S->first + depth, tsr_mig_model_size_index(S->m, size));
    if (isinf(sp)) continue;
    S->taken[q] = true;
    S->cur[depth] = q;
    tsr__miso_search(S, depth + 1, sum + sp);
    S->taken[q] = false;
  }
}

tsr_status_t tsr_mig_miso_plan(const tsr_mig_model_t *m, const tsr_mig_tasks_t *T, tsr_mig_plan_t **out_plan) {
  *out_plan = NULL;
  uint32_t sets[256];
  int ns = tsr_mig_model_partitions(m, sets, 256);
  if (ns > 256) ns = 256;
  tsr_mig_plan_t *p;
  TSR_RETURN_IF_ERROR(tsr_plan_new(m, "MISO-opt", T->n, &p));
  p->reconfig_free = true;
  double t0 = 0;
  int next = 0;
  while (next < T->n) {
    double best_sum = -INFINITY;
    int best_set = -1, best_assign[8] = {0}, best_count = 0;
    int best_nodes[TSR_MIG_MAX_NODES];
    for (int q = 0; q < ns; q++) {
      tsr__miso_t S = {.m = m, .T = T, .first = next};
      for (int s = 0; s < m->nslices; s++)
        for (int j = 0; j < m->nnodes; j++)
          if ((sets[q] >> j & 1u) && m->nodes[j].first_slice == s) S.nodes[S.nn++] = j;
      S.count = T->n - next < S.nn ? T->n - next : S.nn;
      if (S.count > 8) S.count = 8;
      S.best_sum = -INFINITY;
      tsr__miso_search(&S, 0, 0);
      if (S.best_sum > best_sum + TSR__EPS) {
        best_sum = S.best_sum;
        best_set = q;
        best_count = S.count;
        memcpy(best_assign, S.best, sizeof(best_assign));
        memcpy(best_nodes, S.nodes, sizeof(best_nodes));
      }
    }
    if (best_set < 0) {
      tsr_mig_plan_free(p);
      return tsr_status_make(TSR_FAILED_PRECONDITION, "MISO-opt: no partition can run task '%s' with the ones after it",
                             T->names[next]);
    }
    double t1 = t0;
    int first_inst = p->ninstances;
    for (int d = 0; d < best_count; d++) {
      int node = best_nodes[best_assign[d]];
      tsr_mig_instance_t in = {
          .node = node, .size = m->nodes[node].size, .mask = m->nodes[node].mask, .create_start = t0, .create_end = t0};
      int x = tsr_plan_add_instance(p, &in);
      if (x < 0) {
        tsr_mig_plan_free(p);
        return tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory");
      }
      int k = tsr_mig_model_size_index(m, m->nodes[node].size);
      tsr_mig_placement_t *pl = &p->placements[next + d];
      pl->instance = x;
      pl->size = m->nodes[node].size;
      pl->start = t0;
      pl->end = t0 + tsr_mig_tasks_time(T, next + d, k);
      if (pl->end > t1) t1 = pl->end;
    }
    /* the round ends with its last task; its instances go then */
    for (int x = first_inst; x < p->ninstances; x++) p->instances[x].destroy_start = p->instances[x].destroy_end = t1;
    next += best_count;
    t0 = t1;
  }
  tsr_plan_finish(p, T);
  *out_plan = p;
  return NULL;
}
