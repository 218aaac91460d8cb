/* mig/far.c: FAR (Family of Allocations and Repartitioning), phases 1-3,
 * the --effort search, and multi-batch concatenation. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/array.h"
#include "mig/internal.h"

/* ---- phase 1: the family of allocations --------------------------------- */

/* The size index > `above` (or any when above < 0) that minimises
 * s * t(s) among the sizes the task can run on; -1 if none. When sizes tie
 * on that area (common: a scalability factor clipped at 0 makes a step
 * exactly linear, 2 * t(2) = t(1)), the smallest of them, or with `larger`
 * the largest (the authors' loop). Neither rule is better on every batch,
 * so tsr_far_batch tries both. */
static int tsr__min_area_size(const tsr_mig_tasks_t *T, int task, int above, bool larger) {
  int best = -1;
  double best_area = INFINITY;
  for (int k = above + 1; k < T->nsizes; k++) {
    double t = tsr_mig_tasks_time(T, task, k);
    if (isinf(t)) continue;
    double a = T->sizes[k] * t;
    bool tie = best >= 0 && fabs(a - best_area) <= 1e-12 * best_area;
    if (tie ? larger : a < best_area) {
      if (!tie) best_area = a;
      best = k;
    }
  }
  return best;
}

/* Whether any task of the batch has a tie between sizes at the start of its
 * family or on the way up it: if none does, both rules give one family. */
static bool tsr__rules_differ(const tsr_mig_tasks_t *T, const int *ids, int n) {
  for (int i = 0; i < n; i++)
    for (int above = -1; above < T->nsizes; above++) {
      int a = tsr__min_area_size(T, ids[i], above, false);
      if (a != tsr__min_area_size(T, ids[i], above, true)) return true;
      if (a < 0) break;
    }
  return false;
}

/* ---- phase 2: Algorithm 1 ----------------------------------------------- */

typedef struct {
  const tsr_mig_model_t *m;
  const tsr_mig_tasks_t *T;
  const int *ids;
  int n;
  int node_k[TSR_MIG_MAX_NODES];
  uint32_t subtree_sizes[TSR_MIG_MAX_NODES]; /* bit k: size index k in the subtree */
  int kids[TSR_MIG_MAX_NODES][TSR_MIG_MAX_NODES];
  int nkids[TSR_MIG_MAX_NODES];
  int *lpt; /* per size index: batch tasks sorted by time on that size, longest first */
} tsr__alg1_t;

typedef struct {
  double t;
  int i;
} tsr__ti_t;

static int tsr__cmp_ti(const void *a, const void *b) {
  const tsr__ti_t *x = a, *y = b;
  if (x->t != y->t) return x->t > y->t ? -1 : 1;
  return x->i < y->i ? -1 : (x->i > y->i);
}

TSR_MUST_USE static tsr_status_t tsr__alg1_init(tsr__alg1_t *A, const tsr_mig_model_t *m, const tsr_mig_tasks_t *T,
                                                const int *ids, int n) {
  memset(A, 0, sizeof(*A));
  A->m = m;
  A->T = T;
  A->ids = ids;
  A->n = n;
  for (int j = 0; j < m->nnodes; j++) A->node_k[j] = tsr_mig_model_size_index(m, m->nodes[j].size);
  for (int j = m->nnodes - 1; j >= 0; j--) {
    A->subtree_sizes[j] |= 1u << A->node_k[j];
    int p = m->nodes[j].parent;
    if (p >= 0) A->subtree_sizes[p] |= A->subtree_sizes[j];
  }
  for (int j = 0; j < m->nnodes; j++) {
    int p = m->nodes[j].parent;
    if (p >= 0) A->kids[p][A->nkids[p]++] = j;
  }
  A->lpt = malloc(sizeof(int) * (size_t)(n ? n : 1) * (size_t)m->nsizes);
  tsr__ti_t *tmp = malloc(sizeof(*tmp) * (size_t)(n ? n : 1));
  if (!A->lpt || !tmp) {
    free(A->lpt);
    free(tmp);
    return tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory");
  }
  for (int k = 0; k < m->nsizes; k++) {
    for (int i = 0; i < n; i++) tmp[i] = (tsr__ti_t){tsr_mig_tasks_time(T, ids[i], k), i};
    qsort(tmp, (size_t)n, sizeof(*tmp), tsr__cmp_ti);
    for (int i = 0; i < n; i++) A->lpt[(size_t)k * n + i] = tmp[i].i;
  }
  free(tmp);
  return NULL;
}

