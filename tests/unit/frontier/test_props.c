/* test_props.c: algebraic properties on many random frontiers, checked
 * against an unbounded reference implementation written here (a dense array
 * of epochs indexed by axis number), and the overflow rule: a random sequence
 * of operations at small capacity never yields an optimistic answer. */
#include <stdlib.h>

#include "helpers.h"

#define POOL 12 /* axes A..L: small, so random frontiers overlap a lot */
#define TRIALS 4000

/* ---- the reference: unbounded, no eviction, no shortcuts ----------------- */

typedef struct {
  uint64_t e[POOL]; /* 0 = absent */
} ref_t;

static void ref_merge(ref_t *d, const ref_t *s) {
  for (int i = 0; i < POOL; i++)
    if (s->e[i] > d->e[i]) d->e[i] = s->e[i];
}
static bool ref_dominates(const ref_t *h, const ref_t *n) {
  for (int i = 0; i < POOL; i++)
    if (h->e[i] < n->e[i]) return false;
  return true;
}
static bool ref_equal(const ref_t *a, const ref_t *b) { return memcmp(a->e, b->e, sizeof(a->e)) == 0; }
static void ref_from(ref_t *r, const tsr_frontier_t *f) {
  memset(r, 0, sizeof(*r));
  for (uint32_t i = 0; i < f->count; i++) {
    uint64_t ord = tsr_axis_ordinal(f->entries[i].axis);
    cr_assert_lt(ord, POOL);
    r->e[ord] = f->entries[i].epoch;
  }
}

/* ---- random frontiers ---------------------------------------------------- */

static uint64_t rng_state = 0x9E3779B97F4A7C15u;
static uint64_t rnd(void) { /* xorshift64*: deterministic, reproducible */
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return rng_state * 0x2545F4914F6CDD1Du;
}
static uint32_t rnd_below(uint32_t n) { return (uint32_t)(rnd() % n); }

/* A random complete frontier over the pool. With `like` non-NULL, uses the
 * same axis set as `like` (to exercise the equal-axis fast paths). */
static tsr_frontier_t *rnd_frontier(tf_storage_t *st, const tsr_frontier_t *like) {
  tsr_frontier_t *f = tsr_frontier_init(st, POOL, TSR_FRONTIER_KNOWLEDGE);
  if (like) {
    for (uint32_t i = 0; i < like->count; i++) tsr_frontier_insert_or_raise(f, like->entries[i].axis, 1 + rnd_below(6));
    return f;
  }
  uint32_t density = 1 + rnd_below(POOL);
  for (int a = 0; a < POOL; a++)
    if (rnd_below(POOL) < density) tsr_frontier_insert_or_raise(f, tf_axis(a), 1 + rnd_below(6));
  return f;
}

/* A random complete frontier whose axes all lie in one band of the pool
 * (its lower or upper part, or a narrow run): pairs of these often have
 * axis ranges that do not overlap, or one inside the other, which the
 * range shortcuts of merge, compare, dominates and find-undominated take. */
static tsr_frontier_t *rnd_band(tf_storage_t *st) {
  tsr_frontier_t *f = tsr_frontier_init(st, POOL, TSR_FRONTIER_KNOWLEDGE);
  uint32_t lo = rnd_below(POOL), len = 1 + rnd_below(POOL - lo);
  for (uint32_t a = lo; a < lo + len; a++)
    if (rnd_below(3) != 0) tsr_frontier_insert_or_raise(f, tf_axis((int)a), 1 + rnd_below(6));
  return f;
}

/* The first operand: dense over the pool, or a band. */
static tsr_frontier_t *rnd_first(tf_storage_t *st) { return rnd_below(3) == 0 ? rnd_band(st) : rnd_frontier(st, NULL); }

static tsr_frontier_t *rnd_pick(tf_storage_t *st, const tsr_frontier_t *other) {
  uint32_t how = rnd_below(4);
  return how == 3 ? rnd_band(st) : rnd_frontier(st, how == 0 ? other : NULL);
}

