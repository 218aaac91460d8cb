/* mig/generate.c: the synthetic workload generator of Section 6.3. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "mig/internal.h"

tsr_status_t tsr_mig_gen_preset(const tsr_mig_model_t *m, const char *scaling, const char *times, tsr_mig_gen_t *out) {
  memset(out, 0, sizeof(*out));
  out->p_sup = 0.5;
  if (!strcasecmp(times, "wide"))
    out->t_min = 1, out->t_max = 100;
  else if (!strcasecmp(times, "narrow"))
    out->t_min = 90, out->t_max = 100;
  else
    return tsr_status_make(TSR_INVALID_ARGUMENT, "unknown times '%s' (wide, narrow)", times);
  int ns = m->nsizes;
  if (!strcasecmp(scaling, "poor")) {
    /* half only exploit 1 slice, half 2 */
    out->p[0] = 0.5;
    out->p[1] = 0.5;
  } else if (!strcasecmp(scaling, "mixed")) {
    for (int k = 0; k < ns; k++) out->p[k] = 1.0 / ns;
  } else if (!strcasecmp(scaling, "good")) {
    /* half up to the second largest size, half up to the whole GPU */
    out->p[ns - 2] = 0.5;
    out->p[ns - 1] = 0.5;
  } else {
    return tsr_status_make(TSR_INVALID_ARGUMENT, "unknown scaling '%s' (poor, mixed, good)", scaling);
  }
  return NULL;
}

/* N(mu, sigma) clipped to [a, b] (Box-Muller). */
static double tsr__normal_clip(uint64_t *rng, double mu, double sigma, double a, double b) {
  double u1 = tsr__rand_unit(rng), u2 = tsr__rand_unit(rng);
  if (u1 < 1e-300) u1 = 1e-300;
  double z = sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
  double v = mu + sigma * z;
  return v < a ? a : (v > b ? b : v);
}

enum { TSR__SUB = 0, TSR__NEAR = 1, TSR__SUPER = 2 };

static double tsr__draw_r(uint64_t *rng, int kind) {
  switch (kind) {
    case TSR__SUPER: return tsr__normal_clip(rng, -0.25, 0.25, -0.5, 0.0);
    case TSR__NEAR: return tsr__normal_clip(rng, 0.1, 0.1, 0.0, 0.2);
    default: return tsr__normal_clip(rng, 0.75, 0.25, 0.5, 1.0);
  }
}

tsr_status_t tsr_mig_generate(const tsr_mig_model_t *m, const tsr_mig_gen_t *g, int n, uint64_t seed,
                              tsr_mig_tasks_t **out_tasks) {
  *out_tasks = NULL;
  if (n < 0) return tsr_status_make(TSR_INVALID_ARGUMENT, "negative task count");
  if (!(g->t_min > 0) || !(g->t_max >= g->t_min))
    return tsr_status_make(TSR_INVALID_ARGUMENT, "need 0 < t_min <= t_max");
  if (m->nsizes < 1 || m->nsizes > TSR_MIG_MAX_SIZES)
    return tsr_status_make(TSR_INVALID_ARGUMENT, "the model has %d instance sizes (1 to %d)", m->nsizes,
                           TSR_MIG_MAX_SIZES);
  double psum = 0;
  for (int k = 0; k < m->nsizes; k++) {
    if (g->p[k] < 0) return tsr_status_make(TSR_INVALID_ARGUMENT, "negative percentage");
    psum += g->p[k];
  }
  if (fabs(psum - 1) > 1e-6) return tsr_status_make(TSR_INVALID_ARGUMENT, "the scaling percentages must sum to 100%%");
  /* tasks per class: floor, then add one to the class farthest from exact */
  int cnt[TSR_MIG_MAX_SIZES], total = 0;
  for (int k = 0; k < m->nsizes; k++) {
    cnt[k] = (int)floor(n * g->p[k] + 1e-9);
    total += cnt[k];
  }
  while (total < n) {
    int j = 0;
    for (int k = 1; k < m->nsizes; k++)
      if (n * g->p[k] - cnt[k] > n * g->p[j] - cnt[j] + 1e-12) j = k;
    cnt[j]++;
    total++;
  }
  tsr_mig_tasks_t *T;
  TSR_RETURN_IF_ERROR(tsr_mig_tasks_create(m, n, &T));
  uint64_t rng = seed ^ 0x6d69672d67656eull; /* "mig-gen" */
  int maxs = m->sizes[m->nsizes - 1];
  double t[64];
  int i = 0;
  for (int k = 0; k < m->nsizes; k++) {
    int good = m->sizes[k]; /* scales well up to this size */
    int nsup = good >= 2 ? (int)ceil(g->p_sup * cnt[k] - 1e-9) : 0;
    for (int q = 0; q < cnt[k]; q++, i++) {
      bool memory_bound = q < nsup;
      t[1] = g->t_min + (g->t_max - g->t_min) * tsr__rand_unit(&rng);
      for (int s = 1; s < maxs; s++) {
        int kind;
        if (s + 1 > good)
          kind = TSR__SUB;
        else if (memory_bound) {
          /* super-linear 1 -> 2; later it stays memory-bound with 0.7 a slice */
          if (s > 1 && tsr__rand_unit(&rng) < 0.3) memory_bound = false;
          kind = memory_bound ? TSR__SUPER : TSR__SUB;
        } else {
          kind = (q < nsup) ? TSR__SUB : TSR__NEAR; /* became compute-bound: sub-linear */
        }
        double r = tsr__draw_r(&rng, kind);
        t[s + 1] = (s + r) / (s + 1) * t[s];
      }
      for (int kk = 0; kk < m->nsizes; kk++) T->times[(size_t)i * m->nsizes + kk] = t[m->sizes[kk]];
    }
  }
  /* arrival (FIFO) order: shuffled, so classes are mixed */
  for (int a = n - 1; a > 0; a--) {
    int b = (int)(tsr__rand_next(&rng) % (uint64_t)(a + 1));
    for (int kk = 0; kk < m->nsizes; kk++) {
      double x = T->times[(size_t)a * m->nsizes + kk];
      T->times[(size_t)a * m->nsizes + kk] = T->times[(size_t)b * m->nsizes + kk];
      T->times[(size_t)b * m->nsizes + kk] = x;
    }
  }
  *out_tasks = T;
  return NULL;
}
