/* The rules of the lease table, one by one (seed 000, Algorithms 1-4). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "base/units.h"
#include "lease/lease.h"

#define GiB (UINT64_C(1) << 30)

static tsr_lease_table_t *t;
static const tsr_lease_actor_t alice = {1000, "alice", false, 11};
static const tsr_lease_actor_t bob = {1001, "bob", false, 12};
static const tsr_lease_actor_t root = {0, "root", true, 13};
static tsr_lease_now_t now = {1000000000, UINT64_C(1763805600000000000)};
static uint64_t next_id = 1;

static void setup(void) {
  tsr_device_t devs[2] = {
      {.index = 0, .name = "GPU0", .total_bytes = 80 * GiB, .sm_count = 132},
      {.index = 1, .name = "GPU1", .total_bytes = 40 * GiB, .sm_count = 108},
  };
  cr_assert_null(tsr_lease_table_create(devs, 2, "node-1", NULL, &t));
  next_id = 1;
}
static void teardown(void) { tsr_lease_table_free(t); }

static tsr_lease_request_t req(uint32_t dev, uint32_t ppm, uint64_t dur) {
  tsr_lease_request_t r = {.device = dev, .fraction_ppm = ppm, .duration_ns = dur};
  return r;
}

static tsr_status_code_t create(const tsr_lease_actor_t *a, tsr_lease_request_t r, tsr_lease_t *out) {
  tsr_lease_t tmp;
  tsr_status_t st = tsr_lease_table_create_lease(t, &r, a, now, next_id, out ? out : &tmp);
  tsr_status_code_t c = tsr_status_code(st);
  if (!st) next_id++;
  tsr_status_free(st);
  return c;
}

TestSuite(lease_table, .init = setup, .fini = teardown);

Test(lease_table, create_fills_every_field) {
  tsr_lease_t l;
  cr_assert_eq(create(&alice, req(0, 500000, 7200000000000), &l), TSR_OK);
  cr_assert_eq(l.id, 1);
  cr_assert_eq(l.device, 0);
  cr_assert_eq(l.bytes, 40 * GiB);
  cr_assert_eq(l.owner_uid, 1000);
  cr_assert_str_eq(l.owner, "alice");
  cr_assert_str_eq(l.creator, "alice");
  cr_assert_str_eq(l.host, "node-1");
  cr_assert_eq(l.pid, 11);
  cr_assert_eq(l.start_wall_ns, now.wall_ns);
  cr_assert_eq(l.deadline_wall_ns, now.wall_ns + 7200000000000);
  cr_assert_eq(l.deadline_mono_ns, now.mono_ns + 7200000000000);
  cr_assert_eq(l.state, TSR_LEASE_ACTIVE);
  cr_assert_eq(tsr_lease_table_available_bytes(t, 0), 40 * GiB);
  cr_assert_eq(tsr_lease_table_count(t), 1);
  cr_assert_eq(tsr_lease_table_find(t, 1)->bytes, 40 * GiB);
}

Test(lease_table, argument_checks) {
  cr_assert_eq(create(&alice, req(2, 500000, 1), NULL), TSR_NOT_FOUND);
  cr_assert_eq(create(&alice, req(0, 0, 1), NULL), TSR_INVALID_ARGUMENT);
  cr_assert_eq(create(&alice, req(0, 1000001, 1), NULL), TSR_INVALID_ARGUMENT);
  cr_assert_eq(create(&alice, req(0, 500000, 0), NULL), TSR_INVALID_ARGUMENT);
  tsr_lease_request_t r = req(0, 500000, 1);
  r.sm_ppm = 1000001;
  cr_assert_eq(create(&alice, r, NULL), TSR_INVALID_ARGUMENT);
  cr_assert_eq(tsr_lease_table_count(t), 0);
  cr_assert_eq(tsr_lease_table_available_bytes(t, 0), 80 * GiB);
}

Test(lease_table, admission_total_times_fraction_le_available) {
  cr_assert_eq(create(&alice, req(1, 600000, 10), NULL), TSR_OK);
  cr_assert_eq(create(&alice, req(1, 400001, 10), NULL), TSR_RESOURCE_EXHAUSTED);
  cr_assert_eq(create(&alice, req(1, 400000, 10), NULL), TSR_OK); /* exactly fits */
  cr_assert_eq(tsr_lease_table_available_bytes(t, 1), 0);
  cr_assert_eq(create(&alice, req(1, 1, 10), NULL), TSR_RESOURCE_EXHAUSTED);
  /* the other device is independent */
  cr_assert_eq(create(&alice, req(0, 1000000, 10), NULL), TSR_OK);
}

Test(lease_table, whole_device_fraction_one) {
  cr_assert_eq(create(&bob, req(0, 1000000, 10), NULL), TSR_OK);
  cr_assert_eq(tsr_lease_table_available_bytes(t, 0), 0);
}

Test(lease_table, only_admin_creates_for_another_user) {
  tsr_lease_request_t r = req(0, 250000, 10);
  r.has_target = true;
  r.target_uid = 1001;
  r.target_name = "bob";
  cr_assert_eq(create(&alice, r, NULL), TSR_PERMISSION_DENIED);
  tsr_lease_t l;
  cr_assert_eq(create(&root, r, &l), TSR_OK);
  cr_assert_eq(l.owner_uid, 1001);
  cr_assert_str_eq(l.owner, "bob");
  cr_assert_eq(l.creator_uid, 0);
  cr_assert_str_eq(l.creator, "root");
  /* naming yourself as target is allowed for anyone */
  r.fraction_ppm = 200000;
  r.target_uid = 1000;
  r.target_name = "alice";
  cr_assert_eq(create(&alice, r, &l), TSR_OK);
  cr_assert_eq(l.owner_uid, 1000);
}

/* A job label is the scheduler's: only an admin sets it, and only one the
 * rule takes (tsr_lease_job_ok). */
Test(lease_table, only_admin_labels_a_lease_with_a_job) {
  tsr_lease_request_t r = req(0, 250000, 10);
  r.job = "4711";
  cr_assert_eq(create(&alice, r, NULL), TSR_PERMISSION_DENIED);
  tsr_lease_t l;
  r.has_target = true;
  r.target_uid = 1000;
  r.target_name = "alice";
  cr_assert_eq(create(&root, r, &l), TSR_OK);
  cr_assert_str_eq(l.job, "4711");
  cr_assert_eq(l.owner_uid, 1000);
  r.fraction_ppm = 100000;
  r.job = "47 11";
  cr_assert_eq(create(&root, r, NULL), TSR_INVALID_ARGUMENT);
  r.job = "";
  cr_assert_eq(create(&alice, r, &l), TSR_OK); /* empty: no label, anyone */
  cr_assert_str_eq(l.job, "");
  cr_assert(tsr_lease_job_ok("cluster:123_4.a@b+c-d"));
  cr_assert_not(tsr_lease_job_ok(""));
  cr_assert_not(tsr_lease_job_ok(NULL));
  cr_assert_not(tsr_lease_job_ok("a\nb"));
}

