/* The daemon's enforcement parts, each on its own: the /proc snapshot and
 * slot resolution (procs.c), signals with a grace (actions.c), lease roots
 * (roots.c) and the per-user lease index (userindex.c). */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "base/fs.h"
#include "base/time.h"
#include "daemon/actions.h"
#include "daemon/procs.h"
#include "daemon/regions.h"
#include "daemon/roots.h"
#include "daemon/userindex.h"

static void nap_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* A child that waits to be killed; with `ignore_term`, SIGTERM does nothing. */
static pid_t child(bool ignore_term) {
  int p[2];
  cr_assert_eq(pipe(p), 0);
  pid_t pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) {
    if (ignore_term) signal(SIGTERM, SIG_IGN);
    close(p[0]);
    ssize_t w = write(p[1], "x", 1); /* ready: the disposition is set */
    (void)w;
    for (;;) pause();
  }
  close(p[1]);
  char c;
  cr_assert_eq(read(p[0], &c, 1), 1);
  close(p[0]);
  return pid;
}

static tsr_target_t target_of(pid_t pid) {
  tsr_target_t t = {pid, 0};
  cr_assert(tsr_procs_start_of(pid, &t.start_ticks));
  return t;
}

/* ---- procs -------------------------------------------------------------- */

Test(procs, snapshot_knows_this_process_and_its_child) {
  pid_t kid = child(false);
  tsr_procs_t ps = {0};
  tsr_procs_scan(&ps);
  cr_assert_gt(ps.count, 1);
  const tsr_proc_t *me = tsr_procs_find(&ps, getpid());
  cr_assert_not_null(me);
  cr_assert_eq(me->uid, getuid());
  cr_assert_eq(me->nspid, getpid(), "outside containers the innermost pid is the pid");
  uint64_t start = 0;
  cr_assert(tsr_procs_start_of(getpid(), &start));
  cr_assert_eq(me->start_ticks, start);
  const tsr_proc_t *k = tsr_procs_find(&ps, kid);
  cr_assert_not_null(k);
  cr_assert_eq(k->ppid, getpid());
  /* a region slot of this process resolves to it */
  tsr_region_proc_t self;
  tsr_region_proc_self(&self);
  cr_assert_eq(tsr_procs_resolve(&ps, &self), me);
  tsr_region_proc_t reused = self;
  reused.start_ticks++; /* the pid of another process */
  cr_assert_null(tsr_procs_resolve(&ps, &reused));
  kill(kid, SIGKILL);
  waitpid(kid, NULL, 0);
  tsr_procs_free(&ps);
}

static void count_one(void *ctx, const tsr_proc_t *p) {
  (void)p;
  (*(int *)ctx)++;
}

Test(procs, descendants_follow_the_tree_and_the_start_time) {
  pid_t a = child(false), b = child(false);
  tsr_procs_t ps = {0};
  tsr_procs_scan(&ps);
  const tsr_proc_t *me = tsr_procs_find(&ps, getpid());
  int n = 0;
  cr_assert_geq(tsr_procs_descendants(&ps, getpid(), me->start_ticks, 64, count_one, &n), 2);
  cr_assert_geq(n, 2);
  n = 0;
  cr_assert_eq(tsr_procs_descendants(&ps, getpid(), me->start_ticks + 1, 64, count_one, &n), 0,
               "a root whose start time differs is another process: no tree");
  n = 0;
  cr_assert_eq(tsr_procs_descendants(&ps, getpid(), me->start_ticks, 1, count_one, &n), 1, "bounded by max");
  kill(a, SIGKILL);
  kill(b, SIGKILL);
  waitpid(a, NULL, 0);
  waitpid(b, NULL, 0);
  tsr_procs_free(&ps);
}

