/* test_semaphore.c: semaphore semantics, one thread at a time. */

#include "helpers.h"

Test(semaphore, create_checks) {
  tsr_semaphore_t *s = (tsr_semaphore_t *)1;
  tsr_semaphore_options_t o = {0, 0, 4};
  tsr_status_t st = tsr_semaphore_create(&o, &s);
  cr_assert_eq(tsr_status_code(st), TSR_INVALID_ARGUMENT);
  cr_assert_null(s);
  tsr_status_free(st);
  o = (tsr_semaphore_options_t){0, 4, 0};
  st = tsr_semaphore_create(&o, &s);
  cr_assert_eq(tsr_status_code(st), TSR_INVALID_ARGUMENT);
  tsr_status_free(st);
  tsr_semaphore_destroy(NULL);
}

Test(semaphore, signal_rules) {
  tf_storage_t st;
  tsr_semaphore_t *s = tf_semaphore(4, 4);
  tsr_frontier_t *f = K(&st, 1, E(AX_A, 3));
  cr_assert_eq(tsr_semaphore_signal(s, 1, AX_B, f), TSR_SEMAPHORE_NO_ORIGIN);
  cr_assert_eq(tsr_semaphore_signal(s, 1, AX_A, NULL), TSR_SEMAPHORE_NO_ORIGIN);
  cr_assert_eq(tsr_semaphore_value(s), 0);
  cr_assert_eq(tsr_semaphore_signal(s, 2, AX_A, f), TSR_SEMAPHORE_SIGNALLED);
  cr_assert_eq(tsr_semaphore_signal(s, 2, AX_A, f), TSR_SEMAPHORE_NOT_MONOTONIC);
  cr_assert_eq(tsr_semaphore_signal(s, 1, AX_A, f), TSR_SEMAPHORE_NOT_MONOTONIC);
  cr_assert_eq(tsr_semaphore_advance_external(s, 2), TSR_SEMAPHORE_NOT_MONOTONIC);
  cr_assert_eq(tsr_semaphore_value(s), 2);
  /* the signal copied the frontier: later changes to f do not leak in */
  tsr_frontier_insert_or_raise(f, AX_C, 9);
  tsr_frontier_t *k = KEMPTY(&st);
  cr_assert_eq(tsr_semaphore_import(s, 1, k), TSR_SEMAPHORE_IMPORTED);
  tf_expect(k, 1, E(AX_A, 3));
  tsr_semaphore_destroy(s);
}

Test(semaphore, reaching_signal_not_latest) {
  tf_storage_t st;
  tsr_semaphore_t *s = tf_semaphore(8, 4);
  /* signals at 2, 5, 9 by different origins */
  tsr_semaphore_signal(s, 2, AX_A, K(&st, 1, E(AX_A, 1)));
  tsr_semaphore_signal(s, 5, AX_B, K(&st, 1, E(AX_B, 1)));
  tsr_semaphore_signal(s, 9, AX_C, K(&st, 1, E(AX_C, 1)));
  struct {
    uint64_t v;
    tsr_axis_t origin;
  } want[] = {{1, AX_A}, {2, AX_A}, {3, AX_B}, {5, AX_B}, {6, AX_C}, {9, AX_C}};
  for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
    tsr_frontier_t *k = KEMPTY(&st);
    cr_assert_eq(tsr_semaphore_import(s, want[i].v, k), TSR_SEMAPHORE_IMPORTED);
    tf_expect(k, 1, E(want[i].origin, 1));
  }
  cr_assert_eq(tsr_semaphore_import(s, 10, KEMPTY(&st)), TSR_SEMAPHORE_PENDING);
  /* value 0 and values <= the initial value are satisfied from birth */
  cr_assert_eq(tsr_semaphore_import(s, 0, KEMPTY(&st)), TSR_SEMAPHORE_IMPORTED);
  cr_assert(tsr_semaphore_covers(s, 0, KEMPTY(&st)));
  tsr_semaphore_destroy(s);
}

