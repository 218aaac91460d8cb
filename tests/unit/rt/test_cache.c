/* rt/cache: the disk cache of compiled operators. A hit must be exactly
 * what was stored for exactly that key; everything else is a miss. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"
#include "rt/cache.h"

static char root[64]; /* a private temp dir per test */
static char dir[128]; /* root/c: the cache directory most tests use */

static void setup(void) {
  snprintf(root, sizeof root, "/tmp/tsr-rtc-XXXXXX");
  cr_assert_not_null(mkdtemp(root));
  snprintf(dir, sizeof dir, "%s/c", root);
}

static void teardown(void) {
  char cmd[256];
  snprintf(cmd, sizeof cmd, "chmod -R u+rwx %s; rm -rf %s", root, root);
  cr_assert_eq(system(cmd), 0);
}

/* One timeout for all: Criterion 2.4.1's runner leaks 48 bytes (LeakSanitizer
 * fails the asan run) when one test sets its own .timeout, larger than the
 * suite's, while others run beside it under --jobs 2. */
TestSuite(rt_cache, .init = setup, .fini = teardown, .timeout = 60);

static const tsr_rt_cache_key_t key0 = {
    .source = "out[i] = a[i] * 2.0f + b[i];",
    .options = "--gpu-architecture=sm_90 -default-device",
    .arch = "sm_90",
    .driver_version = 12040,
};
static const char blob0[] =
    "\x7f"
    "ELF compiled operator \0 with a NUL and \xff bytes";

static tsr_rt_cache_t *open_ok(const char *path) {
  tsr_rt_cache_t *c = NULL;
  tsr_status_t st = tsr_rt_cache_open(path, &c);
  cr_assert_null(st, "%s", tsr_status_message(st));
  cr_assert_not_null(c);
  return c;
}

static void store_ok(tsr_rt_cache_t *c, const tsr_rt_cache_key_t *k, const void *b, size_t n) {
  tsr_status_t st = tsr_rt_cache_store(c, k, b, n);
  cr_assert_null(st, "%s", tsr_status_message(st));
}

static void expect_hit(tsr_rt_cache_t *c, const tsr_rt_cache_key_t *k, const void *b, size_t n) {
  void *got = NULL;
  size_t len = 99;
  cr_assert(tsr_rt_cache_lookup(c, k, &got, &len), "a miss where a hit was expected");
  cr_assert_not_null(got);
  cr_assert_eq(len, n, "%zu bytes, expected %zu", len, n);
  cr_assert_eq(memcmp(got, b, n), 0, "the bytes differ from what was stored");
  free(got);
}

static void expect_miss(tsr_rt_cache_t *c, const tsr_rt_cache_key_t *k, const char *what) {
  void *got = (void *)1;
  size_t len = 99;
  cr_assert(!tsr_rt_cache_lookup(c, k, &got, &len), "a hit for %s", what);
  cr_assert_null(got);
  cr_assert_eq(len, 0);
}

/* The name of the one entry in `d` (dot files aside), in out (64 bytes). */
static void only_entry(const char *d, char *out) {
  DIR *dd = opendir(d);
  cr_assert_not_null(dd);
  int n = 0;
  struct dirent *e;
  while ((e = readdir(dd)) != NULL) {
    if (e->d_name[0] == '.') continue;
    cr_assert_lt(strlen(e->d_name), 64, "entry name %s", e->d_name);
    memcpy(out, e->d_name, strlen(e->d_name) + 1);
    n++;
  }
  closedir(dd);
  cr_assert_eq(n, 1, "%d entries in %s, expected 1", n, d);
}

/* How many names `d` holds, dot files included (. and .. not). */
static int count_names(const char *d) {
  DIR *dd = opendir(d);
  cr_assert_not_null(dd);
  int n = 0;
  struct dirent *e;
  while ((e = readdir(dd)) != NULL)
    if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) n++;
  closedir(dd);
  return n;
}

