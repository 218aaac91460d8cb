/* mig/engine.c: turns tree schedules into times (see internal.h).
 *
 * Reconfiguration operations (destroy an earlier instance, create one) go
 * through a single timeline: each is placed at the earliest gap, at or after
 * the moment it becomes possible, that is long enough for it, and they are
 * taken in the order they become possible. Within one batch that is exactly
 * the reconfig_end clock of Algorithm 1. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/array.h"
#include "mig/internal.h"

#define TSR__MAX_USES TSR_MIG_MAX_NODES

typedef struct {
  double key;
  int idx; /* batch task index */
  int node;
} tsr__entry_t;

struct tsr__engine_s {
  int cap;
  tsr__entry_t *ent;
  /* scratch timeline */
  double *busy;
  int nbusy;
  size_t capbusy; /* intervals */
  /* per use (filled by eval) */
  int nuses;
  int use_node[TSR__MAX_USES];
  int use_first[TSR__MAX_USES], use_count[TSR__MAX_USES]; /* range in ent[] */
  int use_merged[TSR__MAX_USES];                          /* live index it continues, -1 if created */
  bool use_destroy[TSR__MAX_USES];
  double use_cs[TSR__MAX_USES], use_ce[TSR__MAX_USES];
  double use_ds[TSR__MAX_USES], use_de[TSR__MAX_USES];
  double use_end[TSR__MAX_USES];
  bool live_destroy[TSR_MIG_MAX_SLICES];
  double live_ds[TSR_MIG_MAX_SLICES], live_de[TSR_MIG_MAX_SLICES];
};

/* ---- state -------------------------------------------------------------- */

void tsr_state_init(tsr__state_t *s) {
  memset(s, 0, sizeof(*s));
  for (int i = 0; i < TSR_MIG_MAX_SLICES; i++) s->slice_live[i] = -1;
}

void tsr_state_free(tsr__state_t *s) {
  free(s->busy);
  s->busy = NULL;
  s->nbusy = 0;
  s->capbusy = 0;
}

tsr_status_t tsr_state_copy(tsr__state_t *dst, const tsr__state_t *src) {
  *dst = *src;
  dst->busy = NULL;
  dst->capbusy = 0;
  if (src->nbusy) {
    dst->busy = malloc(sizeof(double) * 2 * (size_t)src->nbusy);
    if (!dst->busy) return tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory");
    memcpy(dst->busy, src->busy, sizeof(double) * 2 * (size_t)src->nbusy);
    dst->capbusy = (size_t)src->nbusy;
  }
  return NULL;
}

/* ---- engine ------------------------------------------------------------- */

tsr_status_t tsr_engine_new(int n, tsr__engine_t **out_engine) {
  *out_engine = NULL;
  tsr__engine_t *e = calloc(1, sizeof(*e));
  if (!e) return tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory");
  e->cap = n > 0 ? n : 1;
  e->ent = malloc(sizeof(*e->ent) * (size_t)e->cap);
  if (!e->ent) {
    free(e);
    return tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory");
  }
  *out_engine = e;
  return NULL;
}

void tsr_engine_free(tsr__engine_t *e) {
  if (!e) return;
  free(e->ent);
  free(e->busy);
  free(e);
}

static int tsr__cmp_entry(const void *a, const void *b) {
  const tsr__entry_t *x = a, *y = b;
  if (x->node != y->node) return x->node < y->node ? -1 : 1;
  if (x->key != y->key) return x->key > y->key ? -1 : 1; /* larger key first */
  return x->idx < y->idx ? -1 : (x->idx > y->idx);
}

/* Earliest t >= ready with [t, t + dur) free in the timeline. */
static double tsr__fit(const double *busy, int nbusy, double ready, double dur) {
  /* binary search the first interval ending after `ready` */
  int lo = 0, hi = nbusy;
  while (lo < hi) {
    int mid = (lo + hi) / 2;
    if (busy[2 * mid + 1] <= ready + TSR__EPS)
      lo = mid + 1;
    else
      hi = mid;
  }
  double t = ready;
  for (int i = lo; i < nbusy; i++) {
    if (busy[2 * i] >= t + dur - TSR__EPS) break;
    if (busy[2 * i + 1] > t) t = busy[2 * i + 1];
  }
  return t;
}

