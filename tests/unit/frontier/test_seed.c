/* test_seed.c: every example of seed 001, as written there, is a test. Each
 * test names the seed section it comes from. */
#include "helpers.h"

static void tf_queue(tsr_queue_t *q, tf_storage_t *st, tsr_axis_t axis, uint32_t cap) {
  tsr_frontier_t *f = tsr_frontier_init(st, cap, TSR_FRONTIER_KNOWLEDGE);
  tsr_status_t s = tsr_queue_init(q, axis, f);
  cr_assert(tsr_status_is_ok(s), "%s", tsr_status_message(s));
}

/* Submits `n` operations without waits. */
static void tf_run(tsr_queue_t *q, int n) {
  for (int i = 0; i < n; i++) cr_assert_neq(tsr_queue_submit(q, NULL, 0, NULL), 0);
}

/* ---- Frontiers / Operations --------------------------------------------- */

/* merge({A:5, B:3}, {A:2, B:7, C:4}) = {A:5, B:7, C:4} */
Test(seed, merge) {
  tf_storage_t s1, s2;
  tsr_frontier_t *x = K(&s1, 2, E(AX_A, 5), E(AX_B, 3));
  tsr_frontier_t *y = K(&s2, 3, E(AX_A, 2), E(AX_B, 7), E(AX_C, 4));
  cr_assert_eq(tsr_frontier_merge(x, y), TSR_FRONTIER_FIT);
  tf_expect(x, 3, E(AX_A, 5), E(AX_B, 7), E(AX_C, 4));
  cr_assert(tsr_frontier_is_complete(x));
}

/* dominates({A:5, B:7, C:4}, {A:3, B:7}) = true   (A:5>=3, B:7>=7)
 * dominates({A:5, B:7},      {A:3, C:4}) = false  (C missing from left) */
Test(seed, dominance) {
  tf_storage_t s1, s2, s3, s4;
  tsr_frontier_t *f1 = K(&s1, 3, E(AX_A, 5), E(AX_B, 7), E(AX_C, 4));
  tsr_frontier_t *g1 = K(&s2, 2, E(AX_A, 3), E(AX_B, 7));
  cr_assert(tsr_frontier_dominates(f1, g1));
  tsr_frontier_t *f2 = K(&s3, 2, E(AX_A, 5), E(AX_B, 7));
  tsr_frontier_t *g2 = K(&s4, 2, E(AX_A, 3), E(AX_C, 4));
  cr_assert_not(tsr_frontier_dominates(f2, g2));
}

/* insert_or_raise({A:5, B:3}, C, 4) = {A:5, B:3, C:4}
 * insert_or_raise({A:5, B:3}, A, 8) = {A:8, B:3} */
Test(seed, insert_or_raise) {
  tf_storage_t s1, s2;
  tsr_frontier_t *f = K(&s1, 2, E(AX_A, 5), E(AX_B, 3));
  cr_assert_eq(tsr_frontier_insert_or_raise(f, AX_C, 4), TSR_FRONTIER_FIT);
  tf_expect(f, 3, E(AX_A, 5), E(AX_B, 3), E(AX_C, 4));
  tsr_frontier_t *g = K(&s2, 2, E(AX_A, 5), E(AX_B, 3));
  cr_assert_eq(tsr_frontier_insert_or_raise(g, AX_A, 8), TSR_FRONTIER_FIT);
  tf_expect(g, 2, E(AX_A, 8), E(AX_B, 3));
}

/* ---- Capacity and Overflow ---------------------------------------------- */

/* "When a new axis would exceed capacity, the entry with the smallest epoch is
 * evicted and the frontier is marked as tainted. Tainted frontiers remain
 * correct for dominance checking -- they are conservative, never optimistic."
 * Plus docs/frontiers.md ("Two roles"): a requirement frontier never drops an
 * entry. */