/* Algorithm 1 for allocation `alloc` (size index per batch task): fills
 * node_of. Its own clock decides the order; the times used afterwards come
 * from the engine. Instances that free at the same moment (siblings made
 * together) are taken left to right, or right to left with `right_first`:
 * with one reconfiguration at a time, the one created first starts first,
 * and which order is better depends on the batch (the authors' heap takes
 * them in its own order), so phase 2 tries both. */
static void tsr__alg1_run(const tsr__alg1_t *A, const int *alloc, bool right_first, int *node_of) {
  const tsr_mig_model_t *m = A->m;
  int remaining[TSR_MIG_MAX_SIZES] = {0}, pos[TSR_MIG_MAX_SIZES] = {0};
  for (int i = 0; i < A->n; i++) remaining[alloc[i]]++;
  double end[TSR_MIG_MAX_NODES];
  bool active[TSR_MIG_MAX_NODES] = {0}, has[TSR_MIG_MAX_NODES] = {0};
  double reconfig_end = 0;
  active[0] = true;
  end[0] = 0;
  for (;;) {
    int I = -1;
    for (int j = 0; j < m->nnodes; j++)
      if (active[j] && (I < 0 || end[j] < end[I] || (right_first && end[j] == end[I]))) I = j;
    if (I < 0) break;
    int k = A->node_k[I];
    if (remaining[k] > 0) {
      if (!has[I]) { /* give time for the creation */
        reconfig_end = (reconfig_end > end[I] ? reconfig_end : end[I]) + m->create_s[k];
        end[I] = reconfig_end;
        has[I] = true;
      }
      /* the longest unscheduled task allocated to this size */
      const int *order = &A->lpt[(size_t)k * A->n];
      while (alloc[order[pos[k]]] != k) pos[k]++;
      int j = order[pos[k]++];
      node_of[j] = I;
      end[I] += tsr_mig_tasks_time(A->T, A->ids[j], k);
      remaining[k]--;
      continue;
    }
    active[I] = false;
    bool below = false;
    for (int q = 0; q < m->nsizes; q++)
      if ((A->subtree_sizes[I] >> q & 1u) && remaining[q]) below = true;
    if (!below) continue; /* nothing left that this subtree could run */
    if (has[I]) {         /* give time for the destruction */
      reconfig_end = (reconfig_end > end[I] ? reconfig_end : end[I]) + m->destroy_s[k];
      end[I] = reconfig_end;
    }
    for (int c = 0; c < A->nkids[I]; c++) {
      int C = A->kids[I][c];
      active[C] = true;
      has[C] = false;
      end[C] = end[I];
    }
  }
}

/* ---- phase 3: Algorithm 2 ----------------------------------------------- */

static bool tsr__better(const tsr__timing_t *a, const tsr__timing_t *b) {
  if (a->makespan < b->makespan - TSR__EPS) return true;
  return a->makespan <= b->makespan + TSR__EPS && a->ncritical < b->ncritical;
}

typedef struct {
  tsr__engine_t *e;
  tsr__batch_t *b;
  const tsr__state_t *st;
  tsr__timing_t cur, trial;
  int node_k[TSR_MIG_MAX_NODES];
} tsr__ref_t;

static double tsr__node_end(const tsr_mig_model_t *m, const tsr__timing_t *tm, int node) {
  double v = 0;
  for (int s = 0; s < m->nslices; s++)
    if ((m->nodes[node].mask >> s & 1u) && tm->slice_end[s] > v) v = tm->slice_end[s];
  return v;
}

static bool tsr__try(tsr__ref_t *R) {
  tsr_engine_eval(R->e, R->b, R->st, &R->trial);
  if (tsr__better(&R->trial, &R->cur)) {
    double *keep = R->cur.start;
    R->cur = R->trial;
    R->trial.start = keep;
    return true;
  }
  return false;
}

static double tsr__bt(const tsr__ref_t *R, int i, int node) {
  return tsr_mig_tasks_time(R->b->tasks, R->b->ids[i], R->node_k[node]);
}

/* Tries a move of a task of I to `alt`, then a swap; the paper's choice of
 * candidates (closest to half the margin) only, or every candidate in order
 * of closeness when `wide`. Returns 1 for a move made, 2 for a swap, 0. */
