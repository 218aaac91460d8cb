/* The rules of the lease table, one by one (seed 000, Algorithms 1-4). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "tessera/lease.h"

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
    for (int i = 0; i < 8; i++)
      cr_assert_eq(create(&alice, req(0, 10000, (uint64_t)(100 - i)), &l[i]), TSR_OK);
    for (int i = 0; i < 8; i++)
      cr_assert_null(tsr_lease_table_remove(t, l[i].id, TSR_LEASE_RELEASED, now, NULL));
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