Test(seed, overflow_knowledge_evicts_smallest_and_taints) {
  tf_storage_t s1, s2;
  tsr_frontier_t *f = tf_make(&s1, 2, TSR_FRONTIER_KNOWLEDGE, 2, E(AX_A, 5), E(AX_B, 3));
  cr_assert_eq(tsr_frontier_insert_or_raise(f, AX_C, 4), TSR_FRONTIER_EVICTED);
  tf_expect(f, 2, E(AX_A, 5), E(AX_C, 4)); /* B:3 had the smallest epoch */
  cr_assert(tsr_frontier_is_tainted(f));
  /* As knowledge it still answers from facts it holds... */
  tsr_frontier_t *need = K(&s2, 1, E(AX_A, 5));
  cr_assert(tsr_frontier_dominates(f, need));
  /* ...and never claims what it lost. */
  need = K(&s2, 1, E(AX_B, 3));
  cr_assert_not(tsr_frontier_dominates(f, need));
  /* As a requirement it is incomplete: nothing dominates it, not even a
   * frontier that covers every entry it kept. */
  tsr_frontier_t *big = K(&s2, 3, E(AX_A, 9), E(AX_B, 9), E(AX_C, 9));
  cr_assert_not(tsr_frontier_dominates(big, f));
  cr_assert_eq(tsr_frontier_compare(big, f), TSR_FRONTIER_CONCURRENT);
}

Test(seed, overflow_requirement_never_drops) {
  tf_storage_t s1, s2;
  tsr_frontier_t *r = tf_make(&s1, 2, TSR_FRONTIER_REQUIREMENT, 2, E(AX_A, 5), E(AX_B, 3));
  cr_assert_eq(tsr_frontier_insert_or_raise(r, AX_C, 4), TSR_FRONTIER_OVERFLOW);
  tf_expect(r, 2, E(AX_A, 5), E(AX_B, 3)); /* nothing evicted */
  cr_assert(tsr_frontier_is_overflowed(r));
  /* The caller must fall back to a real wait: even a frontier covering
   * A, B and C is not allowed to claim the requirement is met. */
  tsr_frontier_t *have = K(&s2, 3, E(AX_A, 9), E(AX_B, 9), E(AX_C, 9));
  cr_assert_not(tsr_frontier_dominates(have, r));
  /* Raising an axis it holds still works. */
  cr_assert_eq(tsr_frontier_insert_or_raise(r, AX_A, 7), TSR_FRONTIER_FIT);
  cr_assert_eq(tsr_frontier_get(r, AX_A), 7);
}

/* ---- Semaphores / Transitivity ------------------------------------------ */

/* Q_A signals S_1 to 1             S_1 frontier: {A: 5}
 * Q_B waits on S_1 >= 1, then signals S_2 to 1
 *                                  S_2 frontier: {A: 5, B: 3}
 * Q_C waits on S_2 >= 1            Q_C: {A: 5, B: 3, C: ...} */
Test(seed, transitivity_through_three_queues) {
  tf_storage_t sa, sb, sc, tmp;
  tsr_queue_t qa, qb, qc;
  tf_queue(&qa, &sa, AX_A, 8);
  tf_queue(&qb, &sb, AX_B, 8);
  tf_queue(&qc, &sc, AX_C, 8);
  tsr_semaphore_t *s1 = tf_semaphore(8, 8), *s2 = tf_semaphore(8, 8);

  tf_run(&qa, 5);
  cr_assert_eq(tsr_queue_signal(&qa, s1, 1), TSR_SEMAPHORE_SIGNALLED);
  tsr_frontier_t *f = KEMPTY(&tmp);
  cr_assert_eq(tsr_semaphore_import(s1, 1, f), TSR_SEMAPHORE_IMPORTED);
  tf_expect(f, 1, E(AX_A, 5));

  tf_run(&qb, 2);
  tsr_queue_wait_t w1 = {s1, 1};
  uint64_t issue = 0;
  cr_assert_eq(tsr_queue_submit(&qb, &w1, 1, &issue), 3);
  cr_assert_eq(issue, 1); /* Q_B never saw A: the wait is real */
  cr_assert_eq(tsr_queue_signal(&qb, s2, 1), TSR_SEMAPHORE_SIGNALLED);
  f = KEMPTY(&tmp);
  cr_assert_eq(tsr_semaphore_import(s2, 1, f), TSR_SEMAPHORE_IMPORTED);
  tf_expect(f, 2, E(AX_A, 5), E(AX_B, 3));

  tsr_queue_wait_t w2 = {s2, 1};
  cr_assert_eq(tsr_queue_submit(&qc, &w2, 1, &issue), 1);
  cr_assert_eq(issue, 1);
  /* Q_C knows about Q_A's work without ever touching S_1. */
  tf_expect(tsr_queue_frontier(&qc), 3, E(AX_A, 5), E(AX_B, 3), E(AX_C, 1));
  tsr_semaphore_destroy(s1);
  tsr_semaphore_destroy(s2);
}

