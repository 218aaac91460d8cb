/* The charging protocol both shims share (tenant/charge.c), on a real
 * region: the sentinels and the policy, the charge and its refusal, the
 * shim's one retry before a refusal, the credit, the rounding. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include "tenant/tenant.h"
#include "region/region.h"

static char dir[] = "/tmp/tsr-tenant-charge-XXXXXX";
static int dfd = -1;
static tsr_tenant_t tenant;

static void setup(void) {
  cr_assert_not_null(mkdtemp(dir));
  dfd = open(dir, O_RDONLY | O_DIRECTORY);
  cr_assert_geq(dfd, 0);
  tsr_region_params_t p = {.lease_id = 5,
                           .device = 0,
                           .device_uuid = "GPU-test",
                           .limit_bytes = 100,
                           .deadline_wall_ns = 1,
                           .owner_uid = geteuid(),
                           .generation = 1};
  tsr_status_t st = tsr_region_create(dfd, &p);
  cr_assert_null(st, "%s", tsr_status_message(st));
  char name[64];
  tsr_region_file_name(5, name, sizeof name);
  tsr_tenant_lease_t *l = &tenant.leases[0];
  st = tsr_region_open(dfd, name, 5, &l->region);
  cr_assert_null(st, "%s", tsr_status_message(st));
  tsr_region_proc_t self;
  tsr_region_proc_self(&self);
  st = tsr_region_attach(l->region, &self, &l->slot);
  cr_assert_null(st, "%s", tsr_status_message(st));
  l->id = 5;
  tenant.governed = true;
  tenant.nleases = 1;
}

static void teardown(void) {
  tsr_region_close(tenant.leases[0].region);
  char name[64];
  tsr_region_file_name(5, name, sizeof name);
  unlinkat(dfd, name, 0);
  close(dfd);
  rmdir(dir);
}

static uint64_t used(void) {
  tsr_region_stats_t s;
  tsr_region_stats(tenant.leases[0].region, &s);
  return s.used_bytes;
}

static int retries;
static void retry_frees_30(void) {
  retries++;
  tsr_tenant_credit(&tenant, 0, 30); /* what a shim's own accounts give back when brought up to date */
}

TestSuite(tenant_charge, .init = setup, .fini = teardown);

Test(tenant_charge, charges_refuses_and_credits_the_lease) {
  int got = 7;
  cr_assert(tsr_tenant_charge(&tenant, 0, 60, NULL, &got));
  cr_assert_eq(got, 0);
  cr_assert_eq(used(), 60);
  cr_assert_not(tsr_tenant_charge(&tenant, 0, 50, NULL, &got), "past the limit");
  cr_assert_eq(got, -1, "nothing charged");
  cr_assert_eq(used(), 60);
  tsr_tenant_credit(&tenant, 0, 60);
  cr_assert_eq(used(), 0);
  tsr_tenant_credit(&tenant, -1, 60);
  tsr_tenant_credit(&tenant, 3, 60);
  cr_assert_eq(used(), 0, "nothing to give back for -1 or a lease it does not have");
}

Test(tenant_charge, a_refusal_retries_once_after_the_shim_reconciles) {
  int got;
  cr_assert(tsr_tenant_charge(&tenant, 0, 80, NULL, &got));
  retries = 0;
  cr_assert(tsr_tenant_charge(&tenant, 0, 40, retry_frees_30, &got), "fits once 30 came back");
  cr_assert_eq(retries, 1);
  cr_assert_eq(used(), 90);
  cr_assert_not(tsr_tenant_charge(&tenant, 0, 50, retry_frees_30, &got), "still does not fit");
  cr_assert_eq(retries, 2, "one retry a charge, not a loop");
  cr_assert_eq(got, -1);
  cr_assert(tsr_tenant_charge(&tenant, 0, 5, retry_frees_30, &got));
  cr_assert_eq(retries, 2, "a charge that fits never retries");
}

Test(tenant_charge, sentinels_follow_the_policy) {
  int got = 7;
  cr_assert(tsr_tenant_charge(&tenant, TSR_TENANT_UNGOVERNED, 1000, NULL, &got));
  cr_assert_eq(got, -1);
  cr_assert(tsr_tenant_charge(&tenant, TSR_TENANT_NO_LEASE, 1000, NULL, &got), "pass");
  cr_assert(tsr_tenant_charge(&tenant, 4, 1000, NULL, &got), "a lease it no longer has: pass");
  tenant.deny = true;
  cr_assert_not(tsr_tenant_charge(&tenant, TSR_TENANT_NO_LEASE, 1, NULL, &got), "deny");
  cr_assert_not(tsr_tenant_charge(&tenant, 4, 1, NULL, &got), "deny");
  cr_assert(tsr_tenant_charge(&tenant, TSR_TENANT_UNGOVERNED, 1, NULL, &got), "ungoverned passes even so");
  tenant.deny = false;
  cr_assert_eq(used(), 0, "none of these charged the region");
}

Test(tenant_charge, rounds_up_to_the_granule) {
  cr_assert_eq(tsr_tenant_round(0, 4096), 0);
  cr_assert_eq(tsr_tenant_round(1, 4096), 4096);
  cr_assert_eq(tsr_tenant_round(4096, 4096), 4096);
  cr_assert_eq(tsr_tenant_round(4097, 2 << 20), 2 << 20);
  cr_assert_eq(tsr_tenant_round(UINT64_MAX - 5, 4096), UINT64_MAX, "no wrap to a small number");
  cr_assert_eq(tsr_tenant_round(77, 1), 77);
}