Test(semaphore, initial_value) {
  tf_storage_t st;
  tsr_semaphore_options_t o = {.initial_value = 10, .history_length = 2, .frontier_capacity = 2};
  tsr_semaphore_t *s;
  cr_assert(tsr_status_is_ok(tsr_semaphore_create(&o, &s)));
  cr_assert_eq(tsr_semaphore_value(s), 10);
  cr_assert_eq(tsr_semaphore_watermark(s), 10);
  cr_assert(tsr_semaphore_covers(s, 10, KEMPTY(&st)));
  cr_assert_not(tsr_semaphore_is_tainted(s, 10));
  tsr_frontier_t *k = KEMPTY(&st);
  cr_assert_eq(tsr_semaphore_import(s, 7, k), TSR_SEMAPHORE_IMPORTED);
  cr_assert_eq(tsr_frontier_count(k), 0);
  cr_assert_not(tsr_semaphore_covers(s, 11, KEMPTY(&st)));
  cr_assert_eq(tsr_semaphore_signal(s, 10, AX_A, K(&st, 1, E(AX_A, 1))), TSR_SEMAPHORE_NOT_MONOTONIC);
  tsr_semaphore_destroy(s);
}

/* A signal frontier larger than the record: stored evicted and tainted, but
 * the signal point is kept, and elision does not depend on the taint. */
Test(semaphore, oversized_signal_frontier) {
  tf_storage_t st, sk;
  tsr_semaphore_t *s = tf_semaphore(4, 2);
  tsr_frontier_t *f = K(&st, 4, E(AX_A, 1), E(AX_B, 9), E(AX_C, 8), E(AX_D, 7));
  cr_assert_eq(tsr_semaphore_signal(s, 1, AX_A, f), TSR_SEMAPHORE_SIGNALLED);
  tsr_frontier_t *k = KEMPTY(&sk);
  cr_assert_eq(tsr_semaphore_import(s, 1, k), TSR_SEMAPHORE_IMPORTED);
  cr_assert(tsr_frontier_is_tainted(k));
  cr_assert_eq(tsr_frontier_get(k, AX_A), 1); /* the signal point survived */
  cr_assert_eq(tsr_frontier_count(k), 2);
  cr_assert(tsr_semaphore_covers(s, 1, K(&sk, 1, E(AX_A, 1))));
  cr_assert_not(tsr_semaphore_covers(s, 1, K(&sk, 3, E(AX_B, 9), E(AX_C, 9), E(AX_D, 9))));
  tsr_semaphore_destroy(s);
}

Test(semaphore, history_of_one_and_external_records) {
  tf_storage_t st;
  tsr_semaphore_t *s = tf_semaphore(1, 2);
  tsr_semaphore_signal(s, 1, AX_A, K(&st, 1, E(AX_A, 1)));
  tsr_semaphore_advance_external(s, 2); /* pushes the tracked record out */
  cr_assert_eq(tsr_semaphore_import(s, 1, KEMPTY(&st)), TSR_SEMAPHORE_HISTORY_LOST);
  cr_assert_eq(tsr_semaphore_import(s, 2, KEMPTY(&st)), TSR_SEMAPHORE_EXTERNAL);
  /* v = 1 is below the watermark but no tracked record covers it any more */
  cr_assert_not(tsr_semaphore_is_tainted(s, 1));
  cr_assert_not(tsr_semaphore_covers(s, 1, K(&st, 1, E(AX_A, 99))));
  cr_assert(tsr_semaphore_is_tainted(s, 2));
  tsr_semaphore_destroy(s);
}

Test(semaphore, wait_times_out) {
  tf_storage_t st;
  tsr_semaphore_t *s = tf_semaphore(2, 2);
  cr_assert_eq(tsr_semaphore_wait(s, 1, 2000000 /* 2 ms */, KEMPTY(&st)), TSR_SEMAPHORE_PENDING);
  cr_assert_eq(tsr_semaphore_wait(s, 1, 0, KEMPTY(&st)), TSR_SEMAPHORE_PENDING);
  tsr_semaphore_destroy(s);
}

/* The threaded scenarios (many threads signalling and waiting) are in
 * test_threads.c, a plain program so that it also runs under ThreadSanitizer,
 * where Criterion cannot start (Snaipe/Criterion#274). */