/* ---- Scheduling vs. Causality (late waiter) ------------------------------ */

/* Q signals S to values 1, 2, 3, 4, 5; later Q_B waits on S >= 2: it
 * inherits the frontier of the signal that set 2, not the one that set 5. */
Test(seed, late_waiter) {
  tf_storage_t sq, sb;
  tsr_queue_t q, qb;
  tf_queue(&q, &sq, AX_A, 8);
  tf_queue(&qb, &sb, AX_B, 8);
  tsr_semaphore_t *s = tf_semaphore(16, 8);
  for (uint64_t v = 1; v <= 5; v++) {
    tf_run(&q, 1);
    cr_assert_eq(tsr_queue_signal(&q, s, v), TSR_SEMAPHORE_SIGNALLED);
  }
  cr_assert_eq(tsr_semaphore_value(s), 5);
  tsr_queue_wait_t w = {s, 2};
  uint64_t issue = 0;
  cr_assert_eq(tsr_queue_submit(&qb, &w, 1, &issue), 1);
  cr_assert_eq(issue, 1);
  tf_expect(tsr_queue_frontier(&qb), 2, E(AX_A, 2), E(AX_B, 1)); /* A:2, not A:5 */
  /* The same through the host-side wait. */
  tf_storage_t st;
  tsr_frontier_t *k = KEMPTY(&st);
  cr_assert_eq(tsr_semaphore_wait(s, 2, 0, k), TSR_SEMAPHORE_IMPORTED);
  tf_expect(k, 1, E(AX_A, 2));
  tsr_semaphore_destroy(s);
}

/* "values older than the history fall back to a conservative answer" */
Test(seed, late_waiter_past_history_is_conservative) {
  tf_storage_t sq, st;
  tsr_queue_t q;
  tf_queue(&q, &sq, AX_A, 8);
  tsr_semaphore_t *s = tf_semaphore(2, 8); /* remembers only 2 signals */
  for (uint64_t v = 1; v <= 5; v++) {
    tf_run(&q, 1);
    cr_assert_eq(tsr_queue_signal(&q, s, v), TSR_SEMAPHORE_SIGNALLED);
  }
  tsr_frontier_t *k = KEMPTY(&st);
  cr_assert_eq(tsr_semaphore_import(s, 2, k), TSR_SEMAPHORE_HISTORY_LOST);
  cr_assert_eq(tsr_frontier_count(k), 0); /* nothing merged: knows less, safe */
  /* Elision uses the first remembered signal above 2 (value 4, A:4). */
  tsr_frontier_t *have = K(&st, 1, E(AX_A, 3));
  cr_assert_not(tsr_semaphore_covers(s, 2, have));
  have = K(&st, 1, E(AX_A, 4));
  cr_assert(tsr_semaphore_covers(s, 2, have));
  cr_assert_eq(tsr_semaphore_import(s, 4, KEMPTY(&st)), TSR_SEMAPHORE_IMPORTED);
  tsr_semaphore_destroy(s);
}

/* ---- Submission Pipeline ------------------------------------------------- */

/* Stage 1 on GPU_A: signal(S, 1)
 * Stage 2 on GPU_B: wait(S, 1), signal(S, 2)
 * Stage 3 on GPU_B: wait(S, 2), signal(S, 3)
 * All submitted before any work begins; when GPU_B receives stage 3's wait on
 * S >= 2, the frontier at S=2 contains GPU_A's axis. */