Test(lease_table, lock_rule_same_fraction_other_owner_conflicts) {
  /* seed line 21-26: a lock on (device, fraction) held by another owner */
  cr_assert_eq(create(&alice, req(0, 250000, 10), NULL), TSR_OK);
  cr_assert_eq(create(&bob, req(0, 250000, 10), NULL), TSR_CONFLICT);
  /* within the same 0.1% key: 25.04% also maps to 250 */
  cr_assert_eq(create(&bob, req(0, 250400, 10), NULL), TSR_CONFLICT);
  /* the owner may take the same fraction again while memory lasts */
  cr_assert_eq(create(&alice, req(0, 250000, 10), NULL), TSR_OK);
  /* another fraction, or the same on another device, is fine */
  cr_assert_eq(create(&bob, req(0, 200000, 10), NULL), TSR_OK);
  cr_assert_eq(create(&bob, req(1, 250000, 10), NULL), TSR_OK);
  /* the admin is bound by the lock rule too when creating for bob */
  tsr_lease_request_t r = req(0, 250000, 10);
  r.has_target = true;
  r.target_uid = 1001;
  r.target_name = "bob";
  cr_assert_eq(create(&root, r, NULL), TSR_CONFLICT);
}

Test(lease_table, lock_frees_when_lease_ends) {
  tsr_lease_t l;
  cr_assert_eq(create(&alice, req(0, 250000, 10), &l), TSR_OK);
  cr_assert_null(tsr_lease_table_remove(t, l.id, TSR_LEASE_RELEASED, now, NULL));
  cr_assert_eq(create(&bob, req(0, 250000, 10), NULL), TSR_OK);
}

Test(lease_table, conflict_checked_before_capacity_changes_nothing) {
  cr_assert_eq(create(&alice, req(0, 500000, 10), NULL), TSR_OK);
  uint64_t before = tsr_lease_table_available_bytes(t, 0);
  cr_assert_eq(create(&bob, req(0, 500000, 10), NULL), TSR_CONFLICT);
  cr_assert_eq(tsr_lease_table_available_bytes(t, 0), before);
  cr_assert_eq(tsr_lease_table_count(t), 1);
}

Test(lease_table, sm_shares_never_exceed_the_device) {
  tsr_lease_request_t r = req(0, 100000, 10);
  r.sm_ppm = 600000;
  cr_assert_eq(create(&alice, r, NULL), TSR_OK);
  r.fraction_ppm = 110000;
  r.sm_ppm = 400001;
  cr_assert_eq(create(&bob, r, NULL), TSR_RESOURCE_EXHAUSTED);
  r.sm_ppm = 400000;
  cr_assert_eq(create(&bob, r, NULL), TSR_OK);
  cr_assert_eq(tsr_lease_table_sm_committed(t, 0), 1000000);
  r.fraction_ppm = 120000;
  r.sm_ppm = 0; /* no share asked: not limited, always admitted */
  cr_assert_eq(create(&bob, r, NULL), TSR_OK);
}

Test(lease_table, release_by_owner_or_admin_only) {
  tsr_lease_t a, b;
  cr_assert_eq(create(&alice, req(0, 100000, 10), &a), TSR_OK);
  cr_assert_eq(create(&bob, req(0, 200000, 10), &b), TSR_OK);
  tsr_status_t st = tsr_lease_table_authorize_release(t, a.id, &bob, NULL);
  cr_assert_eq(tsr_status_code(st), TSR_PERMISSION_DENIED);
  tsr_status_free(st);
  cr_assert_null(tsr_lease_table_authorize_release(t, a.id, &alice, NULL));
  cr_assert_null(tsr_lease_table_authorize_release(t, b.id, &root, NULL));
  st = tsr_lease_table_authorize_release(t, 999, &root, NULL);
  cr_assert_eq(tsr_status_code(st), TSR_NOT_FOUND);
  tsr_status_free(st);
  tsr_lease_t out;
  cr_assert_null(tsr_lease_table_remove(t, a.id, TSR_LEASE_RELEASED, now, &out));
  cr_assert_eq(out.state, TSR_LEASE_RELEASED);
  cr_assert_eq(out.ended_wall_ns, now.wall_ns);
  st = tsr_lease_table_remove(t, a.id, TSR_LEASE_RELEASED, now, NULL);
  cr_assert_eq(tsr_status_code(st), TSR_NOT_FOUND, "double release must fail");
  tsr_status_free(st);
  cr_assert_eq(tsr_lease_table_available_bytes(t, 0), 80 * GiB - b.bytes);
}

Test(lease_table, ids_must_be_fresh) {
  tsr_lease_request_t r = req(0, 100000, 10);
  tsr_lease_t l;
  cr_assert_null(tsr_lease_table_create_lease(t, &r, &alice, now, 5, &l));
  tsr_status_t st = tsr_lease_table_create_lease(t, &r, &alice, now, 5, &l);
  cr_assert_eq(tsr_status_code(st), TSR_INVALID_ARGUMENT);
  tsr_status_free(st);
  st = tsr_lease_table_create_lease(t, &r, &alice, now, 0, &l);
  cr_assert_eq(tsr_status_code(st), TSR_INVALID_ARGUMENT);
  tsr_status_free(st);
}

Test(lease_table, expiry_in_deadline_order) {
  uint64_t durs[] = {50, 10, 30, 20, 40};
  for (int i = 0; i < 5; i++) cr_assert_eq(create(&alice, req(0, 100000, durs[i]), NULL), TSR_OK);
  uint64_t d;
  cr_assert(tsr_lease_table_next_deadline(t, &d));
  cr_assert_eq(d, now.mono_ns + 10);
  tsr_lease_t l;
  cr_assert_not(tsr_lease_table_peek_expired(t, now.mono_ns + 9, &l));
  uint64_t want_ids[] = {2, 4, 3, 5, 1};
  for (int i = 0; i < 5; i++) {
    cr_assert(tsr_lease_table_peek_expired(t, now.mono_ns + 100, &l));
    cr_assert_eq(l.id, want_ids[i]);
    cr_assert_null(tsr_lease_table_remove(t, l.id, TSR_LEASE_EXPIRED, now, &l));
    cr_assert_eq(l.state, TSR_LEASE_EXPIRED);
  }
  cr_assert_not(tsr_lease_table_next_deadline(t, &d));
}

