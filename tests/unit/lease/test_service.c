/* The lease service's transaction (src/lease/service.c): the owner's hooks
 * run at the points that keep a crash harmless, and a failing hook undoes
 * what came before it (lease/lease.h). */
#include <criterion/criterion.h>
#include <dirent.h>
#include <string.h>
#include <unistd.h>

#include "lease/lease.h"
#include "test_helpers.h"

static char *dir;
static tsr_lease_service_t *svc;
static const tsr_lease_now_t now = {1, UINT64_C(1763805600000000000)};
static const tsr_lease_actor_t alice = {1000, "alice", false, 1};

/* What the hooks saw, in order. */
static struct {
  char log[256];
  tsr_status_code_t fail_created, fail_releasing; /* 0: succeed */
  size_t leases_seen, locks_seen;                 /* at the last hook */
} h;

static int lock_files(void) {
  DIR *d = opendir(dir);
  cr_assert_not_null(d);
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)))
    if (strstr(e->d_name, ".lock")) n++;
  closedir(d);
  return n;
}

static void saw(const char *what, const tsr_lease_actor_t *actor) {
  cr_assert_eq(actor->uid, alice.uid, "the create's or release's actor");
  strcat(h.log, what);
  h.leases_seen = tsr_lease_table_count(tsr_lease_service_table(svc));
  h.locks_seen = (size_t)lock_files();
}

TSR_MUST_USE static tsr_status_t created(void *ctx, const tsr_lease_t *lease, const tsr_lease_actor_t *actor) {
  cr_assert_eq(ctx, &h);
  cr_assert_neq(lease->id, 0);
  saw("created ", actor);
  return h.fail_created ? tsr_status_make(h.fail_created, "no region") : NULL;
}

TSR_MUST_USE static tsr_status_t releasing(void *ctx, const tsr_lease_t *lease, const tsr_lease_actor_t *actor) {
  (void)ctx, (void)lease;
  saw("releasing ", actor);
  return h.fail_releasing ? tsr_status_make(h.fail_releasing, "no audit line") : NULL;
}

static void released(void *ctx, const tsr_lease_t *lease, const tsr_lease_actor_t *actor) {
  (void)ctx;
  cr_assert_eq(lease->state, TSR_LEASE_RELEASED);
  saw("released ", actor);
}

static tsr_lease_t renewed_before;
static void renewed(void *ctx, const tsr_lease_t *lease, const tsr_lease_t *before, const tsr_lease_actor_t *actor) {
  (void)ctx;
  cr_assert_eq(lease->id, before->id);
  renewed_before = *before;
  saw("renewed ", actor);
}

static void resized(void *ctx, const tsr_lease_t *lease, const tsr_lease_t *before, const tsr_lease_actor_t *actor) {
  (void)ctx;
  cr_assert_eq(lease->id, before->id);
  saw("resized ", actor);
}

static void setup(void) {
  dir = tsr_test_mkdtemp();
  cr_assert_not_null(dir);
  tsr_device_t dev = {.index = 0, .name = "G", .total_bytes = UINT64_C(1) << 30};
  tsr_lease_service_config_t cfg = {.state_dir = dir, .sync = TSR_LEASE_SYNC_FULL, .host = "h"};
  cr_assert_null(tsr_lease_service_open(&cfg, &dev, 1, now, &svc, NULL));
  memset(&h, 0, sizeof(h));
  tsr_lease_hooks_t hooks = {&h, created, releasing, released, renewed, resized};
  tsr_lease_service_set_hooks(svc, &hooks);
}

/* The daemon killed and started again on the same state directory: nothing
 * may be quarantined. */
static void restart(void) {
  tsr_lease_service_close(svc);
  tsr_device_t dev = {.index = 0, .name = "G", .total_bytes = UINT64_C(1) << 30};
  tsr_lease_service_config_t cfg = {.state_dir = dir, .sync = TSR_LEASE_SYNC_FULL, .host = "h"};
  size_t quarantined = 99;
  cr_assert_null(tsr_lease_service_open(&cfg, &dev, 1, now, &svc, &quarantined));
  cr_assert_eq(quarantined, 0);
}

static void teardown(void) {
  tsr_lease_service_close(svc);
  tsr_test_rmtree(dir);
}

TestSuite(lease_service, .init = setup, .fini = teardown);

static const tsr_lease_request_t req = {.device = 0, .fraction_ppm = 100000, .duration_ns = 1000000000};

Test(lease_service, the_hooks_run_where_the_order_says) {
  tsr_lease_t l;
  cr_assert_null(tsr_lease_service_create(svc, &req, &alice, now, &l));
  cr_assert_str_eq(h.log, "created ");
  cr_assert_eq(h.leases_seen, 1, "created: the lease is in the table");
  cr_assert_eq(h.locks_seen, 1, "and its lock file is written");
  h.log[0] = '\0';
  tsr_lease_t out;
  cr_assert_null(tsr_lease_service_release(svc, l.id, &alice, now, &out));
  cr_assert_str_eq(h.log, "releasing released ");
  cr_assert_eq(h.leases_seen, 0, "released: the lease has left the table");
  cr_assert_eq(h.locks_seen, 0, "and its file");
  cr_assert_eq(out.id, l.id);
  cr_assert_eq(out.state, TSR_LEASE_RELEASED);
}

