#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"
#include "base/time.h"
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
  cr_assert_eq(tsr_status_code(st), TSR_INVALID_ARGUMENT);
  cr_assert(strstr(tsr_status_message(st), needle), "'%s' lacks '%s'", tsr_status_message(st), needle);
  tsr_status_free(st);
}

/* "[daemon]\n<key> = <value>\n" */
static void daemon_ok(const char *key, const char *value) {
  char text[256];
  snprintf(text, sizeof(text), "[daemon]\n%s = %s\n", key, value);
  parse_ok(text);
}

static void daemon_bad(const char *key, const char *value) {
  char text[256], needle[128];
  snprintf(text, sizeof(text), "[daemon]\n%s = %s\n", key, value);
  snprintf(needle, sizeof(needle), "t.conf:2: bad value for %s: ", key);
  parse_bad(text, needle);
}

Test(config, defaults) {
  tsr_config_defaults(&c);
  cr_assert_str_eq(c.state_dir, "/var/lib/tessera");
  cr_assert_str_eq(c.socket, "/run/tessera/tessera.sock");
  cr_assert_eq(c.socket_mode, 0666);
  cr_assert_eq(c.sync, TSR_LEASE_SYNC_FULL);
  cr_assert_eq(c.device_count, 0);
  cr_assert_eq(c.max_clients_per_user, 64);
  cr_assert_eq(c.admin_reserved_clients, 16);
  cr_assert_eq(c.max_queued_bytes, UINT64_C(256) << 20);
  cr_assert_eq(c.max_queued_bytes_per_user, UINT64_C(32) << 20);
  cr_assert_eq(c.max_leases_per_user, 64);
  cr_assert_eq(c.max_queued_per_user, 8);
  cr_assert_eq(c.min_lease_ppm, 1000);
  cr_assert_eq(c.min_lease_bytes, 0);
  cr_assert_eq(c.audit_max_bytes, UINT64_C(64) << 20);
  cr_assert_eq(c.audit_keep, 4);
  cr_assert_eq(c.audit_deny_rate, 5);
  /* the defaults pass the checks a file's values must pass */
  parse_ok("");
}