static int tsr__try_pair(tsr__ref_t *R, int I, int alt, bool wide) {
  const tsr_mig_model_t *m = R->b->model;
  int n = R->b->n;
  int *node_of = R->b->node_of;
  double margin = R->cur.makespan - tsr__node_end(m, &R->cur, alt);
  if (margin <= TSR__EPS) return 0;
  /* move: a task of I shorter than the margin, closest to half of it */
  for (;;) {
    int best = -1;
    double bestd = INFINITY;
    for (int i = 0; i < n; i++) {
      if (node_of[i] != I) continue;
      double t = tsr__bt(R, i, I);
      if (!(t < margin - TSR__EPS)) continue;
      double d = fabs(t - margin / 2);
      if (d < bestd) {
        bestd = d;
        best = i;
      }
    }
    if (best < 0) break;
    node_of[best] = alt;
    if (tsr__try(R)) return 1;
    node_of[best] = I;
    if (!wide) break;
    /* wide: the other candidates, in input order */
    for (int i = 0; i < n; i++) {
      if (node_of[i] != I || i == best) continue;
      if (!(tsr__bt(R, i, I) < margin - TSR__EPS)) continue;
      node_of[i] = alt;
      if (tsr__try(R)) return 1;
      node_of[i] = I;
    }
    break;
  }
  /* swap: Tk of I and a shorter Tj of alt, 0 < tk - tj < margin, the
   * difference closest to half the margin */
  int bk = -1, bj = -1;
  double bestd = INFINITY;
  for (int k = 0; k < n; k++) {
    if (node_of[k] != I) continue;
    double tk = tsr__bt(R, k, I);
    for (int j = 0; j < n; j++) {
      if (node_of[j] != alt) continue;
      double diff = tk - tsr__bt(R, j, alt);
      if (!(diff > TSR__EPS && diff < margin - TSR__EPS)) continue;
      if (wide) {
        node_of[k] = alt;
        node_of[j] = I;
        if (tsr__try(R)) return 2;
        node_of[k] = I;
        node_of[j] = alt;
        continue;
      }
      double d = fabs(diff - margin / 2);
      if (d < bestd) {
        bestd = d;
        bk = k;
        bj = j;
      }
    }
  }
  if (bk >= 0) {
    node_of[bk] = alt;
    node_of[bj] = I;
    if (tsr__try(R)) return 2;
    node_of[bk] = I;
    node_of[bj] = alt;
  }
  return 0;
}

void tsr_refine(tsr__engine_t *e, tsr__batch_t *b, const tsr__state_t *st, int max_iter, bool wide, int *out_moves,
                int *out_swaps) {
  const tsr_mig_model_t *m = b->model;
  int moves = 0, swaps = 0;
  tsr__ref_t R = {.e = e, .b = b, .st = st};
  R.cur.start = malloc(sizeof(double) * (size_t)(b->n ? b->n : 1));
  R.trial.start = malloc(sizeof(double) * (size_t)(b->n ? b->n : 1));
  if (!R.cur.start || !R.trial.start) goto done;
  for (int j = 0; j < m->nnodes; j++) R.node_k[j] = tsr_mig_model_size_index(m, m->nodes[j].size);
  int used[TSR_MIG_MAX_NODES];
  tsr_engine_eval(e, b, st, &R.cur);
  for (int iter = 0; iter < max_iter; iter++) {
    memset(used, 0, sizeof(used));
    for (int i = 0; i < b->n; i++) used[b->node_of[i]]++;
    /* open the leaves over the critical slices */
    int Q[TSR_MIG_MAX_NODES * 2], qh = 0, qt = 0;
    bool opened[TSR_MIG_MAX_NODES] = {0};
    for (int s = 0; s < m->nslices; s++) {
      if (R.cur.slice_end[s] < R.cur.makespan - TSR__EPS) continue;
      for (int j = 0; j < m->nnodes; j++) {
        bool leaf = true;
        for (int c = 0; c < m->nnodes; c++)
          if (m->nodes[c].parent == j) leaf = false;
        if (leaf && (m->nodes[j].mask >> s & 1u) && !opened[j]) {
          opened[j] = true;
          Q[qt++] = j;
        }
      }
    }
    int done_op = 0;
    while (qh < qt && !done_op) {
      int I = Q[qh++];
      if (m->nodes[I].parent < 0) break; /* the root: no slice can be relieved */
      if (used[I]) {
        /* the alternative instances of the same size, least loaded first */
        int alts[TSR_MIG_MAX_NODES], na = 0;
        for (int j = 0; j < m->nnodes; j++)
          if (j != I && m->nodes[j].size == m->nodes[I].size) alts[na++] = j;
        for (int x = 1; x < na; x++)
          for (int y = x; y > 0 && tsr__node_end(m, &R.cur, alts[y]) < tsr__node_end(m, &R.cur, alts[y - 1]) - TSR__EPS;
               y--) {
            int t = alts[y];
            alts[y] = alts[y - 1];
            alts[y - 1] = t;
          }
        for (int a = 0; a < (wide ? na : (na > 0)) && !done_op; a++) done_op = tsr__try_pair(&R, I, alts[a], wide);
      }
      if (done_op) break;
      int P = m->nodes[I].parent;
      if (!opened[P]) {
        opened[P] = true;
        Q[qt++] = P;
      }
    }
    if (!done_op) break;
    if (done_op == 1)
      moves++;
    else
      swaps++;
  }
done:
  free(R.cur.start);
  free(R.trial.start);
  if (out_moves) *out_moves = moves;
  if (out_swaps) *out_swaps = swaps;
}