static void copy_into(tf_storage_t *st, const tsr_frontier_t *src, tsr_frontier_t **out) {
  *out = tsr_frontier_init(st, POOL, TSR_FRONTIER_KNOWLEDGE);
  cr_assert_eq(tsr_frontier_copy(*out, src), TSR_FRONTIER_FIT);
}

/* ---- algebra ------------------------------------------------------------- */

Test(props, merge_matches_reference) {
  for (int t = 0; t < TRIALS; t++) {
    tf_storage_t sa, sb;
    tsr_frontier_t *a = rnd_first(&sa), *b = rnd_pick(&sb, a);
    ref_t ra, rb;
    ref_from(&ra, a);
    ref_from(&rb, b);
    cr_assert_eq(tsr_frontier_merge(a, b), TSR_FRONTIER_FIT);
    cr_assert(tsr_frontier_is_valid(a));
    ref_merge(&ra, &rb);
    ref_t got;
    ref_from(&got, a);
    cr_assert(ref_equal(&got, &ra), "trial %d", t);
    cr_assert(tsr_frontier_is_complete(a));
  }
}

Test(props, merge_commutative_associative_idempotent) {
  for (int t = 0; t < TRIALS; t++) {
    tf_storage_t sa, sb, sc, s1, s2, s3, s4;
    tsr_frontier_t *a = rnd_first(&sa), *b = rnd_pick(&sb, a), *c = rnd_pick(&sc, b);
    tsr_frontier_t *ab, *ba;
    copy_into(&s1, a, &ab);
    tsr_frontier_merge(ab, b);
    copy_into(&s2, b, &ba);
    tsr_frontier_merge(ba, a);
    cr_assert(tsr_frontier_equal(ab, ba), "commutativity, trial %d", t);
    /* (a v b) v c == a v (b v c) */
    tsr_frontier_t *left, *right;
    copy_into(&s3, ab, &left);
    tsr_frontier_merge(left, c);
    copy_into(&s4, b, &right);
    tsr_frontier_merge(right, c);
    tsr_frontier_t *a2;
    copy_into(&s1, a, &a2);
    tsr_frontier_merge(a2, right);
    cr_assert(tsr_frontier_equal(left, a2), "associativity, trial %d", t);
    /* a v a == a */
    copy_into(&s2, a, &a2);
    tsr_frontier_merge(a2, a);
    cr_assert(tsr_frontier_equal(a2, a), "idempotence, trial %d", t);
    /* the merge is an upper bound of both, and the least one */
    cr_assert(tsr_frontier_dominates(ab, a));
    cr_assert(tsr_frontier_dominates(ab, b));
    if (tsr_frontier_dominates(c, a) && tsr_frontier_dominates(c, b))
      cr_assert(tsr_frontier_dominates(c, ab), "least upper bound, trial %d", t);
  }
}

Test(props, dominance_is_a_partial_order_consistent_with_merge) {
  int dominated = 0;
  for (int t = 0; t < TRIALS; t++) {
    tf_storage_t sa, sb, sc, sm;
    tsr_frontier_t *a = rnd_first(&sa), *b = rnd_pick(&sb, a), *c = rnd_pick(&sc, b);
    ref_t ra, rb;
    ref_from(&ra, a);
    ref_from(&rb, b);
    bool dab = tsr_frontier_dominates(a, b);
    cr_assert_eq(dab, ref_dominates(&ra, &rb), "trial %d", t);
    dominated += dab;
    /* reflexive */
    cr_assert(tsr_frontier_dominates(a, a));
    /* antisymmetric */
    if (dab && tsr_frontier_dominates(b, a)) cr_assert(tsr_frontier_equal(a, b));
    /* transitive */
    if (dab && tsr_frontier_dominates(b, c)) cr_assert(tsr_frontier_dominates(a, c));
    /* a dominates b iff merge(a, b) == a */
    tsr_frontier_t *m;
    copy_into(&sm, a, &m);
    tsr_frontier_merge(m, b);
    cr_assert_eq(dab, tsr_frontier_equal(m, a), "trial %d", t);
  }
  cr_assert_gt(dominated, TRIALS / 20, "too few dominating pairs to mean anything: %d", dominated);
}