Test(config, full_file) {
  parse_ok(
      "; comment\n# another\n[daemon]\nstate_dir = /srv/t\nsocket = /srv/t.sock\n"
      "socket_mode = 0660\nadmin_group = gpuadm\ndevices = config\nsync = none\n"
      "max_lease = 2h\nclient_timeout = 5s\nmax_clients = 10\nlog_level = debug\n"
      "audit_log = /var/log/t.log\nmax_clients_per_user = 4\nadmin_reserved_clients = 2\n"
      "max_queued_bytes = 8MiB\nmax_queued_bytes_per_user = 2MiB\nmax_leases_per_user = 3\n"
      "min_lease = 1GiB\naudit_max_size = 1MiB\naudit_keep = 9\naudit_deny_rate = 100\n"
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
  cr_assert_eq(c.max_clients_per_user, 4);
  cr_assert_eq(c.admin_reserved_clients, 2);
  cr_assert_eq(c.max_queued_bytes, UINT64_C(8) << 20);
  cr_assert_eq(c.max_queued_bytes_per_user, UINT64_C(2) << 20);
  cr_assert_eq(c.max_leases_per_user, 3);
  cr_assert_eq(c.min_lease_bytes, UINT64_C(1) << 30);
  cr_assert_eq(c.min_lease_ppm, 0);
  cr_assert_eq(c.audit_max_bytes, UINT64_C(1) << 20);
  cr_assert_eq(c.audit_keep, 9);
  cr_assert_eq(c.audit_deny_rate, 100);
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
  parse_bad("[daemon]\nstate_dir = /x\nbogus = 1\n", "t.conf:3: unknown key 'bogus' in [daemon]");
  parse_bad("[daemon]\nsync = sometimes\n", "t.conf:2: bad value for sync: 'sometimes' (use full");
  parse_bad("[daemon]\ndevices = all\n", "t.conf:2: bad value for devices");
  parse_bad("[daemon]\nmax_lease = forever\n", "t.conf:2: bad value for max_lease");
  parse_bad("[daemon]\nmax_lease = 0s\n", "bad value for max_lease: must be more than 0");
  parse_bad("[daemon]\nclient_timeout = 30\n", "bad value for client_timeout");
  parse_bad("[daemon]\nstate_dir = relative/path\n", "bad value for state_dir");
  parse_bad("[daemon]\nsocket_mode = 999\n", "bad value for socket_mode");
  parse_bad("[daemon]\nsocket_mode = -1\n", "bad value for socket_mode");
  parse_bad("[daemon]\nmax_clients = 0\n",
            "bad value for max_clients: '0' is not a whole number "
            "from 1 to 65536");
  parse_bad("[daemon]\nmax_clients = 65537\n", "bad value for max_clients");
  parse_bad("[daemon]\nlog_level = loud\n", "bad value for log_level");
  parse_bad("[daemon]\nadmin_group =\n", "t.conf:2: bad value for admin_group: empty");
  parse_bad("[daemon]\nsync = full\nsync = none\n", "t.conf:3: duplicate key 'sync' (set on line 2)");
  parse_bad("[daemon]\nsync = full\n[daemon]\nsync = none\n", "t.conf:4: duplicate key 'sync'");
  parse_bad("[gpu]\nx = 1\n", "t.conf:1: unknown section [gpu]");
  parse_bad("state_dir = /x\n", "t.conf:1: key 'state_dir' outside any section");
  parse_bad("[daemon]\nthis line has no equals\n", "t.conf:2: expected '[section]' or 'key = value'");
  parse_bad("[daemon\n", "t.conf:1: bad section header '[daemon'");
  parse_bad("[daemon] x\n", "t.conf:1: bad section header");
  parse_bad("[]\n", "t.conf:1: unknown section []");
  parse_bad("[device.0]\n = 5\n", "t.conf:2: missing key");
  parse_bad("[device.0]\nmemory = lots\n", "t.conf:2: bad value for memory");
  parse_bad("[device.0]\nmemory = 0\n", "bad value for memory");
  parse_bad("[device.0]\nmemory = 1GiB\nsms = 100001\n", "t.conf:3: bad value for sms");
  parse_bad("[daemon]\n\n[device.0]\nname = x\n", "t.conf:3: [device.0] needs memory");
  parse_bad("[device.0]\nmemory = 1GiB\ncolor = red\n", "t.conf:3: unknown device key 'color'");
  parse_bad("[device.0]\nmemory = 1GiB\n[device.2]\nmemory = 1GiB\n", "t.conf:3: [device.2] without [device.1]");
  parse_bad("[device.1]\nmemory = 1GiB\n", "t.conf:1: [device.1] without [device.0]");
  parse_bad("[device.01]\nmemory = 1GiB\n", "t.conf:1: bad device section");
  parse_bad("[device.x]\nmemory = 1GiB\n", "bad device section");
  parse_bad("[device.]\nmemory = 1GiB\n", "bad device section");
  parse_bad("[device.64]\nmemory = 1GiB\n", "bad device section");
  parse_bad("[device.0]\nmemory = 1GiB\nmemory = 2GiB\n", "t.conf:3: duplicate key 'memory'");
  /* the first error is the one reported */
  parse_bad("[daemon]\nsync = x\nbogus = 1\n", "t.conf:2: bad value for sync");
  parse_bad("[daemon]\nno equals\nsync = x\n", "t.conf:2: expected");
}

Test(config, unknown_section_without_keys) {
  /* inih says nothing of a header with no keys after it; the gate does */
  parse_bad("[gpu]\n", "t.conf:1: unknown section [gpu]");
  parse_bad("[daemon]\nsync = none\n[Daemon]\n", "t.conf:3: unknown section [Daemon]");
  parse_bad("[device.9x]\n", "t.conf:1: bad device section");
}

Test(config, value_may_hold_hash_and_semicolon) {
  parse_ok("[daemon]\nadmin_group = gpu#admins\n");
  cr_assert_str_eq(c.admin_group, "gpu#admins");
  parse_ok("[daemon]\nadmin_group = gpu;admins\n");
  cr_assert_str_eq(c.admin_group, "gpu;admins");
  parse_ok("[device.0]\nmemory = 1GiB\nname = GPU#0;A\n");
  cr_assert_str_eq(c.devices[0].name, "GPU#0;A");
}

Test(config, inline_comments_are_refused) {
  /* Debian's inih would cut "full ; why" to "full" and keep "full # why":
   * neither is silent here */
  parse_bad("[daemon]\nsync = full ; why\n", "t.conf:2: ';' after a space: comments take whole lines");
  parse_bad("[daemon]\nsync = full # why\n", "t.conf:2: '#' after a space");
  parse_bad("[daemon]\nsync = full\t;why\n", "t.conf:2: ';' after a space");
  parse_bad("[daemon] ; main\n", "t.conf:1: ';' after a space");
  parse_bad("[daemon]\nstate_dir = /var/lib/tessera   # lock files\n", "t.conf:2: '#' after a space");
  /* whole-line comments, indented or not, are fine */
  parse_ok("# a\n; b\n[daemon]\n   # c\n\t; d\nsync = none\n");
  cr_assert_eq(c.sync, TSR_LEASE_SYNC_NONE);
}

Test(config, indentation_is_not_a_continuation) {
  /* inih would take an indented line as more of the value above: here it is
   * a line of its own, as it always was */
  parse_ok("[daemon]\nsync = none\n   log_level = debug\n\tmax_clients = 99\n");
  cr_assert_eq(c.sync, TSR_LEASE_SYNC_NONE);
  cr_assert_eq(c.log_level, TSR_LOG_DEBUG);
  cr_assert_eq(c.max_clients, 99);
  parse_bad("[daemon]\nadmin_group = gpu\n   admins\n", "t.conf:3: expected '[section]' or 'key = value'");
}

Test(config, colon_is_not_equals) {
  parse_bad("[daemon]\nsync: none\n", "t.conf:2: expected 'key = value', got 'sync: none'");
  /* a ':' after the '=' is part of the value */
  parse_ok("[device.0]\nmemory = 1GiB\nuuid = GPU-1:2\n");
  cr_assert_str_eq(c.devices[0].uuid, "GPU-1:2");
}

Test(config, ini_details) {
  /* CRLF line ends, whitespace everywhere, no newline at the end */
  parse_ok("  [daemon]  \r\n  admin_group   =   gpu#admins  \r\n\r\n[ device.0 ]\r\nmemory=1GiB");
  cr_assert_str_eq(c.admin_group, "gpu#admins");
  cr_assert_eq(c.device_count, 1);
  cr_assert_eq(c.devices[0].total_bytes, UINT64_C(1) << 30);
}

Test(config, byte_order_mark) {
  /* skipped before the first line only */
  parse_ok("\xEF\xBB\xBF[daemon]\nsync = none\n");
  cr_assert_eq(c.sync, TSR_LEASE_SYNC_NONE);
  parse_bad("[daemon]\n\xEF\xBB\xBFsync = none\n", "t.conf:2: unknown key");
}

Test(config, line_length) {
  /* Debian's inih holds 200 bytes a line; config.c raises it so a path of
   * the full 255 bytes fits */
  char path[256];
  memset(path, 'p', sizeof(path) - 1);
  path[0] = '/';
  path[255] = '\0';
  char text[400];
  snprintf(text, sizeof(text), "[daemon]\nstate_dir = %s\nsync = none\n", path);
  parse_ok(text);
  cr_assert_str_eq(c.state_dir, path);
  cr_assert_eq(c.sync, TSR_LEASE_SYNC_NONE);
  /* a longer line is refused whole, never cut into lines of its own (here
   * its tail would otherwise read as "sync = none") */
  size_t n = 5000;
  char *big = malloc(n + 64);
  cr_assert_not_null(big);
  int at = snprintf(big, n + 64, "[daemon]\nadmin_group = ");
  memset(big + at, 'g', n - (size_t)at);
  snprintf(big + n, 64, "sync = none\n");
  parse_bad(big, "t.conf:2: line longer than 4093 bytes");
  cr_assert_eq(c.sync, TSR_LEASE_SYNC_FULL);
  free(big);
}

Test(config, max_clients_per_user) {
  daemon_ok("max_clients_per_user", "0");
  cr_assert_eq(c.max_clients_per_user, 0);
  daemon_ok("max_clients_per_user", "65536");
  cr_assert_eq(c.max_clients_per_user, 65536);
  daemon_bad("max_clients_per_user", "65537");
  daemon_bad("max_clients_per_user", "-1");
  daemon_bad("max_clients_per_user", "many");
  daemon_bad("max_clients_per_user", "");
}

Test(config, admin_reserved_clients) {
  daemon_ok("admin_reserved_clients", "0");
  cr_assert_eq(c.admin_reserved_clients, 0);
  parse_ok("[daemon]\nmax_clients = 2\nadmin_reserved_clients = 1\n");
  cr_assert_eq(c.admin_reserved_clients, 1);
  /* checked after the file, in either order, at the later line */
  parse_ok("[daemon]\nadmin_reserved_clients = 100\nmax_clients = 101\n");
  parse_bad("[daemon]\nmax_clients = 10\nadmin_reserved_clients = 10\n",
            "t.conf:3: admin_reserved_clients (10) must be less than max_clients (10)");
  parse_bad("[daemon]\nadmin_reserved_clients = 50\nsync = none\nmax_clients = 20\n",
            "t.conf:4: admin_reserved_clients (50) must be less than max_clients (20)");
  /* a default is named as such: lowering max_clients alone can trip it */
  parse_bad("[daemon]\nmax_clients = 16\n",
            "t.conf:2: admin_reserved_clients (16, the default) must be less than max_clients (16)");
  parse_bad("[daemon]\nadmin_reserved_clients = 2000\n", "must be less than max_clients (1024, the default)");
  daemon_bad("admin_reserved_clients", "65536");
  daemon_bad("admin_reserved_clients", "x");
}

Test(config, max_queued_bytes) {
  parse_ok("[daemon]\nmax_queued_bytes = 1MiB\nmax_queued_bytes_per_user = 1MiB\n");
  cr_assert_eq(c.max_queued_bytes, UINT64_C(1) << 20);
  parse_ok("[daemon]\nmax_queued_bytes = 1GiB\nmax_queued_bytes_per_user = 1GiB\n");
  cr_assert_eq(c.max_queued_bytes_per_user, UINT64_C(1) << 30);
  daemon_ok("max_queued_bytes_per_user", "1MiB");
  cr_assert_eq(c.max_queued_bytes_per_user, UINT64_C(1) << 20);
  daemon_bad("max_queued_bytes", "1000KiB");
  daemon_bad("max_queued_bytes", "0");
  daemon_bad("max_queued_bytes", "lots");
  daemon_bad("max_queued_bytes_per_user", "512KiB");
  daemon_bad("max_queued_bytes_per_user", "-1MiB");
  /* per user at most the total, in either order */
  parse_bad("[daemon]\nmax_queued_bytes_per_user = 64MiB\nmax_queued_bytes = 32MiB\n",
            "t.conf:3: max_queued_bytes_per_user (64 MiB) is more than max_queued_bytes (32 MiB)");
  parse_bad("[daemon]\nmax_queued_bytes = 16MiB\n",
            "t.conf:2: max_queued_bytes_per_user (32 MiB, the default) is more than "
            "max_queued_bytes (16 MiB)");
  parse_bad("[daemon]\nmax_queued_bytes_per_user = 1GiB\n", "t.conf:2: max_queued_bytes_per_user");
}

Test(config, max_queued_per_user) {
  daemon_ok("max_queued_per_user", "0");
  cr_assert_eq(c.max_queued_per_user, 0);
  daemon_ok("max_queued_per_user", "2");
  cr_assert_eq(c.max_queued_per_user, 2);
  daemon_bad("max_queued_per_user", "-1");
  daemon_bad("max_queued_per_user", "many");
}

Test(config, max_leases_per_user) {
  daemon_ok("max_leases_per_user", "0");
  cr_assert_eq(c.max_leases_per_user, 0);
  daemon_ok("max_leases_per_user", "4294967295");
  cr_assert_eq(c.max_leases_per_user, UINT32_MAX);
  daemon_bad("max_leases_per_user", "4294967296");
  daemon_bad("max_leases_per_user", "1.5");
}

Test(config, min_lease) {
  daemon_ok("min_lease", "0.1%");
  cr_assert_eq(c.min_lease_ppm, 1000);
  cr_assert_eq(c.min_lease_bytes, 0);
  daemon_ok("min_lease", "0.001");
  cr_assert_eq(c.min_lease_ppm, 1000);
  daemon_ok("min_lease", "25%");
  cr_assert_eq(c.min_lease_ppm, 250000);
  /* a size zeroes the share (the default is one) */
  daemon_ok("min_lease", "256MiB");
  cr_assert_eq(c.min_lease_bytes, UINT64_C(256) << 20);
  cr_assert_eq(c.min_lease_ppm, 0);
  daemon_ok("min_lease", "1.5GiB");
  cr_assert_eq(c.min_lease_bytes, UINT64_C(3) << 29);
  cr_assert_eq(c.min_lease_ppm, 0);
  /* and a share zeroes an earlier size */
  tsr_config_defaults(&c);
  c.min_lease_ppm = 0;
  c.min_lease_bytes = 4096;
  cr_assert_null(tsr_config_parse("[daemon]\nmin_lease = 1%\n", "t.conf", &c));
  cr_assert_eq(c.min_lease_ppm, 10000);
  cr_assert_eq(c.min_lease_bytes, 0);
  daemon_ok("min_lease", "0");
  cr_assert_eq(c.min_lease_ppm, 0);
  cr_assert_eq(c.min_lease_bytes, 0);
  /* a bare number could mean bytes or a share: refused, saying what to write */
  parse_bad("[daemon]\nmin_lease = 256\n",
            "t.conf:2: bad value for min_lease: '256' is a bare number: write a share such as "
            "0.1% or a size such as 256MiB");
  daemon_bad("min_lease", "1");
  daemon_bad("min_lease", "150%");
  daemon_bad("min_lease", "0.00000001");
  daemon_bad("min_lease", "big");
  daemon_bad("min_lease", "-1%");
}

Test(config, audit_keys) {
  daemon_ok("audit_max_size", "0");
  cr_assert_eq(c.audit_max_bytes, 0);
  daemon_ok("audit_max_size", "64KiB");
  cr_assert_eq(c.audit_max_bytes, UINT64_C(64) << 10);
  daemon_ok("audit_max_size", "1GiB");
  daemon_bad("audit_max_size", "65535");
  daemon_bad("audit_max_size", "1KiB");
  daemon_bad("audit_max_size", "huge");
  daemon_ok("audit_keep", "0");
  cr_assert_eq(c.audit_keep, 0);
  daemon_ok("audit_keep", "1000");
  cr_assert_eq(c.audit_keep, 1000);
  daemon_bad("audit_keep", "1001");
  daemon_bad("audit_keep", "all");
  daemon_ok("audit_deny_rate", "0");
  cr_assert_eq(c.audit_deny_rate, 0);
  daemon_ok("audit_deny_rate", "4294967295");
  cr_assert_eq(c.audit_deny_rate, UINT32_MAX);
  daemon_bad("audit_deny_rate", "4294967296");
  daemon_bad("audit_deny_rate", "5/s");
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

/* ---- files ---- */

static char dir[64];

static void make_dir(void) {
  snprintf(dir, sizeof(dir), "/tmp/tsr-conf-XXXXXX");
  cr_assert_not_null(mkdtemp(dir));
}

static void remove_dir(void) {
  char cmd[128];
  snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
  cr_assert_eq(system(cmd), 0);
}

static void write_file(const char *path, const char *text, size_t len) {
  FILE *f = fopen(path, "w");
  cr_assert_not_null(f);
  cr_assert_eq(fwrite(text, 1, len, f), len);
  fclose(f);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

Test(config, load_missing_file_is_not_found) {
  tsr_config_defaults(&c);
  tsr_status_t st = tsr_config_load("/nonexistent/tessera.conf", &c);
  cr_assert_eq(tsr_status_code(st), TSR_NOT_FOUND);
  cr_assert(strstr(tsr_status_message(st), "/nonexistent/tessera.conf"));
  tsr_status_free(st);
}

Test(config, load_file, .init = make_dir, .fini = remove_dir) {
  char path[128];
  snprintf(path, sizeof(path), "%s/t.conf", dir);
  const char *text = "[device.0]\nmemory = 16GiB\n";
  write_file(path, text, strlen(text));
  tsr_config_defaults(&c);
  cr_assert_null(tsr_config_load(path, &c));
  cr_assert_eq(c.device_count, 1);
  /* errors name the file as given, and the line */
  text = "[daemon]\nsync = none\nsnyc = full\n";
  write_file(path, text, strlen(text));
  tsr_config_defaults(&c);
  tsr_status_t st = tsr_config_load(path, &c);
  char want[160];
  snprintf(want, sizeof(want), "%s:3: unknown key 'snyc'", path);
  cr_assert(strstr(tsr_status_message(st), want), "%s", tsr_status_message(st));
  tsr_status_free(st);
}

Test(config, load_through_symlink, .init = make_dir, .fini = remove_dir) {
  /* /etc/tessera/tessera.conf -> a managed copy is an admin's right */
  char path[128], link[128];
  snprintf(path, sizeof(path), "%s/real.conf", dir);
  snprintf(link, sizeof(link), "%s/tessera.conf", dir);
  const char *text = "[daemon]\nsync = none\n";
  write_file(path, text, strlen(text));
  cr_assert_eq(symlink("real.conf", link), 0);
  tsr_config_defaults(&c);
  tsr_status_t st = tsr_config_load(link, &c);
  cr_assert_null(st, "%s", tsr_status_message(st));
  cr_assert_eq(c.sync, TSR_LEASE_SYNC_NONE);
  /* a dangling link is a missing file */
  cr_assert_eq(unlink(path), 0);
  st = tsr_config_load(link, &c);
  cr_assert_eq(tsr_status_code(st), TSR_NOT_FOUND, "%s", tsr_status_message(st));
  tsr_status_free(st);
}

/* The old reader opened the file with fopen and hung on a FIFO for good.
 * .timeout fails the test rather than hang the suite. */
Test(config, fifo_is_refused_at_once, .init = make_dir, .fini = remove_dir, .timeout = 10) {
  char fifo[128], link[128];
  snprintf(fifo, sizeof(fifo), "%s/fifo.conf", dir);
  snprintf(link, sizeof(link), "%s/link.conf", dir);
  cr_assert_eq(mkfifo(fifo, 0600), 0);
  cr_assert_eq(symlink(fifo, link), 0);
  const char *paths[] = {fifo, link};
  for (size_t i = 0; i < 2; i++) {
    tsr_config_defaults(&c);
    double t0 = now_s();
    tsr_status_t st = tsr_config_load(paths[i], &c);
    cr_assert_lt(now_s() - t0, 1.0, "took %.3f s", now_s() - t0);
    cr_assert_eq(tsr_status_code(st), TSR_FAILED_PRECONDITION, "%s", tsr_status_message(st));
    cr_assert(strstr(tsr_status_message(st), "not a regular file"), "%s", tsr_status_message(st));
    cr_assert(strstr(tsr_status_message(st), paths[i]), "%s", tsr_status_message(st));
    tsr_status_free(st);
  }
}

Test(config, device_or_directory_is_refused, .init = make_dir, .fini = remove_dir, .timeout = 10) {
  tsr_config_defaults(&c);
  tsr_status_t st = tsr_config_load("/dev/zero", &c);
  cr_assert_eq(tsr_status_code(st), TSR_FAILED_PRECONDITION, "%s", tsr_status_message(st));
  cr_assert(strstr(tsr_status_message(st), "/dev/zero is not a regular file"), "%s", tsr_status_message(st));
  tsr_status_free(st);
  st = tsr_config_load(dir, &c);
  cr_assert_not_null(st);
  cr_assert(strstr(tsr_status_message(st), dir), "%s", tsr_status_message(st));
  tsr_status_free(st);
}

Test(config, nul_byte_and_size_limit, .init = make_dir, .fini = remove_dir) {
  char path[128];
  snprintf(path, sizeof(path), "%s/t.conf", dir);
  /* a NUL would end the text early and hide what follows */
  write_file(path, "[daemon]\nsync = none\n\0bogus = 1\n", 32);
  tsr_config_defaults(&c);
  tsr_status_t st = tsr_config_load(path, &c);
  cr_assert_eq(tsr_status_code(st), TSR_INVALID_ARGUMENT);
  cr_assert(strstr(tsr_status_message(st), "NUL byte"), "%s", tsr_status_message(st));
  tsr_status_free(st);
  /* larger than 1 MiB: refused before parsing */
  size_t n = (1u << 20) + 1;
  char *big = malloc(n);
  cr_assert_not_null(big);
  memset(big, '\n', n);
  write_file(path, big, n);
  free(big);
  st = tsr_config_load(path, &c);
  cr_assert_not_null(st);
  cr_assert(strstr(tsr_status_message(st), "larger than 1048576 bytes"), "%s", tsr_status_message(st));
  tsr_status_free(st);
}

/* contrib/tessera.conf.example says it shows the defaults: hold it to that */
Test(config, example_file_is_the_defaults) {
  const char *src = getenv("TESSERA_SOURCE_DIR");
  cr_assert_not_null(src, "TESSERA_SOURCE_DIR is not set (run through ctest)");
  char path[512];
  snprintf(path, sizeof(path), "%s/contrib/tessera.conf.example", src);
  static tsr_config_t defaults;
  tsr_config_defaults(&defaults);
  tsr_config_defaults(&c);
  tsr_status_t st = tsr_config_load(path, &c);
  cr_assert_null(st, "%s", tsr_status_message(st));
  cr_assert(memcmp(&c, &defaults, sizeof(c)) == 0, "the example differs from the defaults");
}

Test(config, enforcement_defaults) {
  tsr_config_defaults(&c);
  cr_assert_eq(c.on_expiry, TSR_LEASE_ACTION_REVOKE);
  cr_assert_eq(c.over_limit, TSR_LEASE_OVER_LIMIT_SIGNAL);
  cr_assert_eq(c.expiry_grace_ns, 10 * TSR_NS_PER_S);
  cr_assert_eq(c.backstop_period_ns, 500 * TSR_NS_PER_MS);
  cr_assert_not(c.policy_deny);
}

Test(config, enforcement_keys) {
  daemon_ok("on_expiry", "signal");
  cr_assert_eq(c.on_expiry, TSR_LEASE_ACTION_SIGNAL);
  daemon_ok("on_expiry", "revoke");
  cr_assert_eq(c.on_expiry, TSR_LEASE_ACTION_REVOKE);
  daemon_bad("on_expiry", "default"); /* the lock file's "none given", never a node setting */
  daemon_bad("on_expiry", "kill");
  daemon_bad("on_expiry", "SIGNAL");

  daemon_ok("over_limit", "log");
  cr_assert_eq(c.over_limit, TSR_LEASE_OVER_LIMIT_LOG);
  cr_assert_eq(c.on_expiry, TSR_LEASE_ACTION_REVOKE, "over_limit is apart from on_expiry");
  daemon_ok("over_limit", "signal");
  cr_assert_eq(c.over_limit, TSR_LEASE_OVER_LIMIT_SIGNAL);
  daemon_bad("over_limit", "default"); /* the lock file's "none given", never a node setting */
  daemon_bad("over_limit", "revoke");  /* the expiry action's, not this one's */
  daemon_bad("over_limit", "kill");
  daemon_bad("over_limit", "LOG");
  parse_bad("[daemon]\nover_limit = kill\n", "t.conf:2: bad value for over_limit: 'kill' (use signal or log)");
  parse_bad("[daemon]\nover_limit =\n", "over_limit");
  parse_bad("[daemon]\nover_limit = log\nover_limit = signal\n",
            "t.conf:3: duplicate key 'over_limit' (set on line 2)");
  parse_bad("[device.0]\nover_limit = log\n", "unknown device key 'over_limit'"); /* [daemon]'s only */
  /* a refused value changes nothing */
  tsr_config_defaults(&c);
  c.over_limit = TSR_LEASE_OVER_LIMIT_LOG;
  tsr_status_t st = tsr_config_parse("[daemon]\nover_limit = never\n", "t.conf", &c);
  cr_assert_not_null(st);
  tsr_status_free(st);
  cr_assert_eq(c.over_limit, TSR_LEASE_OVER_LIMIT_LOG);

  daemon_ok("expiry_grace", "1s");
  cr_assert_eq(c.expiry_grace_ns, TSR_NS_PER_S);
  daemon_ok("expiry_grace", "250ms");
  cr_assert_eq(c.expiry_grace_ns, 250 * TSR_NS_PER_MS);
  daemon_bad("expiry_grace", "0");
  daemon_bad("expiry_grace", "2h");
  daemon_bad("expiry_grace", "10");
  parse_bad("[daemon]\nexpiry_grace = 2h\n", "'2h' is out of range (1ms to 1h)");
  parse_bad("[daemon]\nexpiry_grace = 500us\n", "'500us' is out of range (1ms to 1h)");
  daemon_ok("expiry_grace", "1h");

  daemon_ok("backstop_period", "0");
  cr_assert_eq(c.backstop_period_ns, 0);
  daemon_ok("backstop_period", "200ms");
  cr_assert_eq(c.backstop_period_ns, 200 * TSR_NS_PER_MS);
  daemon_bad("backstop_period", "500us");
  daemon_bad("backstop_period", "-1s");
  parse_bad("[daemon]\nbackstop_period = 500us\n", "'500us' is out of range (1ms to 1h, or 0 for never)");
  parse_bad("[daemon]\nbackstop_period = 61m\n", "'61m' is out of range (1ms to 1h, or 0 for never)");
  daemon_bad("expiry_grace", "0"); /* "0" turns off only what may be off */

  daemon_ok("policy", "deny");
  cr_assert(c.policy_deny);
  daemon_ok("policy", "pass");
  cr_assert_not(c.policy_deny);
  daemon_bad("policy", "allow");
}

Test(config, compute_share_keys) {
  tsr_config_defaults(&c);
  cr_assert_eq(c.share_burst_ns, 50 * TSR_NS_PER_MS);
  cr_assert_eq(c.stream_share_ppm, 1000000);
  cr_assert_eq(c.share_switch_cost_ppm, 60000);

  daemon_ok("share_burst", "5ms");
  cr_assert_eq(c.share_burst_ns, 5 * TSR_NS_PER_MS);
  daemon_bad("share_burst", "500us");
  daemon_bad("share_burst", "11s");
  daemon_bad("share_burst", "fast");
  daemon_bad("share_burst", "0");
  parse_bad("[daemon]\nshare_burst = 11s\n", "'11s' is out of range (1ms to 10s)");
  parse_bad("[daemon]\nshare_burst = 999us\n", "'999us' is out of range (1ms to 10s)");
  daemon_ok("share_burst", "10s");
  cr_assert_eq(c.share_burst_ns, 10 * TSR_NS_PER_S);

  daemon_ok("stream_share", "25%");
  cr_assert_eq(c.stream_share_ppm, 250000);
  daemon_bad("stream_share", "0%");
  daemon_bad("stream_share", "120%");

  daemon_ok("share_switch_cost", "0%");
  cr_assert_eq(c.share_switch_cost_ppm, 0);
  daemon_ok("share_switch_cost", "4.5%");
  cr_assert_eq(c.share_switch_cost_ppm, 45000);
  daemon_ok("share_switch_cost", "50%");
  cr_assert_eq(c.share_switch_cost_ppm, 500000);
  daemon_bad("share_switch_cost", "51%");
  daemon_bad("share_switch_cost", "-1%");
  daemon_bad("share_switch_cost", "6");
}

/* [daemon] metrics: off, or HOST:PORT with an IPv4 address, localhost or a
 * bracketed IPv6 address; the default listens on loopback */
Test(config, metrics_address) {
  tsr_config_defaults(&c);
  cr_assert_str_eq(c.metrics, "127.0.0.1:9464");
  static const char *const good[] = {"off", "127.0.0.1:9464", "0.0.0.0:1", "localhost:65535", "[::1]:9464", "[::]:80"};
  for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
    char text[128];
    snprintf(text, sizeof(text), "[daemon]\nmetrics = %s\n", good[i]);
    parse_ok(text);
    cr_assert_str_eq(c.metrics, good[i]);
  }
  static const struct {
    const char *value, *needle;
  } bad[] = {
      {"9464", "write HOST:PORT"},
      {"127.0.0.1:", "write HOST:PORT"},
      {":9464", "write HOST:PORT"},
      {"127.0.0.1:0", "1 to 65535"},
      {"127.0.0.1:65536", "1 to 65535"},
      {"127.0.0.1:+80", "1 to 65535"},
      {"127.0.0.1:8x", "1 to 65535"},
      {"300.0.0.1:80", "not an IPv4 address"},
      {"example.com:80", "not an IPv4 address"},
      {"[::1:80", "in brackets"},
      {"[fe80::zz]:80", "not an IPv6 address"},
      {"ON", "write HOST:PORT"},
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    char text[128];
    snprintf(text, sizeof(text), "[daemon]\nmetrics = %s\n", bad[i].value);
    parse_bad(text, bad[i].needle);
  }
}

/* metrics_request_timeout (a duration, 100ms to 1m, default 5s),
 * metrics_group (a group name, default none) and metrics_remote (counts or
 * full, default counts); a bad value says what is wrong and leaves the
 * default */
Test(config, metrics_access_keys) {
  tsr_config_defaults(&c);
  cr_assert_eq(c.metrics_request_timeout_ns, 5 * TSR_NS_PER_S);
  cr_assert_str_eq(c.metrics_group, "", "no metrics group unless one is named");
  cr_assert(!c.metrics_remote_full, "remote scrapers see the counts unless told");

  daemon_ok("metrics_request_timeout", "2s");
  cr_assert_eq(c.metrics_request_timeout_ns, 2 * TSR_NS_PER_S);
  daemon_ok("metrics_request_timeout", "100ms");
  cr_assert_eq(c.metrics_request_timeout_ns, 100 * TSR_NS_PER_MS);
  daemon_ok("metrics_request_timeout", "1m");
  cr_assert_eq(c.metrics_request_timeout_ns, 60 * TSR_NS_PER_S);
  static const struct {
    const char *value, *needle;
  } bad[] = {
      {"0", "needs a unit"},
      {"0s", "'0s' is out of range (100ms to 1m)"},
      {"99ms", "'99ms' is out of range (100ms to 1m)"},
      {"61s", "'61s' is out of range (100ms to 1m)"},
      {"5", "needs a unit"},
      {"soon", "not a duration"},
      {"-1s", "not a duration"},
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    char text[128];
    snprintf(text, sizeof(text), "[daemon]\nmetrics_request_timeout = %s\n", bad[i].value);
    parse_bad(text, "t.conf:2: bad value for metrics_request_timeout: ");
    parse_bad(text, bad[i].needle);
    cr_assert_eq(c.metrics_request_timeout_ns, 5 * TSR_NS_PER_S, "a refused value changed the timeout");
  }

  daemon_ok("metrics_group", "prometheus");
  cr_assert_str_eq(c.metrics_group, "prometheus");
  parse_bad("[daemon]\nmetrics_group =\n", "t.conf:2: bad value for metrics_group: empty");
  parse_bad("[daemon]\nmetrics_group = a-group-name-of-sixty-four-bytes-is-one-byte-too-long-for-it-xyz\n",
            "longer than 63 bytes");
  cr_assert_str_eq(c.metrics_group, "");

  daemon_ok("metrics_remote", "full");
  cr_assert(c.metrics_remote_full);
  daemon_ok("metrics_remote", "counts");
  cr_assert(!c.metrics_remote_full);
  parse_bad("[daemon]\nmetrics_remote = all\n", "t.conf:2: bad value for metrics_remote: 'all' (use counts or full)");
  parse_bad("[daemon]\nmetrics_remote = FULL\n", "'FULL' (use counts or full)");
  cr_assert(!c.metrics_remote_full);
  parse_bad("[daemon]\nmetrics_remote = full\nmetrics_remote = counts\n",
            "t.conf:3: duplicate key 'metrics_remote' (set on line 2)");
}

Test(config, opencl_devices) {
  parse_ok(
      "[device.0]\nmemory = 4GiB\nkind = opencl\nopencl = pthread-*\n"
      "[device.1]\nmemory = 16GiB\nkind = opencl\npci = 0000:C1:00.0\n"
      "[device.2]\nmemory = 80GiB\npci = 00000000:3B:00.0\n");
  cr_assert_eq(c.device_count, 3);
  cr_assert_eq(c.devices[0].kind, TSR_DEVICE_KIND_OPENCL);
  cr_assert_str_eq(c.devices[0].opencl, "pthread-*");
  cr_assert_str_eq(c.devices[0].pci, "");
  cr_assert_str_eq(c.devices[0].name, "OpenCL pthread-*", "an OpenCL device is named by what finds it");
  cr_assert_str_eq(c.devices[2].name, "GPU 2");
  cr_assert_eq(c.devices[1].kind, TSR_DEVICE_KIND_OPENCL);
  cr_assert_str_eq(c.devices[1].pci, "0000:c1:00.0", "normalized to lower case");
  cr_assert_eq(c.devices[2].kind, TSR_DEVICE_KIND_CUDA, "cuda unless said");
  cr_assert_str_eq(c.devices[2].pci, "0000:3b:00.0", "NVML's 8-digit domain, shortened");
}

Test(config, opencl_devices_refused) {
  parse_bad("[device.0]\nmemory = 4GiB\nkind = opencl\n",
            "t.conf:3: [device.0] is an OpenCL device: say how to find it");
  parse_bad("[device.0]\nmemory = 4GiB\nkind = vulkan\n", "'vulkan' is neither cuda nor opencl");
  parse_bad("[device.0]\nmemory = 4GiB\npci = 3b:00\n", "'3b:00' is not a PCI bus id");
  parse_bad("[device.0]\nmemory = 4GiB\nopencl = *\n", "give the OpenCL device's name");
  parse_bad("[device.0]\nmemory = 4GiB\nopencl = a*b\n", "'*' may only end the name");
  parse_bad(
      "[device.0]\nmemory = 4GiB\nopencl = "
      "a-name-of-forty-eight-bytes-is-one-byte-too-long\n",
      "longer than 47 bytes");
  parse_bad("[device.0]\nmemory = 4GiB\ncolour = red\n", "(use name, memory, sms, uuid, kind, pci, opencl, minor)");
}

/* minor = N: the N of the device's /dev/nvidiaN (the Slurm plugin's key
 * from gres.conf's File= to a device); unknown unless given. */
Test(config, device_minor) {
  parse_ok(
      "[device.0]\nmemory = 4GiB\nminor = 1\n[device.1]\nmemory = 4GiB\nminor = 0\n"
      "[device.2]\nmemory = 4GiB\n[device.3]\nmemory = 4GiB\nminor = 1048575\n");
  cr_assert(c.devices[0].has_minor);
  cr_assert_eq(c.devices[0].minor, 1);
  cr_assert(c.devices[1].has_minor);
  cr_assert_eq(c.devices[1].minor, 0, "minor 0 is a minor, not 'unknown'");
  cr_assert(!c.devices[2].has_minor);
  cr_assert_eq(c.devices[3].minor, 1048575);
}

Test(config, device_minor_refused) {
  static const char *const bad[] = {"-1", "x", "1x", "0x1", " ", "1.0", "1048576", "99999999999999999999"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    char text[128];
    snprintf(text, sizeof(text), "[device.0]\nmemory = 4GiB\nminor = %s\n", bad[i]);
    parse_bad(text, "t.conf:3: bad value for minor: not a device minor number (the N of /dev/nvidiaN): ");
    parse_bad(text, "is not a whole number from 0 to 1048575");
  }
  parse_bad("[device.0]\nmemory = 4GiB\nminor =\n", "bad value for minor");
  parse_bad("[device.0]\nmemory = 4GiB\nminor = 0\nminor = 1\n", "t.conf:4: duplicate key 'minor' (set on line 3)");
  parse_bad(
      "[device.0]\nmemory = 4GiB\nminor = 3\n[device.1]\nmemory = 4GiB\n"
      "[device.2]\nmemory = 4GiB\nminor = 3\n",
      "t.conf:8: [device.2] has minor = 3 as [device.0] has (line 3): each /dev/nvidiaN is one device");
}

/* An OpenCL-only device has no /dev/nvidiaN: a minor there would let a job
 * Slurm gave that file be leased on it. Named at the later of the two keys. */
Test(config, device_minor_refused_on_opencl) {
  parse_bad("[device.0]\nmemory = 4GiB\nkind = opencl\nopencl = pthread-*\nminor = 0\n",
            "t.conf:5: [device.0] is an OpenCL device: minor = 0 names an NVIDIA GPU's /dev/nvidiaN");
  parse_bad("[device.0]\nmemory = 4GiB\nminor = 2\npci = 0000:c1:00.0\nkind = opencl\n",
            "t.conf:5: [device.0] is an OpenCL device: minor = 2");
  parse_ok(
      "[device.0]\nmemory = 4GiB\nkind = cuda\nminor = 0\n[device.1]\nmemory = 4GiB\n"
      "kind = opencl\nopencl = pthread-*\n");
  cr_assert(c.devices[0].has_minor);
  cr_assert(!c.devices[1].has_minor);
}