static unsigned char *slurp(const char *path, size_t *out_len) {
  int fd = open(path, O_RDONLY);
  cr_assert_geq(fd, 0, "open %s: %s", path, strerror(errno));
  struct stat sb;
  cr_assert_eq(fstat(fd, &sb), 0);
  unsigned char *buf = malloc((size_t)sb.st_size + 1);
  cr_assert_eq(read(fd, buf, (size_t)sb.st_size), sb.st_size);
  close(fd);
  *out_len = (size_t)sb.st_size;
  return buf;
}

static void spit(const char *path, const void *buf, size_t len) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  cr_assert_geq(fd, 0, "open %s: %s", path, strerror(errno));
  cr_assert_eq(write(fd, buf, len), (ssize_t)len);
  close(fd);
}

static void expect_open_refused(const char *path, tsr_status_code_t code, const char *words) {
  tsr_rt_cache_t *c = (tsr_rt_cache_t *)1;
  tsr_status_t st = tsr_rt_cache_open(path, &c);
  cr_assert_not_null(st, "%s was accepted, expected '%s'", path ? path : "(default)", words);
  cr_assert_null(c);
  cr_assert_eq(tsr_status_code(st), code, "%s", tsr_status_message(st));
  cr_assert(strstr(tsr_status_message(st), words), "'%s' lacks '%s'", tsr_status_message(st), words);
  tsr_status_free(st);
}

/* ---- round trips -------------------------------------------------------------- */

Test(rt_cache, a_stored_blob_comes_back_whole_in_another_open) {
  umask(0); /* the modes below must not come from the umask */
  tsr_rt_cache_t *c = open_ok(dir);
  cr_assert_str_eq(tsr_rt_cache_dir(c), dir);
  expect_miss(c, &key0, "an empty cache");
  store_ok(c, &key0, blob0, sizeof blob0);
  expect_hit(c, &key0, blob0, sizeof blob0);
  tsr_rt_cache_close(c);

  c = open_ok(dir); /* as the next process would */
  expect_hit(c, &key0, blob0, sizeof blob0);
  char name[64], path[256];
  only_entry(dir, name);
  cr_assert_eq(strlen(name), 32, "entry name %s is not 128 bits of hex", name);
  cr_assert_eq(strspn(name, "0123456789abcdef"), 32, "entry name %s is not hex", name);
  snprintf(path, sizeof path, "%s/%s", dir, name);
  struct stat sb;
  cr_assert_eq(stat(path, &sb), 0);
  cr_assert_eq(sb.st_mode & 07777, 0600, "entry mode %o", sb.st_mode & 07777);
  cr_assert_eq(stat(dir, &sb), 0);
  cr_assert_eq(sb.st_mode & 07777, 0700, "directory mode %o", sb.st_mode & 07777);

  /* a second store replaces the first, leaving no temporary file */
  static const char blob1[] = "a longer, different compiled operator";
  store_ok(c, &key0, blob1, sizeof blob1);
  expect_hit(c, &key0, blob1, sizeof blob1);
  cr_assert_eq(count_names(dir), 1);
  tsr_rt_cache_close(c);
}

Test(rt_cache, each_changed_key_field_is_a_miss) {
  tsr_rt_cache_t *c = open_ok(dir);
  store_ok(c, &key0, blob0, sizeof blob0);
  tsr_rt_cache_key_t k;

  k = key0, k.source = "out[i] = a[i] * 3.0f + b[i];";
  expect_miss(c, &k, "another source");
  k = key0, k.source = "out[i] = a[i] * 2.0f + b[i]; ";
  expect_miss(c, &k, "a source one byte longer");
  k = key0, k.options = "--gpu-architecture=sm_90";
  expect_miss(c, &k, "other options");
  k = key0, k.options = "";
  expect_miss(c, &k, "no options");
  k = key0, k.arch = "sm_80";
  expect_miss(c, &k, "another arch");
  k = key0, k.driver_version = 12041;
  expect_miss(c, &k, "another driver version");
  k = key0, k.driver_version = -12040;
  expect_miss(c, &k, "a negated driver version");

  /* the same bytes, split between the fields differently */
  tsr_rt_cache_key_t a = {.source = "ab", .options = "c", .arch = "sm_90", .driver_version = 1};
  tsr_rt_cache_key_t b = {.source = "a", .options = "bc", .arch = "sm_90", .driver_version = 1};
  store_ok(c, &a, "A", 1);
  expect_miss(c, &b, "fields split at another place");
  store_ok(c, &b, "B", 1);
  expect_hit(c, &a, "A", 1);
  expect_hit(c, &b, "B", 1);

  /* no miss above removed the entry it did not match */
  expect_hit(c, &key0, blob0, sizeof blob0);
  tsr_rt_cache_close(c);
}

