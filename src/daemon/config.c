/* config.c: tesserad's configuration: the defaults, the file read with inih
 * behind a strict gate, and the checks only the whole file allows (see
 * config.h for the keys and the rules; the keys' table and the readers of
 * their values are config_keys.c's). */
#include "daemon/config.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Debian's libinih is built to pass the line number to the handler as a
 * fifth argument, but its ini.h (and pkg-config) leave the macro at 0:
 * declare the handler as the library calls it. config.c counts lines itself
 * and does not rely on the value. */
#define INI_HANDLER_LINENO 1
#include <ini.h>

#include "base/fs.h"
#include "base/log.h"
#include "base/time.h"
#include "base/units.h"
#include "daemon/config_keys.h"
#include "proto/proto.h"

#define TSR__CONFIG_FILE_MAX ((size_t)1 << 20)
/* inih's line buffer: the old reader's limit (4095 bytes and a newline). */
#define TSR__INIH_LINE_MAX 4096

void tsr_config_defaults(tsr_config_t *c) {
  memset(c, 0, sizeof(*c));
  snprintf(c->state_dir, sizeof(c->state_dir), "%s", TSR_DEFAULT_STATE_DIR);
  snprintf(c->socket, sizeof(c->socket), "%s", TSR_PROTO_DEFAULT_SOCKET);
  c->socket_mode = 0666;
  snprintf(c->admin_group, sizeof(c->admin_group), "tessera-admin");
  snprintf(c->metrics, sizeof(c->metrics), "%s", TSR_METRICS_DEFAULT);
  c->metrics_request_timeout_ns = TSR_METRICS_REQUEST_TIMEOUT_NS;
  c->devices_from = TSR_DEVICES_AUTO;
  c->sync = TSR_LEASE_SYNC_FULL;
  c->max_lease_ns = 30 * 86400 * TSR_NS_PER_S;
  c->client_timeout_ns = 30 * TSR_NS_PER_S;
  c->max_clients = 1024;
  c->max_clients_per_user = 64;
  c->admin_reserved_clients = 16;
  c->max_queued_bytes = 256ull << 20;
  c->max_queued_bytes_per_user = 32ull << 20;
  c->max_leases_per_user = 64;
  c->max_queued_per_user = 8;
  c->min_lease_ppm = 1000;
  c->min_lease_bytes = 0;
  c->audit_max_bytes = 64ull << 20;
  c->audit_keep = 4;
  c->audit_deny_rate = 5;
  c->busy_poll_ns = 50 * TSR_NS_PER_US;
  c->log_level = TSR_LOG_INFO;
  c->on_expiry = TSR_LEASE_ACTION_REVOKE;
  c->over_limit = TSR_LEASE_OVER_LIMIT_SIGNAL;
  c->expiry_grace_ns = 10 * TSR_NS_PER_S;
  c->backstop_period_ns = 500 * TSR_NS_PER_MS;
  c->policy_deny = false;
  c->share_burst_ns = 50 * TSR_NS_PER_MS;
  c->stream_share_ppm = 1000000;
  c->share_switch_cost_ppm = 60000;
}

/* ---- parsing ------------------------------------------------------------- */

typedef enum tsr__section_e {
  TSR__IN_NONE, /* before the first header */
  TSR__IN_DAEMON,
  TSR__IN_DEVICE
} tsr__section_t;

typedef struct tsr__parse_s {
  tsr_config_t *c;
  const char *name;    /* the file, for messages */
  const char *next;    /* the first byte not yet handed to inih */
  int line;            /* the line handed to inih last (1-based) */
  tsr_status_t status; /* the first error, already "<name>:<line>: ..." */
  tsr__section_t in;
  unsigned device; /* with TSR__IN_DEVICE */
  /* Where each key was set, by its index in tsr_config_daemon_keys or
   * tsr_config_device_keys; 0 = not in the file. */
  int key_line[TSR_CONFIG_DAEMON_KEYS_MAX];
  int dev_line[TSR_CONFIG_MAX_DEVICES]; /* first [device.N] header; 0 = none */
  int dev_key_line[TSR_CONFIG_MAX_DEVICES][TSR_CONFIG_DEVICE_KEYS_MAX];
} tsr__parse_t;

/* Records the first error, at `line` (0: the file as a whole). Returns 0,
 * which is what an inih handler returns for a bad line. */
