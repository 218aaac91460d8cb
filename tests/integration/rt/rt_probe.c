/* rt_probe: a libtessera-rt tenant for integration tests: starts a runtime
 * on the CUDA backend, allocates MIB mebibytes through it, says so, holds
 * them until HOLD_FILE exists (at most 20 s), frees and stops.
 *
 *   rt_probe MIB [HOLD_FILE]
 *
 * Prints "allocated N MiB", then "holding" (with HOLD_FILE), or
 * "refused: <why>"; exit 0 allocated, 1 refused or failed, 2 usage. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "tessera/rt.h"

int main(int argc, char **argv) {
  char *end = NULL;
  long mib = argc > 1 ? strtol(argv[1], &end, 10) : -1;
  if (argc < 2 || argc > 3 || !end || *end || mib <= 0) {
    fprintf(stderr, "usage: rt_probe MIB [HOLD_FILE]\n");
    return 2;
  }
  setvbuf(stdout, NULL, _IOLBF, 0);
  tsr_rt_t *rt = NULL;
  tsr_rt_options_t o = {.backend = TSR_RT_BACKEND_CUDA, .lanes = 4};
  tsr_status_t st = tsr_rt_create(&o, &rt);
  if (st) {
    printf("refused: %s\n", tsr_status_message(st));
    return 1;
  }
  void *p = NULL;
  st = tsr_rt_alloc(rt, (size_t)mib << 20, &p);
  int rc = 0;
  if (st) {
    printf("refused: %s\n", tsr_status_message(st));
    tsr_status_free(st);
    rc = 1;
  } else {
    printf("allocated %ld MiB\n", mib);
    if (argc == 3) {
      printf("holding\n");
      for (int i = 0; i < 2000 && access(argv[2], F_OK) != 0; i++) {
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
      }
    }
    tsr_rt_free(rt, p);
  }
  st = tsr_rt_destroy(rt);
  if (st) {
    printf("destroy: %s\n", tsr_status_message(st));
    tsr_status_free(st);
    rc = 1;
  }
  return rc;
}
