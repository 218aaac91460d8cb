/* base/fs: private directories and regular-file opens that a privileged
 * daemon cannot be tricked by. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/fs.h"

static char dir[64];

static void setup(void) {
  snprintf(dir, sizeof dir, "/tmp/tsr-fs-XXXXXX");
  cr_assert_not_null(mkdtemp(dir));
}

static void teardown(void) {
  char cmd[256];
  snprintf(cmd, sizeof cmd, "chmod -R u+rwx %s; rm -rf %s", dir, dir);
  cr_assert_eq(system(cmd), 0);
}

TestSuite(fs, .init = setup, .fini = teardown, .timeout = 10);

static void expect_refused(tsr_status_t st, const char *words) {
  cr_assert_not_null(st, "accepted, expected '%s'", words);
  cr_assert_eq(tsr_status_code(st), TSR_FAILED_PRECONDITION, "%s", tsr_status_message(st));
  cr_assert(strstr(tsr_status_message(st), words), "'%s' lacks '%s'", tsr_status_message(st), words);
  tsr_status_free(st);
}

Test(fs, a_private_dir_under_tmp_passes) {
  cr_assert_null(tsr_fs_check_private_dir(dir, "state directory"));
  char sub[128];
  snprintf(sub, sizeof sub, "%s/a/b/c", dir);
  tsr_status_t st = tsr_fs_make_private_dir(sub, 0755, "state directory");
  cr_assert_null(st, "%s", tsr_status_message(st));
  struct stat s;
  cr_assert_eq(stat(sub, &s), 0);
  cr_assert(S_ISDIR(s.st_mode));
}

Test(fs, group_or_other_writable_dirs_are_refused) {
  cr_assert_eq(chmod(dir, 0770), 0);
  expect_refused(tsr_fs_check_private_dir(dir, "state directory"), "writable by group or others");
  cr_assert_eq(chmod(dir, 0757), 0);
  expect_refused(tsr_fs_check_private_dir(dir, "state directory"), "writable by group or others");
}

Test(fs, nothing_is_made_inside_a_parent_others_can_write) {
  cr_assert_eq(chmod(dir, 0777), 0);
  char sub[128];
  snprintf(sub, sizeof sub, "%s/state", dir);
  expect_refused(tsr_fs_make_private_dir(sub, 0755, "state directory"), "parent");
  cr_assert_eq(access(sub, F_OK), -1, "the directory was made anyway");
  cr_assert_eq(chmod(dir, 01777), 0); /* sticky, like /tmp: fine */
  cr_assert_null(tsr_fs_make_private_dir(sub, 0755, "state directory"));
}

Test(fs, a_symlinked_dir_is_refused) {
  char real[128], link[128];
  snprintf(real, sizeof real, "%s/real", dir);
  snprintf(link, sizeof link, "%s/link", dir);
  cr_assert_eq(mkdir(real, 0755), 0);
  cr_assert_eq(symlink(real, link), 0);
  expect_refused(tsr_fs_check_private_dir(link, "state directory"), "symbolic link");
}

Test(fs, a_dir_of_another_user_is_refused) {
  if (geteuid() != 0) cr_skip_test("needs root to chown");
  cr_assert_eq(chown(dir, 65534, 65534), 0);
  expect_refused(tsr_fs_check_private_dir(dir, "state directory"), "owned by another user");
}

Test(fs, relative_paths_are_refused) {
  tsr_status_t st = tsr_fs_check_private_dir("var/lib/x", "state directory");
  cr_assert_eq(tsr_status_code(st), TSR_INVALID_ARGUMENT);
  tsr_status_free(st);
}

Test(fs, open_regular_refuses_links_fifos_and_dirs_without_blocking) {
  int dfd = open(dir, O_RDONLY | O_DIRECTORY);
  FILE *f;
  char p[128];
  snprintf(p, sizeof p, "%s/file", dir);
  f = fopen(p, "w");
  fputs("hello\n", f);
  fclose(f);
  cr_assert_eq(symlinkat("file", dfd, "link"), 0);
  cr_assert_eq(mkfifoat(dfd, "fifo", 0600), 0);
  cr_assert_eq(mkdirat(dfd, "sub", 0700), 0);
  int fd = -1;
  expect_refused(tsr_fs_open_regular(dfd, "link", O_RDONLY, 0, &fd), "symbolic link");
  expect_refused(tsr_fs_open_regular(dfd, "fifo", O_RDONLY, 0, &fd), "not a regular file");
  expect_refused(tsr_fs_open_regular(dfd, "fifo", O_WRONLY, 0, &fd), "not a regular file");
  expect_refused(tsr_fs_open_regular(dfd, "sub", O_RDONLY, 0, &fd), "not a regular file");
  cr_assert_eq(fd, -1);
  cr_assert_null(tsr_fs_open_regular(dfd, "file", O_RDONLY, 0, &fd));
  cr_assert_geq(fd, 0);
  close(fd);
  char *text = NULL;
  size_t len = 0;
  cr_assert_null(tsr_fs_read_file(dfd, "file", 100, &text, &len));
  cr_assert_str_eq(text, "hello\n");
  cr_assert_eq(len, 6);
  free(text);
  tsr_status_t st = tsr_fs_read_file(dfd, "file", 3, &text, &len);
  cr_assert_eq(tsr_status_code(st), TSR_DATA_LOSS);
  cr_assert_null(text);
  tsr_status_free(st);
  close(dfd);
}

