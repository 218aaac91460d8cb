/* What `tessera lease create` and `tessera run` send for a new lease
 * (lease.c's tsr_cli_lease_create_request): the options checked before
 * anything is sent, and the request's members, --over-limit's included. */
#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/client.h"

/* lease.c links client.c, which reports through main.c's helpers (main.c
 * holds main()), and devices.c's device list: stood in for here. */
void tsr_cli_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
}
int tsr_cli_exit_for_code(const char *code) {
  return code && strcmp(code, "invalid_argument") == 0 ? TSR_EXIT_USAGE : TSR_EXIT_REFUSED;
}
int tsr_cli_exit_for_status(tsr_status_t st) {
  if (!st) return TSR_EXIT_OK;
  return tsr_status_code(st) == TSR_INVALID_ARGUMENT ? TSR_EXIT_USAGE : TSR_EXIT_INTERNAL;
}
int tsr_cli_fail(tsr_status_t st) {
  int rc = tsr_cli_exit_for_status(st);
  if (st) tsr_cli_error("%s", tsr_status_message(st));
  tsr_status_free(st);
  return rc;
}
static int devices_asked;
int tsr_cli_devices_call(const tsr_cli_globals_t *g, tsr_cli_reply_t *r, const tsr_json_member_t **out_list) {
  (void)g;
  (void)r;
  (void)out_list;
  devices_asked++;
  return TSR_EXIT_UNREACHABLE; /* no daemon here */
}

static const tsr_cli_globals_t globals = {0};
static tsr_json_writer_t w;

static int request(tsr_cli_lease_options_t o) {
  tsr_json_writer_reset(&w);
  if (!o.device) o.device = "0";
  if (!o.mem) o.mem = "10%";
  if (!o.dur) o.dur = "1h";
  return tsr_cli_lease_create_request(&globals, &o, &w);
}

static void fini(void) { tsr_json_writer_free(&w); }

Test(cli_lease_request, over_limit_is_sent_only_when_given, .fini = fini) {
  cr_assert_eq(request((tsr_cli_lease_options_t){0}), TSR_EXIT_OK);
  cr_assert_str_eq(w.buf,
                   "{\"op\":\"lease.create\",\"device\":0,\"fraction_ppm\":100000,"
                   "\"duration_ns\":3600000000000}");
  cr_assert_eq(request((tsr_cli_lease_options_t){.over_limit = "log"}), TSR_EXIT_OK);
  cr_assert(strstr(w.buf, ",\"over_limit\":\"log\"}"), "%s", w.buf);
  cr_assert_eq(request((tsr_cli_lease_options_t){.over_limit = "signal", .on_expiry = "revoke", .job = "4711"}),
               TSR_EXIT_OK);
  cr_assert(strstr(w.buf, ",\"on_expiry\":\"revoke\",\"over_limit\":\"signal\",\"job\":\"4711\"}"), "%s", w.buf);
  cr_assert_eq(devices_asked, 0, "a share needs no daemon");
}

Test(cli_lease_request, a_bad_over_limit_is_a_usage_error, .fini = fini) {
  static const char *const bad[] = {"kill", "revoke", "default", "", "LOG", "log "};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
    cr_assert_eq(request((tsr_cli_lease_options_t){.over_limit = bad[i]}), TSR_EXIT_USAGE, "--over-limit '%s' accepted",
                 bad[i]);
  cr_assert_eq(request((tsr_cli_lease_options_t){.on_expiry = "log"}), TSR_EXIT_USAGE, "log is no expiry action");
  cr_assert_eq(devices_asked, 0);
}