Test(lease_table, released_lease_leaves_the_heap_top) {
  tsr_lease_t a, b;
  cr_assert_eq(create(&alice, req(0, 100000, 10), &a), TSR_OK);
  cr_assert_eq(create(&alice, req(0, 100000, 20), &b), TSR_OK);
  cr_assert_null(tsr_lease_table_remove(t, a.id, TSR_LEASE_RELEASED, now, NULL));
  uint64_t d;
  cr_assert(tsr_lease_table_next_deadline(t, &d));
  cr_assert_eq(d, now.mono_ns + 20);
  tsr_lease_t l;
  cr_assert(tsr_lease_table_peek_expired(t, now.mono_ns + 20, &l));
  cr_assert_eq(l.id, b.id);
}

Test(lease_table, many_releases_keep_heap_bounded_and_correct) {
  /* release in creation order (never the heap top) to grow stale entries */
  for (int round = 0; round < 50; round++) {
    tsr_lease_t l[8];
    for (int i = 0; i < 8; i++) cr_assert_eq(create(&alice, req(0, 10000, (uint64_t)(100 - i)), &l[i]), TSR_OK);
    for (int i = 0; i < 8; i++) cr_assert_null(tsr_lease_table_remove(t, l[i].id, TSR_LEASE_RELEASED, now, NULL));
  }
  uint64_t d;
  cr_assert_not(tsr_lease_table_next_deadline(t, &d));
  cr_assert_eq(tsr_lease_table_available_bytes(t, 0), 80 * GiB);
}

Test(lease_table, deadline_saturates_instead_of_wrapping) {
  tsr_lease_t l;
  cr_assert_eq(create(&alice, req(0, 100000, UINT64_MAX), &l), TSR_OK);
  cr_assert_eq(l.deadline_wall_ns, UINT64_MAX);
  cr_assert_eq(l.deadline_mono_ns, UINT64_MAX);
}

Test(lease_table, max_duration_is_enforced) {
  tsr_lease_table_t *capped;
  tsr_device_t dev = {.index = 0, .name = "G", .total_bytes = GiB};
  cr_assert_null(tsr_lease_table_create(&dev, 1, "h", &(tsr_lease_limits_t){.max_duration_ns = 100}, &capped));
  tsr_lease_request_t r = req(0, 100000, 101);
  tsr_lease_t l;
  tsr_status_t st = tsr_lease_table_create_lease(capped, &r, &alice, now, 1, &l);
  cr_assert_eq(tsr_status_code(st), TSR_INVALID_ARGUMENT);
  tsr_status_free(st);
  r.duration_ns = 100;
  cr_assert_null(tsr_lease_table_create_lease(capped, &r, &alice, now, 1, &l));
  tsr_lease_table_free(capped);
}

Test(lease_table, restore_rebuilds_monotonic_deadline_and_checks_rules) {
  tsr_lease_t l;
  cr_assert_eq(create(&alice, req(0, 500000, 5000), &l), TSR_OK);
  tsr_lease_t copy = l;
  tsr_lease_table_free(t);
  tsr_device_t devs[1] = {{.index = 0, .name = "GPU0", .total_bytes = 80 * GiB}};
  cr_assert_null(tsr_lease_table_create(devs, 1, "node-1", NULL, &t));
  tsr_lease_now_t later = {42, now.wall_ns + 1000}; /* new boot: another monotonic base */
  cr_assert_null(tsr_lease_table_restore(t, &copy, later));
  cr_assert_eq(tsr_lease_table_find(t, l.id)->deadline_mono_ns, 42 + 4000);
  cr_assert_eq(tsr_lease_table_available_bytes(t, 0), 40 * GiB);
  /* the same id twice, a conflicting owner, and a lease past capacity are refused */
  tsr_status_t st = tsr_lease_table_restore(t, &copy, later);
  cr_assert_eq(tsr_status_code(st), TSR_ALREADY_EXISTS);
  tsr_status_free(st);
  tsr_lease_t other = copy;
  other.id = 99;
  other.owner_uid = 1001;
  snprintf(other.owner, sizeof other.owner, "bob");
  st = tsr_lease_table_restore(t, &other, later);
  cr_assert_eq(tsr_status_code(st), TSR_CONFLICT);
  tsr_status_free(st);
  other.fraction_ppm = 600000;
  other.bytes = 48 * GiB;
  st = tsr_lease_table_restore(t, &other, later);
  cr_assert_eq(tsr_status_code(st), TSR_RESOURCE_EXHAUSTED);
  tsr_status_free(st);
  /* a lease whose deadline passed while the daemon was down is due at once */
  tsr_lease_t past = copy;
  past.id = 100;
  past.fraction_ppm = 100000;
  past.bytes = 8 * GiB;
  past.deadline_wall_ns = later.wall_ns - 1;
  cr_assert_null(tsr_lease_table_restore(t, &past, later));
  tsr_lease_t due;
  cr_assert(tsr_lease_table_peek_expired(t, later.mono_ns, &due));
  cr_assert_eq(due.id, 100);
}

Test(lease_table, bad_names_are_refused) {
  tsr_lease_actor_t evil = {1002, "ev\nil", false, 1};
  cr_assert_eq(create(&evil, req(0, 100000, 10), NULL), TSR_INVALID_ARGUMENT);
  tsr_lease_request_t r = req(0, 100000, 10);
  r.has_target = true;
  r.target_uid = 5;
  r.target_name = "a b";
  cr_assert_eq(create(&root, r, NULL), TSR_INVALID_ARGUMENT);
}

Test(lease_table, table_create_validates_devices, .init = NULL, .fini = NULL) {
  tsr_lease_table_t *x = NULL;
  tsr_device_t bad = {.index = 3, .total_bytes = 1};
  tsr_status_t st = tsr_lease_table_create(&bad, 1, "h", NULL, &x);
  cr_assert_eq(tsr_status_code(st), TSR_INVALID_ARGUMENT);
  cr_assert_null(x);
  tsr_status_free(st);
  tsr_device_t empty = {.index = 0, .total_bytes = 0};
  st = tsr_lease_table_create(&empty, 1, "h", NULL, &x);
  cr_assert_eq(tsr_status_code(st), TSR_INVALID_ARGUMENT);
  tsr_status_free(st);
  cr_assert_null(tsr_lease_table_create(NULL, 0, NULL, NULL, &x));
  tsr_lease_table_free(x);
}

/* ---- admission limits -------------------------------------------------------------- */

static tsr_lease_table_t *limited(tsr_lease_limits_t limits) {
  tsr_lease_table_t *x;
  tsr_device_t devs[1] = {{.index = 0, .name = "GPU0", .total_bytes = 80 * GiB}};
  cr_assert_null(tsr_lease_table_create(devs, 1, "node-1", &limits, &x));
  return x;
}