Test(lease_service, a_failed_create_hook_takes_the_lease_back) {
  h.fail_created = TSR_IO_ERROR;
  tsr_lease_t l;
  tsr_status_t st = tsr_lease_service_create(svc, &req, &alice, now, &l);
  cr_assert_eq(tsr_status_code(st), TSR_IO_ERROR);
  cr_assert(strstr(tsr_status_message(st), "lease not created") && strstr(tsr_status_message(st), "no region"), "%s",
            tsr_status_message(st));
  tsr_status_free(st);
  cr_assert_eq(tsr_lease_table_count(tsr_lease_service_table(svc)), 0);
  cr_assert_eq(lock_files(), 0);
  h.fail_created = 0;
  cr_assert_null(tsr_lease_service_create(svc, &req, &alice, now, &l), "the next one is admitted");
}

Test(lease_service, a_failed_release_hook_changes_nothing) {
  tsr_lease_t l;
  cr_assert_null(tsr_lease_service_create(svc, &req, &alice, now, &l));
  h.fail_releasing = TSR_IO_ERROR;
  h.log[0] = '\0';
  tsr_status_t st = tsr_lease_service_release(svc, l.id, &alice, now, NULL);
  cr_assert_eq(tsr_status_code(st), TSR_IO_ERROR);
  cr_assert(strstr(tsr_status_message(st), "not released"), "%s", tsr_status_message(st));
  tsr_status_free(st);
  cr_assert_str_eq(h.log, "releasing ", "released never ran");
  cr_assert_eq(tsr_lease_table_count(tsr_lease_service_table(svc)), 1);
  cr_assert_eq(lock_files(), 1);
}

Test(lease_service, a_release_not_allowed_runs_no_hook) {
  tsr_lease_t l;
  cr_assert_null(tsr_lease_service_create(svc, &req, &alice, now, &l));
  h.log[0] = '\0';
  tsr_lease_actor_t bob = {1001, "bob", false, 2};
  tsr_status_t st = tsr_lease_service_release(svc, l.id, &bob, now, NULL);
  cr_assert_eq(tsr_status_code(st), TSR_PERMISSION_DENIED);
  tsr_status_free(st);
  cr_assert_str_eq(h.log, "");
}

/* Renew: the lock file says the new deadline before anyone hears of it, and
 * a restart finds it there. */
Test(lease_service, a_renew_is_in_the_lock_file_and_survives_a_restart) {
  tsr_lease_t l, r;
  cr_assert_null(tsr_lease_service_create(svc, &req, &alice, now, &l));
  h.log[0] = '\0';
  uint64_t hour = 3600 * UINT64_C(1000000000);
  cr_assert_null(tsr_lease_service_renew(svc, l.id, &alice, now.wall_ns + hour, now, &r));
  cr_assert_str_eq(h.log, "renewed ");
  cr_assert_eq(r.deadline_wall_ns, now.wall_ns + hour);
  cr_assert_eq(renewed_before.deadline_wall_ns, l.deadline_wall_ns, "the hook sees the lease as it was");
  cr_assert_eq(h.locks_seen, 1, "one lock file: rewritten, not a second");
  /* a restart reads the renewed deadline back */
  restart();
  const tsr_lease_t *back = tsr_lease_table_find(tsr_lease_service_table(svc), l.id);
  cr_assert_not_null(back);
  cr_assert_eq(back->deadline_wall_ns, now.wall_ns + hour);
}

Test(lease_service, a_renew_refused_changes_nothing_and_runs_no_hook) {
  tsr_lease_t l;
  cr_assert_null(tsr_lease_service_create(svc, &req, &alice, now, &l));
  h.log[0] = '\0';
  tsr_lease_actor_t bob = {1001, "bob", false, 2};
  tsr_status_t st = tsr_lease_service_renew(svc, l.id, &bob, now.wall_ns + 1000000000000, now, NULL);
  cr_assert_eq(tsr_status_code(st), TSR_PERMISSION_DENIED);
  tsr_status_free(st);
  cr_assert_str_eq(h.log, "");
  cr_assert_eq(tsr_lease_table_find(tsr_lease_service_table(svc), l.id)->deadline_wall_ns, l.deadline_wall_ns);
}

/* Resize: the lock file's name follows the fraction; one file, the new one,
 * and a restart finds the new size. */
Test(lease_service, a_resize_moves_the_lock_file_and_survives_a_restart) {
  tsr_lease_t l, r;
  cr_assert_null(tsr_lease_service_create(svc, &req, &alice, now, &l));
  char old_name[128], new_name[128];
  tsr_lease_lockfile_name(&l, old_name, sizeof(old_name));
  h.log[0] = '\0';
  cr_assert_null(tsr_lease_service_resize(svc, l.id, &alice, 300000, TSR_LEASE_SM_UNCHANGED, &r));
  cr_assert_str_eq(h.log, "resized ");
  cr_assert_eq(h.locks_seen, 1, "one lock file");
  tsr_lease_lockfile_name(&r, new_name, sizeof(new_name));
  cr_assert_str_neq(old_name, new_name);
  char path[1024];
  snprintf(path, sizeof(path), "%s/%s", dir, new_name);
  cr_assert_eq(access(path, F_OK), 0, "the new lock file %s", new_name);
  restart();
  const tsr_lease_t *back = tsr_lease_table_find(tsr_lease_service_table(svc), l.id);
  cr_assert_not_null(back);
  cr_assert_eq(back->fraction_ppm, 300000);
  cr_assert_eq(back->bytes, r.bytes);
  /* refused: nothing changes, no hook */
  h.log[0] = '\0';
  tsr_status_t st = tsr_lease_service_resize(svc, l.id, &alice, 1000001, TSR_LEASE_SM_UNCHANGED, NULL);
  cr_assert_eq(tsr_status_code(st), TSR_INVALID_ARGUMENT);
  tsr_status_free(st);
  cr_assert_str_eq(h.log, "");
  cr_assert_eq(lock_files(), 1);
}
