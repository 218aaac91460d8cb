/* Models, partitions, reconfiguration times, task CSVs, the lower bound. */
#include "common.h"

Test(mig_model, trees_and_partitions) {
  tsr_mig_model_t a30 = mig_model("A30"), a100 = mig_model("a100");
  cr_assert_eq(a30.nslices, 4);
  cr_assert_eq(a100.nslices, 7);
  cr_assert_eq(a100.nsizes, 5);
  uint32_t sets[64];
  cr_assert_eq(tsr_mig_model_partitions(&a30, sets, 64), 5);
  cr_assert_eq(tsr_mig_model_partitions(&a100, sets, 64), 19); /* the paper's count */
  /* every partition covers the slices exactly once */
  int n = tsr_mig_model_partitions(&a100, sets, 64);
  for (int q = 0; q < n; q++) {
    uint32_t used = 0;
    for (int j = 0; j < a100.nnodes; j++)
      if (sets[q] >> j & 1u) {
        cr_assert_eq(used & a100.nodes[j].mask, 0);
        used |= a100.nodes[j].mask;
      }
    cr_assert_eq(used, 0x7Fu);
  }
  /* the 3-slice instance on slices 0-2 blocks slice 3 */
  uint32_t set;
  cr_assert_null(tsr_mig_model_parse_partition(&a100, "3,3", &set));
  char buf[32];
  tsr_mig_model_format_partition(&a100, set, buf, sizeof(buf));
  cr_assert_str_eq(buf, "3,3");
  cr_assert_null(tsr_mig_model_parse_partition(&a100, "4,2,1", &set));
  tsr_status_t st = tsr_mig_model_parse_partition(&a100, "2,4,1", &set);
  cr_assert_not_null(st);
  tsr_status_free(st);
  st = tsr_mig_model_parse_partition(&a30, "1,2,1", &set); /* no {1,2} instance */
  cr_assert_not_null(st);
  tsr_status_free(st);
  st = tsr_mig_model_get("V100", &a30);
  cr_assert_not_null(st);
  cr_assert(strstr(tsr_status_message(st), "V100"));
  tsr_status_free(st);
}

Test(mig_model, reconfig_times_from_csv) {
  tsr_mig_model_t h200 = mig_model("H200"), a100 = mig_model("A100");
  tsr_status_t st = tsr_mig_model_load_reconfig_csv(&a100, mig_data("reconfig_times.csv"));
  cr_assert_null(st, "%s", tsr_status_message(st));
  cr_assert_float_eq(a100.create_s[4], 0.24, 1e-12);
  cr_assert_float_eq(a100.destroy_s[2], 0.21, 1e-12);
  st = tsr_mig_model_load_reconfig_csv(&h200, mig_data("reconfig_times.csv"));
  cr_assert_null(st, "%s", tsr_status_message(st));
  cr_assert_float_eq(h200.create_s[4], 0.42, 1e-12); /* H100's, until measured */
  const char *bad = mig_tmp_csv("gpu,size,create_s,destroy_s\nA100,1,0.1,0.1\nA100,5,0.1,0.1\n");
  st = tsr_mig_model_load_reconfig_csv(&a100, bad);
  unlink(bad);
  cr_assert_not_null(st);
  cr_assert(strstr(tsr_status_message(st), ":3:"), "%s", tsr_status_message(st));
  tsr_status_free(st);
}

Test(mig_tasks, rodinia_long_form_loads) {
  for (int g = 0; g < 2; g++) {
    tsr_mig_model_t m = mig_model(g ? "A30" : "A100");
    tsr_mig_tasks_t *t;
    tsr_status_t st = tsr_mig_tasks_load_csv(&m, mig_data("rodinia_times_mean.csv"), &t);
    cr_assert_null(st, "%s", tsr_status_message(st));
    cr_assert_eq(t->n, 16);
    for (int i = 0; i < t->n; i++)
      for (int k = 0; k < t->nsizes; k++) cr_assert(isfinite(tsr_mig_tasks_time(t, i, k)));
    tsr_mig_tasks_free(t);
  }
}