/* An interval is two doubles, start and end. */
#define TSR__BUSY_ELEM (2 * sizeof(double))

static bool tsr__busy_insert(double **busy, int *nbusy, size_t *cap, double s, double e) {
  if (e - s <= 0) return true;
  double *nb = tsr_array_grow(*busy, cap, (size_t)*nbusy + 1, TSR__BUSY_ELEM, 32);
  if (!nb) return false;
  *busy = nb;
  int i = *nbusy;
  while (i > 0 && (*busy)[2 * (i - 1)] > s) {
    (*busy)[2 * i] = (*busy)[2 * (i - 1)];
    (*busy)[2 * i + 1] = (*busy)[2 * (i - 1) + 1];
    i--;
  }
  (*busy)[2 * i] = s;
  (*busy)[2 * i + 1] = e;
  (*nbusy)++;
  return true;
}

static int tsr__size_index_of(const tsr_mig_model_t *m, int node) {
  return tsr_mig_model_size_index(m, m->nodes[node].size);
}

/* Op kinds. */
enum { TSR__OP_DESTROY_LIVE = 0, TSR__OP_CREATE = 1, TSR__OP_DESTROY = 2 };

/* Returns false only when memory for the timeline ran out. */
static bool tsr__eval(tsr__engine_t *e, const tsr__batch_t *b, const tsr__state_t *st, tsr__timing_t *out) {
  const tsr_mig_model_t *m = b->model;
  const tsr_mig_tasks_t *T = b->tasks;
  int node_k[TSR_MIG_MAX_NODES];
  for (int j = 0; j < m->nnodes; j++) node_k[j] = tsr__size_index_of(m, j);

  /* tasks grouped per node, LPT inside (SPT when reversed) */
  for (int i = 0; i < b->n; i++) {
    int node = b->node_of[i];
    double t = tsr_mig_tasks_time(T, b->ids[i], node_k[node]);
    e->ent[i].key = b->reversed ? -t : t;
    e->ent[i].idx = i;
    e->ent[i].node = b->reversed ? (m->nnodes - 1 - node) : node;
  }
  qsort(e->ent, (size_t)b->n, sizeof(*e->ent), tsr__cmp_entry);
  e->nuses = 0;
  for (int i = 0; i < b->n;) {
    int j = i;
    while (j < b->n && e->ent[j].node == e->ent[i].node) j++;
    int u = e->nuses++;
    e->use_node[u] = b->reversed ? (m->nnodes - 1 - e->ent[i].node) : e->ent[i].node;
    e->use_first[u] = i;
    e->use_count[u] = j - i;
    i = j;
  }
  int nu = e->nuses;
  double barrier = b->barrier ? st->makespan : 0;

  /* predecessors, merges, destroy needs */
  uint64_t pred_use[TSR__MAX_USES];
  uint32_t pred_live[TSR__MAX_USES];
  int pending[TSR__MAX_USES];
  double free_ready[TSR__MAX_USES];
  for (int l = 0; l < st->nlive; l++) e->live_destroy[l] = false;
  for (int u = 0; u < nu; u++) {
    uint32_t mask = m->nodes[e->use_node[u]].mask;
    pred_use[u] = 0;
    for (int v = 0; v < u; v++)
      if (m->nodes[e->use_node[v]].mask & mask) pred_use[u] |= 1ull << v;
    pred_live[u] = 0;
    free_ready[u] = barrier;
    for (int s = 0; s < m->nslices; s++) {
      if (!(mask >> s & 1u)) continue;
      if (st->slice_live[s] >= 0)
        pred_live[u] |= 1u << st->slice_live[s];
      else if (st->slice_free[s] > free_ready[u])
        free_ready[u] = st->slice_free[s];
    }
    e->use_merged[u] = -1;
    if (!pred_use[u] && pred_live[u] && !(pred_live[u] & (pred_live[u] - 1))) {
      int l = __builtin_ctz(pred_live[u]);
      if (st->live[l].node == e->use_node[u]) e->use_merged[u] = l;
    }
    e->use_destroy[u] = false;
  }
  for (int u = 0; u < nu; u++) {
    for (int v = 0; v < u; v++)
      if (pred_use[u] >> v & 1ull) e->use_destroy[v] = true;
    if (e->use_merged[u] < 0)
      for (int l = 0; l < st->nlive; l++)
        if (pred_live[u] >> l & 1u) e->live_destroy[l] = true;
  }

  /* the timeline starts as the state's, with room for every operation this
   * evaluation can add, so the inserts below need not grow it */
  size_t need = (size_t)st->nbusy + 2 * (size_t)nu + (size_t)st->nlive + 8;
  double *nb = tsr_array_grow(e->busy, &e->capbusy, need, TSR__BUSY_ELEM, 64);
  if (!nb) return false;
  e->busy = nb;
  if (st->nbusy) memcpy(e->busy, st->busy, sizeof(double) * 2 * (size_t)st->nbusy);
  e->nbusy = st->nbusy;

  /* ops waiting to run: ready time known */
  double op_ready[2 * TSR__MAX_USES + TSR_MIG_MAX_SLICES];
  int op_kind[2 * TSR__MAX_USES + TSR_MIG_MAX_SLICES], op_who[2 * TSR__MAX_USES + TSR_MIG_MAX_SLICES];
  int nops = 0;
  for (int l = 0; l < st->nlive; l++) {
    e->live_ds[l] = e->live_de[l] = -1;
    if (!e->live_destroy[l]) continue;
    double r = st->live[l].tasks_end;
    if (r < barrier) r = barrier;
    op_ready[nops] = r;
    op_kind[nops] = TSR__OP_DESTROY_LIVE;
    op_who[nops++] = l;
  }
  for (int u = 0; u < nu; u++) {
    e->use_cs[u] = e->use_ce[u] = e->use_ds[u] = e->use_de[u] = -1;
    e->use_end[u] = -1;
    if (e->use_merged[u] >= 0) {
      /* continues a live instance: no creation */
      double t = st->live[e->use_merged[u]].tasks_end;
      if (t < barrier) t = barrier;
      e->use_ce[u] = t;
      for (int q = 0; q < e->use_count[u]; q++) {
        int i = e->ent[e->use_first[u] + q].idx;
        out->start[i] = t;
        t += tsr_mig_tasks_time(T, b->ids[i], node_k[e->use_node[u]]);
      }
      e->use_end[u] = t;
      pending[u] = 0;
      if (e->use_destroy[u]) {
        op_ready[nops] = t;
        op_kind[nops] = TSR__OP_DESTROY;
        op_who[nops++] = u;
      }
      continue;
    }
    pending[u] = __builtin_popcountll(pred_use[u]) + __builtin_popcount(pred_live[u]);
    if (pending[u] == 0) {
      op_ready[nops] = free_ready[u];
      op_kind[nops] = TSR__OP_CREATE;
      op_who[nops++] = u;
    }
  }
  double dep_ready[TSR__MAX_USES];
  for (int u = 0; u < nu; u++) dep_ready[u] = free_ready[u];

  while (nops > 0) {
    /* earliest ready; ties: destroys first, then by use order */
    int best = 0;
    for (int o = 1; o < nops; o++) {
      if (op_ready[o] < op_ready[best] - TSR__EPS)
        best = o;
      else if (op_ready[o] <= op_ready[best] + TSR__EPS) {
        int ko = op_kind[o] == TSR__OP_CREATE, kb = op_kind[best] == TSR__OP_CREATE;
        if (ko < kb || (ko == kb && op_who[o] < op_who[best])) best = o;
      }
    }
    double ready = op_ready[best];
    int kind = op_kind[best], who = op_who[best];
    op_ready[best] = op_ready[nops - 1];
    op_kind[best] = op_kind[nops - 1];
    op_who[best] = op_who[nops - 1];
    nops--;
    int node = kind == TSR__OP_DESTROY_LIVE ? st->live[who].node : e->use_node[who];
    int k = node_k[node];
    double dur = b->reconfig_free ? 0 : (kind == TSR__OP_CREATE ? m->create_s[k] : m->destroy_s[k]);
    double s = tsr__fit(e->busy, e->nbusy, ready, dur);
    if (!tsr__busy_insert(&e->busy, &e->nbusy, &e->capbusy, s, s + dur)) return false;
    double end = s + dur;
    if (kind == TSR__OP_CREATE) {
      e->use_cs[who] = s;
      e->use_ce[who] = end;
      double t = end;
      for (int q = 0; q < e->use_count[who]; q++) {
        int i = e->ent[e->use_first[who] + q].idx;
        out->start[i] = t;
        t += tsr_mig_tasks_time(T, b->ids[i], k);
      }
      e->use_end[who] = t;
      if (e->use_destroy[who]) {
        op_ready[nops] = t;
        op_kind[nops] = TSR__OP_DESTROY;
        op_who[nops++] = who;
      }
      continue;
    }
    /* a destruction: wake the creations waiting on it */
    if (kind == TSR__OP_DESTROY_LIVE) {
      e->live_ds[who] = s;
      e->live_de[who] = end;
    } else {
      e->use_ds[who] = s;
      e->use_de[who] = end;
    }
    for (int u = 0; u < nu; u++) {
      if (e->use_merged[u] >= 0) continue;
      bool dep = kind == TSR__OP_DESTROY_LIVE ? (pred_live[u] >> who & 1u) : (pred_use[u] >> who & 1ull);
      if (!dep) continue;
      if (end > dep_ready[u]) dep_ready[u] = end;
      if (--pending[u] == 0) {
        op_ready[nops] = dep_ready[u];
        op_kind[nops] = TSR__OP_CREATE;
        op_who[nops++] = u;
      }
    }
  }

  /* per-slice ends and the makespan */
  double batch_end = 0;
  for (int u = 0; u < nu; u++)
    if (e->use_end[u] > batch_end) batch_end = e->use_end[u];
  for (int s = 0; s < m->nslices; s++) {
    double v = -1;
    for (int u = 0; u < nu; u++)
      if ((m->nodes[e->use_node[u]].mask >> s & 1u) && e->use_end[u] > v) v = e->use_end[u];
    if (v < 0) {
      int l = st->slice_live[s];
      v = l >= 0 ? st->live[l].tasks_end : st->slice_free[s];
    }
    out->slice_end[s] = v;
  }
  out->batch_end = batch_end;
  out->makespan = batch_end > st->makespan ? batch_end : st->makespan;
  out->ncritical = 0;
  for (int s = 0; s < m->nslices; s++)
    if (out->slice_end[s] >= out->makespan - TSR__EPS) out->ncritical++;
  return true;
}