Test(rt_cache, an_empty_blob_round_trips) {
  tsr_rt_cache_t *c = open_ok(dir);
  store_ok(c, &key0, NULL, 0);
  void *got = NULL;
  size_t len = 99;
  cr_assert(tsr_rt_cache_lookup(c, &key0, &got, &len));
  cr_assert_not_null(got, "a hit must give a buffer to free, even an empty one");
  cr_assert_eq(len, 0);
  free(got);
  tsr_rt_cache_key_t empty = {.source = "", .options = "", .arch = "", .driver_version = 0};
  store_ok(c, &empty, "", 0);
  expect_hit(c, &empty, "", 0);
  expect_hit(c, &key0, "", 0);
  tsr_rt_cache_close(c);
}

Test(rt_cache, blobs_over_64_mib_and_keys_over_16_mib_are_refused) {
  tsr_rt_cache_t *c = open_ok(dir);
  size_t max = (size_t)64 << 20;
  unsigned char *big = malloc(max + 1);
  cr_assert_not_null(big);
  for (size_t i = 0; i < max + 1; i++) big[i] = (unsigned char)(i * 2654435761u >> 13);

  tsr_status_t st = tsr_rt_cache_store(c, &key0, big, max + 1);
  cr_assert_not_null(st, "a blob of 64 MiB + 1 was stored");
  cr_assert_eq(tsr_status_code(st), TSR_INVALID_ARGUMENT, "%s", tsr_status_message(st));
  cr_assert(strstr(tsr_status_message(st), "67108865"), "%s", tsr_status_message(st));
  tsr_status_free(st);
  cr_assert_eq(count_names(dir), 0, "a refused store left a file");

  store_ok(c, &key0, big, max); /* exactly the limit is fine */
  expect_hit(c, &key0, big, max);
  free(big);

  tsr_rt_cache_key_t k = key0;
  k.arch = NULL;
  st = tsr_rt_cache_store(c, &k, "x", 1);
  cr_assert_eq(tsr_status_code(st), TSR_INVALID_ARGUMENT, "%s", tsr_status_message(st));
  cr_assert(strstr(tsr_status_message(st), "arch"), "%s", tsr_status_message(st));
  tsr_status_free(st);
  expect_miss(c, &k, "a key without arch");
  size_t key_max = (size_t)16 << 20;
  char *src = malloc(key_max + 1);
  cr_assert_not_null(src);
  memset(src, 'x', key_max - 10);
  src[key_max - 10] = '\0';
  k = key0, k.source = src, k.options = "", k.arch = "0123456789"; /* exactly 16 MiB */
  store_ok(c, &k, "big key", 7);
  expect_hit(c, &k, "big key", 7);
  k.arch = "0123456789a";
  st = tsr_rt_cache_store(c, &k, "x", 1);
  cr_assert_eq(tsr_status_code(st), TSR_INVALID_ARGUMENT, "%s", tsr_status_message(st));
  cr_assert(strstr(tsr_status_message(st), "over 16 MiB"), "%s", tsr_status_message(st));
  tsr_status_free(st);
  expect_miss(c, &k, "a key over the limit");
  free(src);
  st = tsr_rt_cache_store(c, &key0, NULL, 5);
  cr_assert_eq(tsr_status_code(st), TSR_INVALID_ARGUMENT, "%s", tsr_status_message(st));
  tsr_status_free(st);
  cr_assert_eq(count_names(dir), 2);
  tsr_rt_cache_close(c);
}

/* ---- damage ------------------------------------------------------------------- */

/* Stores key0's blob as the only entry; its path and a copy of its bytes. */
static unsigned char *store_entry0(tsr_rt_cache_t *c, char path[256], size_t *len) {
  store_ok(c, &key0, blob0, sizeof blob0);
  char name[64];
  only_entry(dir, name);
  snprintf(path, 256, "%s/%s", dir, name);
  return slurp(path, len);
}

