/* The lease store: atomic lock files, quarantine, never-repeating ids. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>

#include "tessera/lease.h"
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

static tsr_status_t visit(void *ctx, const tsr_lease_t *l) {
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
  write_file("gpu_0_0100_7.lock", "pid: 1\nuser: x\n");       /* cut short */
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
