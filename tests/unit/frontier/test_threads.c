/* test_threads.c: many threads signalling and waiting on semaphores, with no
 * lost or reordered signals; queues of several threads submitting against
 * shared semaphores; concurrent axis allocation.
 *
 * A plain program (no Criterion) so that it runs under ThreadSanitizer too:
 * Criterion aborts at start-up in TSan builds ("Could not initialize
 * inheritable arena", Snaipe/Criterion#274). Registered as
 * unit.frontier_threads in every build; exits 0 when every check held and
 * prints each failed check otherwise. */
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tessera/frontier.h"

static int g_failures;
static pthread_mutex_t g_fail_mu = PTHREAD_MUTEX_INITIALIZER;

#define CHECK(cond, ...)                                                       \
  do {                                                                         \
    if (!(cond)) {                                                             \
      pthread_mutex_lock(&g_fail_mu);                                          \
      g_failures++;                                                            \
      fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                            \
      fputc('\n', stderr);                                                     \
      pthread_mutex_unlock(&g_fail_mu);                                        \
    }                                                                          \
  } while (0)

static const uint64_t SECOND = 1000000000ull;

static tsr_semaphore_t *make_semaphore(uint32_t history, uint32_t cap) {
  tsr_semaphore_options_t o = {0, history, cap};
  tsr_semaphore_t *s = NULL;
  tsr_status_t st = tsr_semaphore_create(&o, &s);
  if (st) {
    fprintf(stderr, "semaphore: %s\n", tsr_status_message(st));
    exit(2);
  }
  return s;
}

static tsr_axis_t host(uint64_t i) { return tsr_axis_make(0, TSR_AXIS_DOMAIN_HOST_THREAD, 1, i); }
static tsr_axis_t queue_axis(uint64_t i) { return tsr_axis_make(0, TSR_AXIS_DOMAIN_QUEUE, 2, i); }

/* ==== 1. relay: value v signalled by thread v % T after waiting for v - 1 === */
/* A lost signal stalls the relay (the 5 s timeouts turn that into failures);
 * a reordered or mixed-up one shows as a wrong imported frontier. */
#define RELAY_THREADS 4
#define RELAY_VALUES 1200

typedef struct {
  tsr_semaphore_t *s;
  int index;
} relay_job_t;

static void *relay_thread(void *arg) {
  relay_job_t *j = arg;
  TSR_FRONTIER_STORAGE(RELAY_THREADS) st;
  tsr_queue_t q;
  if (tsr_queue_init(&q, host((uint64_t)j->index), tsr_frontier_init(&st, RELAY_THREADS, TSR_FRONTIER_KNOWLEDGE)))
    abort();
  for (uint64_t v = (uint64_t)j->index + 1; v <= RELAY_VALUES; v += RELAY_THREADS) {
    TSR_FRONTIER_STORAGE(RELAY_THREADS) ks;
    tsr_frontier_t *k = tsr_frontier_init(&ks, RELAY_THREADS, TSR_FRONTIER_KNOWLEDGE);
    tsr_semaphore_import_t r = tsr_semaphore_wait(j->s, v - 1, 5 * SECOND, k);
    CHECK(r == TSR_SEMAPHORE_IMPORTED, "thread %d: wait for %llu gave %d", j->index, (unsigned long long)(v - 1),
          (int)r);
    if (r != TSR_SEMAPHORE_IMPORTED) return NULL;
    if (v > 1) {
      /* v - 1 came from thread (v - 2) % T at its epoch (v - 2) / T + 1 */
      uint64_t got = tsr_frontier_get(k, host((v - 2) % RELAY_THREADS));
      CHECK(got == (v - 2) / RELAY_THREADS + 1, "value %llu: signaller epoch %llu", (unsigned long long)(v - 1),
            (unsigned long long)got);
    }
    tsr_queue_wait_t w = {j->s, v - 1};
    uint64_t issue;
    tsr_queue_submit(&q, &w, 1, &issue);
    CHECK(tsr_queue_signal(&q, j->s, v) == TSR_SEMAPHORE_SIGNALLED, "signal %llu", (unsigned long long)v);
  }
  return NULL;
}