Test(rt_cache, a_flipped_byte_anywhere_is_a_miss_and_the_file_goes) {
  tsr_rt_cache_t *c = open_ok(dir);
  char path[256];
  size_t len;
  unsigned char *good = store_entry0(c, path, &len);
  cr_assert_gt(len, 56 + sizeof blob0, "the file is too short to hold header, key and blob");

  static const unsigned char flips[] = {0x01, 0x80, 0xff};
  for (size_t f = 0; f < sizeof flips; f++) {
    for (size_t i = 0; i < len; i++) {
      good[i] ^= flips[f];
      spit(path, good, len);
      good[i] ^= flips[f];
      expect_miss(c, &key0, "a damaged entry");
      cr_assert_eq(access(path, F_OK), -1, "byte %zu ^ %#x: the damaged file is still there", i, flips[f]);
    }
  }
  /* the untouched bytes are still a hit (the loop did not miss for another reason) */
  spit(path, good, len);
  expect_hit(c, &key0, blob0, sizeof blob0);
  free(good);
  tsr_rt_cache_close(c);
}

Test(rt_cache, a_truncated_or_extended_file_is_a_miss) {
  tsr_rt_cache_t *c = open_ok(dir);
  char path[256];
  size_t len;
  unsigned char *good = store_entry0(c, path, &len);
  for (size_t n = 0; n < len; n++) {
    spit(path, good, n);
    expect_miss(c, &key0, "a truncated entry");
    cr_assert_eq(access(path, F_OK), -1, "cut to %zu bytes: the file is still there", n);
  }
  unsigned char *longer = malloc(len + 1);
  memcpy(longer, good, len);
  longer[len] = 0;
  spit(path, longer, len + 1);
  expect_miss(c, &key0, "an entry with a byte after its blob");
  cr_assert_eq(access(path, F_OK), -1);
  free(longer);
  spit(path, good, len);
  expect_hit(c, &key0, blob0, sizeof blob0);
  free(good);
  tsr_rt_cache_close(c);
}

Test(rt_cache, a_whole_entry_of_another_key_under_this_name_is_a_miss) {
  tsr_rt_cache_t *c = open_ok(dir);
  tsr_rt_cache_key_t other = key0;
  other.arch = "sm_80";
  char name0[64], name1[64], path0[256], path1[256];
  store_ok(c, &key0, blob0, sizeof blob0);
  only_entry(dir, name0);
  snprintf(path0, sizeof path0, "%s/%s", dir, name0);
  cr_assert_eq(unlink(path0), 0);
  store_ok(c, &other, "other code", 10);
  only_entry(dir, name1);
  snprintf(path1, sizeof path1, "%s/%s", dir, name1);
  cr_assert_str_neq(name0, name1);

  /* what a hash collision would leave: other's whole entry under key0's name */
  cr_assert_eq(rename(path1, path0), 0);
  expect_miss(c, &key0, "another key's entry");
  expect_miss(c, &other, "an entry under the wrong name");
  /* it was whole, so it was not taken for damage: back in place it hits */
  cr_assert_eq(rename(path0, path1), 0);
  expect_hit(c, &other, "other code", 10);
  tsr_rt_cache_close(c);
}

Test(rt_cache, a_damaged_entry_is_logged_once_at_debug) {
  char logpath[128];
  snprintf(logpath, sizeof logpath, "%s/log", root);
  int logfd = open(logpath, O_WRONLY | O_CREAT | O_APPEND, 0600);
  cr_assert_geq(logfd, 0);
  tsr_log_init("test", TSR_LOG_DEBUG);
  tsr_log_set_fd(logfd);

  tsr_rt_cache_t *c = open_ok(dir);
  store_ok(c, &key0, blob0, sizeof blob0);
  char name[64], path[256];
  only_entry(dir, name);
  snprintf(path, sizeof path, "%s/%s", dir, name);
  size_t len;
  unsigned char *bytes = slurp(path, &len);
  bytes[len - 1] ^= 0x10;
  spit(path, bytes, len);
  free(bytes);
  for (int i = 0; i < 3; i++) expect_miss(c, &key0, "a damaged entry");
  tsr_log_set_fd(2);
  close(logfd);

  size_t n;
  char *log = (char *)slurp(logpath, &n);
  log[n] = '\0';
  int lines = 0;
  for (char *p = log; (p = strstr(p, name)) != NULL; p++) lines++;
  cr_assert_eq(lines, 1, "the damaged entry was logged %d times:\n%s", lines, log);
  cr_assert(strstr(log, "debug: ") && strstr(log, "checksum"), "%s", log);
  free(log);
  tsr_rt_cache_close(c);
}

