/* test_ops.c: frontier operations one by one, edges and overflow rules. */
#include <stdlib.h>

#include "helpers.h"

Test(ops, init_rejects_bad_arguments) {
  tf_storage_t st;
  cr_assert_null(tsr_frontier_init(NULL, 4, TSR_FRONTIER_KNOWLEDGE));
  cr_assert_null(tsr_frontier_init(&st, TSR_FRONTIER_MAX_CAPACITY + 1, TSR_FRONTIER_KNOWLEDGE));
  cr_assert_null(tsr_frontier_init(&st, 4, (tsr_frontier_kind_t)7));
  tsr_frontier_t *f = tsr_frontier_init(&st, 0, TSR_FRONTIER_REQUIREMENT);
  cr_assert_not_null(f);
  cr_assert_eq(tsr_frontier_insert_or_raise(f, AX_A, 1), TSR_FRONTIER_OVERFLOW);
  cr_assert_eq(tsr_frontier_count(f), 0);
  f = tsr_frontier_init(&st, 0, TSR_FRONTIER_KNOWLEDGE);
  cr_assert_eq(tsr_frontier_insert_or_raise(f, AX_A, 1), TSR_FRONTIER_EVICTED);
  cr_assert_eq(tsr_frontier_count(f), 0);
  cr_assert(tsr_frontier_is_tainted(f));
}

Test(ops, heap_frontier) {
  tsr_frontier_t *f = NULL;
  cr_assert(tsr_status_is_ok(tsr_frontier_create(64, TSR_FRONTIER_REQUIREMENT, &f)));
  cr_assert_eq(tsr_frontier_capacity(f), 64);
  cr_assert_eq(tsr_frontier_kind(f), TSR_FRONTIER_REQUIREMENT);
  for (int i = 0; i < 64; i++) tsr_frontier_insert_or_raise(f, tf_axis(63 - i), (uint64_t)i + 1);
  cr_assert(tsr_frontier_is_valid(f));
  cr_assert_eq(tsr_frontier_count(f), 64);
  tsr_frontier_free(f);
  tsr_status_t st = tsr_frontier_create(TSR_FRONTIER_MAX_CAPACITY + 1, TSR_FRONTIER_KNOWLEDGE, &f);
  cr_assert_eq(tsr_status_code(st), TSR_INVALID_ARGUMENT);
  cr_assert_null(f);
  tsr_status_free(st);
}

Test(ops, insert_keeps_order_and_ignores_zero_and_lower) {
  tf_storage_t st;
  tsr_frontier_t *f = KEMPTY(&st);
  tsr_frontier_insert_or_raise(f, AX_C, 3);
  tsr_frontier_insert_or_raise(f, AX_A, 1);
  tsr_frontier_insert_or_raise(f, AX_B, 2);
  tsr_frontier_insert_or_raise(f, AX_D, 0); /* says nothing: not stored */
  tsr_frontier_insert_or_raise(f, AX_C, 1); /* lower: no change */
  tf_expect(f, 3, E(AX_A, 1), E(AX_B, 2), E(AX_C, 3));
  cr_assert_eq(tsr_frontier_get(f, AX_D), 0);
}