Test(procs, alive_for_other_namespaces) {
  tsr_procs_t ps = {0};
  tsr_procs_scan(&ps);
  cr_assert_gt(ps.own_pidns, 0);
  tsr_region_proc_t self;
  tsr_region_proc_self(&self);
  cr_assert(tsr_procs_alive(&ps, &self));
  /* a slot of a namespace no process is in, started long ago: gone */
  tsr_region_proc_t ghost = {.pid = 4242, .start_ticks = 1, .pidns = ps.own_pidns + 1000003};
  cr_assert_not(tsr_procs_alive(&ps, &ghost));
  /* started about when the snapshot was taken: it cannot tell, so alive */
  ghost.start_ticks = ps.taken_ticks;
  cr_assert(tsr_procs_alive(&ps, &ghost));
  /* an empty snapshot (one /proc could not give) cannot tell anything */
  tsr_procs_t none = {.fresh = true};
  ghost.start_ticks = 1;
  cr_assert(tsr_procs_alive(&none, &ghost));
  /* one not taken this tick is taken when a tenant of another namespace
   * needs it, and not for one of the daemon's own */
  tsr_procs_t lazy = {0};
  cr_assert(tsr_procs_alive(&lazy, &self));
  cr_assert_not(lazy.fresh, "the daemon's own pids are looked up one by one");
  cr_assert_not(tsr_procs_alive(&lazy, &ghost));
  cr_assert(lazy.fresh && lazy.count > 0, "taken for the other namespace");
  tsr_procs_free(&lazy);
  tsr_procs_free(&ps);
}

/* ---- actions ------------------------------------------------------------ */

/* The tests signal their own children: nobody is exempt here, except the
 * uids a test names. */
static uint32_t exempt_uid = UINT32_MAX;
static bool exempt_named(void *ctx, uint32_t uid) {
  (void)ctx;
  return uid == exempt_uid;
}

Test(actions, sigterm_then_sigkill_after_the_grace, .timeout = 10) {
  tsr_actions_t *a = NULL;
  cr_assert_null(tsr_actions_create(200 * TSR_NS_PER_MS, exempt_named, NULL, &a));
  pid_t stubborn = child(true), meek = child(false);
  tsr_target_t t[2] = {target_of(stubborn), target_of(meek)};
  uint64_t now = tsr_time_mono_ns();
  cr_assert_eq(tsr_actions_signal(a, 7, getuid(), t, 2, now), 2);
  cr_assert(tsr_actions_pending(a, 7, 0));
  cr_assert_not(tsr_actions_pending(a, 8, 0));
  cr_assert_eq(tsr_actions_signal(a, 7, getuid(), t, 2, now), 0, "a second act adds nothing");
  int st = 0;
  cr_assert_eq(waitpid(meek, &st, 0), meek);
  cr_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM);
  nap_ms(50);
  tsr_actions_tick(a, tsr_time_mono_ns());
  cr_assert_eq(kill(stubborn, 0), 0, "killed before its grace");
  tsr_actions_tick(a, now + 250 * TSR_NS_PER_MS);
  cr_assert_eq(waitpid(stubborn, &st, 0), stubborn);
  cr_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "status %d", st);
  tsr_actions_tick(a, now + 300 * TSR_NS_PER_MS);
  cr_assert_not(tsr_actions_pending(a, 7, 0), "gone targets are forgotten");
  tsr_actions_free(a);
}

Test(actions, a_reused_pid_is_never_signalled, .timeout = 10) {
  tsr_actions_t *a = NULL;
  cr_assert_null(tsr_actions_create(TSR_NS_PER_MS, exempt_named, NULL, &a));
  pid_t kid = child(false);
  tsr_target_t t = target_of(kid);
  t.start_ticks += 1; /* the pid now names another process than the target */
  cr_assert_eq(tsr_actions_signal(a, 0, getuid(), &t, 1, tsr_time_mono_ns()), 0);
  cr_assert_not(tsr_actions_pending(a, 0, kid));
  tsr_actions_tick(a, tsr_time_mono_ns() + TSR_NS_PER_S);
  nap_ms(50);
  cr_assert_eq(waitpid(kid, NULL, WNOHANG), 0, "the other process was signalled");
  /* the deny rule's targets are pending by pid */
  tsr_target_t right = target_of(kid);
  cr_assert_eq(tsr_actions_signal(a, 0, getuid(), &right, 1, tsr_time_mono_ns()), 1);
  cr_assert(tsr_actions_pending(a, 0, kid));
  cr_assert_not(tsr_actions_pending(a, 0, kid + 1));
  waitpid(kid, NULL, 0);
  tsr_actions_free(a);
}