Test(seed, pipeline_submit_before_wait) {
  tf_storage_t sa, sb, st;
  tsr_queue_t ga, gb;
  tf_queue(&ga, &sa, AX_A, 8);
  tf_queue(&gb, &sb, AX_B, 8);
  tsr_semaphore_t *s = tf_semaphore(8, 8);
  uint64_t issue = 0;

  cr_assert_eq(tsr_queue_submit(&ga, NULL, 0, &issue), 1);
  cr_assert_eq(tsr_queue_signal(&ga, s, 1), TSR_SEMAPHORE_SIGNALLED);

  tsr_queue_wait_t w1 = {s, 1};
  cr_assert_eq(tsr_queue_submit(&gb, &w1, 1, &issue), 1);
  cr_assert_eq(issue, 1); /* cross-device: a real device wait */
  cr_assert_eq(tsr_queue_signal(&gb, s, 2), TSR_SEMAPHORE_SIGNALLED);

  tsr_queue_wait_t w2 = {s, 2};
  cr_assert_eq(tsr_queue_submit(&gb, &w2, 1, &issue), 2);
  cr_assert_eq(issue, 0); /* GPU_B's own FIFO already orders stage 3 after 2 */
  cr_assert_eq(tsr_queue_signal(&gb, s, 3), TSR_SEMAPHORE_SIGNALLED);

  tsr_frontier_t *at2 = KEMPTY(&st);
  cr_assert_eq(tsr_semaphore_import(s, 2, at2), TSR_SEMAPHORE_IMPORTED);
  tf_expect(at2, 2, E(AX_A, 1), E(AX_B, 1)); /* GPU_A's axis, transitively */
  tsr_semaphore_destroy(s);
}

/* "a consumer can submit work that waits on a timeline value that hasn't been
 * signaled yet": the wait is issued, nothing is imported yet; once the signal
 * is known the frontier is there for the next waiter. */
Test(seed, wait_before_signal_is_issued_not_elided) {
  tf_storage_t sa, sb, st;
  tsr_queue_t ga, gb;
  tf_queue(&ga, &sa, AX_A, 8);
  tf_queue(&gb, &sb, AX_B, 8);
  tsr_semaphore_t *s = tf_semaphore(8, 8);
  uint64_t issue = 0;
  tsr_queue_wait_t w = {s, 1};
  cr_assert_eq(tsr_queue_submit(&gb, &w, 1, &issue), 1);
  cr_assert_eq(issue, 1);
  tf_expect(tsr_queue_frontier(&gb), 1, E(AX_B, 1)); /* nothing imported */
  cr_assert_eq(tsr_semaphore_import(s, 1, KEMPTY(&st)), TSR_SEMAPHORE_PENDING);
  cr_assert_eq(tsr_semaphore_wait(s, 1, 1000000, KEMPTY(&st)), TSR_SEMAPHORE_PENDING);
  tf_run(&ga, 1);
  cr_assert_eq(tsr_queue_signal(&ga, s, 1), TSR_SEMAPHORE_SIGNALLED);
  tsr_frontier_t *k = KEMPTY(&st);
  cr_assert_eq(tsr_semaphore_wait(s, 1, 1000000, k), TSR_SEMAPHORE_IMPORTED);
  tf_expect(k, 1, E(AX_A, 1));
  tsr_semaphore_destroy(s);
}

/* ---- Wait Elision --------------------------------------------------------- */

/* "the zero-cost fast path for sequential, single-queue workloads: every wait
 * is elided because the queue's own epoch already implies all prerequisites." */