/* ---- the directory ------------------------------------------------------------ */

Test(rt_cache, the_default_dir_comes_from_xdg_cache_home) {
  char xdg[128], want[160];
  snprintf(xdg, sizeof xdg, "%s/xdg/", root); /* a trailing slash, as users write it */
  snprintf(want, sizeof want, "%s/xdg/tessera", root);
  cr_assert_eq(setenv("XDG_CACHE_HOME", xdg, 1), 0);
  cr_assert_eq(setenv("HOME", "/nonexistent-home", 1), 0);
  tsr_rt_cache_t *c = open_ok(NULL);
  cr_assert_str_eq(tsr_rt_cache_dir(c), want);
  struct stat sb;
  cr_assert_eq(stat(want, &sb), 0, "%s was not created", want);
  cr_assert(S_ISDIR(sb.st_mode));
  cr_assert_eq(sb.st_mode & 0077, 0, "mode %o", sb.st_mode & 07777);
  store_ok(c, &key0, blob0, sizeof blob0);
  only_entry(want, (char[64]){0});
  tsr_rt_cache_close(c);
}

Test(rt_cache, the_default_dir_comes_from_home_without_xdg) {
  char home[128], want[160];
  snprintf(home, sizeof home, "%s/home", root);
  snprintf(want, sizeof want, "%s/home/.cache/tessera", root);
  cr_assert_eq(mkdir(home, 0700), 0);
  cr_assert_eq(unsetenv("XDG_CACHE_HOME"), 0);
  cr_assert_eq(setenv("HOME", home, 1), 0);
  tsr_rt_cache_t *c = open_ok(NULL);
  cr_assert_str_eq(tsr_rt_cache_dir(c), want);
  struct stat sb;
  cr_assert_eq(stat(want, &sb), 0, "%s was not created", want);
  cr_assert_eq(sb.st_mode & 0077, 0, "mode %o", sb.st_mode & 07777);
  tsr_rt_cache_close(c);

  cr_assert_eq(setenv("XDG_CACHE_HOME", "", 1), 0); /* empty counts as unset */
  c = open_ok(NULL);
  cr_assert_str_eq(tsr_rt_cache_dir(c), want);
  tsr_rt_cache_close(c);
}

Test(rt_cache, a_relative_xdg_cache_home_is_ignored) {
  char home[128], want[160];
  snprintf(home, sizeof home, "%s/home", root);
  snprintf(want, sizeof want, "%s/home/.cache/tessera", root);
  cr_assert_eq(chdir(root), 0); /* where a relative path would land */
  cr_assert_eq(setenv("XDG_CACHE_HOME", "rel/cache", 1), 0);
  cr_assert_eq(setenv("HOME", home, 1), 0);
  tsr_rt_cache_t *c = open_ok(NULL);
  cr_assert_str_eq(tsr_rt_cache_dir(c), want);
  tsr_rt_cache_close(c);
  char rel[160];
  snprintf(rel, sizeof rel, "%s/rel", root);
  cr_assert_eq(access(rel, F_OK), -1, "a directory was made under the relative path");

  /* with no usable HOME either, there is no default: a clear error */
  cr_assert_eq(setenv("HOME", "relative-home", 1), 0);
  expect_open_refused(NULL, TSR_FAILED_PRECONDITION, "XDG_CACHE_HOME");
  cr_assert_eq(unsetenv("HOME"), 0);
  expect_open_refused(NULL, TSR_FAILED_PRECONDITION, "HOME");
}

