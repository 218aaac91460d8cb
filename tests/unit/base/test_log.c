#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"

/* Captures what tsr_log writes, through a pipe. */
static char *capture(void (*fn)(void)) {
  static char buf[8192];
  int p[2];
  cr_assert_eq(pipe(p), 0);
  tsr_log_set_fd(p[1]);
  fn();
  close(p[1]);
  ssize_t n = read(p[0], buf, sizeof buf - 1);
  close(p[0]);
  tsr_log_set_fd(2);
  buf[n > 0 ? n : 0] = '\0';
  return buf;
}

static void one_warning(void) {
  tsr_log_init("tesserad", TSR_LOG_INFO);
  tsr_log_warn("lease %d quarantined", 7);
}
static void filtered(void) {
  tsr_log_init("t", TSR_LOG_WARN);
  tsr_log_info("hidden");
  tsr_log_debug("hidden too");
  tsr_log_error("shown");
}
static void very_long(void) {
  tsr_log_init("t", TSR_LOG_DEBUG);
  char big[5000];
  memset(big, 'x', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  tsr_log_info("%s", big);
}

Test(log, line_format) {
  char *out = capture(one_warning);
  /* 2026-11-22T10:00:00.123Z tesserad[4242] warn: lease 7 quarantined\n */
  cr_assert_eq(strlen(out) > 30, true, "%s", out);
  cr_assert_eq(out[4], '-');
  cr_assert_eq(out[10], 'T');
  cr_assert_eq(out[23], 'Z');
  char want[64];
  snprintf(want, sizeof want, " tesserad[%d] warn: lease 7 quarantined\n", (int)getpid());
  cr_assert(strstr(out, want), "%s", out);
}

Test(log, levels_filter) {
  char *out = capture(filtered);
  cr_assert_null(strstr(out, "hidden"), "%s", out);
  cr_assert(strstr(out, "error: shown\n"), "%s", out);
}

Test(log, long_messages_are_cut_to_one_line) {
  char *out = capture(very_long);
  cr_assert_eq(strchr(out, '\n'), out + strlen(out) - 1, "exactly one line");
  cr_assert_lt(strlen(out), 2100);
}

Test(log, level_names) {
  cr_assert_eq(tsr_log_level_parse("error"), TSR_LOG_ERROR);
  cr_assert_eq(tsr_log_level_parse("debug"), TSR_LOG_DEBUG);
  cr_assert_eq(tsr_log_level_parse("loud"), -1);
  cr_assert_eq(tsr_log_level_parse(NULL), -1);
}
