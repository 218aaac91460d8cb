/* The lease store: atomic lock files, quarantine, never-repeating ids. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>

#include "lease/lease.h"
#include "test_helpers.h"

static char *dir;
static tsr_lease_store_t *store;

static void setup(void) {
  dir = tsr_test_mkdtemp();
  cr_assert_not_null(dir);
  cr_assert_null(tsr_lease_store_open(dir, TSR_LEASE_SYNC_FULL, &store));
}
static void teardown(void) {
  tsr_lease_store_close(store);
  tsr_test_rmtree(dir);
}
TestSuite(lease_store, .init = setup, .fini = teardown);

static tsr_lease_t lease(uint64_t id, uint32_t ppm, const char *owner) {
  tsr_lease_t l;
  memset(&l, 0, sizeof l);
  l.id = id;
  l.fraction_ppm = ppm;
  l.bytes = 1000;
  l.owner_uid = 1000;
  l.pid = 1;
  snprintf(l.owner, sizeof l.owner, "%s", owner);
  strcpy(l.creator, owner);
  strcpy(l.host, "h");
  l.start_wall_ns = UINT64_C(1763805600000000000);
  l.deadline_wall_ns = l.start_wall_ns + 1000;
  return l;
}

static bool exists(const char *name) {
  char p[512];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  return access(p, F_OK) == 0;
}

static void write_file(const char *name, const char *text) {
  char p[512];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  FILE *f = fopen(p, "w");
  cr_assert_not_null(f);
  fputs(text, f);
  fclose(f);
}

static int count_dir(const char *sub) {
  char p[512];
  snprintf(p, sizeof p, "%s/%s", dir, sub);
  DIR *d = opendir(p);
  if (!d) return 0;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)))
    if (e->d_name[0] != '.') n++;
  closedir(d);
  return n;
}

typedef struct {
  tsr_lease_t seen[16];
  int n;
  uint64_t reject_id;
} visit_ctx_t;

TSR_MUST_USE static tsr_status_t visit(void *ctx, const tsr_lease_t *l) {
  visit_ctx_t *v = ctx;
  if (l->id == v->reject_id) return tsr_status_make(TSR_CONFLICT, "rejected by test");
  v->seen[v->n++] = *l;
  return NULL;
}

Test(lease_store, put_load_remove) {
  tsr_lease_t a = lease(3, 500000, "alice"), b = lease(1, 250000, "bob");
  cr_assert_null(tsr_lease_store_put(store, &a));
  cr_assert_null(tsr_lease_store_put(store, &b));
  cr_assert(exists("gpu_0_0500_3.lock"));
  cr_assert(exists("gpu_0_0250_1.lock"));
  struct stat st;
  char p[512];
  snprintf(p, sizeof p, "%s/gpu_0_0500_3.lock", dir);
  cr_assert_eq(stat(p, &st), 0);
  cr_assert_eq(st.st_mode & 0777, 0644);
  visit_ctx_t v = {0};
  size_t q = 99;
  cr_assert_null(tsr_lease_store_load(store, visit, &v, &q));
  cr_assert_eq(q, 0);
  cr_assert_eq(v.n, 2);
  cr_assert_eq(v.seen[0].id, 1, "loaded in id order");
  cr_assert_eq(v.seen[1].id, 3);
  cr_assert_str_eq(v.seen[1].owner, "alice");
  cr_assert_null(tsr_lease_store_remove(store, &a));
  cr_assert_not(exists("gpu_0_0500_3.lock"));
  cr_assert_null(tsr_lease_store_remove(store, &a), "removing twice is fine");
}

Test(lease_store, ids_never_repeat_across_reopen) {
  uint64_t id, last = 0;
  for (int i = 0; i < 5; i++) {
    cr_assert_null(tsr_lease_store_next_id(store, &id));
    cr_assert_gt(id, last);
    last = id;
  }
  /* a crash: the store is dropped without any goodbye */
  tsr_lease_store_close(store);
  cr_assert_null(tsr_lease_store_open(dir, TSR_LEASE_SYNC_FULL, &store));
  cr_assert_null(tsr_lease_store_load(store, NULL, NULL, NULL));
  cr_assert_null(tsr_lease_store_next_id(store, &id));
  cr_assert_gt(id, last);
}

Test(lease_store, ids_pass_every_lease_on_disk_even_without_counter) {
  tsr_lease_t a = lease(5000, 100000, "alice");
  cr_assert_null(tsr_lease_store_put(store, &a));
  tsr_lease_store_close(store);
  char p[512];
  snprintf(p, sizeof p, "%s/next_id", dir);
  unlink(p);
  cr_assert_null(tsr_lease_store_open(dir, TSR_LEASE_SYNC_FULL, &store));
  cr_assert_null(tsr_lease_store_load(store, NULL, NULL, NULL));
  uint64_t id;
  cr_assert_null(tsr_lease_store_next_id(store, &id));
  cr_assert_gt(id, 5000);
}