Test(rt_cache, unsafe_dirs_are_refused) {
  char real[160], link[160], file[160];
  snprintf(real, sizeof real, "%s/real", root);
  snprintf(link, sizeof link, "%s/link", root);
  snprintf(file, sizeof file, "%s/file", root);
  cr_assert_eq(mkdir(real, 0700), 0);
  cr_assert_eq(symlink(real, link), 0);
  expect_open_refused(link, TSR_FAILED_PRECONDITION, "symbolic link");

  cr_assert_eq(chmod(real, 0770), 0);
  expect_open_refused(real, TSR_FAILED_PRECONDITION, "writable by group or others");
  cr_assert_eq(chmod(real, 0702), 0);
  expect_open_refused(real, TSR_FAILED_PRECONDITION, "writable by group or others");
  cr_assert_eq(chmod(real, 0700), 0);
  tsr_rt_cache_close(open_ok(real)); /* the same directory, made private, is fine */

  spit(file, "x", 1);
  expect_open_refused(file, TSR_FAILED_PRECONDITION, "not a directory");
  expect_open_refused("relative/dir", TSR_INVALID_ARGUMENT, "absolute");

  /* the default path is held to the same rules */
  char xdg[160], xdg_tessera[200];
  snprintf(xdg, sizeof xdg, "%s/xdg", root);
  snprintf(xdg_tessera, sizeof xdg_tessera, "%s/xdg/tessera", root);
  cr_assert_eq(mkdir(xdg, 0700), 0);
  cr_assert_eq(symlink(real, xdg_tessera), 0);
  cr_assert_eq(setenv("XDG_CACHE_HOME", xdg, 1), 0);
  expect_open_refused(NULL, TSR_FAILED_PRECONDITION, "symbolic link");
}

Test(rt_cache, a_dir_of_another_user_is_refused) {
  if (geteuid() != 0) cr_skip_test("needs root to chown");
  cr_assert_eq(mkdir(dir, 0700), 0);
  cr_assert_eq(chown(dir, 65534, 65534), 0);
  expect_open_refused(dir, TSR_FAILED_PRECONDITION, "owned by another user");
}

Test(rt_cache, open_removes_stale_temp_files_only) {
  cr_assert_eq(mkdir(dir, 0700), 0);
  char stale[256], fresh[256], entry[256];
  snprintf(stale, sizeof stale, "%s/.tmp-0123456789abcdef0123456789abcdef-99999-0", dir);
  snprintf(fresh, sizeof fresh, "%s/.tmp-0123456789abcdef0123456789abcdef-99999-1", dir);
  snprintf(entry, sizeof entry, "%s/0123456789abcdef0123456789abcdef", dir);
  spit(stale, "half an entry", 13);
  spit(fresh, "a store in progress", 19);
  spit(entry, "an old entry", 12);
  struct timespec old[2] = {{.tv_sec = time(NULL) - 120}, {.tv_sec = time(NULL) - 120}};
  cr_assert_eq(utimensat(AT_FDCWD, stale, old, 0), 0);
  cr_assert_eq(utimensat(AT_FDCWD, entry, old, 0), 0);
  tsr_rt_cache_t *c = open_ok(dir);
  cr_assert_eq(access(stale, F_OK), -1, "a temp file two minutes old was kept");
  cr_assert_eq(access(fresh, F_OK), 0, "a temp file of a store in progress was removed");
  cr_assert_eq(access(entry, F_OK), 0, "an entry was removed for its age");
  tsr_rt_cache_close(c);
}

/* ---- processes at once -------------------------------------------------------- */

#define RACE_STORES 200

static unsigned char *pattern(size_t n, unsigned seed) {
  unsigned char *b = malloc(n);
  cr_assert_not_null(b);
  for (size_t i = 0; i < n; i++) b[i] = (unsigned char)((i * 2654435761u + seed) >> 11);
  return b;
}

