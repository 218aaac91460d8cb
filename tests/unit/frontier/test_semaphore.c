/* test_semaphore.c: semaphore semantics, and many threads signalling and
 * waiting with no lost or reordered signals (run under make test-tsan too). */
#include <pthread.h>
#include <stdlib.h>

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
  struct { uint64_t v; tsr_axis_t origin; } want[] = {
      {1, AX_A}, {2, AX_A}, {3, AX_B}, {5, AX_B}, {6, AX_C}, {9, AX_C}};
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
  cr_assert_eq(tsr_semaphore_signal(s, 10, AX_A, K(&st, 1, E(AX_A, 1))),
               TSR_SEMAPHORE_NOT_MONOTONIC);
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

/* ---- concurrency ---------------------------------------------------------- */

#define THREADS 4
#define CHAIN 1200

typedef struct {
  tsr_semaphore_t *s;
  int index;
  int failures;
} chain_job_t;

/* Relay: value v is signalled by thread v % THREADS, which first waits for
 * S >= v - 1 and must import exactly the frontier of v - 1 (its signaller's
 * axis at that signaller's epoch). A lost signal hangs the chain (caught by
 * the timeout); a reordered one shows up as a wrong import. */
static void *chain_thread(void *arg) {
  chain_job_t *j = arg;
  TSR_FRONTIER_STORAGE(THREADS) st;
  tsr_queue_t q;
  tsr_axis_t me = tsr_axis_make(0, TSR_AXIS_DOMAIN_HOST_THREAD, 1, (uint64_t)j->index);
  if (tsr_queue_init(&q, me, tsr_frontier_init(&st, THREADS, TSR_FRONTIER_KNOWLEDGE))) abort();
  for (uint64_t v = (uint64_t)j->index + 1; v <= CHAIN; v += THREADS) {
    TSR_FRONTIER_STORAGE(THREADS) ks;
    tsr_frontier_t *k = tsr_frontier_init(&ks, THREADS, TSR_FRONTIER_KNOWLEDGE);
    if (tsr_semaphore_wait(j->s, v - 1, 5ull * 1000000000ull, k) != TSR_SEMAPHORE_IMPORTED) {
      j->failures++;
      return NULL;
    }
    if (v > 1) {
      /* v - 1 was signalled by thread (v - 2) % THREADS at its epoch
       * (v - 2) / THREADS + 1 */
      tsr_axis_t prev = tsr_axis_make(0, TSR_AXIS_DOMAIN_HOST_THREAD, 1, (v - 2) % THREADS);
      if (tsr_frontier_get(k, prev) != (v - 2) / THREADS + 1) j->failures++;
    }
    tsr_queue_wait_t w = {j->s, v - 1};
    uint64_t issue;
    tsr_queue_submit(&q, &w, 1, &issue);
    if (tsr_queue_signal(&q, j->s, v) != TSR_SEMAPHORE_SIGNALLED) j->failures++;
  }
  return NULL;
}

Test(semaphore, threads_relay_without_loss_or_reordering, .timeout = 60) {
  tsr_semaphore_t *s = tf_semaphore(CHAIN + 1, THREADS);
  chain_job_t jobs[THREADS];
  pthread_t th[THREADS];
  for (int i = 0; i < THREADS; i++) {
    jobs[i] = (chain_job_t){s, i, 0};
    pthread_create(&th[i], NULL, chain_thread, &jobs[i]);
  }
  for (int i = 0; i < THREADS; i++) pthread_join(th[i], NULL);
  for (int i = 0; i < THREADS; i++) cr_assert_eq(jobs[i].failures, 0, "thread %d", i);
  cr_assert_eq(tsr_semaphore_value(s), CHAIN);
  /* every value's frontier names its own signaller at its own epoch */
  for (uint64_t v = 1; v <= CHAIN; v++) {
    TSR_FRONTIER_STORAGE(THREADS) ks;
    tsr_frontier_t *k = tsr_frontier_init(&ks, THREADS, TSR_FRONTIER_KNOWLEDGE);
    cr_assert_eq(tsr_semaphore_import(s, v, k), TSR_SEMAPHORE_IMPORTED);
    tsr_axis_t who = tsr_axis_make(0, TSR_AXIS_DOMAIN_HOST_THREAD, 1, (v - 1) % THREADS);
    cr_assert_eq(tsr_frontier_get(k, who), (v - 1) / THREADS + 1, "value %llu",
                 (unsigned long long)v);
  }
  tsr_semaphore_destroy(s);
}