static void relay(void) {
  tsr_semaphore_t *s = make_semaphore(RELAY_VALUES + 1, RELAY_THREADS);
  relay_job_t jobs[RELAY_THREADS];
  pthread_t th[RELAY_THREADS];
  for (int i = 0; i < RELAY_THREADS; i++) {
    jobs[i] = (relay_job_t){s, i};
    pthread_create(&th[i], NULL, relay_thread, &jobs[i]);
  }
  for (int i = 0; i < RELAY_THREADS; i++) pthread_join(th[i], NULL);
  CHECK(tsr_semaphore_value(s) == RELAY_VALUES, "final value %llu", (unsigned long long)tsr_semaphore_value(s));
  for (uint64_t v = 1; v <= RELAY_VALUES; v++) {
    TSR_FRONTIER_STORAGE(RELAY_THREADS) ks;
    tsr_frontier_t *k = tsr_frontier_init(&ks, RELAY_THREADS, TSR_FRONTIER_KNOWLEDGE);
    CHECK(tsr_semaphore_import(s, v, k) == TSR_SEMAPHORE_IMPORTED, "import %llu", (unsigned long long)v);
    CHECK(tsr_frontier_get(k, host((v - 1) % RELAY_THREADS)) == (v - 1) / RELAY_THREADS + 1,
          "value %llu has the wrong frontier", (unsigned long long)v);
  }
  tsr_semaphore_destroy(s);
}

/* ==== 2. producers signalling, waiters blocking on random values ========== */
/* Each waiter must import exactly the frontier of the value it waited for,
 * or (once that signal left the 256-entry history) nothing at all. */
#define PRODUCERS 2
#define WAITERS 4
#define SIGNALS 3000
#define WAITS_EACH 400

typedef struct {
  tsr_semaphore_t **sems;
  int index;
  int exact, lost;
} mix_job_t;

static void *producer(void *arg) {
  mix_job_t *j = arg;
  TSR_FRONTIER_STORAGE(2) st;
  tsr_queue_t q;
  if (tsr_queue_init(&q, queue_axis((uint64_t)j->index), tsr_frontier_init(&st, 2, TSR_FRONTIER_KNOWLEDGE))) abort();
  for (uint64_t v = 1; v <= SIGNALS; v++) {
    tsr_queue_submit(&q, NULL, 0, NULL); /* epoch v */
    CHECK(tsr_queue_signal(&q, j->sems[j->index], v) == TSR_SEMAPHORE_SIGNALLED, "signal");
  }
  return NULL;
}

static void *waiter(void *arg) {
  mix_job_t *j = arg;
  uint64_t seed = 0x1234567u + (uint64_t)j->index * 7919u;
  for (int i = 0; i < WAITS_EACH; i++) {
    seed = seed * 6364136223846793005u + 1442695040888963407u;
    int p = (int)((seed >> 33) % PRODUCERS);
    uint64_t v = 1 + (seed >> 40) % SIGNALS;
    TSR_FRONTIER_STORAGE(2) ks;
    tsr_frontier_t *k = tsr_frontier_init(&ks, 2, TSR_FRONTIER_KNOWLEDGE);
    tsr_semaphore_import_t r = tsr_semaphore_wait(j->sems[p], v, 10 * SECOND, k);
    if (r == TSR_SEMAPHORE_IMPORTED) {
      j->exact++;
      CHECK(tsr_frontier_get(k, queue_axis((uint64_t)p)) == v && tsr_frontier_count(k) == 1,
            "waiter %d: S%d >= %llu imported the wrong frontier", j->index, p, (unsigned long long)v);
    } else {
      CHECK(r == TSR_SEMAPHORE_HISTORY_LOST, "waiter %d: wait gave %d", j->index, (int)r);
      CHECK(tsr_frontier_count(k) == 0, "lost history still imported");
      j->lost++;
    }
  }
  for (int p = 0; p < PRODUCERS; p++)
    CHECK(tsr_semaphore_wait(j->sems[p], SIGNALS, 10 * SECOND, NULL) == TSR_SEMAPHORE_IMPORTED,
          "final value of S%d never seen", p);
  return NULL;
}