void tsr_engine_eval(tsr__engine_t *e, const tsr__batch_t *b, const tsr__state_t *state, tsr__timing_t *out) {
  if (!tsr__eval(e, b, state, out)) {
    out->makespan = out->batch_end = INFINITY;
    out->ncritical = b->model->nslices;
  }
}

tsr_status_t tsr_engine_commit(tsr__engine_t *e, const tsr__batch_t *b, tsr__state_t *st, tsr_mig_plan_t *plan,
                               int batch_index) {
  const tsr_mig_model_t *m = b->model;
  double *start = malloc(sizeof(double) * (size_t)(b->n ? b->n : 1));
  if (!start) return tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory");
  tsr__timing_t tm;
  tm.start = start;
  if (!tsr__eval(e, b, st, &tm)) {
    free(start);
    return tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory");
  }
  /* earlier instances destroyed now */
  for (int l = 0; l < st->nlive; l++)
    if (e->live_destroy[l]) {
      tsr_mig_instance_t *in = &plan->instances[st->live[l].instance];
      in->destroy_start = e->live_ds[l];
      in->destroy_end = e->live_de[l];
    }
  int use_inst[TSR__MAX_USES];
  for (int u = 0; u < e->nuses; u++) {
    int node = e->use_node[u];
    if (e->use_merged[u] >= 0) {
      use_inst[u] = st->live[e->use_merged[u]].instance;
      tsr_mig_instance_t *in = &plan->instances[use_inst[u]];
      in->destroy_start = e->use_ds[u];
      in->destroy_end = e->use_de[u];
    } else {
      tsr_mig_instance_t in = {.node = node,
                               .size = m->nodes[node].size,
                               .mask = m->nodes[node].mask,
                               .create_start = e->use_cs[u],
                               .create_end = e->use_ce[u],
                               .destroy_start = e->use_ds[u],
                               .destroy_end = e->use_de[u],
                               .batch = batch_index};
      use_inst[u] = tsr_plan_add_instance(plan, &in);
      if (use_inst[u] < 0) {
        free(start);
        return tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory");
      }
    }
    int k = tsr_mig_model_size_index(m, m->nodes[node].size);
    for (int q = 0; q < e->use_count[u]; q++) {
      int i = e->ent[e->use_first[u] + q].idx;
      tsr_mig_placement_t *p = &plan->placements[b->ids[i]];
      p->task = b->ids[i];
      p->instance = use_inst[u];
      p->size = m->nodes[node].size;
      p->start = start[i];
      p->end = start[i] + tsr_mig_tasks_time(b->tasks, b->ids[i], k);
      p->batch = batch_index;
    }
  }
  /* the new state: what lives over each slice */
  tsr__state_t ns;
  tsr_state_init(&ns);
  for (int s = 0; s < m->nslices; s++) {
    int last = -1;
    for (int u = 0; u < e->nuses; u++)
      if (m->nodes[e->use_node[u]].mask >> s & 1u) last = u;
    tsr__live_t lv = {-1, -1, 0};
    double free_at = 0;
    if (last >= 0) {
      if (e->use_de[last] >= 0)
        free_at = e->use_de[last];
      else
        lv = (tsr__live_t){use_inst[last], e->use_node[last], e->use_end[last]};
    } else {
      int l = st->slice_live[s];
      if (l < 0)
        free_at = st->slice_free[s];
      else if (e->live_destroy[l])
        free_at = e->live_de[l];
      else
        lv = st->live[l];
    }
    if (lv.instance < 0) {
      ns.slice_free[s] = free_at;
      continue;
    }
    int found = -1;
    for (int l = 0; l < ns.nlive; l++)
      if (ns.live[l].instance == lv.instance) found = l;
    if (found < 0) {
      found = ns.nlive++;
      ns.live[found] = lv;
    }
    ns.slice_live[s] = found;
  }
  ns.makespan = tm.makespan;
  /* keep only the part of the timeline a later operation could still use */
  double floor_t = INFINITY;
  for (int s = 0; s < m->nslices; s++) {
    double v = ns.slice_live[s] >= 0 ? ns.live[ns.slice_live[s]].tasks_end : ns.slice_free[s];
    if (v < floor_t) floor_t = v;
  }
  int keep = 0;
  while (keep < e->nbusy && e->busy[2 * keep + 1] < floor_t - TSR__EPS) keep++;
  ns.nbusy = e->nbusy - keep;
  ns.capbusy = (size_t)ns.nbusy;
  ns.busy = NULL;
  if (ns.nbusy) {
    ns.busy = malloc(sizeof(double) * 2 * (size_t)ns.nbusy);
    if (!ns.busy) {
      free(start);
      return tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory");
    }
    memcpy(ns.busy, e->busy + 2 * keep, sizeof(double) * 2 * (size_t)ns.nbusy);
  }
  tsr_state_free(st);
  *st = ns;
  free(start);
  return NULL;
}
