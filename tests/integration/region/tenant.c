/* tenant.c: a process under a lease, as the shim will be, for the region
 * integration test (region.sh). Loops are bounded in time.
 *
 *   tsr_tenant charge DIR LEASE BYTES HOLD_S   attach, charge, hold, then exit
 *                                              WITHOUT detaching (as a crash would);
 *                                              prints "charged" or "refused" at once,
 *                                              then, after HOLD_S, "then:charged|refused"
 *                                              for one more byte
 *   tsr_tenant stats DIR LEASE                 prints "used=N processes=N state=N"
 */
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "region/region.h"

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: tsr_tenant charge|stats DIR LEASE [BYTES HOLD_S]\n");
    return 2;
  }
  uint64_t lease = strtoull(argv[3], NULL, 10);
  char name[64], path[4200];
  tsr_region_file_name(lease, name, sizeof name);
  /* by path: the region directory (0711) may be searched, not listed */
  snprintf(path, sizeof path, "%s/%s", argv[2], name);
  tsr_region_t *r = NULL;
  tsr_status_t st = tsr_region_open(AT_FDCWD, path, lease, &r);
  if (st) {
    printf("open-failed %s\n", tsr_status_code_name(tsr_status_code(st)));
    fprintf(stderr, "%s\n", tsr_status_message(st));
    tsr_status_free(st);
    fflush(stdout);
    return 1;
  }
  if (argv[1][0] == 's') {
    tsr_region_stats_t s;
    tsr_region_stats(r, &s);
    printf("used=%" PRIu64 " processes=%u state=%d\n", s.used_bytes, s.processes, (int)s.state);
    fflush(stdout);
    tsr_region_close(r);
    return 0;
  }
  if (argc != 6) return 2;
  uint32_t slot = 0;
  tsr_region_proc_t self;
  tsr_region_proc_self(&self);
  st = tsr_region_attach(r, &self, &slot);
  if (st) {
    printf("attach-failed\n");
    tsr_status_free(st);
    tsr_region_close(r);
    return 1;
  }
  printf("%s\n", tsr_region_charge(r, slot, strtoull(argv[4], NULL, 10)) ? "charged" : "refused");
  fflush(stdout);
  double hold = atof(argv[5]);
  usleep((useconds_t)(hold * 1e6));
  printf("then:%s\n", tsr_region_charge(r, slot, 1) ? "charged" : "refused");
  fflush(stdout);
  tsr_region_close(r); /* unmapped, but not detached: the reaper must give the memory back */
  return 0;
}