Test(mig_tasks, wide_form_and_bound) {
  tsr_mig_model_t m = mig_model("A30");
  const char *p = mig_tmp_csv(
      "name,1,2,4,command\n"
      "a,8,4.5,2,\"echo a, b\"\n"
      "b,3,,,\n");
  tsr_mig_tasks_t *t;
  tsr_status_t st = tsr_mig_tasks_load_csv(&m, p, &t);
  unlink(p);
  cr_assert_null(st, "%s", tsr_status_message(st));
  cr_assert_eq(t->n, 2);
  cr_assert_str_eq(t->commands[0], "echo a, b");
  cr_assert_null(t->commands[1]);
  cr_assert(isinf(tsr_mig_tasks_time(t, 1, 1)));
  /* bound: min(8, 9, 8) + 3 = 11 over 4 slices */
  cr_assert_float_eq(tsr_mig_lower_bound(&m, t), 11.0 / 4, 1e-12);
  tsr_mig_tasks_free(t);
}

Test(mig_tasks, errors_name_the_line) {
  mig_expect_csv_error("A100", "name,1,2\na,1,2\nb,1\n", ":3: expected 3 fields");
  mig_expect_csv_error("A100", "name,1,2\na,-1,2\n", ":2: negative time");
  mig_expect_csv_error("A100", "name,1,2\na,nan,2\n", ":2: time is NaN");
  mig_expect_csv_error("A100", "name,1,2\na,x,2\n", ":2: 'x' is not a number");
  mig_expect_csv_error("A100", "name,1,2\na,,\n", ":2: task 'a' is feasible on no size");
  mig_expect_csv_error("A30", "name,1,3\n", ":1: A30 has no instance size 3");
  mig_expect_csv_error("A100", "gpu,kernel,slices,seconds\nA100,k,1,1\nV100,k,1,1\n", ":3: unknown GPU model 'V100'");
  mig_expect_csv_error("A100", "gpu,kernel,slices,seconds\nA100,k,5,1\n", ":2: A100 has no instance size 5");
  mig_expect_csv_error("A100", "gpu,kernel,slices,seconds\nA100,k,1,1\nA100,k,1,2\n", ":3: second time for k");
  mig_expect_csv_error("A100", "gpu,kernel,slices,seconds\nA30,k,1,1\n", "no rows for GPU A100");
  mig_expect_csv_error("A100", "name,1\na,1\na,2\n", ":3: task 'a' listed twice");
  mig_expect_csv_error("A100", "name,1\n\"a,1\n", ":2: unterminated");
}

/* Loads `text` as reconfiguration times for the A100, expecting an error
 * that names "<file>:<line>:" and contains `needle`. */
static void reconfig_expect_error(const char *text, int line, const char *needle) {
  tsr_mig_model_t m = mig_model("A100");
  const char *path = mig_tmp_csv(text);
  char where[128];
  snprintf(where, sizeof(where), "%s:%d: ", path, line);
  tsr_status_t st = tsr_mig_model_load_reconfig_csv(&m, path);
  unlink(path);
  cr_assert_not_null(st, "expected an error with '%s'", needle);
  const char *msg = tsr_status_message(st);
  cr_assert(strstr(msg, where) == msg, "'%s' does not start with '%s'", msg, where);
  cr_assert(strstr(msg, needle), "'%s' lacks '%s'", msg, needle);
  tsr_status_free(st);
}

/* A line of `n` bytes: `head`, then `fill` repeated, then `tail` and a newline. */
static char *long_line(const char *head, char fill, size_t n, const char *tail) {
  char *s = malloc(n + strlen(head) + strlen(tail) + 2);
  cr_assert_not_null(s);
  strcpy(s, head);
  size_t len = strlen(s);
  memset(s + len, fill, n);
  strcpy(s + len + n, tail);
  strcat(s, "\n");
  return s;
}

Test(mig_model, reconfig_lines_of_any_length) {
  /* a 5000-byte comment was cut into 1024-byte pieces, the rest read as rows */
  char *comment = long_line("#", 'c', 5000, "");
  char text[6000];
  snprintf(text, sizeof(text), "gpu,size,create_s,destroy_s\n%sA100,1,0.5,0.6\n", comment);
  free(comment);
  tsr_mig_model_t m = mig_model("A100");
  const char *path = mig_tmp_csv(text);
  tsr_status_t st = tsr_mig_model_load_reconfig_csv(&m, path);
  unlink(path);
  cr_assert_null(st, "%s", tsr_status_message(st));
  cr_assert_float_eq(m.create_s[0], 0.5, 1e-12);
  cr_assert_float_eq(m.destroy_s[0], 0.6, 1e-12);
}