static tsr_status_code_t create_in(tsr_lease_table_t *x, const tsr_lease_actor_t *a, tsr_lease_request_t r,
                                   const char *needle) {
  tsr_lease_t l;
  tsr_status_t st = tsr_lease_table_create_lease(x, &r, a, now, next_id, &l);
  tsr_status_code_t c = tsr_status_code(st);
  if (needle)
    cr_assert(st && strstr(tsr_status_message(st), needle), "message '%s' lacks '%s'", tsr_status_message(st), needle);
  if (!st) next_id++;
  tsr_status_free(st);
  return c;
}

Test(lease_table, per_owner_limit_counts_the_owner_and_spares_admins) {
  tsr_lease_table_t *x = limited((tsr_lease_limits_t){.max_per_owner = 2});
  cr_assert_eq(create_in(x, &alice, req(0, 100000, 10), NULL), TSR_OK);
  cr_assert_eq(create_in(x, &alice, req(0, 100000, 10), NULL), TSR_OK);
  cr_assert_eq(create_in(x, &alice, req(0, 100000, 10), "user alice holds 2 leases, the most this node allows"),
               TSR_RESOURCE_EXHAUSTED);
  /* naming herself as the target changes nothing */
  tsr_lease_request_t self = req(0, 100000, 10);
  self.has_target = true;
  self.target_uid = alice.uid;
  self.target_name = "alice";
  cr_assert_eq(create_in(x, &alice, self, NULL), TSR_RESOURCE_EXHAUSTED);
  /* another owner has a count of their own */
  cr_assert_eq(create_in(x, &bob, req(0, 200000, 10), NULL), TSR_OK);
  /* an admin may grant alice a third, and is not held to it for itself */
  tsr_lease_request_t for_alice = self;
  cr_assert_eq(create_in(x, &root, for_alice, NULL), TSR_OK);
  for (int i = 0; i < 3; i++) cr_assert_eq(create_in(x, &root, req(0, 10000, 10), NULL), TSR_OK);
  cr_assert_eq(tsr_lease_table_count(x), 7);
  /* alice holds 3 now: one release leaves 2, still the most */
  cr_assert_null(tsr_lease_table_remove(x, 1, TSR_LEASE_RELEASED, now, NULL));
  cr_assert_eq(create_in(x, &alice, req(0, 100000, 10), "holds 2 leases"), TSR_RESOURCE_EXHAUSTED);
  cr_assert_null(tsr_lease_table_remove(x, 2, TSR_LEASE_RELEASED, now, NULL));
  cr_assert_eq(create_in(x, &alice, req(0, 100000, 10), NULL), TSR_OK);
  tsr_lease_table_free(x);
}

Test(lease_table, minimum_fraction_and_bytes) {
  tsr_lease_table_t *x = limited((tsr_lease_limits_t){.min_fraction_ppm = 10000});
  cr_assert_eq(create_in(x, &alice, req(0, 5000, 10), "0.5% is smaller than this node allows (at least 1%)"),
               TSR_INVALID_ARGUMENT);
  cr_assert_eq(create_in(x, &root, req(0, 9999, 10), "at least 1%"), TSR_INVALID_ARGUMENT);
  cr_assert_eq(create_in(x, &alice, req(0, 10000, 10), NULL), TSR_OK);
  cr_assert_eq(tsr_lease_table_count(x), 1);
  tsr_lease_table_free(x);
  /* 1 GiB of 80 GiB is 1.25%: 1.2% gives 983 MiB */
  x = limited((tsr_lease_limits_t){.min_bytes = GiB});
  cr_assert_eq(
      create_in(x, &alice, req(0, 12000, 10), "is smaller than this node allows (at least 1 GiB, 1073741824 bytes)"),
      TSR_INVALID_ARGUMENT);
  cr_assert_eq(create_in(x, &alice, req(0, 12500, 10), NULL), TSR_OK);
  cr_assert_eq(tsr_lease_table_count(x), 1);
  tsr_lease_table_free(x);
}

Test(lease_table, ids_above_the_largest_are_not_fresh) {
  tsr_lease_request_t r = req(0, 100000, 10);
  tsr_lease_t l;
  tsr_status_t st = tsr_lease_table_create_lease(t, &r, &alice, now, TSR_LEASE_ID_MAX + 1, &l);
  cr_assert_eq(tsr_status_code(st), TSR_INVALID_ARGUMENT);
  tsr_status_free(st);
  cr_assert_null(tsr_lease_table_create_lease(t, &r, &alice, now, TSR_LEASE_ID_MAX, &l));
}

/* ---- restore: the rules of a create, for a lease read from a file ------------------- */

static tsr_lease_t stored(uint64_t id, uint32_t dev, uint32_t ppm) {
  tsr_lease_t l;
  memset(&l, 0, sizeof l);
  l.id = id;
  l.device = dev;
  l.fraction_ppm = ppm;
  l.bytes = tsr_units_scale_ppm(dev == 0 ? 80 * GiB : 40 * GiB, ppm);
  l.owner_uid = 1000;
  l.creator_uid = 1000;
  l.pid = 7;
  strcpy(l.owner, "alice");
  strcpy(l.creator, "alice");
  strcpy(l.host, "node-1");
  l.start_wall_ns = now.wall_ns - 1000;
  l.deadline_wall_ns = now.wall_ns + 3600 * UINT64_C(1000000000);
  return l;
}

static void restore_refused(tsr_lease_table_t *x, tsr_lease_t l, tsr_status_code_t code, const char *needle) {
  size_t before = tsr_lease_table_count(x);
  uint64_t avail = tsr_lease_table_available_bytes(x, 0);
  tsr_status_t st = tsr_lease_table_restore(x, &l, now);
  cr_assert_not_null(st, "restored, but should fail with '%s'", needle);
  cr_assert_eq(tsr_status_code(st), code, "%s: got %s (%s)", needle, tsr_status_code_name(tsr_status_code(st)),
               tsr_status_message(st));
  cr_assert(strstr(tsr_status_message(st), needle), "message '%s' lacks '%s'", tsr_status_message(st), needle);
  cr_assert_eq(tsr_lease_table_count(x), before, "a refused restore changed the table");
  cr_assert_eq(tsr_lease_table_available_bytes(x, 0), avail);
  tsr_status_free(st);
}

