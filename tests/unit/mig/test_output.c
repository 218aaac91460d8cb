/* Plans as JSON: written through base/json's writer, read back by
 * tsr_mig_plan_read_json, names escaped, doubles exact. */
#include "base/json.h"
#include "common.h"
#include "base/json.h"

/* The JSON text of one double. */
static const char *double_text(double v) {
  static char buf[64];
  tsr_json_writer_t w = {0};
  tsr_json_double(&w, v);
  cr_assert(!w.failed);
  snprintf(buf, sizeof(buf), "%s", w.buf);
  tsr_json_writer_free(&w);
  return buf;
}

Test(mig_json, doubles_are_short_and_exact) {
  cr_assert_str_eq(double_text(0.25), "0.25");
  cr_assert_str_eq(double_text(12.61), "12.61");
  cr_assert_str_eq(double_text(0), "0");
  cr_assert_str_eq(double_text(-1), "-1");
  cr_assert_str_eq(double_text(1e300), "1e+300");
  cr_assert_str_eq(double_text(INFINITY), "null");
  cr_assert_str_eq(double_text(NAN), "null");
  double hard[] = {0.1 + 0.2, 1.0 / 3, 5e-324, 1.7976931348623157e308, 0.42000000000000004};
  for (size_t i = 0; i < sizeof(hard) / sizeof(hard[0]); i++)
    cr_assert_eq(strtod(double_text(hard[i]), NULL), hard[i], "%s", double_text(hard[i]));
}

Test(mig_json, plan_round_trip_with_awkward_names) {
  tsr_mig_model_t m = mig_model("A30");
  const char *names[] = {"say \"hi\" \\ there", "naïve ünïcødé ✓", "tab\there", "ctl\x01"};
  tsr_mig_tasks_t *t;
  cr_assert_null(tsr_mig_tasks_create(&m, 4, &t));
  for (int i = 0; i < 4; i++) {
    cr_assert_null(tsr_mig_tasks_set_name(t, i, names[i]));
    cr_assert_null(tsr_mig_tasks_set_time(t, i, 1, 0.1 * (i + 1)));
    cr_assert_null(tsr_mig_tasks_set_time(t, i, 2, 0.07 * (i + 1)));
  }
  cr_assert_null(tsr_mig_tasks_set_command(t, 1, "echo \"$X\" \\n"));
  tsr_mig_plan_t *p;
  cr_assert_null(tsr_mig_far_plan(&m, t, NULL, &p));
  char path[] = "/tmp/tsr_mig_json_XXXXXX";
  int fd = mkstemp(path);
  cr_assert_geq(fd, 0);
  FILE *f = fdopen(fd, "w+");
  cr_assert_null(tsr_mig_plan_write_json(p, t, f));
  /* what was written is one strict JSON object */
  rewind(f);
  char text[8192];
  size_t len = fread(text, 1, sizeof(text) - 1, f);
  fclose(f);
  text[len] = 0;
  tsr_json_member_t members[16];
  size_t count;
  tsr_json_error_t err;
  cr_assert(tsr_json_scan_object(text, len, members, 16, &count, &err), "%s at %zu: %s", err.message, err.offset, text);
  /* and reads back as the same plan */
  tsr_mig_plan_t *q;
  tsr_mig_tasks_t *u;
  tsr_status_t st = tsr_mig_plan_read_json(path, &q, &u);
  unlink(path);
  cr_assert_null(st, "%s", tsr_status_message(st));
  mig_assert_valid(q, u);
  cr_assert_eq(u->n, 4);
  for (int i = 0; i < 4; i++) {
    cr_assert_str_eq(u->names[i], names[i]);
    cr_assert_eq(q->placements[i].start, p->placements[i].start, "times are exact");
    cr_assert_eq(q->placements[i].end, p->placements[i].end);
  }
  cr_assert_str_eq(u->commands[1], "echo \"$X\" \\n");
  cr_assert_null(u->commands[0]);
  cr_assert_eq(q->makespan, p->makespan);
  tsr_mig_plan_free(q);
  tsr_mig_tasks_free(u);
  tsr_mig_plan_free(p);
  tsr_mig_tasks_free(t);
}

/* Reads `text` as a plan file; the status (NULL: read). */
TSR_MUST_USE static tsr_status_t read_text(const char *text) {
  char path[] = "/tmp/tsr_mig_bad_XXXXXX";
  int fd = mkstemp(path);
  cr_assert_geq(fd, 0);
  cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
  close(fd);
  tsr_mig_plan_t *p = (void *)1;
  tsr_mig_tasks_t *t = (void *)1;
  tsr_status_t st = tsr_mig_plan_read_json(path, &p, &t);
  unlink(path);
  if (st) cr_assert(p == NULL && t == NULL, "a refusal hands out nothing");
  tsr_mig_plan_free(p);
  tsr_mig_tasks_free(t);
  return st;
}