Test(lease_store, corrupt_counter_refuses_to_open) {
  tsr_lease_store_close(store);
  store = NULL;
  write_file("next_id", "next_id: banana\n");
  tsr_status_t st = tsr_lease_store_open(dir, TSR_LEASE_SYNC_FULL, &store);
  cr_assert_eq(tsr_status_code(st), TSR_DATA_LOSS);
  cr_assert(strstr(tsr_status_message(st), "next_id"));
  cr_assert_null(store);
  tsr_status_free(st);
  write_file("next_id", "garbage");
  st = tsr_lease_store_open(dir, TSR_LEASE_SYNC_FULL, &store);
  cr_assert_eq(tsr_status_code(st), TSR_DATA_LOSS);
  tsr_status_free(st);
}

Test(lease_store, bad_files_are_quarantined_not_fatal) {
  tsr_lease_t good = lease(2, 100000, "alice");
  cr_assert_null(tsr_lease_store_put(store, &good));
  write_file("gpu_0_0100_7.lock", "pid: 1\nuser: x\n");      /* cut short */
  write_file("gpu_0_0200_8.lock", "\x01\x02 binary junk\n"); /* garbage */
  /* a valid file under the wrong name */
  tsr_lease_t moved = lease(9, 300000, "bob");
  char body[2048];
  size_t n = tsr_lease_lockfile_format(&moved, body, sizeof body);
  body[n] = '\0';
  write_file("gpu_0_0999_9.lock", body);
  write_file(".tmp-gpu_0_0100_4.lock", "pid: 1\n"); /* an interrupted write */
  write_file("notes.txt", "ignored\n");
  write_file("tesserad.lock", "4242\n"); /* not a lease: not gpu_*.lock */
  visit_ctx_t v = {0};
  size_t q = 0;
  cr_assert_null(tsr_lease_store_load(store, visit, &v, &q));
  cr_assert_eq(q, 3);
  cr_assert_eq(v.n, 1);
  cr_assert_eq(v.seen[0].id, 2);
  cr_assert_eq(count_dir("quarantine"), 3);
  cr_assert_not(exists(".tmp-gpu_0_0100_4.lock"));
  cr_assert(exists("notes.txt"));
  cr_assert(exists("tesserad.lock"));
  /* a second start finds a clean directory */
  v.n = 0;
  cr_assert_null(tsr_lease_store_load(store, visit, &v, &q));
  cr_assert_eq(q, 0);
  cr_assert_eq(v.n, 1);
}

Test(lease_store, rejected_by_visitor_is_quarantined) {
  tsr_lease_t a = lease(1, 100000, "alice"), b = lease(2, 200000, "bob");
  cr_assert_null(tsr_lease_store_put(store, &a));
  cr_assert_null(tsr_lease_store_put(store, &b));
  visit_ctx_t v = {.reject_id = 2};
  size_t q = 0;
  cr_assert_null(tsr_lease_store_load(store, visit, &v, &q));
  cr_assert_eq(q, 1);
  cr_assert_eq(v.n, 1);
  cr_assert_not(exists("gpu_0_0200_2.lock"));
  cr_assert_eq(count_dir("quarantine"), 1);
}

Test(lease_store, sync_none_writes_the_same_files) {
  tsr_lease_store_t *fast;
  cr_assert_null(tsr_lease_store_open(dir, TSR_LEASE_SYNC_NONE, &fast));
  tsr_lease_t a = lease(11, 100000, "alice");
  cr_assert_null(tsr_lease_store_put(fast, &a));
  cr_assert(exists("gpu_0_0100_11.lock"));
  tsr_lease_store_close(fast);
}

Test(lease_store, open_fails_clearly_on_unusable_dir, .init = NULL, .fini = NULL) {
  tsr_lease_store_t *s = NULL;
  tsr_status_t st = tsr_lease_store_open("/proc/version/x", TSR_LEASE_SYNC_FULL, &s);
  cr_assert_not_null(st);
  cr_assert(strstr(tsr_status_message(st), "/proc/version/x"));
  cr_assert_null(s);
  tsr_status_free(st);
  st = tsr_lease_store_open("", TSR_LEASE_SYNC_FULL, &s);
  cr_assert_eq(tsr_status_code(st), TSR_INVALID_ARGUMENT);
  tsr_status_free(st);
}

static int open_fds(void) {
  DIR *d = opendir("/proc/self/fd");
  int n = 0;
  while (readdir(d)) n++;
  closedir(d);
  return n;
}