Test(lease_table, restore_refuses_each_broken_rule_with_its_reason) {
  tsr_lease_t l;
  /* ids: 0, 2^63 and 2^64-1 (which wrapped the counter) */
  l = stored(0, 0, 100000);
  restore_refused(t, l, TSR_INVALID_ARGUMENT, "lease id 0 is outside [1, 9223372036854775807]");
  l.id = TSR_LEASE_ID_MAX + 1;
  restore_refused(t, l, TSR_INVALID_ARGUMENT, "lease id 9223372036854775808 is outside");
  l.id = UINT64_MAX;
  restore_refused(t, l, TSR_INVALID_ARGUMENT, "lease id 18446744073709551615 is outside");
  /* a device this node lacks */
  l = stored(5, 2, 100000);
  l.bytes = 1;
  restore_refused(t, l, TSR_NOT_FOUND, "lease 5 is on device 2, which this node lacks");
  /* fraction and SM share out of range */
  l = stored(5, 0, 100000);
  l.fraction_ppm = 0;
  restore_refused(t, l, TSR_INVALID_ARGUMENT, "fraction must be in (0, 1], got 0 ppm");
  l.fraction_ppm = 1000001;
  restore_refused(t, l, TSR_INVALID_ARGUMENT, "got 1000001 ppm");
  l = stored(5, 0, 100000);
  l.sm_ppm = 1000001;
  restore_refused(t, l, TSR_INVALID_ARGUMENT, "SM share must be at most 1, got 1000001 ppm");
  /* bytes that disagree with the fraction: half the device that books all of it */
  l = stored(5, 0, 500000);
  l.bytes = 80 * GiB;
  restore_refused(t, l, TSR_INVALID_ARGUMENT,
                  "lease 5: bytes 85899345920 disagree with fraction 0.5 of device 0 "
                  "(85899345920 bytes), which is 42949672960 bytes");
  l.bytes = 40 * GiB + 1;
  restore_refused(t, l, TSR_INVALID_ARGUMENT, "disagree with fraction");
  l.bytes = 40 * GiB - 1;
  restore_refused(t, l, TSR_INVALID_ARGUMENT, "disagree with fraction");
  /* names */
  l = stored(5, 0, 100000);
  l.owner[0] = '\0';
  restore_refused(t, l, TSR_INVALID_ARGUMENT, "the owner name is not usable");
  strcpy(l.owner, "al ice");
  restore_refused(t, l, TSR_INVALID_ARGUMENT, "the owner name is not usable");
  memset(l.owner, 'a', sizeof l.owner); /* no NUL inside the field */
  restore_refused(t, l, TSR_INVALID_ARGUMENT, "the owner name is not usable");
  l = stored(5, 0, 100000);
  strcpy(l.creator, "root\nFAKE LOG LINE");
  restore_refused(t, l, TSR_INVALID_ARGUMENT, "the creator name is not usable");
  l = stored(5, 0, 100000);
  l.host[0] = '\0';
  restore_refused(t, l, TSR_INVALID_ARGUMENT, "the host name is not usable");
  /* a start in the future beyond a minute of skew */
  l = stored(5, 0, 100000);
  l.start_wall_ns = now.wall_ns + 61 * UINT64_C(1000000000);
  restore_refused(t, l, TSR_INVALID_ARGUMENT,
                  "lease 5 starts at 2025-11-22T10:01:01.000Z, in the future (now "
                  "2025-11-22T10:00:00.000Z");
  /* a deadline not after the start */
  l = stored(5, 0, 100000);
  l.deadline_wall_ns = l.start_wall_ns;
  restore_refused(t, l, TSR_INVALID_ARGUMENT, "is not after its start");
  /* capacity and the lock rule, named with the lease */
  l = stored(6, 0, 600000);
  cr_assert_null(tsr_lease_table_restore(t, &l, now));
  l = stored(7, 0, 500000);
  restore_refused(t, l, TSR_RESOURCE_EXHAUSTED, "lease 7: device 0 has 32 GiB free");
  l = stored(8, 0, 600000);
  l.owner_uid = 1001;
  strcpy(l.owner, "bob");
  restore_refused(t, l, TSR_CONFLICT, "lease 8: device 0 fraction 60.0% is locked by alice");
  restore_refused(t, stored(6, 0, 100000), TSR_ALREADY_EXISTS, "lease id 6 appears twice");
  /* what passes: a start within the skew, the largest id */
  l = stored(TSR_LEASE_ID_MAX, 0, 100000);
  l.start_wall_ns = now.wall_ns + 59 * UINT64_C(1000000000);
  cr_assert_null(tsr_lease_table_restore(t, &l, now));
  cr_assert_eq(tsr_lease_table_count(t), 2);
}

Test(lease_table, restore_holds_what_is_left_to_the_longest_lease) {
  uint64_t hour = 3600 * UINT64_C(1000000000);
  tsr_lease_table_t *x = limited((tsr_lease_limits_t){.max_duration_ns = hour});
  tsr_lease_t l = stored(1, 0, 100000);
  l.deadline_wall_ns = now.wall_ns + hour + 1;
  restore_refused(x, l, TSR_INVALID_ARGUMENT,
                  "lease 1 has 1h (3600000000001 ns) left, longer "
                  "than this node allows a lease (1h)");
  l.deadline_wall_ns = now.wall_ns + hour;
  cr_assert_null(tsr_lease_table_restore(x, &l, now));
  /* a renewed lease: 3 hours old in all, half an hour left */
  l = stored(2, 0, 100000);
  l.start_wall_ns = now.wall_ns - 3 * hour;
  l.deadline_wall_ns = now.wall_ns + hour / 2;
  cr_assert_null(tsr_lease_table_restore(x, &l, now));
  tsr_lease_table_free(x);
}

Test(lease_table, restore_ignores_the_per_owner_count_and_minimum) {
  /* a limit lowered in the configuration takes away no granted lease */
  tsr_lease_table_t *x = limited((tsr_lease_limits_t){.max_per_owner = 1, .min_fraction_ppm = 500000});
  for (uint64_t id = 1; id <= 3; id++) {
    tsr_lease_t l = stored(id, 0, 100000);
    cr_assert_null(tsr_lease_table_restore(x, &l, now));
  }
  cr_assert_eq(tsr_lease_table_count(x), 3);
  /* but they count against a new create */
  next_id = 4;
  cr_assert_eq(create_in(x, &alice, req(0, 500000, 10), "holds 3 leases"), TSR_RESOURCE_EXHAUSTED);
  tsr_lease_table_free(x);
}

/* ---- the indexes: restart with many leases, per-owner counts ------------------------ */

#define MANY_DEVS 100
#define PER_DEV 1000