/* ---- one batch ---------------------------------------------------------- */

typedef struct {
  double makespan;
  int *node_of;
} tsr__cand_t;

static double tsr__now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The --effort search: refines the best few allocations with the wide
 * neighbourhood, then restarts from random perturbations of the best. */
uint64_t tsr_mig_effort_steps(double effort_s, uint64_t effort_steps) {
  if (effort_steps > 0) return effort_steps;
  if (!(effort_s > 0)) return 0;
  /* to the nearest step (a product like 29 / rate * rate lands a hair
   * above 29, so rounding up would count a step more), at least one */
  double steps = round(effort_s * TSR_MIG_EFFORT_STEPS_PER_S);
  if (steps < 1) return 1;
  return steps >= 1e18 ? UINT64_C(1000000000000000000) : (uint64_t)steps;
}

/* Whether the search may take another step: within its step budget, and
 * within its wall-clock cap when it has one. */
static bool tsr__budget_left(uint64_t used, uint64_t steps, double deadline) {
  return used < steps && (isinf(deadline) || tsr__now() < deadline);
}

static void tsr__effort(tsr__engine_t *e, tsr__batch_t *b, const tsr__state_t *st, const tsr__cand_t *cands, int ncands,
                        const tsr_mig_far_options_t *opt, int *best_node_of, double *best_ms) {
  uint64_t steps = tsr_mig_effort_steps(opt->effort_s, opt->effort_steps), used = 0;
  double deadline = opt->effort_steps > 0 && opt->effort_s > 0 ? tsr__now() + opt->effort_s : INFINITY;
  int n = b->n;
  const tsr_mig_model_t *m = b->model;
  uint64_t rng = opt->seed ? opt->seed : 0x5eed;
  int *work = malloc(sizeof(int) * (size_t)(n ? n : 1));
  double *start = malloc(sizeof(double) * (size_t)(n ? n : 1));
  if (!work || !start) goto out;
  int *saved = b->node_of;
  b->node_of = work;
  tsr__timing_t tm;
  tm.start = start;
  int max_iter = opt->max_iterations > 0 ? opt->max_iterations : 1000;
  /* 1. more allocations refined, wide neighbourhood */
  for (int c = 0; c < ncands && tsr__budget_left(used, steps, deadline); c++, used++) {
    memcpy(work, cands[c].node_of, sizeof(int) * (size_t)n);
    tsr_refine(e, b, st, max_iter, true, NULL, NULL);
    tsr_engine_eval(e, b, st, &tm);
    if (tm.makespan < *best_ms - TSR__EPS) {
      *best_ms = tm.makespan;
      memcpy(best_node_of, work, sizeof(int) * (size_t)n);
    }
  }
  /* 2. restarts: perturb the best (move a few tasks to random nodes of any
   * size they can run on), refine, keep if better */
  for (; n > 0 && tsr__budget_left(used, steps, deadline); used++) {
    memcpy(work, best_node_of, sizeof(int) * (size_t)n);
    int kicks = 1 + (int)(tsr__rand_next(&rng) % 3);
    for (int q = 0; q < kicks; q++) {
      int i = (int)(tsr__rand_next(&rng) % (uint64_t)n);
      for (int tries = 0; tries < 8; tries++) {
        int j = (int)(tsr__rand_next(&rng) % (uint64_t)m->nnodes);
        int k = tsr_mig_model_size_index(m, m->nodes[j].size);
        if (!isinf(tsr_mig_tasks_time(b->tasks, b->ids[i], k))) {
          work[i] = j;
          break;
        }
      }
    }
    tsr_refine(e, b, st, max_iter, tsr__rand_next(&rng) & 1, NULL, NULL);
    tsr_engine_eval(e, b, st, &tm);
    if (tm.makespan < *best_ms - TSR__EPS) {
      *best_ms = tm.makespan;
      memcpy(best_node_of, work, sizeof(int) * (size_t)n);
    }
  }
  b->node_of = saved;
out:
  free(work);
  free(start);
}