/* Eviction picks the smallest (epoch, axis), including the newcomer. */
Test(ops, knowledge_eviction_order) {
  tf_storage_t st;
  tsr_frontier_t *f = tf_make(&st, 3, TSR_FRONTIER_KNOWLEDGE, 3, E(AX_A, 4), E(AX_B, 2), E(AX_D, 9));
  /* newcomer C:1 is the smallest: dropped itself */
  cr_assert_eq(tsr_frontier_insert_or_raise(f, AX_C, 1), TSR_FRONTIER_EVICTED);
  tf_expect(f, 3, E(AX_A, 4), E(AX_B, 2), E(AX_D, 9));
  cr_assert(tsr_frontier_is_tainted(f));
  /* newcomer C:5 evicts B:2 (victim before the insert position) */
  tsr_frontier_insert_or_raise(f, AX_C, 5);
  tf_expect(f, 3, E(AX_A, 4), E(AX_C, 5), E(AX_D, 9));
  /* newcomer at the front evicting an entry after it */
  tsr_frontier_t *g = tf_make(&st, 3, TSR_FRONTIER_KNOWLEDGE, 3, E(AX_B, 7), E(AX_C, 1), E(AX_D, 9));
  tsr_frontier_insert_or_raise(g, AX_A, 5);
  tf_expect(g, 3, E(AX_A, 5), E(AX_B, 7), E(AX_D, 9));
  /* ties on epoch: the smaller axis goes */
  g = tf_make(&st, 2, TSR_FRONTIER_KNOWLEDGE, 2, E(AX_B, 3), E(AX_C, 3));
  tsr_frontier_insert_or_raise(g, AX_D, 3);
  tf_expect(g, 2, E(AX_C, 3), E(AX_D, 3));
}

Test(ops, merge_paths) {
  tf_storage_t s1, s2;
  /* equal axes */
  tsr_frontier_t *x = K(&s1, 3, E(AX_A, 1), E(AX_B, 9), E(AX_C, 3));
  tsr_frontier_t *y = K(&s2, 3, E(AX_A, 4), E(AX_B, 2), E(AX_C, 3));
  tsr_frontier_merge(x, y);
  tf_expect(x, 3, E(AX_A, 4), E(AX_B, 9), E(AX_C, 3));
  /* src a subset of dst, interleaved */
  x = K(&s1, 4, E(AX_A, 1), E(AX_B, 1), E(AX_C, 1), E(AX_D, 1));
  y = K(&s2, 2, E(AX_B, 5), E(AX_D, 6));
  tsr_frontier_merge(x, y);
  tf_expect(x, 4, E(AX_A, 1), E(AX_B, 5), E(AX_C, 1), E(AX_D, 6));
  /* disjoint interleaved */
  x = K(&s1, 2, E(AX_A, 1), E(AX_C, 3));
  y = K(&s2, 2, E(AX_B, 2), E(AX_D, 4));
  tsr_frontier_merge(x, y);
  tf_expect(x, 4, E(AX_A, 1), E(AX_B, 2), E(AX_C, 3), E(AX_D, 4));
  /* empty dst, empty src, self */
  x = KEMPTY(&s1);
  y = K(&s2, 2, E(AX_B, 2), E(AX_D, 4));
  tsr_frontier_merge(x, y);
  tf_expect(x, 2, E(AX_B, 2), E(AX_D, 4));
  tsr_frontier_merge(y, KEMPTY(&s1));
  tf_expect(y, 2, E(AX_B, 2), E(AX_D, 4));
  tsr_frontier_merge(y, y);
  tf_expect(y, 2, E(AX_B, 2), E(AX_D, 4));
}

Test(ops, merge_overflow_knowledge_keeps_largest) {
  tf_storage_t s1, s2;
  tsr_frontier_t *x = tf_make(&s1, 3, TSR_FRONTIER_KNOWLEDGE, 2, E(AX_A, 5), E(AX_C, 1));
  tsr_frontier_t *y = K(&s2, 3, E(AX_B, 7), E(AX_C, 2), E(AX_D, 3));
  cr_assert_eq(tsr_frontier_merge(x, y), TSR_FRONTIER_EVICTED);
  /* union {A:5, B:7, C:2, D:3}: the smallest epoch (C:2) goes */
  tf_expect(x, 3, E(AX_A, 5), E(AX_B, 7), E(AX_D, 3));
  cr_assert(tsr_frontier_is_tainted(x));
}

/* A source of one entry (merged as an insert-or-raise) follows the same
 * rules: the top entries of the union by epoch, the new one dropped when
 * it is the smallest; a requirement refuses it; a known axis is raised. */