Test(props, compare_antisymmetric_and_consistent) {
  int seen[4] = {0};
  for (int t = 0; t < TRIALS; t++) {
    tf_storage_t sa, sb;
    tsr_frontier_t *a = rnd_first(&sa), *b = rnd_pick(&sb, a);
    tsr_frontier_order_t ab = tsr_frontier_compare(a, b), ba = tsr_frontier_compare(b, a);
    seen[ab]++;
    switch (ab) {
      case TSR_FRONTIER_EQUAL: cr_assert_eq(ba, TSR_FRONTIER_EQUAL); break;
      case TSR_FRONTIER_BEFORE: cr_assert_eq(ba, TSR_FRONTIER_AFTER); break;
      case TSR_FRONTIER_AFTER: cr_assert_eq(ba, TSR_FRONTIER_BEFORE); break;
      case TSR_FRONTIER_CONCURRENT: cr_assert_eq(ba, TSR_FRONTIER_CONCURRENT); break;
    }
    bool dab = tsr_frontier_dominates(a, b), dba = tsr_frontier_dominates(b, a);
    tsr_frontier_order_t want = dab && dba ? TSR_FRONTIER_EQUAL
                                : dab      ? TSR_FRONTIER_AFTER
                                : dba      ? TSR_FRONTIER_BEFORE
                                           : TSR_FRONTIER_CONCURRENT;
    cr_assert_eq(ab, want, "trial %d", t);
  }
  for (int k = 0; k < 4; k++) cr_assert_gt(seen[k], 0, "order %d never produced", k);
}

Test(props, find_undominated_matches_reference) {
  for (int t = 0; t < TRIALS; t++) {
    tf_storage_t sh, sn, sm;
    tsr_frontier_t *h = rnd_first(&sh), *n = rnd_pick(&sn, h);
    tsr_frontier_t *m = tsr_frontier_init(&sm, POOL, TSR_FRONTIER_REQUIREMENT);
    bool covered = tsr_frontier_find_undominated(h, n, m);
    cr_assert_eq(covered, tsr_frontier_dominates(h, n));
    ref_t rh, rn, rm;
    ref_from(&rh, h);
    ref_from(&rn, n);
    ref_from(&rm, m);
    for (int i = 0; i < POOL; i++) {
      uint64_t want = rh.e[i] < rn.e[i] ? rn.e[i] : 0;
      cr_assert_eq(rm.e[i], want, "trial %d axis %d", t, i);
    }
  }
}

/* ---- overflow: never optimistic ------------------------------------------ */

/* K frontiers at capacity CAP (half knowledge, half requirement), each with
 * an unbounded reference that receives exactly the same operations. After
 * every step: the frontier is canonical; every entry it holds is a true fact
 * (epoch <= the reference's); a complete frontier equals its reference; and
 * no dominance or compare answer claims more than the references allow. */
#define K_FRONTIERS 6
#define CAP 3
#define STEPS 20000