/* Exits 0 when all its stores succeed. */
static void race_writer(const void *blob, size_t len) {
  tsr_rt_cache_t *c = NULL;
  tsr_status_t st = tsr_rt_cache_open(dir, &c);
  for (int i = 0; !st && i < RACE_STORES; i++) st = tsr_rt_cache_store(c, &key0, blob, len);
  if (st) fprintf(stderr, "writer %d: %s\n", (int)getpid(), tsr_status_message(st));
  _exit(st ? 1 : 0);
}

/* Looks up until `done` reads EOF (both writers gone); writes its count of
 * lookups to `report`. Exits 1 on a hit that is neither blob, 2 on a miss:
 * the entry was there before the writers started, and a rename leaves the
 * name on one whole file or the other at every instant. */
static void race_reader(int done, int report, const void *a, size_t alen, const void *b, size_t blen) {
  tsr_rt_cache_t *c = NULL;
  if (tsr_rt_cache_open(dir, &c)) _exit(3);
  long lookups = 0;
  for (;;) {
    void *got;
    size_t len;
    if (!tsr_rt_cache_lookup(c, &key0, &got, &len)) _exit(2);
    bool ok = (len == alen && memcmp(got, a, alen) == 0) || (len == blen && memcmp(got, b, blen) == 0);
    free(got);
    if (!ok) _exit(1);
    lookups++;
    struct pollfd p = {.fd = done, .events = POLLIN};
    if (poll(&p, 1, 0) == 1) break; /* EOF: every write end is closed */
  }
  ssize_t w = write(report, &lookups, sizeof lookups);
  _exit(w == (ssize_t)sizeof lookups ? 0 : 4);
}

Test(rt_cache, two_processes_storing_one_key_leave_one_whole_blob) {
  size_t alen = 300000, blen = 200001; /* lengths differ too */
  unsigned char *a = pattern(alen, 1), *b = pattern(blen, 77);
  tsr_rt_cache_t *c = open_ok(dir);
  store_ok(c, &key0, a, alen);

  int done[2], report[2];
  cr_assert_eq(pipe(done), 0);
  cr_assert_eq(pipe(report), 0);
  fflush(NULL);
  pid_t reader = fork();
  cr_assert_geq(reader, 0);
  if (reader == 0) {
    close(done[1]);
    close(report[0]);
    race_reader(done[0], report[1], a, alen, b, blen);
  }
  close(report[1]);
  pid_t writers[2];
  for (int i = 0; i < 2; i++) {
    writers[i] = fork();
    cr_assert_geq(writers[i], 0);
    if (writers[i] == 0) {
      close(done[0]);
      race_writer(i ? b : a, i ? blen : alen); /* keeps done[1] open until it exits */
    }
  }
  close(done[0]);
  close(done[1]);

  for (int i = 0; i < 2; i++) {
    int ws;
    cr_assert_eq(waitpid(writers[i], &ws, 0), writers[i]);
    cr_assert(WIFEXITED(ws) && WEXITSTATUS(ws) == 0, "writer %d failed (status %#x)", i, ws);
  }
  int ws;
  cr_assert_eq(waitpid(reader, &ws, 0), reader);
  cr_assert(WIFEXITED(ws), "the reader died (status %#x)", ws);
  cr_assert_neq(WEXITSTATUS(ws), 1, "the reader got bytes that are neither blob");
  cr_assert_neq(WEXITSTATUS(ws), 2, "the reader missed while the entry was being replaced");
  cr_assert_eq(WEXITSTATUS(ws), 0, "the reader failed (exit %d)", WEXITSTATUS(ws));
  long lookups = 0;
  cr_assert_eq(read(report[0], &lookups, sizeof lookups), (ssize_t)sizeof lookups);
  close(report[0]);
  cr_assert_gt(lookups, 0);

  /* the end state: one of the two, whole, and no temporary file left */
  void *got;
  size_t len;
  cr_assert(tsr_rt_cache_lookup(c, &key0, &got, &len));
  cr_assert((len == alen && memcmp(got, a, alen) == 0) || (len == blen && memcmp(got, b, blen) == 0));
  free(got);
  cr_assert_eq(count_names(dir), 1);
  cr_log_info("%ld lookups during %d stores", lookups, 2 * RACE_STORES);
  tsr_rt_cache_close(c);
  free(a);
  free(b);
}