Test(ops, merge_of_one_entry_overflow_rules) {
  tf_storage_t s1, s2;
  tsr_frontier_t *x = tf_make(&s1, 2, TSR_FRONTIER_KNOWLEDGE, 2, E(AX_A, 5), E(AX_B, 6));
  tsr_frontier_t *y = K(&s2, 1, E(AX_C, 1));
  cr_assert_eq(tsr_frontier_merge(x, y), TSR_FRONTIER_EVICTED);
  tf_expect(x, 2, E(AX_A, 5), E(AX_B, 6));
  cr_assert(tsr_frontier_is_tainted(x));
  x = tf_make(&s1, 2, TSR_FRONTIER_KNOWLEDGE, 2, E(AX_A, 5), E(AX_B, 6));
  y = K(&s2, 1, E(AX_C, 9));
  cr_assert_eq(tsr_frontier_merge(x, y), TSR_FRONTIER_EVICTED);
  tf_expect(x, 2, E(AX_B, 6), E(AX_C, 9));
  y = K(&s2, 1, E(AX_B, 8));
  cr_assert_eq(tsr_frontier_merge(x, y), TSR_FRONTIER_FIT);
  tf_expect(x, 2, E(AX_B, 8), E(AX_C, 9));
  y = K(&s2, 1, E(AX_B, 2)); /* behind: nothing changes */
  cr_assert_eq(tsr_frontier_merge(x, y), TSR_FRONTIER_FIT);
  tf_expect(x, 2, E(AX_B, 8), E(AX_C, 9));
  x = tf_make(&s1, 1, TSR_FRONTIER_REQUIREMENT, 1, E(AX_B, 5));
  y = K(&s2, 1, E(AX_A, 9));
  cr_assert_eq(tsr_frontier_merge(x, y), TSR_FRONTIER_OVERFLOW);
  tf_expect(x, 1, E(AX_B, 5));
  cr_assert(tsr_frontier_is_overflowed(x));
  /* into an empty frontier, and its marks */
  x = K(&s1, 0, 0, 0);
  y = tf_make(&s2, 1, TSR_FRONTIER_KNOWLEDGE, 1, E(AX_A, 5));
  tsr_frontier_insert_or_raise(y, AX_B, 9); /* evicts A: y is tainted */
  cr_assert_eq(tsr_frontier_merge(x, y), TSR_FRONTIER_FIT);
  tf_expect(x, 1, E(AX_B, 9));
  cr_assert(tsr_frontier_is_tainted(x));
}

Test(ops, merge_overflow_requirement_raises_only) {
  tf_storage_t s1, s2;
  tsr_frontier_t *x = tf_make(&s1, 2, TSR_FRONTIER_REQUIREMENT, 2, E(AX_A, 5), E(AX_C, 1));
  tsr_frontier_t *y = K(&s2, 3, E(AX_B, 7), E(AX_C, 2), E(AX_D, 3));
  cr_assert_eq(tsr_frontier_merge(x, y), TSR_FRONTIER_OVERFLOW);
  tf_expect(x, 2, E(AX_A, 5), E(AX_C, 2));
  cr_assert(tsr_frontier_is_overflowed(x));
  cr_assert_not(tsr_frontier_is_tainted(x));
}

Test(ops, merge_marks_travel) {
  tf_storage_t s1, s2, s3;
  tsr_frontier_t *tainted = tf_make(&s1, 1, TSR_FRONTIER_KNOWLEDGE, 1, E(AX_A, 5));
  tsr_frontier_insert_or_raise(tainted, AX_B, 9); /* evicts A */
  cr_assert(tsr_frontier_is_tainted(tainted));
  /* into knowledge: TAINTED */
  tsr_frontier_t *k = K(&s2, 1, E(AX_C, 1));
  tsr_frontier_merge(k, tainted);
  cr_assert(tsr_frontier_is_tainted(k));
  /* into requirement: the source's marks */
  tsr_frontier_t *r = tf_make(&s3, 4, TSR_FRONTIER_REQUIREMENT, 1, E(AX_C, 1));
  tsr_frontier_merge(r, tainted);
  cr_assert(tsr_frontier_is_tainted(r));
  cr_assert_not(tsr_frontier_is_overflowed(r));
  /* overflowed requirement into knowledge: knowledge becomes TAINTED */
  tsr_frontier_t *ovf = tf_make(&s1, 1, TSR_FRONTIER_REQUIREMENT, 1, E(AX_A, 5));
  tsr_frontier_insert_or_raise(ovf, AX_B, 1);
  k = K(&s2, 1, E(AX_C, 1));
  tsr_frontier_merge(k, ovf);
  cr_assert(tsr_frontier_is_tainted(k));
  cr_assert_not(tsr_frontier_is_overflowed(k));
}