static void check_claims(tsr_frontier_t *const *f, const ref_t *ref, int step) {
  char b1[256];
  for (int i = 0; i < K_FRONTIERS; i++) {
    cr_assert(tsr_frontier_is_valid(f[i]), "step %d: invalid %s", step, tf_str(f[i], b1, sizeof b1));
    ref_t got;
    ref_from(&got, f[i]);
    for (int a = 0; a < POOL; a++)
      cr_assert_leq(got.e[a], ref[i].e[a], "step %d: frontier %d claims more than happened", step, i);
    if (tsr_frontier_is_complete(f[i]))
      cr_assert(ref_equal(&got, &ref[i]), "step %d: complete frontier %d lost entries", step, i);
  }
  for (int i = 0; i < K_FRONTIERS; i++) {
    for (int j = 0; j < K_FRONTIERS; j++) {
      if (tsr_frontier_dominates(f[i], f[j]))
        cr_assert(ref_dominates(&ref[i], &ref[j]), "step %d: dominates(%d, %d) optimistic", step, i, j);
      tsr_frontier_order_t o = tsr_frontier_compare(f[i], f[j]);
      if (o == TSR_FRONTIER_AFTER || o == TSR_FRONTIER_EQUAL)
        cr_assert(ref_dominates(&ref[i], &ref[j]), "step %d: compare(%d, %d) optimistic", step, i, j);
      if (o == TSR_FRONTIER_BEFORE || o == TSR_FRONTIER_EQUAL)
        cr_assert(ref_dominates(&ref[j], &ref[i]), "step %d: compare(%d, %d) optimistic", step, i, j);
    }
  }
  /* random probes, as have and as need */
  for (int k = 0; k < 4; k++) {
    tf_storage_t sp;
    tsr_frontier_t *p = rnd_frontier(&sp, NULL);
    ref_t rp;
    ref_from(&rp, p);
    for (int i = 0; i < K_FRONTIERS; i++) {
      if (tsr_frontier_dominates(p, f[i]))
        cr_assert(ref_dominates(&rp, &ref[i]), "step %d: probe covers incomplete need", step);
      if (tsr_frontier_dominates(f[i], p))
        cr_assert(ref_dominates(&ref[i], &rp), "step %d: frontier %d over-claims", step, i);
    }
  }
}

Test(props, overflow_never_optimistic) {
  TSR_FRONTIER_STORAGE(CAP) st[K_FRONTIERS];
  tsr_frontier_t *f[K_FRONTIERS];
  ref_t ref[K_FRONTIERS];
  memset(ref, 0, sizeof(ref));
  for (int i = 0; i < K_FRONTIERS; i++)
    f[i] = tsr_frontier_init(&st[i], CAP, i % 2 ? TSR_FRONTIER_REQUIREMENT : TSR_FRONTIER_KNOWLEDGE);
  int evicted = 0, overflowed = 0, complete_merges = 0;
  for (int step = 0; step < STEPS; step++) {
    int i = (int)rnd_below(K_FRONTIERS);
    if (rnd_below(4) == 0) {
      /* occasionally start over: a fresh frontier is complete again */
      tsr_frontier_clear(f[i]);
      memset(&ref[i], 0, sizeof(ref[i]));
    } else if (rnd_below(2) == 0) {
      int a = (int)rnd_below(POOL);
      uint64_t e = 1 + rnd_below(50);
      tsr_frontier_fit_t r = tsr_frontier_insert_or_raise(f[i], tf_axis(a), e);
      evicted += r == TSR_FRONTIER_EVICTED;
      overflowed += r == TSR_FRONTIER_OVERFLOW;
      if (e > ref[i].e[a]) ref[i].e[a] = e;
    } else {
      int j = (int)rnd_below(K_FRONTIERS);
      tsr_frontier_fit_t r = tsr_frontier_merge(f[i], f[j]);
      evicted += r == TSR_FRONTIER_EVICTED;
      overflowed += r == TSR_FRONTIER_OVERFLOW;
      complete_merges += r == TSR_FRONTIER_FIT && tsr_frontier_is_complete(f[i]);
      if (i != j) ref_merge(&ref[i], &ref[j]);
    }
    check_claims(f, ref, step);
  }
  /* the run must actually have exercised both overflow kinds */
  cr_assert_gt(evicted, 100, "evictions: %d", evicted);
  cr_assert_gt(overflowed, 100, "overflows: %d", overflowed);
  cr_assert_gt(complete_merges, 100, "complete merges: %d", complete_merges);
}