Test(lease_store, group_commit_renames_at_once_and_syncs_once_per_batch) {
  tsr_lease_store_defer_sync(store, true);
  int before = open_fds();
  tsr_lease_t a = lease(21, 100000, "alice"), b = lease(22, 200000, "bob");
  cr_assert_null(tsr_lease_store_put(store, &a));
  cr_assert_null(tsr_lease_store_put(store, &b));
  /* visible at once: a killed process loses nothing */
  cr_assert(exists("gpu_0_0100_21.lock"));
  cr_assert(exists("gpu_0_0200_22.lock"));
  cr_assert_eq(open_fds(), before + 2, "each unsynced file is held until the sync pass");
  cr_assert_null(tsr_lease_store_remove(store, &a));
  cr_assert_null(tsr_lease_store_sync(store));
  cr_assert_eq(open_fds(), before, "the sync pass closes every file");
  cr_assert_null(tsr_lease_store_sync(store), "an empty pass is fine");
  visit_ctx_t v = {0};
  cr_assert_null(tsr_lease_store_load(store, visit, &v, NULL));
  cr_assert_eq(v.n, 1);
  cr_assert_eq(v.seen[0].id, 22);
}

/* ---- recycled files ------------------------------------------------------------ */

static ino_t inode_of(const char *name) {
  char p[512];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  struct stat st;
  cr_assert_eq(stat(p, &st), 0, "%s missing", name);
  return st.st_ino;
}

static char *read_whole(const char *name) {
  static char buf[4096];
  char p[512];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  FILE *f = fopen(p, "r");
  cr_assert_not_null(f, "%s missing", name);
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  return buf;
}

static int count_spares(void) {
  DIR *d = opendir(dir);
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)))
    if (strncmp(e->d_name, ".spare-", 7) == 0) n++;
  closedir(d);
  return n;
}

Test(lease_store, an_ended_lease_file_is_reused_by_the_next_lease) {
  /* a long owner name first, so that the reuse must also cut the file short */
  tsr_lease_t a = lease(1, 500000, "a-rather-long-owner-name"), b = lease(2, 250000, "bob");
  cr_assert_null(tsr_lease_store_put(store, &a));
  ino_t ino = inode_of("gpu_0_0500_1.lock");
  cr_assert_null(tsr_lease_store_remove(store, &a));
  cr_assert_not(exists("gpu_0_0500_1.lock"));
  cr_assert_eq(count_spares(), 1, "the file is kept as a spare");
  cr_assert_null(tsr_lease_store_put(store, &b));
  cr_assert_eq(inode_of("gpu_0_0250_2.lock"), ino, "the spare's inode is reused");
  cr_assert_eq(count_spares(), 0);
  /* and its contents are exactly the new lease's, nothing left of the old */
  char want[2048];
  size_t len = tsr_lease_lockfile_format(&b, want, sizeof want);
  cr_assert_gt(len, 0);
  cr_assert_str_eq(read_whole("gpu_0_0250_2.lock"), want);
  visit_ctx_t v = {0};
  cr_assert_null(tsr_lease_store_load(store, visit, &v, NULL));
  cr_assert_eq(v.n, 1);
  cr_assert_str_eq(v.seen[0].owner, "bob");
}

Test(lease_store, spares_are_not_leases_and_are_adopted_at_start) {
  tsr_lease_t a = lease(1, 500000, "alice");
  cr_assert_null(tsr_lease_store_put(store, &a));
  cr_assert_null(tsr_lease_store_remove(store, &a));
  /* a crash between writing a spare and renaming it: a whole lease in a
   * spare's name, and a half-written one */
  char body[2048];
  tsr_lease_t c = lease(7, 100000, "carol");
  tsr_lease_lockfile_format(&c, body, sizeof body);
  write_file(".spare-41", body);
  write_file(".spare-42", "pid: 1\nuser: ca");
  write_file(".spare-junk", "whatever");
  tsr_lease_store_close(store);
  cr_assert_null(tsr_lease_store_open(dir, TSR_LEASE_SYNC_FULL, &store));
  visit_ctx_t v = {0};
  size_t q = 99;
  cr_assert_null(tsr_lease_store_load(store, visit, &v, &q));
  cr_assert_eq(v.n, 0, "no spare is restored as a lease");
  cr_assert_eq(q, 0, "nor quarantined");
  cr_assert_not(exists(".spare-junk"), "a spare name that is not ours is removed");
  cr_assert_eq(count_spares(), 3);
  /* new spares are numbered past the adopted ones, and the adopted ones are
   * used before new files are made */
  ino_t spares[3] = {inode_of(".spare-0"), inode_of(".spare-41"), inode_of(".spare-42")};
  tsr_lease_t d = lease(8, 200000, "dave"), e = lease(9, 200000, "erin");
  cr_assert_null(tsr_lease_store_put(store, &d));
  cr_assert_null(tsr_lease_store_put(store, &e));
  ino_t got[2] = {inode_of("gpu_0_0200_8.lock"), inode_of("gpu_0_0200_9.lock")};
  cr_assert_neq(got[0], got[1]);
  for (int i = 0; i < 2; i++)
    cr_assert(got[i] == spares[0] || got[i] == spares[1] || got[i] == spares[2],
              "lease %d got a new inode while spares were there", i);
  cr_assert_eq(count_spares(), 1);
  cr_assert_null(tsr_lease_store_remove(store, &d));
  cr_assert(exists(".spare-43"), "numbered past the highest adopted spare");
  v.n = 0;
  cr_assert_null(tsr_lease_store_load(store, visit, &v, NULL));
  cr_assert_eq(v.n, 1);
  cr_assert_eq(v.seen[0].id, 9);
  char want[2048];
  tsr_lease_lockfile_format(&e, want, sizeof want);
  cr_assert_str_eq(read_whole("gpu_0_0200_9.lock"), want);
}