static void producers_and_waiters(void) {
  tsr_semaphore_t *sems[PRODUCERS];
  for (int p = 0; p < PRODUCERS; p++) sems[p] = make_semaphore(256, 2);
  mix_job_t jobs[PRODUCERS + WAITERS];
  pthread_t th[PRODUCERS + WAITERS];
  for (int i = 0; i < WAITERS; i++) {
    jobs[PRODUCERS + i] = (mix_job_t){sems, i, 0, 0};
    pthread_create(&th[PRODUCERS + i], NULL, waiter, &jobs[PRODUCERS + i]);
  }
  for (int p = 0; p < PRODUCERS; p++) {
    jobs[p] = (mix_job_t){sems, p, 0, 0};
    pthread_create(&th[p], NULL, producer, &jobs[p]);
  }
  int exact = 0, lost = 0;
  for (int i = 0; i < PRODUCERS + WAITERS; i++) {
    pthread_join(th[i], NULL);
    exact += jobs[i].exact, lost += jobs[i].lost;
  }
  for (int p = 0; p < PRODUCERS; p++) {
    CHECK(tsr_semaphore_value(sems[p]) == SIGNALS, "S%d ended at %llu", p,
          (unsigned long long)tsr_semaphore_value(sems[p]));
    tsr_semaphore_destroy(sems[p]);
  }
  CHECK(exact + lost == WAITERS * WAITS_EACH, "%d + %d waits", exact, lost);
  CHECK(exact > 0, "no exact import at all");
  printf("producers_and_waiters: %d exact imports, %d past the history\n", exact, lost);
}

/* ==== 3. queues on several threads, all-to-all through semaphores ========= */
/* Queue i signals S_i after each op and waits on every other S_j at values
 * that exist. Checks: each queue's frontier never claims more of queue j than
 * j has signalled (facts only), and the elision decisions taken concurrently
 * are sound: an elided wait was covered by what the queue had imported. */
#define MESH 4
#define MESH_OPS 600

typedef struct {
  tsr_semaphore_t **sems;
  int index;
  int elided, issued;
} mesh_job_t;