Test(actions, only_the_owners_processes_and_never_an_exempt_uid, .timeout = 10) {
  tsr_actions_t *a = NULL;
  cr_assert_not_null(tsr_actions_create(TSR_NS_PER_MS, NULL, NULL, &a), "an exemption rule is required");
  cr_assert_null(tsr_actions_create(TSR_NS_PER_MS, exempt_named, NULL, &a));
  pid_t kid = child(false);
  tsr_target_t t = target_of(kid);
  /* a lease of another user names this process (as a slot can): refused */
  cr_assert_eq(tsr_actions_signal(a, 5, getuid() + 1, &t, 1, tsr_time_mono_ns()), 0);
  cr_assert_eq(tsr_actions_refused(a), 1);
  cr_assert_not(tsr_actions_pending(a, 5, 0));
  /* the owner's, but the owner is exempt (root, the daemon's, an admin) */
  exempt_uid = getuid();
  cr_assert_eq(tsr_actions_signal(a, 5, getuid(), &t, 1, tsr_time_mono_ns()), 0);
  cr_assert_eq(tsr_actions_refused(a), 2);
  exempt_uid = UINT32_MAX;
  nap_ms(50);
  cr_assert_eq(waitpid(kid, NULL, WNOHANG), 0, "a refused target was signalled");
  /* the owner's and not exempt: signalled */
  cr_assert_eq(tsr_actions_signal(a, 5, getuid(), &t, 1, tsr_time_mono_ns()), 1);
  int st = 0;
  cr_assert_eq(waitpid(kid, &st, 0), kid);
  cr_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM);
  tsr_actions_free(a);
}

Test(actions, no_sigkill_once_the_target_is_exempt, .timeout = 10) {
  tsr_actions_t *a = NULL;
  cr_assert_null(tsr_actions_create(50 * TSR_NS_PER_MS, exempt_named, NULL, &a));
  pid_t stubborn = child(true);
  tsr_target_t t = target_of(stubborn);
  uint64_t now = tsr_time_mono_ns();
  cr_assert_eq(tsr_actions_signal(a, 9, getuid(), &t, 1, now), 1);
  exempt_uid = getuid(); /* as if it had become root's (a set-user-ID exec) */
  tsr_actions_tick(a, now + 100 * TSR_NS_PER_MS);
  nap_ms(50);
  cr_assert_eq(waitpid(stubborn, NULL, WNOHANG), 0, "SIGKILL went to an exempt process");
  exempt_uid = UINT32_MAX;
  kill(stubborn, SIGKILL);
  waitpid(stubborn, NULL, 0);
  tsr_actions_free(a);
}

/* ---- roots -------------------------------------------------------------- */

Test(roots, bounded_per_lease_and_forgotten) {
  tsr_roots_t r = {0};
  for (int i = 0; i < TSR_ROOTS_PER_LEASE; i++) cr_assert_null(tsr_roots_add(&r, 1, 100 + i, 5));
  cr_assert_null(tsr_roots_add(&r, 1, 100, 5), "the same process again is a no-op");
  tsr_status_t st = tsr_roots_add(&r, 1, 999, 5);
  cr_assert_eq(tsr_status_code(st), TSR_RESOURCE_EXHAUSTED);
  tsr_status_free(st);
  cr_assert_null(tsr_roots_add(&r, 2, 999, 5), "another lease has its own bound");
  cr_assert_eq(r.count, TSR_ROOTS_PER_LEASE + 1);
  tsr_roots_forget_lease(&r, 1);
  cr_assert_eq(r.count, 1);
  cr_assert_eq(r.v[0].lease, 2);
  /* pruned against a snapshot: this process stays, a made-up one goes */
  uint64_t start = 0;
  cr_assert(tsr_procs_start_of(getpid(), &start));
  cr_assert_null(tsr_roots_add(&r, 3, getpid(), start));
  tsr_procs_t ps = {0};
  tsr_procs_scan(&ps);
  tsr_roots_prune(&r, &ps);
  cr_assert_eq(r.count, 1);
  cr_assert_eq(r.v[0].pid, getpid());
  tsr_procs_free(&ps);
  tsr_roots_free(&r);
}