/* ---- the id counter at its limit --------------------------------------------------- */

static tsr_status_code_t reopen(const char *counter, const char *needle) {
  tsr_lease_store_close(store);
  store = NULL;
  if (counter) write_file("next_id", counter);
  tsr_status_t st = tsr_lease_store_open(dir, TSR_LEASE_SYNC_FULL, &store);
  tsr_status_code_t c = tsr_status_code(st);
  if (needle)
    cr_assert(st && strstr(tsr_status_message(st), needle), "message '%s' lacks '%s'", tsr_status_message(st), needle);
  tsr_status_free(st);
  return c;
}

Test(lease_store, ids_stop_at_the_largest_and_never_wrap) {
  cr_assert_eq(reopen("next_id: 9223372036854775806\n", NULL), TSR_OK);
  uint64_t id;
  cr_assert_null(tsr_lease_store_next_id(store, &id));
  cr_assert_eq(id, TSR_LEASE_ID_MAX - 1);
  cr_assert_null(tsr_lease_store_next_id(store, &id));
  cr_assert_eq(id, TSR_LEASE_ID_MAX);
  for (int i = 0; i < 2; i++) {
    tsr_status_t st = tsr_lease_store_next_id(store, &id);
    cr_assert_eq(tsr_status_code(st), TSR_RESOURCE_EXHAUSTED);
    cr_assert(strstr(tsr_status_message(st), "lease ids are exhausted"));
    tsr_status_free(st);
  }
  /* the counter on disk stopped at the largest + 1, and stays exhausted */
  cr_assert_str_eq(read_whole("next_id"), "next_id: 9223372036854775808\n");
  cr_assert_eq(reopen(NULL, NULL), TSR_OK);
  tsr_status_t st = tsr_lease_store_next_id(store, &id);
  cr_assert_eq(tsr_status_code(st), TSR_RESOURCE_EXHAUSTED);
  tsr_status_free(st);
}

Test(lease_store, a_counter_past_the_largest_id_is_corrupt) {
  const char *bad[] = {"next_id: 9223372036854775809\n", "next_id: 18446744073709551615\n",
                       "next_id: 18446744073709551616\n", "next_id: 0\n"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    cr_assert_eq(reopen(bad[i], "next_id is corrupt"), TSR_DATA_LOSS, "%s", bad[i]);
    cr_assert_eq(reopen(bad[i], "fix it by hand"), TSR_DATA_LOSS);
    cr_assert_null(store);
  }
}

Test(lease_store, a_lock_file_with_the_largest_id_exhausts_ids_without_wrapping) {
  tsr_lease_t a = lease(TSR_LEASE_ID_MAX, 100000, "alice");
  cr_assert_null(tsr_lease_store_put(store, &a));
  visit_ctx_t v = {0};
  cr_assert_null(tsr_lease_store_load(store, visit, &v, NULL));
  cr_assert_eq(v.n, 1);
  uint64_t id;
  tsr_status_t st = tsr_lease_store_next_id(store, &id);
  cr_assert_eq(tsr_status_code(st), TSR_RESOURCE_EXHAUSTED, "handed out %llu", (unsigned long long)id);
  tsr_status_free(st);
  cr_assert_str_eq(read_whole("next_id"), "next_id: 9223372036854775808\n");
}

Test(lease_store, lock_files_with_ids_out_of_range_are_quarantined) {
  tsr_lease_t a = lease(5, 100000, "alice");
  char body[2048];
  size_t n = tsr_lease_lockfile_format(&a, body, sizeof body);
  body[n] = '\0';
  /* the same contents with partition 0, 2^63 and 2^64-1, each in its own name */
  const char *ids[] = {"0", "9223372036854775808", "18446744073709551615"};
  for (int i = 0; i < 3; i++) {
    char text[2100], name[64];
    char *p = strstr(body, "partition: 5\n");
    cr_assert_not_null(p);
    snprintf(text, sizeof text, "%.*spartition: %s\n%s", (int)(p - body), body, ids[i], p + strlen("partition: 5\n"));
    snprintf(name, sizeof name, "gpu_0_0100_%s.lock", ids[i]);
    write_file(name, text);
  }
  visit_ctx_t v = {0};
  size_t q = 0;
  cr_assert_null(tsr_lease_store_load(store, visit, &v, &q));
  cr_assert_eq(q, 3);
  cr_assert_eq(v.n, 0);
  uint64_t id;
  cr_assert_null(tsr_lease_store_next_id(store, &id));
  cr_assert_eq(id, 1, "a refused id moved the counter");
}

/* ---- what a hostile or damaged directory holds ---------------------------------------- */

/* A directory beside the state directory. Criterion runs the suite's
 * setup and teardown around these too. */