Test(ops, copy) {
  tf_storage_t s1, s2;
  tsr_frontier_t *src = K(&s1, 3, E(AX_A, 5), E(AX_B, 2), E(AX_C, 7));
  tsr_frontier_t *dst = tsr_frontier_init(&s2, 8, TSR_FRONTIER_REQUIREMENT);
  cr_assert_eq(tsr_frontier_copy(dst, src), TSR_FRONTIER_FIT);
  cr_assert(tsr_frontier_equal(dst, src));
  dst = tsr_frontier_init(&s2, 2, TSR_FRONTIER_REQUIREMENT);
  cr_assert_eq(tsr_frontier_copy(dst, src), TSR_FRONTIER_OVERFLOW);
  cr_assert(tsr_frontier_is_overflowed(dst));
  dst = tsr_frontier_init(&s2, 2, TSR_FRONTIER_KNOWLEDGE);
  cr_assert_eq(tsr_frontier_copy(dst, src), TSR_FRONTIER_EVICTED);
  tf_expect(dst, 2, E(AX_A, 5), E(AX_C, 7));
  cr_assert(tsr_frontier_is_tainted(dst));
}

Test(ops, dominates_edges) {
  tf_storage_t s1, s2;
  tsr_frontier_t *empty = KEMPTY(&s1);
  tsr_frontier_t *f = K(&s2, 2, E(AX_A, 1), E(AX_B, 1));
  cr_assert(tsr_frontier_dominates(empty, empty));
  cr_assert(tsr_frontier_dominates(f, empty));
  cr_assert_not(tsr_frontier_dominates(empty, f));
  cr_assert(tsr_frontier_dominates(f, f));
  /* same count, different axes: must not take the fast path's answer */
  tsr_frontier_t *g = K(&s1, 2, E(AX_A, 1), E(AX_C, 1));
  cr_assert_not(tsr_frontier_dominates(f, g));
  cr_assert_not(tsr_frontier_dominates(g, f));
  /* an incomplete empty need is not dominated */
  tsr_frontier_t *inc = tsr_frontier_init(&s1, 0, TSR_FRONTIER_REQUIREMENT);
  tsr_frontier_insert_or_raise(inc, AX_A, 1);
  cr_assert_not(tsr_frontier_dominates(f, inc));
  /* an incomplete have still proves what it holds */
  tsr_frontier_t *have = tf_make(&s1, 1, TSR_FRONTIER_KNOWLEDGE, 1, E(AX_A, 3));
  tsr_frontier_insert_or_raise(have, AX_B, 4); /* evicts A:3 */
  tsr_frontier_t *need = K(&s2, 1, E(AX_B, 4));
  cr_assert(tsr_frontier_is_tainted(have));
  cr_assert(tsr_frontier_dominates(have, need));
}