static int tsr__cmp_cand(const void *a, const void *b) {
  const tsr__cand_t *x = a, *y = b;
  return x->makespan < y->makespan ? -1 : (x->makespan > y->makespan);
}

/* What one tie rule gives: phases 1-2 (every allocation of the family,
 * scheduled by Algorithm 1, the best kept) and phase 3. */
typedef struct {
  tsr__alg1_t *A;
  tsr__engine_t *e;
  tsr__batch_t *b;
  const tsr__state_t *state;
  const tsr_mig_far_options_t *opt;
  int *alloc, *best;
  tsr__timing_t *tm;
  tsr__cand_t *cands; /* the --effort search's candidates (both rules') */
  int ncands;
  size_t capcands;
} tsr__family_t;

TSR_MUST_USE static tsr_status_t tsr__family(tsr__family_t *F, bool larger, bool right_first, tsr__far_result_t *r) {
  const tsr_mig_tasks_t *tasks = F->b->tasks;
  const int *ids = F->b->ids;
  int n = F->b->n;
  size_t cnt = n ? (size_t)n : 1;
  int *node_of = F->b->node_of;
  for (int i = 0; i < n; i++) F->alloc[i] = tsr__min_area_size(tasks, ids[i], -1, larger);
  double best_ms = INFINITY;
  for (;;) {
    r->nallocations++;
    tsr__alg1_run(F->A, F->alloc, right_first, node_of);
    tsr_engine_eval(F->e, F->b, F->state, F->tm);
    if (F->tm->makespan < best_ms - TSR__EPS) {
      best_ms = F->tm->makespan;
      memcpy(F->best, node_of, sizeof(int) * cnt);
    }
    if (F->opt->effort_s > 0 || F->opt->effort_steps > 0) {
      tsr__cand_t *ncs = tsr_array_grow(F->cands, &F->capcands, (size_t)F->ncands + 1, sizeof(*F->cands), 16);
      if (!ncs) return tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory");
      F->cands = ncs;
      F->cands[F->ncands].makespan = F->tm->makespan;
      F->cands[F->ncands].node_of = malloc(sizeof(int) * cnt);
      if (!F->cands[F->ncands].node_of) return tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory");
      memcpy(F->cands[F->ncands++].node_of, node_of, sizeof(int) * cnt);
    }
    /* the next allocation: grow the longest task(s) */
    double mx = -1;
    for (int i = 0; i < n; i++) {
      double t = tsr_mig_tasks_time(tasks, ids[i], F->alloc[i]);
      if (t > mx) mx = t;
    }
    bool grew = false, stuck = false;
    for (int i = 0; i < n; i++) {
      if (tsr_mig_tasks_time(tasks, ids[i], F->alloc[i]) != mx) continue;
      int k = tsr__min_area_size(tasks, ids[i], F->alloc[i], larger);
      if (k < 0)
        stuck = true;
      else {
        F->alloc[i] = k;
        grew = true;
      }
    }
    if (stuck || !grew) break;
  }
  r->phase2 = best_ms;
  /* phase 3 */
  memcpy(node_of, F->best, sizeof(int) * cnt);
  if (!F->opt->no_refine)
    tsr_refine(F->e, F->b, F->state, F->opt->max_iterations > 0 ? F->opt->max_iterations : 1000, false, &r->moves,
               &r->swaps);
  tsr_engine_eval(F->e, F->b, F->state, F->tm);
  r->final = F->tm->makespan;
  return NULL;
}