/* ---- the per-user lease index ----------------------------------------------- */

static char dir[] = "/tmp/tsr-index-XXXXXX";

static void make_dir(void) { cr_assert_not_null(mkdtemp(dir)); }
static void remove_dir(void) {
  char cmd[128];
  snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
  cr_assert_eq(system(cmd), 0);
}

Test(user_index, format_mode_and_removal, .init = make_dir, .fini = remove_dir) {
  tsr_device_t devs[2] = {
      {.index = 0, .name = "A", .uuid = "GPU-5c3e", .total_bytes = 1ull << 36},
      {.index = 1, .name = "B", .uuid = "", .total_bytes = 1ull << 35},
  };
  tsr_lease_table_t *t = NULL;
  cr_assert_null(tsr_lease_table_create(devs, 2, "node", NULL, &t));
  uint32_t me = (uint32_t)getuid();
  tsr_lease_actor_t actor = {me, "me", true, 1};
  tsr_lease_now_t now = {1, 1};
  tsr_lease_request_t r1 = {.device = 0, .fraction_ppm = 100000, .duration_ns = TSR_NS_PER_S};
  tsr_lease_request_t r2 = {.device = 1, .fraction_ppm = 200000, .duration_ns = TSR_NS_PER_S};
  tsr_lease_t l;
  cr_assert_null(tsr_lease_table_create_lease(t, &r1, &actor, now, 12, &l));
  cr_assert_null(tsr_lease_table_create_lease(t, &r2, &actor, now, 15, &l));
  int fd = open(dir, O_RDONLY | O_DIRECTORY);
  cr_assert_null(tsr_user_index_update(fd, t, me));
  char name[64], *text = NULL;
  size_t len = 0;
  snprintf(name, sizeof(name), "user-%u.leases", me);
  cr_assert_null(tsr_fs_read_file(fd, name, 4096, &text, &len));
  cr_assert_str_eq(text, "tessera-leases 1\n12 0 GPU-5c3e\n15 1 -\n");
  free(text);
  struct stat sb;
  cr_assert_eq(fstatat(fd, name, &sb, 0), 0);
  cr_assert_eq(sb.st_mode & 07777, 0400);
  cr_assert_eq(sb.st_uid, me);
  /* a stale index and a temporary file go at a rebuild; the live one stays */
  cr_assert_eq(mknodat(fd, "user-4242.leases", S_IFREG | 0600, 0), 0);
  cr_assert_eq(mknodat(fd, ".tmp-user-7.leases", S_IFREG | 0600, 0), 0);
  tsr_user_index_rebuild(fd, t);
  cr_assert_neq(faccessat(fd, "user-4242.leases", F_OK, 0), 0);
  cr_assert_neq(faccessat(fd, ".tmp-user-7.leases", F_OK, 0), 0);
  cr_assert_eq(faccessat(fd, name, F_OK, 0), 0);
  /* no lease left: no index */
  cr_assert_null(tsr_lease_table_remove(t, 12, TSR_LEASE_RELEASED, now, NULL));
  cr_assert_null(tsr_lease_table_remove(t, 15, TSR_LEASE_RELEASED, now, NULL));
  cr_assert_null(tsr_user_index_update(fd, t, me));
  cr_assert_neq(faccessat(fd, name, F_OK, 0), 0);
  close(fd);
  tsr_lease_table_free(t);
}

/* Another user's index is the daemon's, readable by that user alone. Needs
 * root (to own a file another uid reads through an ACL); the integration
 * tests (backstop.sh, nodewide.sh) read and try to rewrite it as that user. */
