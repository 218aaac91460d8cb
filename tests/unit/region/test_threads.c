/* Threads of one process charge and credit one region while another thread
 * samples it: the admitted total never passes the limit, and comes back to
 * zero. A plain program so that it runs under ThreadSanitizer as well. */
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "region/region.h"

#define THREADS 8
#define ROUNDS 50000
#define LIMIT (1u << 20)

static tsr_region_t *g_region;
static atomic_int g_stop, g_bad;

static void *worker(void *arg) {
  unsigned seed = (unsigned)(uintptr_t)arg * 2654435761u + 1;
  uint32_t slot;
  /* each thread a slot of its own, all under this process's identity: a
   * made-up start time would be a gone process's, which a refused charge
   * frees */
  tsr_region_proc_t self;
  tsr_region_proc_self(&self);
  tsr_status_t st = tsr_region_attach(g_region, &self, &slot);
  if (st) {
    fprintf(stderr, "attach: %s\n", tsr_status_message(st));
    atomic_store(&g_bad, 1);
    return NULL;
  }
  uint64_t held[16] = {0};
  for (int i = 0; i < ROUNDS; i++) {
    int j = rand_r(&seed) % 16;
    if (held[j]) {
      tsr_region_credit(g_region, slot, held[j]);
      held[j] = 0;
    } else {
      uint64_t want = 1 + (uint64_t)(rand_r(&seed) % (LIMIT / 4));
      if (tsr_region_charge(g_region, slot, want)) held[j] = want;
    }
  }
  for (int j = 0; j < 16; j++) tsr_region_credit(g_region, slot, held[j]);
  tsr_region_detach(g_region, slot);
  return NULL;
}

static void *checker(void *arg) {
  (void)arg;
  while (!atomic_load(&g_stop)) {
    tsr_region_stats_t s;
    tsr_region_stats(g_region, &s);
    if (s.used_bytes > LIMIT || s.corrupt) atomic_store(&g_bad, 2);
  }
  return NULL;
}

int main(void) {
  char dir[] = "/tmp/tsr-region-threads-XXXXXX";
  if (!mkdtemp(dir)) return 1;
  int dfd = open(dir, O_RDONLY | O_DIRECTORY);
  tsr_region_params_t p = {.lease_id = 1, .limit_bytes = LIMIT, .owner_uid = geteuid()};
  tsr_status_t st = tsr_region_create(dfd, &p);
  if (!st) st = tsr_region_open(dfd, "lease-1.region", 1, &g_region);
  if (st) {
    fprintf(stderr, "create: %s\n", tsr_status_message(st));
    return 1;
  }
  pthread_t t[THREADS], c;
  pthread_create(&c, NULL, checker, NULL);
  for (uintptr_t i = 0; i < THREADS; i++) pthread_create(&t[i], NULL, worker, (void *)i);
  for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
  atomic_store(&g_stop, 1);
  pthread_join(c, NULL);
  tsr_region_stats_t s;
  tsr_region_stats(g_region, &s);
  int rc = 0;
  if (atomic_load(&g_bad))
    fprintf(stderr, "FAIL: the checker saw the limit passed or corruption (%d)\n", atomic_load(&g_bad)), rc = 1;
  if (s.used_bytes != 0)
    fprintf(stderr, "FAIL: %llu bytes never came back\n", (unsigned long long)s.used_bytes), rc = 1;
  if (s.denied == 0) fprintf(stderr, "FAIL: never reached the limit: the test proves nothing\n"), rc = 1;
  tsr_region_close(g_region);
  st = tsr_region_remove(dfd, 1);
  if (st) fprintf(stderr, "FAIL: removing the region: %s\n", tsr_status_message(st)), rc = 1;
  tsr_status_free(st);
  close(dfd);
  rmdir(dir);
  printf("%s: %d threads x %d rounds, %llu denied, peak %llu of %u bytes\n", rc ? "FAIL" : "ok", THREADS, ROUNDS,
         (unsigned long long)s.denied, (unsigned long long)s.peak_bytes, LIMIT);
  return rc;
}