Test(ops, compare_four_ways) {
  tf_storage_t s1, s2;
  tsr_frontier_t *a = K(&s1, 2, E(AX_A, 1), E(AX_B, 2));
  tsr_frontier_t *b = K(&s2, 2, E(AX_A, 1), E(AX_B, 2));
  cr_assert_eq(tsr_frontier_compare(a, b), TSR_FRONTIER_EQUAL);
  b = K(&s2, 2, E(AX_A, 1), E(AX_B, 3));
  cr_assert_eq(tsr_frontier_compare(a, b), TSR_FRONTIER_BEFORE);
  cr_assert_eq(tsr_frontier_compare(b, a), TSR_FRONTIER_AFTER);
  b = K(&s2, 2, E(AX_A, 2), E(AX_B, 1));
  cr_assert_eq(tsr_frontier_compare(a, b), TSR_FRONTIER_CONCURRENT);
  b = K(&s2, 3, E(AX_A, 1), E(AX_B, 2), E(AX_C, 1));
  cr_assert_eq(tsr_frontier_compare(a, b), TSR_FRONTIER_BEFORE);
  b = K(&s2, 1, E(AX_C, 1));
  cr_assert_eq(tsr_frontier_compare(a, b), TSR_FRONTIER_CONCURRENT);
  cr_assert_eq(tsr_frontier_compare(KEMPTY(&s2), a), TSR_FRONTIER_BEFORE);
  cr_assert_str_eq(tsr_frontier_order_name(TSR_FRONTIER_CONCURRENT), "concurrent");
}

Test(ops, compare_with_incomplete_never_claims_order_it_cannot_prove) {
  tf_storage_t s1, s2;
  tsr_frontier_t *a = tf_make(&s1, 2, TSR_FRONTIER_REQUIREMENT, 2, E(AX_A, 1), E(AX_B, 2));
  tsr_frontier_insert_or_raise(a, AX_C, 1); /* overflow: a is incomplete */
  tsr_frontier_t *b = K(&s2, 2, E(AX_A, 1), E(AX_B, 2));
  /* Same entries: b may not be claimed to dominate a; a dominates b. */
  cr_assert_eq(tsr_frontier_compare(a, b), TSR_FRONTIER_AFTER);
  cr_assert_eq(tsr_frontier_compare(b, a), TSR_FRONTIER_BEFORE);
  tsr_frontier_t *big = K(&s2, 3, E(AX_A, 9), E(AX_B, 9), E(AX_C, 9));
  cr_assert_eq(tsr_frontier_compare(big, a), TSR_FRONTIER_CONCURRENT);
  cr_assert_eq(tsr_frontier_compare(a, a), TSR_FRONTIER_CONCURRENT);
}

Test(ops, equal_is_structural) {
  tf_storage_t s1, s2;
  tsr_frontier_t *a = K(&s1, 2, E(AX_A, 1), E(AX_B, 2));
  tsr_frontier_t *b = tf_make(&s2, 7, TSR_FRONTIER_REQUIREMENT, 2, E(AX_B, 2), E(AX_A, 1));
  cr_assert(tsr_frontier_equal(a, b)); /* kind and capacity do not matter */
  tsr_frontier_insert_or_raise(b, AX_B, 3);
  cr_assert_not(tsr_frontier_equal(a, b));
  b = K(&s2, 2, E(AX_A, 1), E(AX_B, 2));
  b->flags = TSR_FRONTIER_TAINTED;
  cr_assert_not(tsr_frontier_equal(a, b));
}

