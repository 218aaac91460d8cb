/* The daemon's enforcement parts, each on its own: the /proc snapshot and
 * slot resolution (procs.c), signals with a grace (actions.c), lease roots
 * (roots.c) and the per-user lease index (userindex.c). */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/fs.h"
#include "base/time.h"
#include "daemon/daemon.h"

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
  cr_assert_eq(tsr_procs_descendants(&ps, getpid(), me->start_ticks, 1, count_one, &n), 1,
               "bounded by max");
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

Test(actions, sigterm_then_sigkill_after_the_grace, .timeout = 10) {
  tsr_actions_t *a = NULL;
  cr_assert_null(tsr_actions_create(200 * TSR_NS_PER_MS, &a));
  pid_t stubborn = child(true), meek = child(false);
  tsr_target_t t[2] = {target_of(stubborn), target_of(meek)};
  uint64_t now = tsr_time_mono_ns();
  cr_assert_eq(tsr_actions_signal(a, 7, t, 2, now), 2);
  cr_assert(tsr_actions_pending(a, 7, 0));
  cr_assert_not(tsr_actions_pending(a, 8, 0));
  cr_assert_eq(tsr_actions_signal(a, 7, t, 2, now), 0, "a second act adds nothing");
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
  cr_assert_null(tsr_actions_create(TSR_NS_PER_MS, &a));
  pid_t kid = child(false);
  tsr_target_t t = target_of(kid);
  t.start_ticks += 1; /* the pid now names another process than the target */
  cr_assert_eq(tsr_actions_signal(a, 0, &t, 1, tsr_time_mono_ns()), 0);
  cr_assert_not(tsr_actions_pending(a, 0, kid));
  tsr_actions_tick(a, tsr_time_mono_ns() + TSR_NS_PER_S);
  nap_ms(50);
  cr_assert_eq(waitpid(kid, NULL, WNOHANG), 0, "the other process was signalled");
  /* the deny rule's targets are pending by pid */
  tsr_target_t right = target_of(kid);
  cr_assert_eq(tsr_actions_signal(a, 0, &right, 1, tsr_time_mono_ns()), 1);
  cr_assert(tsr_actions_pending(a, 0, kid));
  cr_assert_not(tsr_actions_pending(a, 0, kid + 1));
  waitpid(kid, NULL, 0);
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

/* ---- the switching reserve (regions.c) ------------------------------------ */

static tsr_region_t *lease_region(tsr_regions_t *rs, uint64_t id, uint32_t device, uint32_t sm_ppm) {
  tsr_lease_t l = {.id = id, .device = device, .bytes = 1 << 20, .owner_uid = (uint32_t)getuid(),
                   .sm_ppm = sm_ppm};
  cr_assert_null(tsr_regions_add(rs, &l, NULL));
  tsr_region_t *r = tsr_regions_find(rs, id);
  cr_assert_not_null(r);
  return r;
}

Test(share_tick, leases_that_run_together_share_the_switching_cost, .init = make_dir, .fini = remove_dir) {
  tsr_regions_t *rs = NULL;
  cr_assert_null(tsr_regions_open(dir, &rs));
  tsr_region_t *a = lease_region(rs, 1, 0, 300000), *b = lease_region(rs, 2, 0, 700000),
               *c = lease_region(rs, 3, 1, 500000), *none = lease_region(rs, 4, 0, 0),
               *d = lease_region(rs, 5, 1, 400000);
  const uint32_t cost = 60000; /* 6% */
  /* nothing ran: every lease has its own share */
  cr_assert_eq(tsr_regions_share_tick(rs, cost), 0);
  cr_assert_eq(tsr_region_share_now(a), 300000);
  cr_assert_eq(tsr_region_share_now(b), 700000);

  /* one runs alone: its own share */
  tsr_region_note_launches(a, 10, 1000000, 0, 0);
  cr_assert_eq(tsr_regions_share_tick(rs, cost), 0);
  cr_assert_eq(tsr_region_share_now(a), 300000);

  /* 30% and 70% run together on device 0: 94% of the device split 30:70;
   * device 1's leases, and a lease without a share, are not counted */
  tsr_region_note_launches(a, 10, 1000000, 0, 0);
  tsr_region_note_launches(b, 10, 1000000, 0, 0);
  tsr_region_note_launches(c, 10, 1000000, 0, 0);
  tsr_region_note_launches(none, 0, 0, 0, 5);
  cr_assert_eq(tsr_regions_share_tick(rs, cost), 2);
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
  cr_assert_eq(tsr_regions_share_tick(rs, cost), 2);
  cr_assert_eq(tsr_region_share_now(c), 500000);
  cr_assert_eq(tsr_region_share_now(d), 400000);

  /* b stops: a gets its whole share back at the next tick */
  tsr_region_note_launches(a, 10, 1000000, 0, 0);
  cr_assert_eq(tsr_regions_share_tick(rs, cost), 0);
  cr_assert_eq(tsr_region_share_now(a), 300000);
  cr_assert_eq(tsr_region_share_now(b), 700000);

  /* a cost of 0 never scales */
  tsr_region_note_launches(a, 10, 1000000, 0, 0);
  tsr_region_note_launches(b, 10, 1000000, 0, 0);
  cr_assert_eq(tsr_regions_share_tick(rs, 0), 0);
  cr_assert_eq(tsr_region_share_now(b), 700000);
  tsr_regions_close(rs);
}

Test(share_tick, a_share_in_force_is_never_more_than_the_lease, .init = make_dir, .fini = remove_dir) {
  tsr_regions_t *rs = NULL;
  cr_assert_null(tsr_regions_open(dir, &rs));
  tsr_region_t *a = lease_region(rs, 1, 0, 300000), *none = lease_region(rs, 2, 0, 0);
  tsr_region_set_share_now(a, 900000); /* above the lease: its own share */
  cr_assert_eq(tsr_region_share_now(a), 300000);
  tsr_region_set_share_now(a, 1);
  cr_assert_eq(tsr_region_share_now(a), 1);
  tsr_region_set_share_now(a, 0);
  cr_assert_eq(tsr_region_share_now(a), 300000);
  tsr_region_set_share_now(none, 5000); /* not limited stays not limited */
  cr_assert_eq(tsr_region_share_now(none), 0);
  tsr_regions_close(rs);
}