Test(user_index, another_users_index_is_the_daemons_and_only_hers_to_read, .init = make_dir, .fini = remove_dir) {
  if (geteuid() != 0) cr_skip_test("needs root: an index of another uid");
  tsr_device_t devs[1] = {{.index = 0, .name = "A", .uuid = "GPU-5c3e", .total_bytes = 1ull << 36}};
  tsr_lease_table_t *t = NULL;
  cr_assert_null(tsr_lease_table_create(devs, 1, "node", NULL, &t));
  tsr_lease_actor_t actor = {0, "root", true, 1};
  tsr_lease_now_t now = {1, 1};
  tsr_lease_request_t r = {.device = 0,
                           .fraction_ppm = 100000,
                           .duration_ns = TSR_NS_PER_S,
                           .has_target = true,
                           .target_uid = 4242,
                           .target_name = "u4242"};
  tsr_lease_t l;
  cr_assert_null(tsr_lease_table_create_lease(t, &r, &actor, now, 3, &l));
  int fd = open(dir, O_RDONLY | O_DIRECTORY);
  cr_assert_null(tsr_user_index_update(fd, t, 4242));
  struct stat sb;
  cr_assert_eq(fstatat(fd, "user-4242.leases", &sb, 0), 0);
  cr_assert_eq(sb.st_uid, 0, "the index is the daemon's, not its user's");
  cr_assert_eq(sb.st_mode & 0222, 0, "nobody may write it");
  cr_assert_eq(sb.st_mode & 0004, 0, "others may not read it");
  unsigned char acl[64];
  char path[128];
  snprintf(path, sizeof(path), "%s/user-4242.leases", dir);
  ssize_t n = getxattr(path, "system.posix_acl_access", acl, sizeof(acl));
  if (n < 0 && (errno == EOPNOTSUPP || errno == ENOTSUP)) {
    cr_assert_eq(sb.st_mode & 07777, 0440, "without ACLs: the user's group reads it");
  } else {
    cr_assert_eq(n, 4 + 5 * 8, "an ACL of five entries");
    bool user_entry = false;
    for (ssize_t k = 4; k + 8 <= n; k += 8) {
      uint16_t tag = (uint16_t)(acl[k] | acl[k + 1] << 8), perm = (uint16_t)(acl[k + 2] | acl[k + 3] << 8);
      uint32_t id =
          (uint32_t)acl[k + 4] | (uint32_t)acl[k + 5] << 8 | (uint32_t)acl[k + 6] << 16 | (uint32_t)acl[k + 7] << 24;
      if (tag == 0x02) user_entry = id == 4242 && perm == 4;
      if (tag == 0x20) cr_assert_eq(perm, 0, "others: nothing");
    }
    cr_assert(user_entry, "user:4242:r-- is not in the ACL");
  }
  close(fd);
  tsr_lease_table_free(t);
}

/* ---- the switching reserve (regions.c) ------------------------------------ */

/* The daemon adds lease `id`; the test maps its region as a tenant would. */
static tsr_region_t *mapped[16];
static size_t nmapped;

static tsr_region_t *lease_region(tsr_regions_t *rs, uint64_t id, uint32_t device, uint32_t sm_ppm) {
  tsr_lease_t l = {.id = id, .device = device, .bytes = 1 << 20, .owner_uid = (uint32_t)getuid(), .sm_ppm = sm_ppm};
  cr_assert_null(tsr_regions_add(rs, &l, NULL));
  char name[64];
  tsr_region_file_name(id, name, sizeof(name));
  tsr_region_t *r = NULL;
  cr_assert_null(tsr_region_open(tsr_regions_dir_fd(rs), name, id, &r));
  cr_assert_lt(nmapped, 16);
  mapped[nmapped++] = r;
  return r;
}

static void unmap_all(void) {
  for (size_t i = 0; i < nmapped; i++) tsr_region_close(mapped[i]);
  nmapped = 0;
}