tsr_status_t tsr_far_batch(const tsr_mig_model_t *model, const tsr_mig_tasks_t *tasks, const int *ids, int n,
                           const tsr__state_t *state, bool reversed, const tsr_mig_far_options_t *opt,
                           tsr__far_result_t *res) {
  memset(res, 0, sizeof(*res));
  tsr_mig_far_options_t defaults = {0};
  if (!opt) opt = &defaults;
  size_t cnt = n ? (size_t)n : 1;
  for (int i = 0; i < n; i++)
    if (tsr__min_area_size(tasks, ids[i], -1, false) < 0)
      return tsr_status_make(TSR_INVALID_ARGUMENT, "task '%s' can run on no instance size", tasks->names[ids[i]]);
  tsr__alg1_t A;
  TSR_RETURN_IF_ERROR(tsr__alg1_init(&A, model, tasks, ids, n));
  tsr__engine_t *e = NULL;
  int *alloc = malloc(sizeof(int) * cnt);
  int *node_of = malloc(sizeof(int) * cnt);
  int *best = malloc(sizeof(int) * cnt);
  int *kept = malloc(sizeof(int) * cnt);
  double *start = malloc(sizeof(double) * cnt);
  tsr_status_t st = tsr_engine_new(n, &e);
  if (!st && (!alloc || !node_of || !best || !kept || !start)) st = tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory");
  tsr__batch_t b = {.model = model, .tasks = tasks, .n = n, .ids = ids, .node_of = node_of, .reversed = reversed};
  tsr__timing_t tm;
  tm.start = start;
  tsr__family_t F = {.A = &A, .e = e, .b = &b, .state = state, .opt = opt, .alloc = alloc, .best = best, .tm = &tm};
  /* phases 1-3 under each tie rule (when the rules differ on this batch)
   * and each order of siblings in phase 2; the best final plan kept, the
   * first tried on a tie (smaller size, left to right: the order of before) */
  bool rules[2] = {
      opt->tie != TSR_MIG_TIE_LARGER,
      opt->tie == TSR_MIG_TIE_LARGER || (opt->tie == TSR_MIG_TIE_BOTH && tsr__rules_differ(tasks, ids, n))};
  int tried = 0, nallocations = 0;
  for (int larger = 0; larger < 2 && !st; larger++)
    for (int right = 0; right < (opt->one_sibling_order ? 1 : 2) && !st && rules[larger]; right++) {
      tsr__far_result_t r = {0};
      st = tsr__family(&F, larger, right, &r);
      if (st) break;
      nallocations += r.nallocations;
      if (tried++ == 0 || r.final < res->final - TSR__EPS) {
        *res = r;
        memcpy(kept, node_of, sizeof(int) * cnt);
      }
    }
  if (st) goto out;
  res->nallocations = nallocations;
  memcpy(node_of, kept, sizeof(int) * cnt);
  double final_ms = res->final;
  if (F.ncands > 0) {
    qsort(F.cands, (size_t)F.ncands, sizeof(*F.cands), tsr__cmp_cand);
    tsr__effort(e, &b, state, F.cands, F.ncands < 8 ? F.ncands : 8, opt, node_of, &final_ms);
  }
  res->final = final_ms;
  res->node_of = node_of;
  node_of = NULL;
out:
  for (int c = 0; c < F.ncands; c++) free(F.cands[c].node_of);
  free(F.cands);
  free(A.lpt);
  tsr_engine_free(e);
  free(alloc);
  free(node_of);
  free(best);
  free(kept);
  free(start);
  return st;
}

tsr_status_t tsr_mig_far_plan(const tsr_mig_model_t *model, const tsr_mig_tasks_t *tasks,
                              const tsr_mig_far_options_t *options, tsr_mig_plan_t **out_plan) {
  *out_plan = NULL;
  if (tasks->nsizes != model->nsizes)
    return tsr_status_make(TSR_INVALID_ARGUMENT, "tasks were made for another GPU model");
  int n = tasks->n;
  int *ids = malloc(sizeof(int) * (size_t)(n ? n : 1));
  if (!ids) return tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory");
  for (int i = 0; i < n; i++) ids[i] = i;
  tsr__state_t state;
  tsr_state_init(&state);
  tsr__far_result_t res;
  tsr_status_t st = tsr_far_batch(model, tasks, ids, n, &state, false, options, &res);
  tsr_mig_plan_t *plan = NULL;
  tsr__engine_t *e = NULL;
  bool effort = options && tsr_mig_effort_steps(options->effort_s, options->effort_steps) > 0;
  if (!st) st = tsr_plan_new(model, effort ? "FAR+effort" : "FAR", n, &plan);
  if (!st) st = tsr_engine_new(n, &e);
  if (!st) {
    tsr__batch_t b = {.model = model, .tasks = tasks, .n = n, .ids = ids, .node_of = res.node_of};
    st = tsr_engine_commit(e, &b, &state, plan, 0);
  }
  tsr_engine_free(e);
  tsr_state_free(&state);
  free(ids);
  free(res.node_of);
  if (st) {
    tsr_mig_plan_free(plan);
    return st;
  }
  tsr_plan_finish(plan, tasks);
  plan->nallocations = res.nallocations;
  plan->phase2_makespan = res.phase2;
  plan->moves = res.moves;
  plan->swaps = res.swaps;
  *out_plan = plan;
  return NULL;
}