Test(lease_table, restoring_100000_leases_is_not_quadratic, .timeout = 60) {
  /* 100 devices of 1000 leases each, on 3 lock keys per device, 300 owners:
   * the lock rule scanning every lease made this 5e9 comparisons */
  static tsr_device_t devs[MANY_DEVS];
  for (uint32_t d = 0; d < MANY_DEVS; d++) devs[d] = (tsr_device_t){.index = d, .name = "G", .total_bytes = 80 * GiB};
  tsr_lease_table_t *x;
  cr_assert_null(tsr_lease_table_create(devs, MANY_DEVS, "node-1", NULL, &x));
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  uint64_t id = 1;
  for (uint32_t j = 0; j < PER_DEV; j++) {
    for (uint32_t d = 0; d < MANY_DEVS; d++, id++) {
      uint32_t ppm = 200 + (j % 10) * 150; /* keys 0, 1 and 2; 875 ppm on average */
      tsr_lease_t l = stored(id, 0, ppm);
      l.device = d;
      uint32_t owner = 2000 + (d * 3 + tsr_lease_lock_key(ppm)) % 300;
      l.owner_uid = owner;
      snprintf(l.owner, sizeof l.owner, "u%u", owner);
      tsr_status_t st = tsr_lease_table_restore(x, &l, now);
      cr_assert_null(st, "lease %llu: %s", (unsigned long long)id, tsr_status_message(st));
    }
  }
  clock_gettime(CLOCK_MONOTONIC, &b);
  double ms = (double)(b.tv_sec - a.tv_sec) * 1e3 + (double)(b.tv_nsec - a.tv_nsec) / 1e6;
  cr_log_info("restored %zu leases in %.1f ms", tsr_lease_table_count(x), ms);
  fprintf(stderr, "restored %zu leases in %.1f ms\n", tsr_lease_table_count(x), ms);
  cr_assert_eq(tsr_lease_table_count(x), (size_t)MANY_DEVS * PER_DEV);
  /* the lock index holds: device 7's key 1 belongs to u2022, not to u2000 */
  tsr_lease_actor_t other = {2000, "u2000", false, 1};
  tsr_lease_request_t r = req(7, 800, 10);
  tsr_lease_t got;
  tsr_status_t st = tsr_lease_table_create_lease(x, &r, &other, now, id, &got);
  cr_assert_eq(tsr_status_code(st), TSR_CONFLICT, "%s", tsr_status_message(st));
  cr_assert(strstr(tsr_status_message(st), "locked by u2022 ("), "%s", tsr_status_message(st));
  tsr_status_free(st);
  /* removing every lease of that key frees it, and only the last one does */
  size_t on_key = 0;
  for (uint64_t i = 1; i < id; i++) {
    const tsr_lease_t *l = tsr_lease_table_find(x, i);
    if (l->device == 7 && tsr_lease_lock_key(l->fraction_ppm) == 1) on_key++;
  }
  cr_assert_eq(on_key, 700); /* 500 to 1400 ppm: j % 10 in 2..8 */
  for (uint64_t i = 1; i < id; i++) {
    const tsr_lease_t *l = tsr_lease_table_find(x, i);
    if (!l || l->device != 7 || tsr_lease_lock_key(l->fraction_ppm) != 1) continue;
    st = tsr_lease_table_create_lease(x, &r, &other, now, id, &got);
    cr_assert_eq(tsr_status_code(st), TSR_CONFLICT, "key freed with %zu leases on it", on_key);
    tsr_status_free(st);
    cr_assert_null(tsr_lease_table_remove(x, i, TSR_LEASE_RELEASED, now, NULL));
    on_key--;
  }
  cr_assert_null(tsr_lease_table_create_lease(x, &r, &other, now, id, &got));
  tsr_lease_table_free(x);
}

Test(lease_table, per_owner_counts_stay_right_through_many_owners) {
  /* 1500 owners with 2 or 3 leases each, then half the leases go: each
   * owner's count, seen through the limit, must match a plain tally (the
   * owner map grows several times and deletes with backward shifts) */
  enum { DEVS = 101, OWNERS = 1500, LIMIT = 3 };
  static tsr_device_t devs[DEVS];
  for (uint32_t d = 0; d < DEVS; d++) devs[d] = (tsr_device_t){.index = d, .name = "G", .total_bytes = 80 * GiB};
  tsr_lease_table_t *x;
  cr_assert_null(tsr_lease_table_create(devs, DEVS, "node-1", &(tsr_lease_limits_t){.max_per_owner = LIMIT}, &x));
  static uint32_t tally[OWNERS], owner_of[DEVS * 41 + 1];
  uint64_t id = 1;
  for (uint32_t d = 0; d + 1 < DEVS; d++) {
    for (uint32_t k = 0; k <= 40; k++, id++) { /* keys 0..40 use 82% of a device */
      uint32_t o = (uint32_t)((id * 7919) % OWNERS);
      tsr_lease_t l = stored(id, 0, k ? k * 1000 : 1);
      l.device = d;
      l.owner_uid = 5000 + o;
      snprintf(l.owner, sizeof l.owner, "o%u", o);
      cr_assert_null(tsr_lease_table_restore(x, &l, now));
      owner_of[id] = o;
      tally[o]++;
    }
  }
  for (int round = 0; round < 2; round++) {
    /* each owner asks for one more on the spare device (then gives it back) */
    for (uint32_t o = 0; o < OWNERS; o++) {
      char name[16];
      snprintf(name, sizeof name, "o%u", o);
      tsr_lease_actor_t a = {5000 + o, name, false, 1};
      tsr_lease_request_t r = req(DEVS - 1, 1, 10);
      tsr_lease_t got;
      tsr_status_t st = tsr_lease_table_create_lease(x, &r, &a, now, id, &got);
      cr_assert_eq(tsr_status_code(st), tally[o] >= LIMIT ? TSR_RESOURCE_EXHAUSTED : TSR_OK,
                   "round %d owner %u with %u leases: %s", round, o, tally[o], tsr_status_message(st));
      tsr_status_free(st);
      if (tally[o] < LIMIT) cr_assert_null(tsr_lease_table_remove(x, id++, TSR_LEASE_RELEASED, now, NULL));
    }
    /* drop every other restored lease */
    for (uint64_t i = 1 + (uint64_t)round; i <= (uint64_t)(DEVS - 1) * 41; i += 2) {
      if (!tsr_lease_table_find(x, i)) continue;
      cr_assert_null(tsr_lease_table_remove(x, i, TSR_LEASE_RELEASED, now, NULL));
      tally[owner_of[i]]--;
    }
  }
  cr_assert_eq(tsr_lease_table_count(x), 0);
  tsr_lease_table_free(x);
}

/* The expiry action is stored as asked; one out of range is refused, on a
 * create and on a restore. */