Test(share_tick, leases_that_run_together_share_the_switching_cost, .init = make_dir, .fini = remove_dir) {
  tsr_regions_t *rs = NULL;
  cr_assert_null(tsr_regions_open(dir, &rs));
  tsr_region_t *a = lease_region(rs, 1, 0, 300000), *b = lease_region(rs, 2, 0, 700000),
               *c = lease_region(rs, 3, 1, 500000), *none = lease_region(rs, 4, 0, 0),
               *d = lease_region(rs, 5, 1, 400000);
  const uint32_t cost = 60000; /* 6% */
  /* nothing ran: every lease has its own share */
  cr_assert_eq(tsr_regions_share_tick(rs, cost, NULL, NULL), 0);
  cr_assert_eq(tsr_region_share_now(a), 300000);
  cr_assert_eq(tsr_region_share_now(b), 700000);

  /* one runs alone: its own share */
  tsr_region_note_launches(a, 10, 1000000, 0, 0);
  cr_assert_eq(tsr_regions_share_tick(rs, cost, NULL, NULL), 0);
  cr_assert_eq(tsr_region_share_now(a), 300000);

  /* 30% and 70% run together on device 0: 94% of the device split 30:70;
   * device 1's leases, and a lease without a share, are not counted */
  tsr_region_note_launches(a, 10, 1000000, 0, 0);
  tsr_region_note_launches(b, 10, 1000000, 0, 0);
  tsr_region_note_launches(c, 10, 1000000, 0, 0);
  tsr_region_note_launches(none, 0, 0, 0, 5);
  cr_assert_eq(tsr_regions_share_tick(rs, cost, NULL, NULL), 2);
  cr_assert_eq(tsr_region_share_now(a), 282000);
  cr_assert_eq(tsr_region_share_now(b), 658000);
  cr_assert_eq(tsr_region_share_now(c), 500000);
  cr_assert_eq(tsr_region_share_now(none), 0);
  tsr_region_stats_t st;
  tsr_region_stats(b, &st);
  cr_assert_eq(st.sm_ppm, 700000);
  cr_assert_eq(st.sm_now_ppm, 658000);

  /* 50% and 40% on device 1 leave the switching room: not scaled */
  tsr_region_note_launches(a, 10, 1000000, 0, 0);
  tsr_region_note_launches(b, 10, 1000000, 0, 0);
  tsr_region_note_launches(c, 10, 1000000, 0, 0);
  tsr_region_note_launches(d, 10, 1000000, 0, 0);
  cr_assert_eq(tsr_regions_share_tick(rs, cost, NULL, NULL), 2);
  cr_assert_eq(tsr_region_share_now(c), 500000);
  cr_assert_eq(tsr_region_share_now(d), 400000);

  /* b stops: a gets its whole share back at the next tick */
  tsr_region_note_launches(a, 10, 1000000, 0, 0);
  cr_assert_eq(tsr_regions_share_tick(rs, cost, NULL, NULL), 0);
  cr_assert_eq(tsr_region_share_now(a), 300000);
  cr_assert_eq(tsr_region_share_now(b), 700000);

  /* a cost of 0 never scales */
  tsr_region_note_launches(a, 10, 1000000, 0, 0);
  tsr_region_note_launches(b, 10, 1000000, 0, 0);
  cr_assert_eq(tsr_regions_share_tick(rs, 0, NULL, NULL), 0);
  cr_assert_eq(tsr_region_share_now(b), 700000);
  unmap_all();
  tsr_regions_close(rs);
}

