#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "base/log.h"
#include "daemon/config.h"

static tsr_config_t c;

static void parse_ok(const char *text) {
  tsr_config_defaults(&c);
  tsr_status_t st = tsr_config_parse(text, "t.conf", &c);
  cr_assert_null(st, "%s", tsr_status_message(st));
}

static void parse_bad(const char *text, const char *needle) {
  tsr_config_defaults(&c);
  tsr_status_t st = tsr_config_parse(text, "t.conf", &c);
  cr_assert_not_null(st, "accepted: %s", text);
  cr_assert(strstr(tsr_status_message(st), needle), "'%s' lacks '%s'", tsr_status_message(st),
            needle);
  tsr_status_free(st);
}

Test(config, defaults) {
  tsr_config_defaults(&c);
  cr_assert_str_eq(c.state_dir, "/var/lib/tessera");
  cr_assert_str_eq(c.socket, "/run/tessera/tessera.sock");
  cr_assert_eq(c.socket_mode, 0666);
  cr_assert_eq(c.sync, TSR_LEASE_SYNC_FULL);
  cr_assert_eq(c.device_count, 0);
}

Test(config, full_file) {
  parse_ok("; comment\n# another\n[daemon]\nstate_dir = /srv/t\nsocket = /srv/t.sock\n"
           "socket_mode = 0660\nadmin_group = gpuadm\ndevices = config\nsync = none\n"
           "max_lease = 2h\nclient_timeout = 5s\nmax_clients = 10\nlog_level = debug\n"
           "audit_log = /var/log/t.log\n"
           "[device.0]\nname = Demo GPU\nmemory = 80GiB\nsms = 132\nuuid = GPU-1\n"
           "[device.1]\nmemory = 24GiB\n");
  cr_assert_str_eq(c.state_dir, "/srv/t");
  cr_assert_str_eq(c.socket, "/srv/t.sock");
  cr_assert_eq(c.socket_mode, 0660);
  cr_assert_str_eq(c.admin_group, "gpuadm");
  cr_assert_eq(c.devices_from, TSR_DEVICES_CONFIG);
  cr_assert_eq(c.sync, TSR_LEASE_SYNC_NONE);
  cr_assert_eq(c.max_lease_ns, UINT64_C(7200000000000));
  cr_assert_eq(c.client_timeout_ns, UINT64_C(5000000000));
  cr_assert_eq(c.max_clients, 10);
  cr_assert_eq(c.log_level, TSR_LOG_DEBUG);
  cr_assert_str_eq(c.audit_log, "/var/log/t.log");
  cr_assert_eq(c.device_count, 2);
  cr_assert_str_eq(c.devices[0].name, "Demo GPU");
  cr_assert_eq(c.devices[0].total_bytes, UINT64_C(80) << 30);
  cr_assert_eq(c.devices[0].sm_count, 132);
  cr_assert_str_eq(c.devices[0].uuid, "GPU-1");
  cr_assert_eq(c.devices[0].source, TSR_DEVICE_FROM_CONFIG);
  cr_assert_str_eq(c.devices[1].name, "GPU 1");
  cr_assert_eq(c.devices[1].index, 1);
}

Test(config, errors_name_the_line) {
  parse_bad("[daemon]\nstate_dir = /x\nbogus = 1\n", "t.conf:3: unknown key 'bogus'");
  parse_bad("[daemon]\nsync = sometimes\n", "t.conf:2: sync must be full or none");
  parse_bad("[daemon]\nmax_lease = forever\n", "t.conf:2: bad value for max_lease");
  parse_bad("[daemon]\nmax_lease = 0s\n", "bad value for max_lease");
  parse_bad("[daemon]\nstate_dir = relative/path\n", "bad value for state_dir");
  parse_bad("[daemon]\nsocket_mode = 999\n", "bad value for socket_mode");
  parse_bad("[daemon]\nmax_clients = 0\n", "bad value for max_clients");
  parse_bad("[daemon]\nlog_level = loud\n", "bad value for log_level");
  parse_bad("[daemon]\nsync = full\nsync = none\n", "t.conf:3: duplicate key 'sync'");
  parse_bad("[gpu]\nx = 1\n", "t.conf:1: unknown section [gpu]");
  parse_bad("[gpu]\n", "t.conf:1: unknown section [gpu]");
  parse_bad("state_dir = /x\n", "outside any section");
  parse_bad("[daemon]\nthis line has no equals\n", "t.conf:2: expected");
  parse_bad("[daemon\n", "t.conf:1: bad section header");
  parse_bad("[device.0]\n = 5\n", "t.conf:2: missing key");
  parse_bad("[device.0]\nmemory = lots\n", "t.conf:2: bad value for memory");
  parse_bad("[device.0]\nmemory = 0\n", "bad value for memory");
  parse_bad("[device.0]\nname = x\n", "needs memory");
  parse_bad("[device.0]\nmemory = 1GiB\ncolor = red\n", "unknown device key 'color'");
  parse_bad("[device.1]\nmemory = 1GiB\n", "[device.1] without [device.0]");
  parse_bad("[device.01]\nmemory = 1GiB\n", "bad device section");
  parse_bad("[device.x]\nmemory = 1GiB\n", "bad device section");
  parse_bad("[device.64]\nmemory = 1GiB\n", "bad device section");
  parse_bad("[device.0]\nmemory = 1GiB\nmemory = 2GiB\n", "duplicate key 'memory'");
}

Test(config, load_missing_file_is_not_found) {
  tsr_config_defaults(&c);
  tsr_status_t st = tsr_config_load("/nonexistent/tessera.conf", &c);
  cr_assert_eq(tsr_status_code(st), TSR_NOT_FOUND);
  cr_assert(strstr(tsr_status_message(st), "/nonexistent/tessera.conf"));
  tsr_status_free(st);
}

Test(config, load_file) {
  char path[] = "/tmp/tsr-conf-XXXXXX";
  int fd = mkstemp(path);
  cr_assert_geq(fd, 0);
  FILE *f = fdopen(fd, "w");
  fputs("[device.0]\nmemory = 16GiB\n", f);
  fclose(f);
  tsr_config_defaults(&c);
  cr_assert_null(tsr_config_load(path, &c));
  cr_assert_eq(c.device_count, 1);
  remove(path);
}

Test(config, ini_details) {
  /* CRLF line ends, '#' inside a value, whitespace everywhere */
  parse_ok("  [daemon]  \r\n  admin_group   =   gpu#admins  \r\n\r\n[ device.0 ]\r\nmemory=1GiB\r\n");
  cr_assert_str_eq(c.admin_group, "gpu#admins");
  cr_assert_eq(c.device_count, 1);
}

Test(config, busy_poll) {
  tsr_config_defaults(&c);
  cr_assert_eq(c.busy_poll_ns, 50000, "default 50us");
  parse_ok("[daemon]\nbusy_poll = 0\n");
  cr_assert_eq(c.busy_poll_ns, 0);
  parse_ok("[daemon]\nbusy_poll = 200us\n");
  cr_assert_eq(c.busy_poll_ns, 200000);
  parse_ok("[daemon]\nbusy_poll = 10ms\n");
  cr_assert_eq(c.busy_poll_ns, 10000000);
  parse_bad("[daemon]\nbusy_poll = 11ms\n", "at most 10ms");
  parse_bad("[daemon]\nbusy_poll = fast\n", "bad value for busy_poll");
  parse_bad("[daemon]\nbusy_poll = -1us\n", "bad value for busy_poll");
}