Test(mig_json, bad_plan_files_are_refused_with_a_reason) {
  const char *good_instance =
      "{\"node\":0,\"create_start_s\":0,\"create_end_s\":1,\"destroy_start_s\":null,"
      "\"destroy_end_s\":null,\"batch\":0}";
  char buf[1024];
  struct {
    const char *text, *says;
  } bad[] = {
      {"", "the plan"},
      {"not json", "the plan"},
      {"[1, 2]", "the plan"},
      {"{\"gpu\":\"A30\",\"tasks\":[]}", "not a tessera MIG plan"},
      {"{\"gpu\":7,\"instances\":[],\"tasks\":[]}", "not a tessera MIG plan"},
      {"{\"gpu\":\"A30\",\"instances\":{},\"tasks\":[]}", "not a tessera MIG plan"},
      {"{\"gpu\":\"no-such-gpu\",\"instances\":[],\"tasks\":[]}", "no-such-gpu"},
      {"{\"gpu\":\"A30\",\"instances\":[7],\"tasks\":[]}", "instance 0"},
      {"{\"gpu\":\"A30\",\"instances\":[{\"node\":-1}],\"tasks\":[]}", "bad node"},
      {"{\"gpu\":\"A30\",\"instances\":[{\"node\":99999}],\"tasks\":[]}", "bad node"},
      {"{\"gpu\":\"A30\",\"instances\":[{\"node\":0.5}],\"tasks\":[]}", "bad node"},
      {"{\"gpu\":\"A30\",\"gpu\":\"A30\",\"instances\":[],\"tasks\":[]}", "the plan"},
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    tsr_status_t st = read_text(bad[i].text);
    cr_assert_not_null(st, "read: %s", bad[i].text);
    cr_assert(strstr(tsr_status_message(st), bad[i].says), "'%s' says '%s', not '%s'", bad[i].text,
              tsr_status_message(st), bad[i].says);
    tsr_status_free(st);
  }
  /* tasks that do not hold: each names the task */
  const char *tasks[] = {
      "[7]",
      "[{\"name\":1,\"instance\":0,\"size\":1,\"start_s\":0,\"end_s\":1}]",
      "[{\"name\":\"a\",\"instance\":5,\"size\":1,\"start_s\":0,\"end_s\":1}]",
      "[{\"name\":\"a\",\"instance\":0,\"size\":3,\"start_s\":0,\"end_s\":1}]",
      "[{\"name\":\"a\",\"instance\":0,\"size\":1,\"start_s\":\"0\",\"end_s\":1}]",
      "[{\"name\":\"a\",\"instance\":0,\"size\":1,\"start_s\":0}]",
      "[{\"name\":\"a\",\"command\":[],\"instance\":0,\"size\":1,\"start_s\":0,\"end_s\":1}]",
  };
  for (size_t i = 0; i < sizeof(tasks) / sizeof(tasks[0]); i++) {
    snprintf(buf, sizeof(buf), "{\"gpu\":\"A30\",\"instances\":[%s],\"tasks\":%s}", good_instance, tasks[i]);
    tsr_status_t st = read_text(buf);
    cr_assert_not_null(st, "read: %s", buf);
    cr_assert(strstr(tsr_status_message(st), "task 0 is malformed"), "%s: %s", tasks[i], tsr_status_message(st));
    tsr_status_free(st);
  }
}

Test(mig_json, a_long_command_reads_back_whole) {
  static char text[40000], cmd[20001];
  memset(cmd, 'x', sizeof(cmd) - 1);
  snprintf(text, sizeof(text),
           "{\"gpu\":\"A30\",\"instances\":[{\"node\":0,\"create_start_s\":0,\"create_end_s\":1,"
           "\"destroy_start_s\":null,\"destroy_end_s\":null,\"batch\":0}],\"tasks\":[{\"name\":\"a\","
           "\"command\":\"%s\",\"instance\":0,\"size\":4,\"start_s\":1,\"end_s\":2,\"batch\":0}]}",
           cmd);
  char path[] = "/tmp/tsr_mig_long_XXXXXX";
  int fd = mkstemp(path);
  cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
  close(fd);
  tsr_mig_plan_t *p;
  tsr_mig_tasks_t *t;
  tsr_status_t st = tsr_mig_plan_read_json(path, &p, &t);
  unlink(path);
  cr_assert_null(st, "%s", tsr_status_message(st));
  cr_assert_eq(strlen(t->commands[0]), sizeof(cmd) - 1);
  cr_assert_str_eq(t->names[0], "a");
  tsr_mig_plan_free(p);
  tsr_mig_tasks_free(t);
}

/* The SVG's time axis: one tick a step from 0 to the makespan, labelled with
 * its time (the step 1, 2 or 5 times a power of ten, at most 10 steps). */
static void svg_axis(double makespan, const char *want) {
  tsr_mig_plan_t p = {.model = mig_model("A30"), .makespan = makespan};
  tsr_mig_tasks_t *t;
  cr_assert_null(tsr_mig_tasks_create(&p.model, 0, &t));
  char *svg = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&svg, &len);
  cr_assert_null(tsr_mig_plan_write_svg(&p, t, f));
  fclose(f);
  char got[512] = "";
  for (const char *s = svg; (s = strstr(s, "text-anchor=\"middle\">")) != NULL;) {
    s += strlen("text-anchor=\"middle\">");
    snprintf(got + strlen(got), sizeof(got) - strlen(got), "%s%.*s", got[0] ? " " : "", (int)strcspn(s, "<"), s);
  }
  cr_assert_str_eq(got, want, "makespan %g", makespan);
  free(svg);
  tsr_mig_tasks_free(t);
}

Test(mig_svg, axis_ticks_from_zero_to_the_makespan) {
  svg_axis(7.3, "0 1 2 3 4 5 6 7");
  svg_axis(0.3, "0 0.05 0.1 0.15 0.2 0.25 0.3");
  svg_axis(0.7, "0 0.1 0.2 0.3 0.4 0.5 0.6 0.7");
  svg_axis(123.4, "0 20 40 60 80 100 120");
  svg_axis(0, "0 0.1 0.2 0.3 0.4 0.5 0.6 0.7 0.8 0.9 1"); /* an empty plan spans 1 s */
}