static char outside[256];

static void setup_outside(void) { cr_assert_not_null(tsr_test_mkdtemp_in(outside, sizeof outside)); }
static void teardown_outside(void) { tsr_test_rmtree(outside); }

/* A file outside the state directory that must never change; its path
 * (the buffer is the caller's). */
static const char *precious(char p[static 512], const char *name, const char *text) {
  snprintf(p, 512, "%s/%s", outside, name);
  FILE *f = fopen(p, "w");
  cr_assert_not_null(f);
  fputs(text, f);
  fclose(f);
  return p;
}

static void assert_unchanged(const char *path, const char *text) {
  char buf[4096];
  FILE *f = fopen(path, "r");
  cr_assert_not_null(f, "%s is gone", path);
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  cr_assert_str_eq(buf, text, "%s was changed", path);
}

static mode_t lmode(const char *name) {
  char p[512];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  struct stat st;
  cr_assert_eq(lstat(p, &st), 0, "%s missing", p);
  return st.st_mode;
}

/* The one entry in quarantine/ whose name starts with `prefix`. */
static char *quarantined_as(const char *prefix) {
  static char found[512];
  char p[512];
  snprintf(p, sizeof p, "%s/quarantine", dir);
  DIR *d = opendir(p);
  cr_assert_not_null(d);
  struct dirent *e;
  found[0] = '\0';
  while ((e = readdir(d)))
    if (strncmp(e->d_name, prefix, strlen(prefix)) == 0) snprintf(found, sizeof found, "quarantine/%s", e->d_name);
  closedir(d);
  cr_assert_neq(found[0], '\0', "nothing named %s* in quarantine/", prefix);
  return found;
}

Test(lease_store, a_fifo_named_like_a_lock_file_is_quarantined_without_blocking, .init = setup_outside,
     .fini = teardown_outside, .timeout = 10) {
  char p[512];
  snprintf(p, sizeof p, "%s/gpu_0_0500_7.lock", dir);
  cr_assert_eq(mkfifo(p, 0644), 0);
  tsr_lease_t good = lease(2, 100000, "alice");
  cr_assert_null(tsr_lease_store_put(store, &good));
  visit_ctx_t v = {0};
  size_t q = 0;
  cr_assert_null(tsr_lease_store_load(store, visit, &v, &q)); /* a hang times out */
  cr_assert_eq(q, 1);
  cr_assert_eq(v.n, 1);
  cr_assert_eq(v.seen[0].id, 2);
  cr_assert_not(exists("gpu_0_0500_7.lock"));
  cr_assert(S_ISFIFO(lmode(quarantined_as("gpu_0_0500_7.lock."))));
}

Test(lease_store, a_symlinked_lock_file_is_quarantined_and_never_followed, .init = setup_outside,
     .fini = teardown_outside) {
  /* a whole valid lease behind the link: following it would restore it */
  tsr_lease_t planted = lease(7, 500000, "mallory");
  char body[2048];
  size_t n = tsr_lease_lockfile_format(&planted, body, sizeof body);
  body[n] = '\0';
  char tp[512];
  const char *target = precious(tp, "lease", body);
  char p[512];
  snprintf(p, sizeof p, "%s/gpu_0_0500_7.lock", dir);
  cr_assert_eq(symlink(target, p), 0);
  visit_ctx_t v = {0};
  size_t q = 0;
  cr_assert_null(tsr_lease_store_load(store, visit, &v, &q));
  cr_assert_eq(q, 1);
  cr_assert_eq(v.n, 0, "a lease was restored through a symlink");
  cr_assert_not(exists("gpu_0_0500_7.lock"));
  cr_assert(S_ISLNK(lmode(quarantined_as("gpu_0_0500_7.lock."))), "the link itself is moved");
  assert_unchanged(target, body);
}

Test(lease_store, other_non_files_named_like_lock_files_are_quarantined) {
  char p[512];
  snprintf(p, sizeof p, "%s/gpu_0_0100_3.lock", dir);
  cr_assert_eq(mkdir(p, 0700), 0);
  snprintf(p, sizeof p, "%s/gpu_0_0100_4.lock", dir);
  cr_assert_eq(symlink("/nonexistent", p), 0); /* dangling */
  size_t q = 0;
  cr_assert_null(tsr_lease_store_load(store, NULL, NULL, &q));
  cr_assert_eq(q, 2);
  cr_assert(S_ISDIR(lmode(quarantined_as("gpu_0_0100_3.lock."))));
  cr_assert(S_ISLNK(lmode(quarantined_as("gpu_0_0100_4.lock."))));
}