/* ---- multi-batch -------------------------------------------------------- */

struct tsr_mig_multi_s {
  tsr_mig_model_t model;
  tsr_mig_concat_t mode;
  tsr_mig_far_options_t opt;
  tsr__state_t state;
  tsr_mig_tasks_t *all;
  tsr_mig_plan_t *plan;
  int nbatches;
  bool broken; /* a batch failed half-joined: the plan can no longer be trusted */
};

tsr_status_t tsr_mig_multi_create(const tsr_mig_model_t *model, tsr_mig_concat_t mode,
                                  const tsr_mig_far_options_t *options, tsr_mig_multi_t **out_multi) {
  *out_multi = NULL;
  tsr_mig_multi_t *mb = calloc(1, sizeof(*mb));
  if (!mb) return tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory");
  mb->model = *model;
  mb->mode = mode;
  if (options) mb->opt = *options;
  tsr_state_init(&mb->state);
  tsr_status_t st = tsr_mig_tasks_create(model, 0, &mb->all);
  if (!st)
    st = tsr_plan_new(model,
                      mode == TSR_MIG_CONCAT_TRIVIAL   ? "FAR multi-batch (trivial)"
                      : mode == TSR_MIG_CONCAT_REVERSE ? "FAR multi-batch (reversed)"
                                                       : "FAR multi-batch (reversed+moves)",
                      0, &mb->plan);
  if (st) {
    tsr_mig_multi_free(mb);
    return st;
  }
  mb->plan->nbatches = 0;
  *out_multi = mb;
  return NULL;
}

void tsr_mig_multi_free(tsr_mig_multi_t *mb) {
  if (!mb) return;
  tsr_state_free(&mb->state);
  tsr_mig_tasks_free(mb->all);
  tsr_mig_plan_free(mb->plan);
  free(mb);
}

double tsr_mig_multi_makespan(const tsr_mig_multi_t *mb) { return mb->state.makespan; }

/* Drops a's tasks from index n on, with their copies. */
static void tsr__tasks_truncate(tsr_mig_tasks_t *a, int n) {
  for (int i = n; i < a->n; i++) {
    free(a->names[i]);
    free(a->commands[i]);
    a->names[i] = a->commands[i] = NULL;
  }
  a->n = n;
}

/* Appends copies of b's tasks to a in place. On failure a holds the tasks
 * it held before (its arrays may have grown). */
TSR_MUST_USE static tsr_status_t tsr__tasks_append(tsr_mig_tasks_t *a, const tsr_mig_tasks_t *b) {
  size_t n = (size_t)a->n + (size_t)b->n;
  char **nn = realloc(a->names, sizeof(char *) * (n ? n : 1));
  if (nn) a->names = nn;
  char **nc = realloc(a->commands, sizeof(char *) * (n ? n : 1));
  if (nc) a->commands = nc;
  double *nt = realloc(a->times, sizeof(double) * (n ? n : 1) * (size_t)a->nsizes);
  if (nt) a->times = nt;
  if (!nn || !nc || !nt) return tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory");
  int n0 = a->n;
  for (int i = 0; i < b->n; i++) {
    char *name = strdup(b->names[i]);
    char *command = b->commands[i] ? strdup(b->commands[i]) : NULL;
    if (!name || (b->commands[i] && !command)) {
      free(name);
      free(command);
      tsr__tasks_truncate(a, n0); /* and the copies of the tasks before this one */
      return tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory");
    }
    int j = a->n;
    a->names[j] = name;
    a->commands[j] = command;
    memcpy(&a->times[(size_t)j * a->nsizes], &b->times[(size_t)i * b->nsizes], sizeof(double) * (size_t)a->nsizes);
    a->n++; /* a stays consistent after each task */
  }
  return NULL;
}

