/* tsr_tenant_warn_once (src/tenant/tenant.c): each warning key prints its
 * line once, and no key silences another (bare numbers did: tenant.c's
 * per-lease keys 8..23 ran into the shim's 20..23). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tenant/tenant.h"

Test(tenant_warnings, every_key_prints_once_and_none_silences_another) {
  char path[] = "/tmp/tsr-warn-XXXXXX";
  int fd = mkstemp(path);
  cr_assert_geq(fd, 0);
  fflush(stderr);
  int saved = dup(2);
  dup2(fd, 2);
  for (int round = 0; round < 2; round++)
    for (int k = TSR_WARN_LEASE_ENV; k < TSR_WARN_END; k++) tsr_tenant_warn_once((tsr_tenant_warning_t)k, "key %d", k);
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  FILE *f = fopen(path, "r");
  cr_assert_not_null(f);
  int seen[64] = {0}, lines = 0, k;
  char line[128];
  while (fgets(line, sizeof(line), f)) {
    cr_assert_eq(sscanf(line, "tessera: key %d", &k), 1, "an unexpected line: %s", line);
    cr_assert(k >= 0 && k < 64);
    seen[k]++;
    lines++;
  }
  fclose(f);
  close(fd);
  unlink(path);
  for (k = TSR_WARN_LEASE_ENV; k < TSR_WARN_END; k++) cr_assert_eq(seen[k], 1, "key %d printed %d times", k, seen[k]);
  cr_assert_eq(lines, TSR_WARN_END - TSR_WARN_LEASE_ENV);
}