Test(mig_model, reconfig_errors_name_file_and_line) {
  /* the line after a long one keeps its number */
  char *comment = long_line("#", 'c', 3000, "");
  char text[4000];
  snprintf(text, sizeof(text), "gpu,size,create_s,destroy_s\n%sA100,9,0.1,0.1\n", comment);
  free(comment);
  reconfig_expect_error(text, 3, "A100 has no instance size 9");
  /* a long row is one row, and its error names it */
  char *row = long_line("A100,1,0.1,", '9', 2000, "x");
  snprintf(text, sizeof(text), "gpu,size,create_s,destroy_s\n%s", row);
  free(row);
  reconfig_expect_error(text, 2, "create/destroy times must be finite seconds");
  /* errors of the CSV splitter name the place too */
  reconfig_expect_error("gpu,size,create_s,destroy_s\nA100,\"1,0.1,0.1\n", 2, "unterminated quoted field");
  reconfig_expect_error("gpu,size,create_s,destroy_s\n1,2,3,4,5,6,7,8,9\n", 2, "more than 8 fields");
  reconfig_expect_error("gpu,size\n", 1, "expected header");
  reconfig_expect_error("gpu,size,create_s,destroy_s\nA100,1,0.1\n", 2, "expected 4 fields");
  reconfig_expect_error("# only a comment\n", 2, "ends before its header");
  reconfig_expect_error("", 1, "ends before its header");
}

Test(mig_tasks, long_rows_are_read_whole) {
  tsr_mig_model_t m = mig_model("A30");
  char *row = long_line("a,1,,,\"echo ", 'x', 4000, "\"");
  char text[4200];
  snprintf(text, sizeof(text), "name,1,2,4,command\n%sb,2,,,\n", row);
  free(row);
  const char *path = mig_tmp_csv(text);
  tsr_mig_tasks_t *t;
  tsr_status_t st = tsr_mig_tasks_load_csv(&m, path, &t);
  unlink(path);
  cr_assert_null(st, "%s", tsr_status_message(st));
  cr_assert_eq(t->n, 2);
  cr_assert_eq(strlen(t->commands[0]), 5 + 4000);
  tsr_mig_tasks_free(t);
}

/* Found by fuzz.mig_csv: a task named "#FD" was written bare and read back
 * as a comment; a size past int wrapped onto a real one (4294967297 as 1),
 * and one past int's range as a double was undefined behaviour. */
Test(mig_tasks, what_is_written_reads_back_and_sizes_do_not_wrap) {
  tsr_mig_model_t m = mig_model("A30");
  const char *p = mig_tmp_csv(
      "name,1,2,4\n"
      "  # a comment, indented\n"
      "\"#FD\",1,2,3\n"
      "\" padded \",4,,\n");
  tsr_mig_tasks_t *t;
  tsr_status_t st = tsr_mig_tasks_load_csv(&m, p, &t);
  unlink(p);
  cr_assert_null(st, "%s", tsr_status_message(st));
  cr_assert_eq(t->n, 2, "the comment is skipped, the quoted '#FD' is a task");
  cr_assert_str_eq(t->names[0], "#FD");
  cr_assert_str_eq(t->names[1], "padded", "cells are trimmed, quoted or not");
  char *text = NULL;
  size_t len = 0;
  FILE *out = open_memstream(&text, &len);
  cr_assert_null(tsr_mig_tasks_write_csv(t, out));
  fclose(out);
  p = mig_tmp_csv(text);
  tsr_mig_tasks_t *u;
  st = tsr_mig_tasks_load_csv(&m, p, &u);
  unlink(p);
  cr_assert_null(st, "%s: %s", tsr_status_message(st), text);
  cr_assert_eq(u->n, 2, "%s", text);
  cr_assert_str_eq(u->names[0], "#FD");
  cr_assert_str_eq(u->names[1], "padded");
  free(text);
  tsr_mig_tasks_free(u);
  tsr_mig_tasks_free(t);
  mig_expect_csv_error("A30", "name,4294967297\n", "has no instance size");
  mig_expect_csv_error("A30", "gpu,kernel,slices,seconds\nA30,k,4294967297,1\n", "has no instance size");
  reconfig_expect_error("gpu,size,create_s,destroy_s\nA30,1.3e26,1,1\n", 2, "bad size");
}