static void *mesh_thread(void *arg) {
  mesh_job_t *j = arg;
  TSR_FRONTIER_STORAGE(MESH + 1) st;
  tsr_queue_t q;
  if (tsr_queue_init(&q, queue_axis(100 + (uint64_t)j->index),
                     tsr_frontier_init(&st, MESH + 1, TSR_FRONTIER_KNOWLEDGE)))
    abort();
  tsr_queue_wait_t waits[MESH];
  for (int op = 1; op <= MESH_OPS; op++) {
    uint32_t n = 0;
    for (int k = 0; k < MESH; k++) {
      if (k == j->index) continue;
      uint64_t cur = tsr_semaphore_value(j->sems[k]);
      if (cur == 0) continue;
      waits[n++] = (tsr_queue_wait_t){j->sems[k], cur > 3 ? cur - (uint64_t)(op % 3) : cur};
    }
    /* what the queue knew before the submit, for the soundness check */
    TSR_FRONTIER_STORAGE(MESH + 1) before_st;
    tsr_frontier_t *before = tsr_frontier_init(&before_st, MESH + 1, TSR_FRONTIER_KNOWLEDGE);
    tsr_frontier_copy(before, q.frontier);
    uint64_t issue = 0;
    tsr_queue_submit(&q, waits, n, &issue);
    for (uint32_t w = 0; w < n; w++) {
      if (issue >> w & 1) {
        j->issued++;
      } else {
        j->elided++;
        /* elided: the queue knew S >= value, before the submit or through a
         * wait issued earlier in the same submit (whose frontier it imported).
         * S_k's value v is signalled by queue k at its epoch v, so knowing
         * S_k >= v means knowing k >= v. */
        int k = 0;
        while (j->sems[k] != waits[w].semaphore) k++;
        tsr_axis_t ak = queue_axis(100 + (uint64_t)k);
        bool earlier_issued = (issue & ((UINT64_C(1) << w) - 1)) != 0;
        CHECK(tsr_frontier_get(q.frontier, ak) >= waits[w].value &&
                  (tsr_frontier_get(before, ak) >= waits[w].value || earlier_issued),
              "queue %d elided a wait on S%d >= %llu it could not prove", j->index, k,
              (unsigned long long)waits[w].value);
      }
    }
    CHECK(tsr_queue_signal(&q, j->sems[j->index], (uint64_t)op) == TSR_SEMAPHORE_SIGNALLED, "queue %d signal %d",
          j->index, op);
    /* facts only: never more of queue k than k has signalled */
    for (int k = 0; k < MESH; k++) {
      if (k == j->index) continue;
      uint64_t known = tsr_frontier_get(q.frontier, queue_axis(100 + (uint64_t)k));
      CHECK(known <= tsr_semaphore_value(j->sems[k]), "queue %d claims %llu of queue %d", j->index,
            (unsigned long long)known, k);
    }
  }
  return NULL;
}

static void mesh(void) {
  tsr_semaphore_t *sems[MESH];
  for (int i = 0; i < MESH; i++) sems[i] = make_semaphore(16, MESH + 1);
  mesh_job_t jobs[MESH];
  pthread_t th[MESH];
  for (int i = 0; i < MESH; i++) {
    jobs[i] = (mesh_job_t){sems, i, 0, 0};
    pthread_create(&th[i], NULL, mesh_thread, &jobs[i]);
  }
  int elided = 0, issued = 0;
  for (int i = 0; i < MESH; i++) {
    pthread_join(th[i], NULL);
    elided += jobs[i].elided, issued += jobs[i].issued;
  }
  for (int i = 0; i < MESH; i++) tsr_semaphore_destroy(sems[i]);
  printf("mesh: %d waits elided, %d issued\n", elided, issued);
  CHECK(issued > 0, "no wait issued");
}

/* ==== 4. axis allocation from several threads ============================= */

static tsr_axis_allocator_t g_alloc;
#define AXES_EACH 3000

static void *alloc_thread(void *arg) {
  tsr_axis_t *out = arg;
  for (int i = 0; i < AXES_EACH; i++)
    CHECK(tsr_axis_allocator_next(&g_alloc, TSR_AXIS_DOMAIN_QUEUE, &out[i]) == NULL, "alloc");
  return NULL;
}

static int cmp_axis(const void *a, const void *b) {
  tsr_axis_t x = *(const tsr_axis_t *)a, y = *(const tsr_axis_t *)b;
  return (x > y) - (x < y);
}

static void axes(void) {
  static tsr_axis_t got[4 * AXES_EACH];
  if (tsr_axis_allocator_init(&g_alloc, 1, 1)) abort();
  pthread_t th[4];
  for (int i = 0; i < 4; i++) pthread_create(&th[i], NULL, alloc_thread, &got[i * AXES_EACH]);
  for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
  qsort(got, 4 * AXES_EACH, sizeof(got[0]), cmp_axis);
  for (int i = 1; i < 4 * AXES_EACH; i++) CHECK(got[i] != got[i - 1], "axis handed out twice");
}

int main(void) {
  relay();
  producers_and_waiters();
  mesh();
  axes();
  if (g_failures) {
    fprintf(stderr, "test_threads: %d checks failed\n", g_failures);
    return 1;
  }
  printf("test_threads: all checks passed\n");
  return 0;
}