Test(seed, wait_elision_single_queue) {
  tf_storage_t sq;
  tsr_queue_t q;
  tf_queue(&q, &sq, AX_A, 4);
  tsr_semaphore_t *s = tf_semaphore(4, 4);
  uint64_t issue = 0;
  cr_assert_eq(tsr_queue_submit(&q, NULL, 0, &issue), 1);
  cr_assert_eq(tsr_queue_signal(&q, s, 1), TSR_SEMAPHORE_SIGNALLED);
  for (uint64_t v = 2; v <= 100; v++) {
    tsr_queue_wait_t w = {s, v - 1};
    cr_assert_eq(tsr_queue_submit(&q, &w, 1, &issue), v);
    cr_assert_eq(issue, 0, "wait on %llu not elided", (unsigned long long)(v - 1));
    cr_assert_eq(tsr_queue_signal(&q, s, v), TSR_SEMAPHORE_SIGNALLED);
  }
  tf_expect(tsr_queue_frontier(&q), 1, E(AX_A, 100));
  tsr_semaphore_destroy(s);
}

/* Elision across queues once the knowledge is there, and a mixed submit. */
Test(seed, wait_elision_across_queues) {
  tf_storage_t sa, sb;
  tsr_queue_t qa, qb;
  tf_queue(&qa, &sa, AX_A, 8);
  tf_queue(&qb, &sb, AX_B, 8);
  tsr_semaphore_t *s = tf_semaphore(8, 8), *t = tf_semaphore(8, 8);
  tf_run(&qa, 1);
  tsr_queue_signal(&qa, s, 1);
  tf_run(&qa, 1);
  tsr_queue_signal(&qa, s, 2);
  uint64_t issue = 0;
  tsr_queue_wait_t w2 = {s, 2};
  tsr_queue_submit(&qb, &w2, 1, &issue);
  cr_assert_eq(issue, 1);
  /* Q_B now knows A:2, so waits on S >= 1 and S >= 2 are elided; T >= 1 (not
   * signalled) must be issued. */
  tsr_queue_wait_t ws[3] = {{s, 1}, {t, 1}, {s, 2}};
  tsr_queue_submit(&qb, ws, 3, &issue);
  cr_assert_eq(issue, UINT64_C(0x2));
  tsr_semaphore_destroy(s);
  tsr_semaphore_destroy(t);
}

/* ---- Buffer Reuse --------------------------------------------------------- */

/* The deallocating queue records its frontier as the death frontier;
 * dominates(requesting_queue_frontier, death_frontier) says whether reuse is
 * safe; when not, the allocator scans recent timelines for minimal waits that
 * close the gap, issues them and re-tests dominance. */
Test(seed, buffer_reuse_try_before_you_fence) {
  tf_storage_t sa, sb, sc, sd;
  tsr_queue_t qa, qb, qc;
  tf_queue(&qa, &sa, AX_A, 8);
  tf_queue(&qb, &sb, AX_B, 8);
  tf_queue(&qc, &sc, AX_C, 8);
  tsr_semaphore_t *sem_a = tf_semaphore(8, 8);
  /* Q_A uses the buffer in ops 1..3, signalling as it goes; Q_B reads it after
   * waiting for A's op 2; Q_B frees it. */
  for (uint64_t v = 1; v <= 3; v++) {
    tf_run(&qa, 1);
    tsr_queue_signal(&qa, sem_a, v);
  }
  tsr_queue_wait_t w = {sem_a, 3};
  uint64_t issue;
  tsr_queue_submit(&qb, &w, 1, &issue); /* B's op 1: last use, after A:3 */
  tsr_queue_submit(&qb, NULL, 0, NULL); /* B's op 2: the free */
  tsr_frontier_t *death = tsr_frontier_init(&sd, 8, TSR_FRONTIER_REQUIREMENT);
  cr_assert_eq(tsr_buffer_record_death(tsr_queue_frontier(&qb), death), TSR_FRONTIER_FIT);
  tf_expect(death, 2, E(AX_A, 3), E(AX_B, 2));

  /* Q_B itself may reuse it at once: its frontier dominates. */
  cr_assert(tsr_buffer_can_reuse(tsr_queue_frontier(&qb), death));
  /* Q_C has seen nothing: not yet. */
  tf_run(&qc, 1);
  cr_assert_not(tsr_buffer_can_reuse(tsr_queue_frontier(&qc), death));

  /* B signals a semaphore after the free; the plan finds the one wait. */
  tsr_semaphore_t *sem_b = tf_semaphore(8, 8);
  tsr_queue_signal(&qb, sem_b, 1);
  tsr_semaphore_t *sems[2] = {sem_a, sem_b};
  tsr_buffer_wait_t waits[4];
  uint32_t n = 99;
  cr_assert_eq(tsr_buffer_plan_reuse(tsr_queue_frontier(&qc), death, sems, 2, 4, waits, &n),
               TSR_BUFFER_REUSE_AFTER_WAITS);
  cr_assert_eq(n, 1); /* sem_b at 1 carries both A:3 and B:2 */
  cr_assert_eq(waits[0].semaphore, sem_b);
  cr_assert_eq(waits[0].value, 1);
  /* Issue it (as the queue would) and re-test. */
  tsr_queue_wait_t qw = {waits[0].semaphore, waits[0].value};
  tsr_queue_submit(&qc, &qw, 1, &issue);
  cr_assert_eq(issue, 1);
  cr_assert(tsr_buffer_can_reuse(tsr_queue_frontier(&qc), death));
  cr_assert_eq(tsr_buffer_plan_reuse(tsr_queue_frontier(&qc), death, sems, 2, 4, waits, &n), TSR_BUFFER_REUSE_NOW);
  cr_assert_eq(n, 0);
  tsr_semaphore_destroy(sem_a);
  tsr_semaphore_destroy(sem_b);
}