Test(lease_store, a_planted_temporary_symlink_is_not_written_through, .init = setup_outside, .fini = teardown_outside) {
  char tp[512];
  const char *target = precious(tp, "passwd", "root:x:0:0\n");
  char p[512];
  snprintf(p, sizeof p, "%s/.tmp-gpu_0_0500_3.lock", dir);
  cr_assert_eq(symlink(target, p), 0);
  tsr_lease_t a = lease(3, 500000, "alice");
  cr_assert_null(tsr_lease_store_put(store, &a));
  assert_unchanged(target, "root:x:0:0\n");
  cr_assert(S_ISREG(lmode("gpu_0_0500_3.lock")));
  char want[2048];
  tsr_lease_lockfile_format(&a, want, sizeof want);
  cr_assert_str_eq(read_whole("gpu_0_0500_3.lock"), want);
  cr_assert_not(exists(".tmp-gpu_0_0500_3.lock"));
  /* the id counter's temporary file too */
  snprintf(p, sizeof p, "%s/.tmp-next_id", dir);
  cr_assert_eq(symlink(target, p), 0);
  uint64_t id;
  cr_assert_null(tsr_lease_store_next_id(store, &id));
  assert_unchanged(target, "root:x:0:0\n");
  cr_assert(S_ISREG(lmode("next_id")));
}

Test(lease_store, a_temporary_name_that_cannot_be_cleared_fails_the_write) {
  /* a directory: unlink cannot remove it, so O_EXCL finds the name taken */
  char p[512];
  snprintf(p, sizeof p, "%s/.tmp-gpu_0_0500_3.lock", dir);
  cr_assert_eq(mkdir(p, 0700), 0);
  tsr_lease_t a = lease(3, 500000, "alice");
  tsr_status_t st = tsr_lease_store_put(store, &a);
  cr_assert_eq(tsr_status_code(st), TSR_IO_ERROR, "%s", tsr_status_message(st));
  cr_assert(strstr(tsr_status_message(st), ".tmp-gpu_0_0500_3.lock: the name is taken"), "%s", tsr_status_message(st));
  tsr_status_free(st);
  cr_assert_not(exists("gpu_0_0500_3.lock"));
  cr_assert(S_ISDIR(lmode(".tmp-gpu_0_0500_3.lock")));
}

Test(lease_store, planted_spares_are_never_reused, .init = setup_outside, .fini = teardown_outside) {
  /* a hard link to a file elsewhere and a symlink, under spare names */
  char hp[512], sp[512];
  const char *hard = precious(hp, "hard", "keep me\n");
  const char *soft = precious(sp, "soft", "keep me too\n");
  char p[512];
  snprintf(p, sizeof p, "%s/.spare-5", dir);
  cr_assert_eq(link(hard, p), 0);
  snprintf(p, sizeof p, "%s/.spare-6", dir);
  cr_assert_eq(symlink(soft, p), 0);
  tsr_lease_store_close(store);
  cr_assert_null(tsr_lease_store_open(dir, TSR_LEASE_SYNC_FULL, &store));
  cr_assert_null(tsr_lease_store_load(store, NULL, NULL, NULL));
  cr_assert_not(exists(".spare-6"), "a symlink is not adopted as a spare");
  tsr_lease_t a = lease(1, 100000, "alice"), b = lease(2, 200000, "bob");
  cr_assert_null(tsr_lease_store_put(store, &a));
  cr_assert_null(tsr_lease_store_put(store, &b));
  assert_unchanged(hard, "keep me\n");
  assert_unchanged(soft, "keep me too\n");
  struct stat st;
  cr_assert_eq(stat(hard, &st), 0);
  cr_assert_eq(st.st_nlink, 1, "the planted link is removed");
  cr_assert_neq(inode_of("gpu_0_0100_1.lock"), st.st_ino);
  cr_assert_neq(inode_of("gpu_0_0200_2.lock"), st.st_ino);
  cr_assert_eq(count_spares(), 0);
}

Test(lease_store, a_spare_swapped_after_start_is_not_reused, .init = setup_outside, .fini = teardown_outside) {
  tsr_lease_t a = lease(1, 100000, "alice"), b = lease(2, 200000, "bob");
  cr_assert_null(tsr_lease_store_put(store, &a));
  cr_assert_null(tsr_lease_store_remove(store, &a));
  cr_assert(exists(".spare-0"));
  char tp[512];
  const char *target = precious(tp, "target", "untouched\n");
  char p[512];
  snprintf(p, sizeof p, "%s/.spare-0", dir);
  cr_assert_eq(unlink(p), 0);
  cr_assert_eq(symlink(target, p), 0);
  cr_assert_null(tsr_lease_store_put(store, &b));
  assert_unchanged(target, "untouched\n");
  cr_assert(S_ISREG(lmode("gpu_0_0200_2.lock")));
  cr_assert_not(exists(".spare-0"));
}

Test(lease_store, a_spare_of_another_user_is_not_reused) {
  if (geteuid() != 0) cr_skip_test("needs root to give a file to another uid");
  tsr_lease_t a = lease(1, 100000, "alice"), b = lease(2, 200000, "bob");
  cr_assert_null(tsr_lease_store_put(store, &a));
  cr_assert_null(tsr_lease_store_remove(store, &a));
  ino_t ino = inode_of(".spare-0");
  char p[512];
  snprintf(p, sizeof p, "%s/.spare-0", dir);
  cr_assert_eq(chown(p, 65534, 65534), 0);
  cr_assert_null(tsr_lease_store_put(store, &b));
  cr_assert_neq(inode_of("gpu_0_0200_2.lock"), ino);
  cr_assert_not(exists(".spare-0"));
}