/* Producers signal their own semaphores as fast as they can; waiters block
 * on random values of random semaphores and check the imported frontier is
 * the one of that exact value (or, once it left the small history, that
 * nothing was imported). Signals are never lost: every waiter eventually sees
 * the final value of every semaphore. */
#define PRODUCERS 2
#define WAITERS 4
#define SIGNALS 3000

typedef struct {
  tsr_semaphore_t **sems;
  int index;
  int failures;
  int exact, lost;
} mix_job_t;

static void *producer(void *arg) {
  mix_job_t *j = arg;
  TSR_FRONTIER_STORAGE(2) st;
  tsr_queue_t q;
  tsr_axis_t me = tsr_axis_make(0, TSR_AXIS_DOMAIN_QUEUE, 2, (uint64_t)j->index);
  if (tsr_queue_init(&q, me, tsr_frontier_init(&st, 2, TSR_FRONTIER_KNOWLEDGE))) abort();
  for (uint64_t v = 1; v <= SIGNALS; v++) {
    tsr_queue_submit(&q, NULL, 0, NULL); /* epoch v */
    if (tsr_queue_signal(&q, j->sems[j->index], v) != TSR_SEMAPHORE_SIGNALLED) j->failures++;
  }
  return NULL;
}

static void *waiter(void *arg) {
  mix_job_t *j = arg;
  uint64_t seed = 0x1234567u + (uint64_t)j->index * 7919u;
  for (int i = 0; i < 400; i++) {
    seed = seed * 6364136223846793005u + 1442695040888963407u;
    int p = (int)((seed >> 33) % PRODUCERS);
    uint64_t v = 1 + (seed >> 40) % SIGNALS;
    TSR_FRONTIER_STORAGE(2) ks;
    tsr_frontier_t *k = tsr_frontier_init(&ks, 2, TSR_FRONTIER_KNOWLEDGE);
    tsr_semaphore_import_t r = tsr_semaphore_wait(j->sems[p], v, 10ull * 1000000000ull, k);
    tsr_axis_t who = tsr_axis_make(0, TSR_AXIS_DOMAIN_QUEUE, 2, (uint64_t)p);
    if (r == TSR_SEMAPHORE_IMPORTED) {
      j->exact++;
      if (tsr_frontier_get(k, who) != v || tsr_frontier_count(k) != 1) j->failures++;
    } else if (r == TSR_SEMAPHORE_HISTORY_LOST) {
      j->lost++;
      if (tsr_frontier_count(k) != 0) j->failures++;
    } else {
      j->failures++;
    }
  }
  for (int p = 0; p < PRODUCERS; p++)
    if (tsr_semaphore_wait(j->sems[p], SIGNALS, 10ull * 1000000000ull, NULL) !=
        TSR_SEMAPHORE_IMPORTED)
      j->failures++;
  return NULL;
}

Test(semaphore, many_signallers_and_waiters, .timeout = 60) {
  tsr_semaphore_t *sems[PRODUCERS];
  for (int p = 0; p < PRODUCERS; p++) sems[p] = tf_semaphore(64, 2);
  mix_job_t jobs[PRODUCERS + WAITERS];
  pthread_t th[PRODUCERS + WAITERS];
  for (int i = 0; i < WAITERS; i++) {
    jobs[PRODUCERS + i] = (mix_job_t){sems, i, 0, 0, 0};
    pthread_create(&th[PRODUCERS + i], NULL, waiter, &jobs[PRODUCERS + i]);
  }
  for (int p = 0; p < PRODUCERS; p++) {
    jobs[p] = (mix_job_t){sems, p, 0, 0, 0};
    pthread_create(&th[p], NULL, producer, &jobs[p]);
  }
  int exact = 0, lost = 0;
  for (int i = 0; i < PRODUCERS + WAITERS; i++) {
    pthread_join(th[i], NULL);
    cr_assert_eq(jobs[i].failures, 0, "thread %d", i);
    exact += jobs[i].exact, lost += jobs[i].lost;
  }
  for (int p = 0; p < PRODUCERS; p++) {
    cr_assert_eq(tsr_semaphore_value(sems[p]), SIGNALS);
    tsr_semaphore_destroy(sems[p]);
  }
  cr_assert_eq(exact + lost, WAITERS * 400);
  cr_assert_gt(exact, 0);
}