/* ---- Taint ----------------------------------------------------------------- */

/* External advance: values beyond the watermark are tainted; the scheduler
 * issues device waits rather than eliding them. When it signals past the
 * tainted range through its own tracked work, the watermark advances and
 * performance recovers. */
Test(seed, taint_and_recovery) {
  tf_storage_t sa, sb, st;
  tsr_queue_t qa, qb;
  tf_queue(&qa, &sa, AX_A, 8);
  tf_queue(&qb, &sb, AX_B, 8);
  tsr_semaphore_t *s = tf_semaphore(8, 8);
  uint64_t issue = 0;

  tf_run(&qa, 1);
  tsr_queue_signal(&qa, s, 1); /* tracked: watermark 1 */
  cr_assert_eq(tsr_semaphore_watermark(s), 1);
  cr_assert_eq(tsr_semaphore_advance_external(s, 4), TSR_SEMAPHORE_SIGNALLED); /* CUDA event */
  cr_assert_eq(tsr_semaphore_value(s), 4);
  cr_assert_eq(tsr_semaphore_watermark(s), 1);
  cr_assert_not(tsr_semaphore_is_tainted(s, 1));
  for (uint64_t v = 2; v <= 4; v++) cr_assert(tsr_semaphore_is_tainted(s, v));
  cr_assert_not(tsr_semaphore_is_tainted(s, 5)); /* not reached: not tainted, pending */

  /* Q_B already knows everything the scheduler knows about A... */
  tsr_queue_wait_t w1 = {s, 1};
  tsr_queue_submit(&qb, &w1, 1, &issue);
  cr_assert_eq(issue, 1);
  /* ...yet a wait on a tainted value is never elided, and imports nothing. */
  tsr_queue_wait_t w3 = {s, 3};
  tsr_queue_submit(&qb, &w3, 1, &issue);
  cr_assert_eq(issue, 1);
  tsr_queue_submit(&qb, &w3, 1, &issue);
  cr_assert_eq(issue, 1, "tainted wait elided");
  cr_assert_eq(tsr_semaphore_import(s, 3, KEMPTY(&st)), TSR_SEMAPHORE_EXTERNAL);
  /* The untainted value below the watermark still elides. */
  tsr_queue_submit(&qb, &w1, 1, &issue);
  cr_assert_eq(issue, 0);

  /* Recovery: tracked work signals past the tainted range. */
  tf_run(&qa, 1);
  cr_assert_eq(tsr_queue_signal(&qa, s, 5), TSR_SEMAPHORE_SIGNALLED);
  cr_assert_eq(tsr_semaphore_watermark(s), 5);
  for (uint64_t v = 1; v <= 5; v++) cr_assert_not(tsr_semaphore_is_tainted(s, v));
  tsr_queue_wait_t w5 = {s, 5};
  tsr_queue_submit(&qb, &w5, 1, &issue); /* learns A:2 */
  cr_assert_eq(issue, 1);
  tsr_queue_submit(&qb, &w3, 1, &issue); /* S >= 5 implies S >= 3 */
  cr_assert_eq(issue, 0, "elision did not recover after the watermark moved");
  /* The frontier of S >= 3 itself stays unknown (its reaching advance was
   * external): import stays conservative, never invents one. */
  cr_assert_eq(tsr_semaphore_import(s, 3, KEMPTY(&st)), TSR_SEMAPHORE_EXTERNAL);
  tsr_semaphore_destroy(s);
}