Test(lease_table, on_expiry_is_kept) {
  tsr_lease_request_t r = req(0, 100000, 1000000000);
  r.on_expiry = TSR_LEASE_ACTION_SIGNAL;
  tsr_lease_t l;
  cr_assert_eq(create(&alice, r, &l), TSR_OK);
  cr_assert_eq(l.on_expiry, TSR_LEASE_ACTION_SIGNAL);
  cr_assert_eq(tsr_lease_table_find(t, l.id)->on_expiry, TSR_LEASE_ACTION_SIGNAL);
  r.on_expiry = (tsr_lease_action_t)7;
  cr_assert_eq(create(&alice, r, NULL), TSR_INVALID_ARGUMENT);
  cr_assert_eq(tsr_lease_table_count(t), 1);
  tsr_lease_t bad = l;
  bad.id = 99;
  bad.on_expiry = (tsr_lease_action_t)3;
  tsr_status_t st = tsr_lease_table_restore(t, &bad, now);
  cr_assert_eq(tsr_status_code(st), TSR_INVALID_ARGUMENT);
  cr_assert(strstr(tsr_status_message(st), "expiry action"), "%s", tsr_status_message(st));
  tsr_status_free(st);
  tsr_lease_t old = l;
  old.id = 100;
  old.on_expiry = TSR_LEASE_ACTION_DEFAULT; /* a lock file from before actions */
  cr_assert_null(tsr_lease_table_restore(t, &old, now));
  cr_assert_eq(tsr_lease_table_find(t, 100)->on_expiry, TSR_LEASE_ACTION_DEFAULT);
}

/* The over-limit action likewise: kept as asked (DEFAULT too: the node's,
 * then), apart from the expiry action; out of range refused on a create
 * and on a restore. */
Test(lease_table, over_limit_is_kept) {
  tsr_lease_request_t r = req(0, 100000, 1000000000);
  r.over_limit = TSR_LEASE_OVER_LIMIT_LOG;
  tsr_lease_t l;
  cr_assert_eq(create(&alice, r, &l), TSR_OK);
  cr_assert_eq(l.over_limit, TSR_LEASE_OVER_LIMIT_LOG);
  cr_assert_eq(l.on_expiry, TSR_LEASE_ACTION_DEFAULT);
  cr_assert_eq(tsr_lease_table_find(t, l.id)->over_limit, TSR_LEASE_OVER_LIMIT_LOG);
  r.over_limit = TSR_LEASE_OVER_LIMIT_DEFAULT;
  tsr_lease_t d;
  cr_assert_eq(create(&alice, r, &d), TSR_OK);
  cr_assert_eq(tsr_lease_table_find(t, d.id)->over_limit, TSR_LEASE_OVER_LIMIT_DEFAULT);
  r.over_limit = (tsr_lease_over_limit_t)3;
  cr_assert_eq(create(&alice, r, NULL), TSR_INVALID_ARGUMENT);
  cr_assert_eq(tsr_lease_table_count(t), 2);
  tsr_lease_t bad = l;
  bad.id = 99;
  bad.over_limit = (tsr_lease_over_limit_t)7;
  tsr_status_t st = tsr_lease_table_restore(t, &bad, now);
  cr_assert_eq(tsr_status_code(st), TSR_INVALID_ARGUMENT);
  cr_assert(strstr(tsr_status_message(st), "over-limit action"), "%s", tsr_status_message(st));
  tsr_status_free(st);
  tsr_lease_t old = l;
  old.id = 100;
  old.over_limit = TSR_LEASE_OVER_LIMIT_DEFAULT; /* a lock file from before over_limit */
  cr_assert_null(tsr_lease_table_restore(t, &old, now));
  cr_assert_eq(tsr_lease_table_find(t, 100)->over_limit, TSR_LEASE_OVER_LIMIT_DEFAULT);
}

/* ---- renew ---------------------------------------------------------------------------- */

static const uint64_t S = UINT64_C(1000000000);

Test(lease_table, renew_moves_the_deadline_and_the_expiry_order) {
  tsr_lease_t a, b, r;
  cr_assert_eq(create(&alice, req(0, 100000, 10 * S), &a), TSR_OK);
  cr_assert_eq(create(&bob, req(0, 200000, 20 * S), &b), TSR_OK);
  uint64_t next = 0;
  cr_assert(tsr_lease_table_next_deadline(t, &next));
  cr_assert_eq(next, a.deadline_mono_ns, "a is due first");
  /* later: a now ends after b */
  tsr_lease_now_t later = {now.mono_ns + S, now.wall_ns + S};
  cr_assert_null(tsr_lease_table_renew(t, a.id, &alice, later.wall_ns + 60 * S, later, &r));
  cr_assert_eq(r.deadline_wall_ns, later.wall_ns + 60 * S);
  cr_assert_eq(r.deadline_mono_ns, later.mono_ns + 60 * S);
  cr_assert_eq(tsr_lease_table_find(t, a.id)->deadline_wall_ns, r.deadline_wall_ns);
  cr_assert(tsr_lease_table_next_deadline(t, &next));
  cr_assert_eq(next, b.deadline_mono_ns, "b is due first now");
  tsr_lease_t due;
  cr_assert_not(tsr_lease_table_peek_expired(t, a.deadline_mono_ns, &due), "a's old deadline ends nothing");
  cr_assert(tsr_lease_table_peek_expired(t, b.deadline_mono_ns, &due));
  cr_assert_eq(due.id, b.id);
  /* earlier is allowed too: the owner may shorten */
  cr_assert_null(tsr_lease_table_renew(t, a.id, &alice, later.wall_ns + 2 * S, later, &r));
  cr_assert(tsr_lease_table_next_deadline(t, &next));
  cr_assert_eq(next, later.mono_ns + 2 * S);
  cr_assert(tsr_lease_table_peek_expired(t, later.mono_ns + 2 * S, &due));
  cr_assert_eq(due.id, a.id);
  /* capacity is untouched */
  cr_assert_eq(tsr_lease_table_available_bytes(t, 0), 80 * GiB - a.bytes - b.bytes);
}

static void renew_refused(uint64_t id, const tsr_lease_actor_t *who, uint64_t deadline, tsr_status_code_t code,
                          const char *needle) {
  const tsr_lease_t *l = tsr_lease_table_find(t, id);
  uint64_t before = l ? l->deadline_wall_ns : 0;
  tsr_status_t st = tsr_lease_table_renew(t, id, who, deadline, now, NULL);
  cr_assert_not_null(st, "renewed, but should fail with '%s'", needle);
  cr_assert_eq(tsr_status_code(st), code, "%s: got %s", needle, tsr_status_message(st));
  cr_assert(strstr(tsr_status_message(st), needle), "message '%s' lacks '%s'", tsr_status_message(st), needle);
  if (l) cr_assert_eq(tsr_lease_table_find(t, id)->deadline_wall_ns, before, "a refused renew changed the lease");
  tsr_status_free(st);
}