Test(lease_store, a_symlinked_quarantine_takes_nothing_elsewhere, .init = setup_outside, .fini = teardown_outside) {
  char p[512];
  snprintf(p, sizeof p, "%s/quarantine", dir);
  cr_assert_eq(symlink(outside, p), 0);
  write_file("gpu_0_0100_7.lock", "garbage\n");
  tsr_lease_t a = lease(1, 100000, "alice");
  cr_assert_null(tsr_lease_store_put(store, &a));
  visit_ctx_t v = {.reject_id = 1};
  size_t q = 0;
  cr_assert_null(tsr_lease_store_load(store, visit, &v, &q));
  cr_assert_eq(q, 2, "both files are set aside");
  cr_assert_eq(v.n, 0, "and neither is restored");
  DIR *d = opendir(outside);
  struct dirent *e;
  while ((e = readdir(d))) cr_assert(e->d_name[0] == '.', "%s was moved outside", e->d_name);
  closedir(d);
  cr_assert(exists("gpu_0_0100_7.lock"), "left where it was");
  cr_assert(exists("gpu_0_0100_1.lock"));
  cr_assert(S_ISLNK(lmode("quarantine")));
}

Test(lease_store, a_quarantine_of_another_user_is_not_used) {
  if (geteuid() != 0) cr_skip_test("needs root to give a directory to another uid");
  char p[512];
  snprintf(p, sizeof p, "%s/quarantine", dir);
  cr_assert_eq(mkdir(p, 0700), 0);
  cr_assert_eq(chown(p, 65534, 65534), 0);
  write_file("gpu_0_0100_7.lock", "garbage\n");
  size_t q = 0;
  cr_assert_null(tsr_lease_store_load(store, NULL, NULL, &q));
  cr_assert_eq(q, 1);
  cr_assert(exists("gpu_0_0100_7.lock"));
  cr_assert_eq(count_dir("quarantine"), 0);
}

Test(lease_store, a_counter_that_is_not_a_regular_file_stops_the_start, .init = setup_outside, .fini = teardown_outside,
     .timeout = 10) {
  char p[512];
  snprintf(p, sizeof p, "%s/next_id", dir);
  unlink(p);
  cr_assert_eq(mkfifo(p, 0644), 0);
  cr_assert_eq(reopen(NULL, "next_id is corrupt"), TSR_DATA_LOSS);
  unlink(p);
  char tp[512];
  const char *target = precious(tp, "counter", "next_id: 5\n");
  cr_assert_eq(symlink(target, p), 0);
  cr_assert_eq(reopen(NULL, "symbolic link"), TSR_DATA_LOSS);
  assert_unchanged(target, "next_id: 5\n");
}

/* ---- the state directory itself ----------------------------------------------------- */

static void assert_empty(const char *path) {
  DIR *d = opendir(path);
  cr_assert_not_null(d);
  struct dirent *e;
  while ((e = readdir(d)))
    cr_assert(strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0, "%s was created in a refused directory",
              e->d_name);
  closedir(d);
}

static void expect_refused(const char *path, const char *needle) {
  tsr_lease_store_t *s = NULL;
  tsr_status_t st = tsr_lease_store_open(path, TSR_LEASE_SYNC_FULL, &s);
  cr_assert_eq(tsr_status_code(st), TSR_FAILED_PRECONDITION, "%s: %s", path, tsr_status_message(st));
  cr_assert(strstr(tsr_status_message(st), needle), "message '%s' lacks '%s'", tsr_status_message(st), needle);
  cr_assert(strstr(tsr_status_message(st), "state directory"));
  cr_assert_null(s);
  tsr_status_free(st);
}

Test(lease_store, a_state_directory_others_can_write_is_refused) {
  char d[256];
  cr_assert_not_null(tsr_test_mkdtemp_in(d, sizeof d));
  cr_assert_eq(chmod(d, 0777), 0);
  expect_refused(d, "is writable by group or others");
  assert_empty(d);
  /* or whose parent others can change (and is not sticky) */
  char child[512];
  snprintf(child, sizeof child, "%s/state", d);
  cr_assert_eq(mkdir(child, 0700), 0);
  expect_refused(child, "its parent");
  assert_empty(child);
  /* or a symlink to a good one */
  cr_assert_eq(chmod(d, 0700), 0);
  char link_path[512];
  snprintf(link_path, sizeof link_path, "%s/link", d);
  cr_assert_eq(symlink(child, link_path), 0);
  expect_refused(link_path, "symbolic link");
  assert_empty(child);
  tsr_test_rmtree(d);
}

