/* test_buffer.c: death frontiers and "try before you fence" planning. */
#include "helpers.h"

/* Signals `s` to value v with frontier f (origin = f's first axis). */
static void sig(tsr_semaphore_t *s, uint64_t v, tsr_axis_t origin, const tsr_frontier_t *f) {
  cr_assert_eq(tsr_semaphore_signal(s, v, origin, f), TSR_SEMAPHORE_SIGNALLED);
}

static tsr_frontier_t *death_of(tf_storage_t *st, int n, ...) {
  tsr_frontier_t *d = tsr_frontier_init(st, 16, TSR_FRONTIER_REQUIREMENT);
  va_list ap;
  va_start(ap, n);
  for (int i = 0; i < n; i++) {
    tsr_axis_t a = va_arg(ap, tsr_axis_t);
    uint64_t e = va_arg(ap, uint64_t);
    tsr_frontier_insert_or_raise(d, a, e);
  }
  va_end(ap);
  return d;
}

/* Three queues each used the buffer; three semaphores, one per queue, with
 * a few signals each. The plan takes one wait per queue at the earliest value
 * that covers its entry, and importing them makes the reuse test pass. */
Test(buffer, plan_earliest_values) {
  tf_storage_t sd, sh, sf;
  tsr_semaphore_t *sa = tf_semaphore(8, 4), *sb = tf_semaphore(8, 4), *sc = tf_semaphore(8, 4);
  for (uint64_t v = 1; v <= 6; v++) {
    sig(sa, v, AX_A, K(&sf, 1, E(AX_A, v)));
    sig(sb, v, AX_B, K(&sf, 1, E(AX_B, 10 * v)));
    sig(sc, v, AX_C, K(&sf, 1, E(AX_C, v + 100)));
  }
  tsr_frontier_t *death = death_of(&sd, 3, E(AX_A, 4), E(AX_B, 25), E(AX_C, 101));
  tsr_frontier_t *have = K(&sh, 1, E(AX_C, 200)); /* C already covered */
  tsr_semaphore_t *sems[3] = {sa, sb, sc};
  tsr_buffer_wait_t w[8];
  uint32_t n = 0;
  cr_assert_eq(tsr_buffer_plan_reuse(have, death, sems, 3, 8, w, &n), TSR_BUFFER_REUSE_AFTER_WAITS);
  cr_assert_eq(n, 2);
  cr_assert_eq(w[0].semaphore, sa);
  cr_assert_eq(w[0].value, 4); /* A:4 first appears at value 4 */
  cr_assert_eq(w[1].semaphore, sb);
  cr_assert_eq(w[1].value, 3); /* B:30 at value 3 covers B:25 */
  for (uint32_t i = 0; i < n; i++)
    cr_assert_eq(tsr_semaphore_import(w[i].semaphore, w[i].value, have), TSR_SEMAPHORE_IMPORTED);
  cr_assert(tsr_buffer_can_reuse(have, death));
  for (int i = 0; i < 3; i++) tsr_semaphore_destroy(sems[i]);
}

/* Greedy set cover prefers one signal that carries several missing entries. */
Test(buffer, plan_prefers_transitive_signal) {
  tf_storage_t sd, sh, sf;
  tsr_semaphore_t *sa = tf_semaphore(8, 4), *sb = tf_semaphore(8, 4), *sj = tf_semaphore(8, 4);
  sig(sa, 1, AX_A, K(&sf, 1, E(AX_A, 5)));
  sig(sb, 1, AX_B, K(&sf, 1, E(AX_B, 5)));
  sig(sj, 1, AX_C, K(&sf, 3, E(AX_A, 5), E(AX_B, 5), E(AX_C, 1))); /* C joined A and B */
  tsr_frontier_t *death = death_of(&sd, 2, E(AX_A, 5), E(AX_B, 5));
  tsr_semaphore_t *sems[3] = {sa, sb, sj};
  tsr_buffer_wait_t w[4];
  uint32_t n = 0;
  cr_assert_eq(tsr_buffer_plan_reuse(KEMPTY(&sh), death, sems, 3, 4, w, &n), TSR_BUFFER_REUSE_AFTER_WAITS);
  cr_assert_eq(n, 1);
  cr_assert_eq(w[0].semaphore, sj);
  for (int i = 0; i < 3; i++) tsr_semaphore_destroy(sems[i]);
}