Test(ops, find_undominated) {
  tf_storage_t s1, s2, s3;
  tsr_frontier_t *have = K(&s1, 3, E(AX_A, 5), E(AX_B, 2), E(AX_D, 1));
  tsr_frontier_t *need = K(&s2, 4, E(AX_A, 3), E(AX_B, 4), E(AX_C, 1), E(AX_D, 1));
  tsr_frontier_t *miss = tsr_frontier_init(&s3, 8, TSR_FRONTIER_REQUIREMENT);
  cr_assert_not(tsr_frontier_find_undominated(have, need, miss));
  tf_expect(miss, 2, E(AX_B, 4), E(AX_C, 1));
  cr_assert(tsr_frontier_is_complete(miss));
  /* merging the missing entries closes the gap */
  tsr_frontier_merge(have, miss);
  cr_assert(tsr_frontier_find_undominated(have, need, miss));
  cr_assert_eq(tsr_frontier_count(miss), 0);
  /* too small an output overflows instead of dropping silently */
  have = K(&s1, 0, 0, 0);
  miss = tsr_frontier_init(&s3, 1, TSR_FRONTIER_REQUIREMENT);
  cr_assert_not(tsr_frontier_find_undominated(have, need, miss));
  cr_assert(tsr_frontier_is_overflowed(miss));
  /* an incomplete need: nothing missing in the entries, still not covered */
  tsr_frontier_t *inc = tf_make(&s2, 1, TSR_FRONTIER_REQUIREMENT, 1, E(AX_A, 1));
  tsr_frontier_insert_or_raise(inc, AX_B, 1);
  have = K(&s1, 2, E(AX_A, 9), E(AX_B, 9));
  miss = tsr_frontier_init(&s3, 8, TSR_FRONTIER_REQUIREMENT);
  cr_assert_not(tsr_frontier_find_undominated(have, inc, miss));
  cr_assert_eq(tsr_frontier_count(miss), 0);
  cr_assert(tsr_frontier_is_overflowed(miss));
  /* the same axes, more missing than out holds: overflow, and nothing
   * written past out's capacity */
  tf_storage_t s5, s6;
  tsr_frontier_t *h4 = K(&s5, 4, E(AX_A, 1), E(AX_B, 1), E(AX_C, 1), E(AX_D, 1));
  tsr_frontier_t *n4 = K(&s6, 4, E(AX_A, 2), E(AX_B, 2), E(AX_C, 2), E(AX_D, 2));
  memset(&s3, 0xab, sizeof(s3));
  miss = tsr_frontier_init(&s3, 2, TSR_FRONTIER_REQUIREMENT);
  cr_assert_not(tsr_frontier_find_undominated(h4, n4, miss));
  cr_assert(tsr_frontier_is_overflowed(miss));
  cr_assert_eq(tsr_frontier_count(miss), 2);
  const unsigned char *past = (const unsigned char *)&miss->entries[2];
  for (size_t b = 0; b < 2 * sizeof(tsr_frontier_entry_t); b++)
    cr_assert_eq(past[b], 0xab, "byte %zu past out's capacity was written", b);
  miss = tsr_frontier_init(&s3, 8, TSR_FRONTIER_REQUIREMENT);
  /* the marks are the need's: a complete need of one axis clears those an
   * earlier call left, covered or not */
  tf_storage_t s4;
  tsr_frontier_t *one = K(&s4, 1, E(AX_A, 3));
  cr_assert(tsr_frontier_find_undominated(have, one, miss));
  cr_assert_eq(tsr_frontier_count(miss), 0);
  cr_assert(tsr_frontier_is_complete(miss));
  cr_assert_not(tsr_frontier_find_undominated(have, inc, miss));
  cr_assert(tsr_frontier_is_overflowed(miss));
  one = K(&s4, 1, E(AX_A, 10));
  cr_assert_not(tsr_frontier_find_undominated(have, one, miss));
  tf_expect(miss, 1, E(AX_A, 10));
  cr_assert(tsr_frontier_is_complete(miss));
  /* an incomplete need of one axis: its entry is reached, still not covered */
  one = tf_make(&s4, 1, TSR_FRONTIER_REQUIREMENT, 1, E(AX_A, 1));
  tsr_frontier_insert_or_raise(one, AX_B, 1);
  cr_assert_eq(tsr_frontier_count(one), 1);
  cr_assert_not(tsr_frontier_find_undominated(have, one, miss));
  cr_assert_not(tsr_frontier_dominates(have, one));
  cr_assert_eq(tsr_frontier_count(miss), 0);
  cr_assert(tsr_frontier_is_overflowed(miss));
}