/* ---- tsr_fs_read_fd ------------------------------------------------------------- */

static int make_file(const char *name, size_t size) {
  char p[128];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  int fd = open(p, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  cr_assert_geq(fd, 0);
  for (size_t i = 0; i < size; i++) cr_assert_eq(write(fd, &"0123456789"[i % 10], 1), 1);
  return fd;
}

static void expect_too_big(tsr_status_t st, const char *words, const char *text, size_t len) {
  cr_assert_eq(tsr_status_code(st), TSR_DATA_LOSS, "%s", tsr_status_message(st));
  cr_assert(strstr(tsr_status_message(st), words), "'%s' lacks '%s'", tsr_status_message(st), words);
  cr_assert_null(text);
  cr_assert_eq(len, 0);
  tsr_status_free(st);
}

/* The limit is inclusive: a file of exactly `max` bytes is read whole, one
 * byte more is refused (never cut). */
Test(fs, read_fd_takes_exactly_max_bytes_and_refuses_one_more) {
  int fd = make_file("exact", 10000); /* past the first 4 KiB buffer */
  char *text = NULL;
  size_t len = 99;
  cr_assert_null(tsr_fs_read_fd(fd, 10000, &text, &len));
  cr_assert_eq(len, 10000);
  cr_assert_eq(strlen(text), 10000, "NUL-terminated");
  cr_assert_eq(text[9999], '9');
  free(text);
  len = 99;
  tsr_status_t st = tsr_fs_read_fd(fd, 9999, &text, &len);
  expect_too_big(st, "larger than 9999 bytes", text, len);
  close(fd);
  fd = make_file("empty", 0);
  cr_assert_null(tsr_fs_read_fd(fd, 0, &text, &len));
  cr_assert_eq(len, 0);
  cr_assert_str_eq(text, "");
  free(text);
  close(fd);
  /* tsr_fs_read_file reads through it: the same limit, the file named */
  int dfd = open(dir, O_RDONLY | O_DIRECTORY);
  fd = make_file("six", 6);
  close(fd);
  cr_assert_null(tsr_fs_read_file(dfd, "six", 6, &text, &len));
  cr_assert_str_eq(text, "012345");
  free(text);
  st = tsr_fs_read_file(dfd, "six", 5, &text, &len);
  expect_too_big(st, "six: larger than 5 bytes", text, len);
  close(dfd);
}

/* pread from 0: the descriptor's offset stays (sbatch reads its stdin
 * after the plugin has looked). */
Test(fs, read_fd_reads_from_the_start_and_leaves_the_offset) {
  int fd = make_file("offset", 20);
  cr_assert_eq(lseek(fd, 7, SEEK_SET), 7);
  char *text = NULL;
  size_t len = 0;
  cr_assert_null(tsr_fs_read_fd(fd, 100, &text, &len));
  cr_assert_str_eq(text, "01234567890123456789");
  cr_assert_eq(lseek(fd, 0, SEEK_CUR), 7);
  free(text);
  close(fd);
}

/* A file whose size says 0 (/proc's) is read to its end all the same,
 * and held to the limit. */
Test(fs, read_fd_does_not_trust_the_size) {
  int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
  cr_assert_geq(fd, 0);
  struct stat st;
  cr_assert_eq(fstat(fd, &st), 0);
  cr_assert_eq(st.st_size, 0);
  char *text = NULL;
  size_t len = 0;
  cr_assert_null(tsr_fs_read_fd(fd, 1 << 20, &text, &len));
  cr_assert_gt(len, 0);
  cr_assert_eq(text[len], '\0');
  cr_assert_eq(strlen(text) + 1 <= len, true, "argv[0] and its NUL: '%s'", text);
  free(text);
  size_t whole = len;
  cr_assert_null(tsr_fs_read_fd(fd, whole, &text, &len));
  cr_assert_eq(len, whole);
  free(text);
  tsr_status_t st2 = tsr_fs_read_fd(fd, whole - 1, &text, &len);
  cr_assert_eq(tsr_status_code(st2), TSR_DATA_LOSS, "%s", tsr_status_message(st2));
  cr_assert_null(text);
  tsr_status_free(st2);
  close(fd);
}

/* A pipe (sbatch's stdin from `cat job.sh |`), a directory: refused at
 * once, never waited on. */
Test(fs, read_fd_refuses_what_is_not_a_regular_file) {
  int p[2];
  cr_assert_eq(pipe(p), 0);
  char *text = NULL;
  size_t len = 0;
  expect_refused(tsr_fs_read_fd(p[0], 100, &text, &len), "not a regular file");
  cr_assert_null(text);
  close(p[0]);
  close(p[1]);
  int dfd = open(dir, O_RDONLY | O_DIRECTORY);
  expect_refused(tsr_fs_read_fd(dfd, 100, &text, &len), "not a regular file");
  close(dfd);
  tsr_status_t st = tsr_fs_read_fd(-1, 100, &text, &len);
  cr_assert_not_null(st, "a closed descriptor read");
  cr_assert_null(text);
  tsr_status_free(st);
}