Test(buffer, plan_falls_back_to_fence) {
  tf_storage_t sd, sh, sf;
  tsr_semaphore_t *sa = tf_semaphore(2, 4);
  for (uint64_t v = 1; v <= 5; v++) sig(sa, v, AX_A, K(&sf, 1, E(AX_A, v)));
  tsr_semaphore_t *sems[1] = {sa};
  tsr_buffer_wait_t w[4];
  uint32_t n = 7;
  /* an axis no history mentions */
  tsr_frontier_t *death = death_of(&sd, 2, E(AX_A, 5), E(AX_D, 1));
  cr_assert_eq(tsr_buffer_plan_reuse(KEMPTY(&sh), death, sems, 1, 4, w, &n), TSR_BUFFER_REUSE_FENCE);
  cr_assert_eq(n, 0);
  /* history only still holds A:4 and A:5: A:3 is still covered by A:4 */
  death = death_of(&sd, 1, E(AX_A, 3));
  cr_assert_eq(tsr_buffer_plan_reuse(KEMPTY(&sh), death, sems, 1, 4, w, &n), TSR_BUFFER_REUSE_AFTER_WAITS);
  cr_assert_eq(w[0].value, 4);
  /* not enough room for the waits */
  tsr_semaphore_t *sb = tf_semaphore(2, 4);
  sig(sb, 1, AX_B, K(&sf, 1, E(AX_B, 1)));
  tsr_semaphore_t *two[2] = {sa, sb};
  death = death_of(&sd, 2, E(AX_A, 5), E(AX_B, 1));
  cr_assert_eq(tsr_buffer_plan_reuse(KEMPTY(&sh), death, two, 2, 1, w, &n), TSR_BUFFER_REUSE_FENCE);
  cr_assert_eq(tsr_buffer_plan_reuse(KEMPTY(&sh), death, two, 2, 2, w, &n), TSR_BUFFER_REUSE_AFTER_WAITS);
  cr_assert_eq(n, 2);
  tsr_semaphore_destroy(sa);
  tsr_semaphore_destroy(sb);
}

/* An incomplete death frontier is never reused without a fence. */
Test(buffer, incomplete_death_frontier_needs_fence) {
  tf_storage_t sq, sd, sh;
  tsr_frontier_t *freeing = tf_make(&sq, 2, TSR_FRONTIER_KNOWLEDGE, 2, E(AX_A, 5), E(AX_B, 6));
  tsr_frontier_insert_or_raise(freeing, AX_C, 7); /* evicts A:5: the queue forgot A */
  tsr_frontier_t *death = tsr_frontier_init(&sd, 8, TSR_FRONTIER_REQUIREMENT);
  cr_assert_eq(tsr_buffer_record_death(freeing, death), TSR_FRONTIER_FIT);
  cr_assert(tsr_frontier_is_tainted(death));
  tsr_frontier_t *have = K(&sh, 3, E(AX_A, 9), E(AX_B, 9), E(AX_C, 9));
  cr_assert_not(tsr_buffer_can_reuse(have, death));
  uint32_t n;
  tsr_buffer_wait_t w[1];
  cr_assert_eq(tsr_buffer_plan_reuse(have, death, NULL, 0, 1, w, &n), TSR_BUFFER_REUSE_FENCE);
  /* a death frontier too small for the freeing frontier overflows */
  tsr_frontier_t *small = tsr_frontier_init(&sd, 1, TSR_FRONTIER_REQUIREMENT);
  tsr_frontier_t *clean = K(&sq, 2, E(AX_A, 5), E(AX_B, 6));
  cr_assert_eq(tsr_buffer_record_death(clean, small), TSR_FRONTIER_OVERFLOW);
  cr_assert_not(tsr_buffer_can_reuse(have, small));
}