Test(lease_store, a_state_directory_of_another_user_is_refused) {
  if (geteuid() != 0) cr_skip_test("needs root to give a directory to another uid");
  char d[256];
  cr_assert_not_null(tsr_test_mkdtemp_in(d, sizeof d));
  cr_assert_eq(chown(d, 65534, 65534), 0);
  expect_refused(d, "is owned by another user");
  assert_empty(d);
  tsr_test_rmtree(d);
}

Test(lease_store, a_missing_state_directory_is_made_private) {
  char d[256];
  cr_assert_not_null(tsr_test_mkdtemp_in(d, sizeof d));
  char sub[512];
  snprintf(sub, sizeof sub, "%s/a/b", d);
  tsr_lease_store_t *s = NULL;
  cr_assert_null(tsr_lease_store_open(sub, TSR_LEASE_SYNC_FULL, &s));
  struct stat st;
  cr_assert_eq(stat(sub, &st), 0);
  cr_assert_eq(st.st_uid, geteuid());
  cr_assert_eq(st.st_mode & 022, 0);
  tsr_lease_store_close(s);
  tsr_status_t e = tsr_lease_store_open("relative/state", TSR_LEASE_SYNC_FULL, &s);
  cr_assert_eq(tsr_status_code(e), TSR_INVALID_ARGUMENT);
  tsr_status_free(e);
  tsr_test_rmtree(d);
}

/* ---- a full disk is an I/O error ---------------------------------------------------- */

static char full[512];

/* A 64 KiB tmpfs in a mount namespace of this test's own process: it goes
 * away with the process whatever happens. Needs root (CAP_SYS_ADMIN). */
static void setup_full(void) {
  if (unshare(CLONE_NEWNS) != 0) cr_skip_test("no mount namespace: %s", strerror(errno));
  if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
    cr_skip_test("cannot make mounts private: %s", strerror(errno));
  snprintf(full, sizeof full, "%s/full", dir);
  cr_assert_eq(mkdir(full, 0700), 0);
  if (mount("tmpfs", full, "tmpfs", 0, "size=64k,mode=0700") != 0)
    cr_skip_test("cannot mount a tmpfs: %s", strerror(errno));
}
static void teardown_full(void) { umount2(full, MNT_DETACH); }

Test(lease_store, a_full_disk_is_an_io_error_not_exhaustion, .init = setup_full, .fini = teardown_full) {
  tsr_device_t dev = {.index = 0, .name = "G", .total_bytes = UINT64_C(1) << 30};
  tsr_lease_service_config_t cfg = {.state_dir = full, .sync = TSR_LEASE_SYNC_FULL, .host = "h"};
  tsr_lease_now_t now = {1, UINT64_C(1763805600000000000)};
  tsr_lease_service_t *svc;
  cr_assert_null(tsr_lease_service_open(&cfg, &dev, 1, now, &svc, NULL));
  tsr_lease_actor_t alice = {1000, "alice", false, 1};
  tsr_lease_request_t r = {.device = 0, .fraction_ppm = 100000, .duration_ns = 1000000000};
  tsr_lease_t l;
  cr_assert_null(tsr_lease_service_create(svc, &r, &alice, now, &l));
  /* fill the rest of the disk */
  char p[600];
  snprintf(p, sizeof p, "%s/filler", full);
  int fd = open(p, O_WRONLY | O_CREAT, 0600);
  cr_assert_geq(fd, 0);
  static char block[4096];
  while (write(fd, block, sizeof block) > 0) {
  }
  cr_assert_eq(errno, ENOSPC);
  close(fd);
  r.fraction_ppm = 200000;
  tsr_status_t st = tsr_lease_service_create(svc, &r, &alice, now, &l);
  cr_assert_eq(tsr_status_code(st), TSR_IO_ERROR, "got %s: %s", tsr_status_code_name(tsr_status_code(st)),
               tsr_status_message(st));
  cr_assert(strstr(tsr_status_message(st), "No space left on device"), "%s", tsr_status_message(st));
  tsr_status_free(st);
  /* nothing changed: one lease, one lock file, no temporary file */
  cr_assert_eq(tsr_lease_table_count(tsr_lease_service_table(svc)), 1);
  DIR *d = opendir(full);
  struct dirent *e;
  int locks = 0;
  while ((e = readdir(d))) {
    cr_assert_neq(strncmp(e->d_name, ".tmp-", 5), 0, "%s left behind", e->d_name);
    if (strstr(e->d_name, ".lock")) locks++;
  }
  closedir(d);
  cr_assert_eq(locks, 1);
  /* the id counter's write fails the same way */
  tsr_lease_store_t *s;
  cr_assert_null(tsr_lease_store_open(full, TSR_LEASE_SYNC_FULL, &s));
  uint64_t id = 0;
  st = NULL;
  for (int i = 0; i < 3000 && !st; i++) st = tsr_lease_store_next_id(s, &id);
  cr_assert_eq(tsr_status_code(st), TSR_IO_ERROR, "%s", tsr_status_message(st));
  tsr_status_free(st);
  tsr_lease_store_close(s);
  tsr_lease_service_close(svc);
}