/* ---- Collective Channel Axes --------------------------------------------- */

/* "When 8 GPUs participate in an all-reduce, the result is one frontier entry
 * (collective_axis, sequence_number) instead of eight entries." */
Test(seed, collective_channel_one_entry_for_eight_gpus) {
  tf_storage_t st[8], sc, sn;
  tsr_queue_t gpu[8], consumer;
  tsr_collective_t ch;
  tsr_axis_t ch_axis = tsr_axis_make(0, TSR_AXIS_DOMAIN_COLLECTIVE, 1, 0);
  cr_assert(tsr_status_is_ok(tsr_collective_init(&ch, ch_axis)));
  tsr_semaphore_t *done = tf_semaphore(8, 4);
  for (int g = 0; g < 8; g++) {
    tf_queue(&gpu[g], &st[g], tsr_axis_make(0, TSR_AXIS_DOMAIN_QUEUE, 1, 10 + (uint64_t)g), 4);
    tf_run(&gpu[g], 3); /* some local work first */
  }
  uint64_t seq = tsr_collective_next(&ch);
  cr_assert_eq(seq, 1);
  for (int g = 0; g < 8; g++) cr_assert_eq(tsr_queue_submit_collective(&gpu[g], &ch, seq, NULL, 0, NULL), 4);
  /* Each member: its own axis plus one channel entry. */
  for (int g = 0; g < 8; g++) {
    cr_assert_eq(tsr_frontier_count(tsr_queue_frontier(&gpu[g])), 2);
    cr_assert_eq(tsr_frontier_get(tsr_queue_frontier(&gpu[g]), ch_axis), 1);
    cr_assert(tsr_frontier_is_complete(tsr_queue_frontier(&gpu[g])));
  }
  /* A consumer of GPU 0's result learns (channel, 1): that requirement is
   * what "the all-reduce is done" means, whatever the group size. */
  tsr_queue_signal(&gpu[0], done, 1);
  tf_queue(&consumer, &sc, AX_D, 4);
  tsr_queue_wait_t w = {done, 1};
  uint64_t issue;
  tsr_queue_submit(&consumer, &w, 1, &issue);
  tsr_frontier_t *need = tsr_frontier_init(&sn, 4, TSR_FRONTIER_REQUIREMENT);
  tsr_frontier_insert_or_raise(need, ch_axis, 1);
  cr_assert(tsr_frontier_dominates(tsr_queue_frontier(&consumer), need));
  cr_assert_eq(tsr_frontier_count(tsr_queue_frontier(&consumer)), 3); /* D, GPU0, channel */
  /* The next collective is not implied by the first. */
  uint64_t seq2 = tsr_collective_next(&ch);
  tsr_frontier_insert_or_raise(need, ch_axis, seq2);
  cr_assert_not(tsr_frontier_dominates(tsr_queue_frontier(&consumer), need));
  /* A sequence number the channel never handed out is refused. */
  cr_assert_eq(tsr_queue_submit_collective(&gpu[1], &ch, 9, NULL, 0, NULL), 0);
  tsr_semaphore_destroy(done);
}
