/* bench_region: what the shared region's admission costs, per charge+credit
 * pair, for 1, 2, 4 and 8 threads of one process on one region, beside the
 * floor measured in the same run: one fetch_add and one fetch_sub on a
 * shared counter (what any lock-free counter pays). No GPU: this is the
 * part of a hooked cuMemAlloc/cuMemFree that tessera adds before and after
 * the driver's own work (the target: p50 <= 0.5 us added).
 *
 * usage: bench_region [--quick] */
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_record.h"
#include "region/region.h"

static tsr_region_t *g_region;
static _Atomic uint64_t g_counter;
static long g_rounds;

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static void *region_worker(void *arg) {
  uint32_t slot;
  tsr_status_t st = tsr_region_attach(g_region, &(tsr_region_proc_t){getpid(), 1 + (uint64_t)(uintptr_t)arg, 0}, &slot);
  if (st) abort();
  for (long i = 0; i < g_rounds; i++) {
    if (!tsr_region_charge(g_region, slot, 2u << 20)) abort();
    tsr_region_credit(g_region, slot, 2u << 20);
  }
  tsr_region_detach(g_region, slot);
  return NULL;
}

static void *floor_worker(void *arg) {
  (void)arg;
  for (long i = 0; i < g_rounds; i++) {
    atomic_fetch_add_explicit(&g_counter, 2u << 20, memory_order_acq_rel);
    atomic_fetch_sub_explicit(&g_counter, 2u << 20, memory_order_acq_rel);
  }
  return NULL;
}

static double run(void *(*fn)(void *), int threads) {
  pthread_t t[8];
  double t0 = now_ns();
  for (int i = 0; i < threads; i++) pthread_create(&t[i], NULL, fn, (void *)(uintptr_t)i);
  for (int i = 0; i < threads; i++) pthread_join(t[i], NULL);
  return (now_ns() - t0) / (double)g_rounds; /* wall ns per pair per thread */
}

int main(int argc, char **argv) {
  g_rounds = argc > 1 && strcmp(argv[1], "--quick") == 0 ? 200000 : 2000000;
  char dir[] = "/tmp/tsr-bench-region-XXXXXX";
  if (!mkdtemp(dir)) return 1;
  int dfd = open(dir, O_RDONLY | O_DIRECTORY);
  tsr_region_params_t p = {.lease_id = 1, .limit_bytes = UINT64_C(1) << 40, .owner_uid = geteuid()};
  tsr_status_t st = tsr_region_create(dfd, &p);
  if (!st) st = tsr_region_open(dfd, "lease-1.region", 1, &g_region);
  if (st) {
    fprintf(stderr, "bench_region: %s\n", tsr_status_message(st));
    return 1;
  }
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  printf("## bench_region: admission in the shared region (%ld CPUs, %ld pairs per thread)\n\n", cpus, g_rounds);
  printf("| threads | tessera charge+credit | floor: fetch_add+fetch_sub | target |\n|---|---|---|---|\n");
  for (int th = 1; th <= 8; th *= 2) {
    double r = run(region_worker, th), f = run(floor_worker, th);
    printf("| %d | %.1f ns | %.1f ns | %s |\n", th, r, f,
           th == 1 ? "<= 500 ns (the target, of a hooked alloc+free)" : "");
    tsr_bench_record_t *rec = tsr_bench_record_begin("region", "%d thread%s", th, th == 1 ? "" : "s");
    tsr_bench_record_figure(rec, r, "charge_credit_ns");
    tsr_bench_record_figure(rec, f, "floor_ns");
    tsr_bench_record_end(rec, th == 1 ? "<= 500 ns" : NULL, NULL);
  }
  tsr_region_close(g_region);
  st = tsr_region_remove(dfd, 1);
  if (st) fprintf(stderr, "bench_region: %s\n", tsr_status_message(st));
  tsr_status_free(st);
  close(dfd);
  rmdir(dir);
  return 0;
}