Test(share_tick, a_share_in_force_is_never_more_than_the_lease, .init = make_dir, .fini = remove_dir) {
  tsr_regions_t *rs = NULL;
  cr_assert_null(tsr_regions_open(dir, &rs));
  int fd = tsr_regions_dir_fd(rs);
  tsr_region_t *a = lease_region(rs, 1, 0, 300000), *none = lease_region(rs, 2, 0, 0);
  cr_assert_null(tsr_region_write_share_now(fd, 1, 900000)); /* above the lease: its own share */
  cr_assert_eq(tsr_region_share_now(a), 300000);
  cr_assert_null(tsr_region_write_share_now(fd, 1, 1));
  cr_assert_eq(tsr_region_share_now(a), 1);
  cr_assert_null(tsr_region_write_share_now(fd, 1, 0));
  cr_assert_eq(tsr_region_share_now(a), 300000);
  cr_assert_null(tsr_region_write_share_now(fd, 2, 5000)); /* not limited stays not limited */
  cr_assert_eq(tsr_region_share_now(none), 0);
  tsr_status_t st = tsr_region_write_share_now(fd, 1, 1000001);
  cr_assert_eq(tsr_status_code(st), TSR_INVALID_ARGUMENT);
  tsr_status_free(st);
  unmap_all();
  tsr_regions_close(rs);
}

/* What NVML says of a lease, for the tests: a table the test fills. */
static int said_running[8];
static int said(void *ctx, uint64_t id, uint32_t device) {
  (void)ctx, (void)device;
  return id < 8 ? said_running[id] : -1;
}

Test(share_tick, counters_a_tenant_writes_do_not_scale_its_neighbours, .init = make_dir, .fini = remove_dir) {
  tsr_regions_t *rs = NULL;
  cr_assert_null(tsr_regions_open(dir, &rs));
  tsr_region_t *a = lease_region(rs, 1, 0, 300000), *b = lease_region(rs, 2, 0, 700000);
  const uint32_t cost = 60000;
  /* b runs (the driver says so); a only writes launch counters */
  said_running[1] = 0;
  said_running[2] = 1;
  tsr_region_note_launches(a, 1000, 1000000000, 0, 0);
  tsr_region_note_launches(b, 10, 1000000, 0, 0);
  cr_assert_eq(tsr_regions_share_tick(rs, cost, said, NULL), 0);
  cr_assert_eq(tsr_region_share_now(b), 700000, "b was scaled down by a's forged counters");
  /* both run by the driver's word: scaled, whatever the counters say */
  said_running[1] = 1;
  cr_assert_eq(tsr_regions_share_tick(rs, cost, said, NULL), 2);
  cr_assert_eq(tsr_region_share_now(b), 658000);
  /* where the driver cannot tell, the counters decide (none moved: not running) */
  said_running[1] = said_running[2] = -1;
  cr_assert_eq(tsr_regions_share_tick(rs, cost, said, NULL), 0);
  cr_assert_eq(tsr_region_share_now(b), 700000);
  unmap_all();
  tsr_regions_close(rs);
}

/* ---- what a tenant writes into its region (regions.c) ---------------------- */

static uint32_t damage_seen;
static int damage_calls;
static void on_damage(void *ctx, uint64_t lease, uint32_t damage, bool repaired) {
  (void)ctx;
  cr_assert_eq(lease, 3);
  cr_assert(repaired);
  damage_seen |= damage;
  damage_calls++;
}