Test(ops, is_valid_catches_broken_frontiers) {
  tf_storage_t st;
  tsr_frontier_t *f = K(&st, 2, E(AX_A, 1), E(AX_B, 2));
  cr_assert(tsr_frontier_is_valid(f));
  f->entries[1].axis = AX_A;
  cr_assert_not(tsr_frontier_is_valid(f));
  f = K(&st, 2, E(AX_A, 1), E(AX_B, 2));
  f->entries[0].epoch = 0;
  cr_assert_not(tsr_frontier_is_valid(f));
  f = K(&st, 2, E(AX_A, 1), E(AX_B, 2));
  f->flags = 0x80;
  cr_assert_not(tsr_frontier_is_valid(f));
  f = K(&st, 2, E(AX_A, 1), E(AX_B, 2));
  f->count = 17;
  cr_assert_not(tsr_frontier_is_valid(f));
  cr_assert_not(tsr_frontier_is_valid(NULL));
}

/* A queue never evicts its own entry, even at capacity 1 and under a flood
 * of imports with larger epochs. */
Test(ops, queue_own_entry_is_pinned) {
  tf_storage_t sq, sp;
  tsr_queue_t q, p;
  cr_assert(tsr_status_is_ok(tsr_queue_init(&q, AX_A, tsr_frontier_init(&sq, 1, TSR_FRONTIER_KNOWLEDGE))));
  cr_assert(tsr_status_is_ok(tsr_queue_init(&p, AX_B, tsr_frontier_init(&sp, 4, TSR_FRONTIER_KNOWLEDGE))));
  tsr_semaphore_t *s = tf_semaphore(4, 4);
  for (int i = 0; i < 100; i++) tsr_queue_submit(&p, NULL, 0, NULL);
  tsr_queue_signal(&p, s, 1);
  tsr_queue_wait_t w = {s, 1};
  uint64_t issue;
  cr_assert_eq(tsr_queue_submit(&q, &w, 1, &issue), 1);
  tf_expect(tsr_queue_frontier(&q), 1, E(AX_A, 1));
  cr_assert(tsr_frontier_is_tainted(tsr_queue_frontier(&q)));
  /* and the queue can still signal with its own signal point */
  cr_assert_eq(tsr_queue_signal(&q, s, 2), TSR_SEMAPHORE_SIGNALLED);
  tsr_semaphore_destroy(s);
}

Test(ops, queue_argument_checks) {
  tf_storage_t sq;
  tsr_queue_t q;
  tsr_status_t st = tsr_queue_init(&q, 0, tsr_frontier_init(&sq, 4, TSR_FRONTIER_KNOWLEDGE));
  cr_assert_eq(tsr_status_code(st), TSR_INVALID_ARGUMENT);
  tsr_status_free(st);
  st = tsr_queue_init(&q, AX_A, tsr_frontier_init(&sq, 4, TSR_FRONTIER_REQUIREMENT));
  cr_assert_eq(tsr_status_code(st), TSR_INVALID_ARGUMENT);
  tsr_status_free(st);
  cr_assert(tsr_status_is_ok(tsr_queue_init(&q, AX_A, tsr_frontier_init(&sq, 4, TSR_FRONTIER_KNOWLEDGE))));
  tsr_semaphore_t *s = tf_semaphore(4, 4);
  cr_assert_eq(tsr_queue_signal(&q, s, 1), TSR_SEMAPHORE_NO_ORIGIN); /* nothing submitted */
  uint64_t issue = 7;
  cr_assert_eq(tsr_queue_submit(&q, NULL, 1, &issue), 0);
  cr_assert_eq(issue, 0);
  tsr_queue_wait_t many[TSR_QUEUE_MAX_WAITS + 1];
  for (uint32_t i = 0; i <= TSR_QUEUE_MAX_WAITS; i++) many[i] = (tsr_queue_wait_t){s, 1};
  cr_assert_eq(tsr_queue_submit(&q, many, TSR_QUEUE_MAX_WAITS + 1, &issue), 0);
  cr_assert_eq(q.epoch, 0);
  /* 64 waits on a value nobody signalled: all issued */
  cr_assert_eq(tsr_queue_submit(&q, many, TSR_QUEUE_MAX_WAITS, &issue), 1);
  cr_assert_eq(issue, UINT64_MAX);
  tsr_semaphore_destroy(s);
}