Test(lease_table, renew_is_the_owners_or_an_admins) {
  tsr_lease_t a, r;
  cr_assert_eq(create(&alice, req(0, 100000, 10 * S), &a), TSR_OK);
  renew_refused(a.id, &bob, now.wall_ns + 60 * S, TSR_PERMISSION_DENIED, "belongs to alice");
  renew_refused(a.id + 100, &alice, now.wall_ns + 60 * S, TSR_NOT_FOUND, "no active lease");
  renew_refused(a.id, &alice, now.wall_ns, TSR_INVALID_ARGUMENT, "not in the future");
  cr_assert_null(tsr_lease_table_renew(t, a.id, &root, now.wall_ns + 60 * S, now, &r));
  cr_assert_eq(r.owner_uid, alice.uid, "the owner stays");
}

Test(lease_table, renew_reaches_at_most_the_longest_lease_from_now) {
  uint64_t hour = 3600 * S;
  tsr_lease_table_t *x = limited((tsr_lease_limits_t){.max_duration_ns = hour});
  tsr_lease_t l = stored(1, 0, 100000);
  cr_assert_null(tsr_lease_table_restore(x, &l, now));
  tsr_status_t st = tsr_lease_table_renew(x, 1, &alice, now.wall_ns + hour + 1, now, NULL);
  cr_assert_eq(tsr_status_code(st), TSR_INVALID_ARGUMENT);
  cr_assert(strstr(tsr_status_message(st), "at most 1h from now"), "%s", tsr_status_message(st));
  tsr_status_free(st);
  /* an hour from a moment 59 minutes on: 1h59m after the start, allowed */
  tsr_lease_now_t later = {now.mono_ns + 59 * 60 * S, now.wall_ns + 59 * 60 * S};
  cr_assert_null(tsr_lease_table_renew(x, 1, &alice, later.wall_ns + hour, later, NULL));
  tsr_lease_table_free(x);
}

/* ---- resize ---------------------------------------------------------------------------- */

static void resize_refused(uint64_t id, const tsr_lease_actor_t *who, uint32_t ppm, uint32_t sm, tsr_status_code_t code,
                           const char *needle) {
  const tsr_lease_t *l = tsr_lease_table_find(t, id);
  tsr_lease_t before = l ? *l : (tsr_lease_t){0};
  uint64_t avail = tsr_lease_table_available_bytes(t, 0);
  uint32_t sm_held = tsr_lease_table_sm_committed(t, 0);
  tsr_status_t st = tsr_lease_table_resize(t, id, who, ppm, sm, NULL);
  cr_assert_not_null(st, "resized, but should fail with '%s'", needle);
  cr_assert_eq(tsr_status_code(st), code, "%s: got %s", needle, tsr_status_message(st));
  cr_assert(strstr(tsr_status_message(st), needle), "message '%s' lacks '%s'", tsr_status_message(st), needle);
  tsr_status_free(st);
  if (l) {
    cr_assert_eq(memcmp(tsr_lease_table_find(t, id), &before, sizeof(before)), 0, "a refused resize changed the lease");
    cr_assert_eq(tsr_lease_table_available_bytes(t, 0), avail, "a refused resize changed the device");
    cr_assert_eq(tsr_lease_table_sm_committed(t, 0), sm_held);
  }
}

Test(lease_table, resize_counts_the_lease_own_share_as_free) {
  tsr_lease_t a, r;
  tsr_lease_request_t q = req(0, 600000, 10 * S);
  q.sm_ppm = 300000;
  cr_assert_eq(create(&alice, q, &a), TSR_OK);
  /* alone on the device: 60% may become 100%, its own 60% counting as free */
  cr_assert_null(tsr_lease_table_resize(t, a.id, &alice, 1000000, TSR_LEASE_SM_UNCHANGED, &r));
  cr_assert_eq(r.bytes, 80 * GiB);
  cr_assert_eq(r.sm_ppm, 300000, "the SM share kept");
  cr_assert_eq(r.deadline_wall_ns, a.deadline_wall_ns, "the deadline kept");
  cr_assert_eq(tsr_lease_table_available_bytes(t, 0), 0);
  /* shrink: what it gives back is free for others at once */
  cr_assert_null(tsr_lease_table_resize(t, a.id, &alice, 250000, 0, &r));
  cr_assert_eq(r.sm_ppm, 0, "sm 0: no share");
  cr_assert_eq(tsr_lease_table_available_bytes(t, 0), 60 * GiB);
  cr_assert_eq(tsr_lease_table_sm_committed(t, 0), 0);
  tsr_lease_t b;
  cr_assert_eq(create(&bob, req(0, 700000, 10 * S), &b), TSR_OK, "bob takes what alice gave back");
  /* and alice cannot grow into it */
  resize_refused(a.id, &alice, 400000, TSR_LEASE_SM_UNCHANGED, TSR_RESOURCE_EXHAUSTED, "not resized");
}

Test(lease_table, resize_keeps_the_rules_of_a_create) {
  tsr_lease_t a, b;
  cr_assert_eq(create(&alice, req(0, 100000, 10 * S), &a), TSR_OK);
  cr_assert_eq(create(&bob, req(0, 250000, 10 * S), &b), TSR_OK);
  resize_refused(a.id, &alice, 250000, TSR_LEASE_SM_UNCHANGED, TSR_CONFLICT, "locked by bob");
  resize_refused(a.id, &bob, 200000, TSR_LEASE_SM_UNCHANGED, TSR_PERMISSION_DENIED, "belongs to alice");
  resize_refused(a.id + 100, &alice, 200000, TSR_LEASE_SM_UNCHANGED, TSR_NOT_FOUND, "no active lease");
  resize_refused(a.id, &alice, 1000001, TSR_LEASE_SM_UNCHANGED, TSR_INVALID_ARGUMENT, "fraction must be");
  resize_refused(a.id, &alice, 0, 1000001, TSR_INVALID_ARGUMENT, "SM share must be");
  tsr_lease_request_t q = req(0, 120000, 10 * S);
  q.sm_ppm = 900000;
  tsr_lease_t c;
  cr_assert_eq(create(&bob, q, &c), TSR_OK);
  resize_refused(a.id, &alice, 0, 200000, TSR_RESOURCE_EXHAUSTED, "of its SMs unclaimed");
  /* an admin may resize anyone's; the owner and the lock key move with it */
  tsr_lease_t r;
  cr_assert_null(tsr_lease_table_resize(t, a.id, &root, 150000, 100000, &r));
  cr_assert_eq(r.owner_uid, alice.uid);
  cr_assert_eq(tsr_lease_table_sm_committed(t, 0), 1000000);
  /* alice's old fraction (10%) is free for bob now, her new one (15%) is hers */
  tsr_lease_t d;
  cr_assert_eq(create(&bob, req(0, 100000, 10 * S), &d), TSR_OK, "the old key was let go");
  cr_assert_eq(create(&bob, req(0, 150000, 10 * S), &d), TSR_CONFLICT, "the new key is held");
}