tsr_status_t tsr_mig_multi_add(tsr_mig_multi_t *mb, const tsr_mig_tasks_t *batch, int *out_moves, int *out_swaps) {
  if (out_moves) *out_moves = 0;
  if (out_swaps) *out_swaps = 0;
  if (mb->broken)
    return tsr_status_make(TSR_FAILED_PRECONDITION,
                           "an earlier batch failed half-joined; start a new multi-batch plan");
  if (batch->nsizes != mb->model.nsizes || memcmp(batch->sizes, mb->model.sizes, sizeof(batch->sizes)))
    return tsr_status_make(TSR_INVALID_ARGUMENT, "batch made for another GPU model");
  int off = mb->all->n, n = batch->n;
  TSR_RETURN_IF_ERROR(tsr__tasks_append(mb->all, batch));
  tsr_mig_plan_t *p = mb->plan;
  int *ids = NULL;
  tsr__far_result_t res = {0};
  tsr__engine_t *e = NULL;
  tsr_status_t st = NULL;
  tsr_mig_placement_t *np = realloc(p->placements, sizeof(*np) * (size_t)(off + n ? off + n : 1));
  if (np) p->placements = np;
  ids = malloc(sizeof(int) * (size_t)(n ? n : 1));
  if (!np || !ids) {
    st = tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory");
    goto undo;
  }
  for (int i = off; i < off + n; i++) p->placements[i] = (tsr_mig_placement_t){.task = i, .instance = -1};
  p->ntasks = off + n;
  for (int i = 0; i < n; i++) ids[i] = off + i;
  /* FAR plans the batch on its own; the concatenation places it */
  tsr__state_t empty;
  tsr_state_init(&empty);
  st = tsr_far_batch(&mb->model, mb->all, ids, n, &empty, false, &mb->opt, &res);
  if (!st) st = tsr_engine_new(n, &e);
  if (st) goto undo;
  tsr__batch_t b = {.model = &mb->model, .tasks = mb->all, .n = n, .ids = ids, .node_of = res.node_of};
  b.reversed = mb->mode != TSR_MIG_CONCAT_TRIVIAL && (mb->nbatches % 2 == 1);
  b.barrier = mb->mode == TSR_MIG_CONCAT_TRIVIAL;
  if (mb->mode == TSR_MIG_CONCAT_REVERSE_MOVES && mb->nbatches > 0)
    tsr_refine(e, &b, &mb->state, mb->opt.max_iterations > 0 ? mb->opt.max_iterations : 1000, false, out_moves,
               out_swaps);
  st = tsr_engine_commit(e, &b, &mb->state, p, mb->nbatches);
  if (st) {
    mb->broken = true; /* commit may have changed earlier instances before failing */
    goto out;
  }
  mb->nbatches++;
  p->nbatches = mb->nbatches;
  goto out;
undo: /* nothing was planned yet: the builder is as it was */
  tsr__tasks_truncate(mb->all, off);
  p->ntasks = off;
out:
  tsr_engine_free(e);
  free(res.node_of);
  free(ids);
  return st;
}

tsr_status_t tsr_mig_multi_result(const tsr_mig_multi_t *mb, tsr_mig_plan_t **out_plan, tsr_mig_tasks_t **out_tasks) {
  *out_plan = NULL;
  *out_tasks = NULL;
  if (mb->broken)
    return tsr_status_make(TSR_FAILED_PRECONDITION,
                           "an earlier batch failed half-joined; start a new multi-batch plan");
  tsr_mig_tasks_t *t;
  TSR_RETURN_IF_ERROR(tsr_mig_tasks_concat(mb->all, NULL, &t));
  tsr_mig_plan_t *p;
  tsr_status_t st = tsr_plan_new(&mb->model, mb->plan->algorithm, mb->plan->ntasks, &p);
  if (st) {
    tsr_mig_tasks_free(t);
    return st;
  }
  memcpy(p->placements, mb->plan->placements, sizeof(*p->placements) * (size_t)p->ntasks);
  for (int i = 0; i < mb->plan->ninstances; i++)
    if (tsr_plan_add_instance(p, &mb->plan->instances[i]) < 0) {
      tsr_mig_plan_free(p);
      tsr_mig_tasks_free(t);
      return tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory");
    }
  p->nbatches = mb->nbatches;
  tsr_plan_finish(p, t);
  *out_plan = p;
  *out_tasks = t;
  return NULL;
}