Test(regions, a_tenants_limit_and_state_are_put_back_and_its_report_clamped, .init = make_dir, .fini = remove_dir) {
  tsr_regions_t *rs = NULL;
  cr_assert_null(tsr_regions_open(dir, &rs));
  tsr_regions_on_damage(rs, on_damage, NULL);
  tsr_region_t *r = lease_region(rs, 3, 0, 0);
  tsr_region_proc_t self;
  tsr_region_proc_self(&self);
  uint32_t slot = 0;
  cr_assert_null(tsr_region_attach(r, &self, &slot));
  tsr_regions_set_state(rs, 3, TSR_REGION_EXPIRED); /* ended while the lease lives */
  cr_assert(tsr_regions_revoked(rs, 3));
  cr_assert_not(tsr_region_charge(r, slot, 1), "a revoked region admits nothing");
  /* the tenant raises its limit word and sets the state back to active */
  char path[160];
  snprintf(path, sizeof(path), "%s/lease-3.region", dir);
  int fd = open(path, O_WRONLY);
  uint64_t big = UINT64_C(64) << 30;
  uint32_t active = TSR_REGION_ACTIVE;
  cr_assert_eq(pwrite(fd, &big, 8, 40), 8);
  cr_assert_eq(pwrite(fd, &active, 4, 56), 4);
  close(fd);
  cr_assert(tsr_region_charge(r, slot, UINT64_C(50) << 30), "it lies to itself");
  tsr_region_stats_t s;
  cr_assert(tsr_regions_stats(rs, 3, &s));
  cr_assert_eq(s.used_bytes, 1 << 20, "the report is clamped to the lease's limit");
  cr_assert_eq(s.peak_bytes, 1 << 20);
  cr_assert_eq(s.limit_bytes, 1 << 20, "the limit is the lease table's");
  cr_assert_eq(s.state, TSR_REGION_EXPIRED, "the state is the daemon's");
  cr_assert(tsr_regions_tampered(rs, 3));
  cr_assert(damage_seen & TSR_REGION_DAMAGE_HEADER);
  cr_assert(damage_seen & TSR_REGION_DAMAGE_STATE);
  cr_assert(damage_seen & TSR_REGION_DAMAGE_COUNTERS);
  /* the daemon's words are back in the tenant's own mapping */
  tsr_region_stats_t mine;
  tsr_region_stats(r, &mine);
  cr_assert_eq(mine.limit_bytes, 1 << 20);
  cr_assert_eq(mine.state, TSR_REGION_EXPIRED);
  cr_assert_not(tsr_region_charge(r, slot, 1));
  int calls = damage_calls;
  cr_assert(tsr_regions_stats(rs, 3, &s));
  cr_assert_eq(damage_calls, calls, "the same damage is reported once");
  /* shrunk to nothing: the daemon reads, puts the size back, and lives */
  cr_assert_eq(truncate(path, 0), 0);
  cr_assert(tsr_regions_stats(rs, 3, &s));
  cr_assert(damage_seen & TSR_REGION_DAMAGE_SIZE);
  struct stat sb;
  cr_assert_eq(stat(path, &sb), 0);
  cr_assert_eq((size_t)sb.st_size, tsr_region_file_size());
  tsr_region_stats(r, &mine);
  cr_assert_eq(mine.limit_bytes, 1 << 20, "the mapping reads the header again");
  cr_assert_eq(mine.state, TSR_REGION_EXPIRED);
  unmap_all();
  tsr_regions_close(rs);
}

Test(regions, the_reaper_marks_and_a_tenant_gives_back, .init = make_dir, .fini = remove_dir) {
  tsr_regions_t *rs = NULL;
  cr_assert_null(tsr_regions_open(dir, &rs));
  tsr_region_t *r = lease_region(rs, 4, 0, 0);
  /* a slot of a process that is gone (a start time no process has) */
  tsr_region_proc_t ghost;
  tsr_region_proc_self(&ghost);
  ghost.start_ticks = 1;
  uint32_t gslot = 0, slot = 0;
  cr_assert_null(tsr_region_attach(r, &ghost, &gslot));
  cr_assert(tsr_region_charge(r, gslot, 1 << 19));
  tsr_region_proc_t self;
  tsr_region_proc_self(&self);
  cr_assert_null(tsr_region_attach(r, &self, &slot));
  uint64_t bytes = 0;
  cr_assert_eq(tsr_regions_reap_with(rs, NULL, NULL, &bytes), 1);
  cr_assert_eq(bytes, 1 << 19);
  cr_assert_eq(tsr_regions_reap_with(rs, NULL, NULL, &bytes), 0, "marked once");
  tsr_region_stats_t s;
  cr_assert(tsr_regions_stats(rs, 4, &s));
  cr_assert_eq(s.used_bytes, 0, "what a dead process's slot holds is not the lease's use");
  cr_assert_eq(s.processes, 1);
  cr_assert(tsr_region_charge(r, slot, 1 << 20), "the tenant takes it back at a charge that needs it");
  unmap_all();
  tsr_regions_close(rs);
}