static int tsr__fail(tsr__parse_t *p, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int tsr__fail(tsr__parse_t *p, int line, const char *fmt, ...) {
  if (p->status) return 0;
  va_list ap;
  va_start(ap, fmt);
  tsr_status_t st = tsr_status_makev(TSR_INVALID_ARGUMENT, fmt, ap);
  va_end(ap);
  p->status = line > 0 ? tsr_status_annotate(st, "%s:%d", p->name, line) : tsr_status_annotate(st, "%s", p->name);
  return 0;
}

/* A setter's refusal as "bad value for <key>: <why>". */
static int tsr__fail_value(tsr__parse_t *p, const char *key, tsr_status_t why) {
  tsr__fail(p, p->line, "bad value for %s: %s", key, tsr_status_message(why));
  tsr_status_free(why);
  return 0;
}

/* Enters the section named `name` (`len` bytes, trimmed). inih never
 * reports a header on its own, so headers are checked here. */
static bool tsr__enter_section(tsr__parse_t *p, const char *name, size_t len) {
  if (len == 6 && memcmp(name, "daemon", 6) == 0) {
    p->in = TSR__IN_DAEMON;
    return true;
  }
  if (len < 7 || memcmp(name, "device.", 7) != 0) {
    tsr__fail(p, p->line, "unknown section [%.*s] (use [daemon] or [device.N])", (int)len, name);
    return false;
  }
  const char *num = name + 7;
  size_t digits = len - 7;
  unsigned idx = 0;
  bool ok = digits >= 1 && digits <= 2 && !(digits == 2 && num[0] == '0');
  for (size_t i = 0; ok && i < digits; i++) {
    ok = isdigit((unsigned char)num[i]);
    idx = idx * 10 + (unsigned)(num[i] - '0');
  }
  if (!ok || idx >= TSR_CONFIG_MAX_DEVICES) {
    tsr__fail(p, p->line, "bad device section [%.*s] (use [device.0] ... [device.%d])", (int)len, name,
              TSR_CONFIG_MAX_DEVICES - 1);
    return false;
  }
  if (!p->dev_line[idx]) {
    p->dev_line[idx] = p->line;
    tsr_device_t *d = &p->c->devices[idx];
    memset(d, 0, sizeof(*d));
    d->index = idx;
    d->source = TSR_DEVICE_FROM_CONFIG;
    d->mig = TSR_DEVICE_MIG_UNKNOWN;
  }
  p->in = TSR__IN_DEVICE;
  p->device = idx;
  return true;
}

/* The gate: inih's reader. It hands inih one line per call, so that inih's
 * line numbers and ours agree, and refuses (ending the input, which stops
 * inih) any line inih would take other than as our rules say:
 *   - a line longer than inih's buffer, which inih would cut, reading the
 *     rest as lines of their own (a long value could smuggle in a key);
 *   - '#' or ';' after whitespace: Debian's inih cuts a value at " ;" and
 *     keeps " #"; comments take whole lines, so both are refused;
 *   - "key: value" (inih's alternative to '=') and a line without '=';
 *   - a bad or unknown "[section]": inih ignores what follows ']', truncates
 *     long names and says nothing of a section without keys.
 * Leading whitespace is dropped before inih sees the line, so it never takes
 * an indented line for the continuation of a value; comment lines reach it
 * blank, whatever comment characters its build knows; a header reaches it as
 * "[name]". A UTF-8 byte-order mark before the first line is skipped. */
static char *tsr__next_line(char *buf, int cap, void *stream) {
  tsr__parse_t *p = stream;
  if (p->status || *p->next == '\0') return NULL;
  const char *s = p->next;
  const char *nl = strchr(s, '\n');
  size_t len = nl ? (size_t)(nl - s) : strlen(s);
  p->next = s + len + (nl ? 1 : 0);
  p->line++;
  if (p->line == 1 && len >= 3 && memcmp(s, "\xEF\xBB\xBF", 3) == 0) {
    s += 3;
    len -= 3;
  }
  if (cap < 3 || len > (size_t)cap - 3) {
    tsr__fail(p, p->line, "line longer than %d bytes", cap < 3 ? 0 : cap - 3);
    return NULL;
  }
  while (len > 0 && isspace((unsigned char)s[0])) s++, len--;
  while (len > 0 && isspace((unsigned char)s[len - 1])) len--;
  if (len == 0 || s[0] == '#' || s[0] == ';') {
    buf[0] = '\n';
    buf[1] = '\0';
    return buf;
  }
  int shown = len > 80 ? 80 : (int)len;
  for (size_t i = 1; i < len; i++)
    if ((s[i] == '#' || s[i] == ';') && isspace((unsigned char)s[i - 1])) {
      tsr__fail(p, p->line, "'%c' after a space: comments take whole lines (in '%.*s')", s[i], shown, s);
      return NULL;
    }
  if (s[0] == '[') {
    if (len < 2 || s[len - 1] != ']') {
      tsr__fail(p, p->line, "bad section header '%.*s'", shown, s);
      return NULL;
    }
    const char *name = s + 1;
    size_t n = len - 2;
    while (n > 0 && isspace((unsigned char)name[0])) name++, n--;
    while (n > 0 && isspace((unsigned char)name[n - 1])) n--;
    if (!tsr__enter_section(p, name, n)) return NULL;
    /* a valid name is at most "device.63": it fits inih's section buffer */
    snprintf(buf, (size_t)cap, "[%.*s]\n", (int)n, name);
    return buf;
  }
  size_t sep = 0;
  while (sep < len && s[sep] != '=' && s[sep] != ':') sep++;
  if (sep == len) {
    tsr__fail(p, p->line, "expected '[section]' or 'key = value', got '%.*s'", shown, s);
    return NULL;
  }
  if (s[sep] == ':') {
    tsr__fail(p, p->line, "expected 'key = value', got '%.*s' (':' is not '=')", shown, s);
    return NULL;
  }
  memcpy(buf, s, len);
  buf[len] = '\n';
  buf[len + 1] = '\0';
  return buf;
}

static int tsr__unknown_key(tsr__parse_t *p, const char *key) {
  if (p->in == TSR__IN_DAEMON) return tsr__fail(p, p->line, "unknown key '%s' in [daemon]", key);
  char names[256];
  tsr_config_key_names(&tsr_config_device_keys, names, sizeof(names));
  return tsr__fail(p, p->line, "unknown device key '%s' (use %s)", key, names);
}

/* inih's handler: one "key = value" the gate let through. The section is
 * the gate's (inih's copy says the same). */
static int tsr__on_key(void *user, const char *section, const char *key, const char *value, int lineno) {
  tsr__parse_t *p = user;
  (void)section;
  (void)lineno;
  if (key[0] == '\0') return tsr__fail(p, p->line, "missing key before '='");
  const tsr_config_keys_t *keys = NULL;
  int *key_line = NULL;
  void *into = NULL;
  switch (p->in) {
    case TSR__IN_DAEMON: keys = &tsr_config_daemon_keys, key_line = p->key_line, into = p->c; break;
    case TSR__IN_DEVICE:
      keys = &tsr_config_device_keys, key_line = p->dev_key_line[p->device], into = &p->c->devices[p->device];
      break;
    case TSR__IN_NONE: return tsr__fail(p, p->line, "key '%s' outside any section (put it under [daemon])", key);
  }
  int k = tsr_config_key_find(keys, key);
  if (k < 0) return tsr__unknown_key(p, key);
  if (key_line[k]) return tsr__fail(p, p->line, "duplicate key '%s' (set on line %d)", key, key_line[k]);
  key_line[k] = p->line;
  tsr_status_t why = tsr_config_key_set(keys, k, into, value);
  return why ? tsr__fail_value(p, key, why) : 1;
}

/* The line that set field `f` of [daemon], or of [device.i]; 0 = not set
 * in the file. */
#define TSR__DAEMON_LINE(p, f) tsr__line((p)->key_line, &tsr_config_daemon_keys, offsetof(tsr_config_t, f))
#define TSR__DEVICE_LINE(p, i, f) tsr__line((p)->dev_key_line[i], &tsr_config_device_keys, offsetof(tsr_device_t, f))

static int tsr__line(const int *key_line, const tsr_config_keys_t *keys, size_t offset) {
  int k = tsr_config_key_of_field(keys, offset);
  return k < 0 ? 0 : key_line[k];
}

static int tsr__later(int a, int b) { return a > b ? a : b; }

/* What only the whole file can tell: device numbering, and limits set by
 * two keys in either order (named at the later of their lines). */
static void tsr__check_whole(tsr__parse_t *p) {
  tsr_config_t *c = p->c;
  size_t n = 0;
  while (n < TSR_CONFIG_MAX_DEVICES && p->dev_line[n]) n++;
  for (size_t i = n; i < TSR_CONFIG_MAX_DEVICES; i++)
    if (p->dev_line[i]) tsr__fail(p, p->dev_line[i], "[device.%zu] without [device.%zu]: number devices 0..N-1", i, n);
  for (size_t i = 0; i < n; i++) {
    tsr_device_t *d = &c->devices[i];
    int kind_line = TSR__DEVICE_LINE(p, i, kind), minor_line = TSR__DEVICE_LINE(p, i, minor);
    if (!TSR__DEVICE_LINE(p, i, total_bytes)) tsr__fail(p, p->dev_line[i], "[device.%zu] needs memory = <size>", i);
    if (!TSR__DEVICE_LINE(p, i, name) && d->kind == TSR_DEVICE_KIND_OPENCL)
      snprintf(d->name, sizeof(d->name), "OpenCL %s", d->opencl[0] ? d->opencl : d->pci);
    else if (!TSR__DEVICE_LINE(p, i, name))
      snprintf(d->name, sizeof(d->name), "GPU %zu", i);
    if (d->kind == TSR_DEVICE_KIND_OPENCL && !d->pci[0] && !d->opencl[0])
      tsr__fail(p, kind_line,
                "[device.%zu] is an OpenCL device: say how to find it (opencl = <device name> "
                "or pci = <bus id>)",
                i);
    /* a minor names an NVIDIA GPU's /dev/nvidiaN, which Slurm gives a job:
     * an OpenCL-only device has none, and a job given that file must
     * never be leased on it */
    if (d->kind == TSR_DEVICE_KIND_OPENCL && d->has_minor)
      tsr__fail(p, tsr__later(minor_line, kind_line),
                "[device.%zu] is an OpenCL device: minor = %" PRIu32
                " names an NVIDIA GPU's "
                "/dev/nvidiaN, which it has none of (drop minor, or kind = cuda)",
                i, d->minor);
    /* one device file is one GPU: two devices with one minor would let a
     * job given one of them be leased on the other */
    for (size_t j = 0; j < i && d->has_minor; j++)
      if (c->devices[j].has_minor && c->devices[j].minor == d->minor)
        tsr__fail(p, minor_line,
                  "[device.%zu] has minor = %" PRIu32
                  " as [device.%zu] has (line %d): each "
                  "/dev/nvidiaN is one device",
                  i, d->minor, j, TSR__DEVICE_LINE(p, j, minor));
  }
  if (n > 0) c->device_count = n;

  int reserved = TSR__DAEMON_LINE(p, admin_reserved_clients), clients = TSR__DAEMON_LINE(p, max_clients);
  if (c->admin_reserved_clients >= c->max_clients)
    tsr__fail(p, tsr__later(reserved, clients),
              "admin_reserved_clients (%" PRIu32 "%s) must be less than max_clients (%" PRIu32
              "%s): users need at least one connection",
              c->admin_reserved_clients, reserved ? "" : ", the default", c->max_clients,
              clients ? "" : ", the default");
  int per_user = TSR__DAEMON_LINE(p, max_queued_bytes_per_user), total = TSR__DAEMON_LINE(p, max_queued_bytes);
  if (c->max_queued_bytes_per_user > c->max_queued_bytes) {
    char per_user_size[32], total_size[32];
    tsr_format_size(c->max_queued_bytes_per_user, per_user_size, sizeof(per_user_size));
    tsr_format_size(c->max_queued_bytes, total_size, sizeof(total_size));
    tsr__fail(p, tsr__later(per_user, total), "max_queued_bytes_per_user (%s%s) is more than max_queued_bytes (%s%s)",
              per_user_size, per_user ? "" : ", the default", total_size, total ? "" : ", the default");
  }
}

/* Debian builds inih with its options as process-wide variables (ini.h:
 * ini_max_line and others; upstream has only the macros). Its lines are
 * 200 bytes, too short for a 255-byte path: raise that, once per process.
 * The other options are left as built: the gate makes them irrelevant. */
static pthread_once_t tsr__inih_once = PTHREAD_ONCE_INIT;

static void tsr__inih_setup(void) {
  if (ini_max_line < TSR__INIH_LINE_MAX) ini_max_line = TSR__INIH_LINE_MAX;
}

tsr_status_t tsr_config_parse(const char *text, const char *name, tsr_config_t *config) {
  pthread_once(&tsr__inih_once, tsr__inih_setup);
  tsr__parse_t p = {.c = config, .name = name, .next = text};
  int rc = ini_parse_stream(tsr__next_line, &p, tsr__on_key, &p);
  if (rc == -2) {
    tsr__fail(&p, 0, "out of memory");
  } else if (rc != 0 && !p.status) {
    /* inih refused a line the gate passed: the gate is missing a rule */
    tsr__fail(&p, rc, "line not understood");
  }
  if (!p.status) tsr__check_whole(&p);
  return p.status;
}

tsr_status_t tsr_config_load(const char *path, tsr_config_t *config) {
  /* An admin may make the configuration a symbolic link (to a managed copy),
   * so resolve it; then open what it names as base/fs opens every file: as
   * a regular file only, never blocking on a FIFO or a device, which is
   * refused at once instead of hanging the daemon at start-up. */
  char *real = realpath(path, NULL);
  if (!real) return tsr_status_from_errno(errno, "config file %s", path);
  char *text = NULL;
  size_t len = 0;
  tsr_status_t st = tsr_fs_read_file(AT_FDCWD, real, TSR__CONFIG_FILE_MAX, &text, &len);
  if (st) {
    st = strcmp(real, path) == 0 ? tsr_status_annotate(st, "config file")
                                 : tsr_status_annotate(st, "config file %s", path);
    free(real);
    return st;
  }
  free(real);
  if (memchr(text, '\0', len)) {
    free(text);
    return tsr_status_make(TSR_INVALID_ARGUMENT, "config file %s holds a NUL byte: not a text file", path);
  }
  st = tsr_config_parse(text, path, config);
  free(text);
  return st;
}
