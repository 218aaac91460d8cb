/* config.c: tesserad's configuration, read with inih behind a strict gate
 * (see config.h for the keys and the rules). */
#include "daemon/config.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
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

/* ---- values --------------------------------------------------------------
 * Each setter reads one value into the configuration or says what is wrong
 * with it; the caller adds "<file>:<line>: bad value for <key>: ". */

TSR_MUST_USE static tsr_status_t tsr__string(const char *v, bool absolute, char *dst, size_t cap) {
  size_t n = strlen(v);
  if (n == 0) return tsr_status_make(TSR_INVALID_ARGUMENT, "empty");
  if (absolute && v[0] != '/') return tsr_status_make(TSR_INVALID_ARGUMENT, "'%s' is not an absolute path", v);
  if (n >= cap) return tsr_status_make(TSR_INVALID_ARGUMENT, "longer than %zu bytes", cap - 1);
  memcpy(dst, v, n + 1);
  return NULL;
}

TSR_MUST_USE static tsr_status_t tsr__u32(const char *v, uint32_t min, uint32_t max, uint32_t *out) {
  uint64_t u = 0;
  tsr_status_t st = tsr_parse_u64(v, &u);
  if (st || u < min || u > max) {
    tsr_status_free(st);
    return tsr_status_make(TSR_INVALID_ARGUMENT, "'%s' is not a whole number from %" PRIu32 " to %" PRIu32, v, min,
                           max);
  }
  *out = (uint32_t)u;
  return NULL;
}

TSR_MUST_USE static tsr_status_t tsr__positive_duration(const char *v, uint64_t *out) {
  uint64_t ns = 0;
  TSR_RETURN_IF_ERROR(tsr_parse_duration(v, &ns));
  if (ns == 0) return tsr_status_make(TSR_INVALID_ARGUMENT, "must be more than 0");
  *out = ns;
  return NULL;
}

/* A size of at least `min` bytes, or 0 where `zero_ok` (0 turns a feature off). */
TSR_MUST_USE static tsr_status_t tsr__size(const char *v, uint64_t min, bool zero_ok, uint64_t *out) {
  uint64_t bytes = 0;
  TSR_RETURN_IF_ERROR(tsr_parse_size(v, &bytes));
  if (bytes < min && !(zero_ok && bytes == 0)) {
    char m[32];
    tsr_format_size(min, m, sizeof(m));
    return tsr_status_make(TSR_INVALID_ARGUMENT, "'%s' is less than %s%s", v, m, zero_ok ? " (0 turns it off)" : "");
  }
  *out = bytes;
  return NULL;
}

TSR_MUST_USE static tsr_status_t tsr__set_state_dir(tsr_config_t *c, const char *v) {
  return tsr__string(v, true, c->state_dir, sizeof(c->state_dir));
}

TSR_MUST_USE static tsr_status_t tsr__set_socket(tsr_config_t *c, const char *v) {
  return tsr__string(v, true, c->socket, sizeof(c->socket));
}

TSR_MUST_USE static tsr_status_t tsr__set_socket_mode(tsr_config_t *c, const char *v) {
  char *end = NULL;
  errno = 0;
  unsigned long m = strtoul(v, &end, 8);
  if (errno || !end || *end || !*v || !isdigit((unsigned char)v[0]) || m > 0777)
    return tsr_status_make(TSR_INVALID_ARGUMENT, "'%s' is not an octal mode 0..0777", v);
  c->socket_mode = (uint32_t)m;
  return NULL;
}

TSR_MUST_USE static tsr_status_t tsr__set_admin_group(tsr_config_t *c, const char *v) {
  return tsr__string(v, false, c->admin_group, sizeof(c->admin_group));
}

TSR_MUST_USE static tsr_status_t tsr__set_devices(tsr_config_t *c, const char *v) {
  if (strcmp(v, "auto") == 0)
    c->devices_from = TSR_DEVICES_AUTO;
  else if (strcmp(v, "nvml") == 0)
    c->devices_from = TSR_DEVICES_NVML;
  else if (strcmp(v, "config") == 0)
    c->devices_from = TSR_DEVICES_CONFIG;
  else
    return tsr_status_make(TSR_INVALID_ARGUMENT, "'%s' (use auto, nvml or config)", v);
  return NULL;
}

TSR_MUST_USE static tsr_status_t tsr__set_sync(tsr_config_t *c, const char *v) {
  if (strcmp(v, "full") == 0)
    c->sync = TSR_LEASE_SYNC_FULL;
  else if (strcmp(v, "none") == 0)
    c->sync = TSR_LEASE_SYNC_NONE;
  else
    return tsr_status_make(TSR_INVALID_ARGUMENT, "'%s' (use full or none)", v);
  return NULL;
}

TSR_MUST_USE static tsr_status_t tsr__set_max_lease(tsr_config_t *c, const char *v) {
  return tsr__positive_duration(v, &c->max_lease_ns);
}

TSR_MUST_USE static tsr_status_t tsr__set_client_timeout(tsr_config_t *c, const char *v) {
  return tsr__positive_duration(v, &c->client_timeout_ns);
}

TSR_MUST_USE static tsr_status_t tsr__set_max_clients(tsr_config_t *c, const char *v) {
  return tsr__u32(v, 1, 65536, &c->max_clients);
}

TSR_MUST_USE static tsr_status_t tsr__set_max_clients_per_user(tsr_config_t *c, const char *v) {
  return tsr__u32(v, 0, 65536, &c->max_clients_per_user);
}

/* Checked against max_clients after the whole file (tsr__check_limits). */
TSR_MUST_USE static tsr_status_t tsr__set_admin_reserved_clients(tsr_config_t *c, const char *v) {
  return tsr__u32(v, 0, 65535, &c->admin_reserved_clients);
}

TSR_MUST_USE static tsr_status_t tsr__set_max_queued_bytes(tsr_config_t *c, const char *v) {
  return tsr__size(v, UINT64_C(1) << 20, false, &c->max_queued_bytes);
}

TSR_MUST_USE static tsr_status_t tsr__set_max_queued_bytes_per_user(tsr_config_t *c, const char *v) {
  return tsr__size(v, UINT64_C(1) << 20, false, &c->max_queued_bytes_per_user);
}

TSR_MUST_USE static tsr_status_t tsr__set_max_leases_per_user(tsr_config_t *c, const char *v) {
  return tsr__u32(v, 0, UINT32_MAX, &c->max_leases_per_user);
}

/* A share or a size, never a bare number: "256" could mean 256 bytes or
 * (as a lock file writes a share) 25600%. "0" alone is clear: no minimum. */
TSR_MUST_USE static tsr_status_t tsr__set_min_lease(tsr_config_t *c, const char *v) {
  if (strcmp(v, "0") == 0) {
    c->min_lease_ppm = 0;
    c->min_lease_bytes = 0;
    return NULL;
  }
  if (v[strspn(v, "0123456789")] == '\0')
    return tsr_status_make(TSR_INVALID_ARGUMENT,
                           "'%s' is a bare number: write a share such as 0.1%% or a size such "
                           "as 256MiB (0 for no minimum)",
                           v);
  uint32_t ppm = 0;
  uint64_t bytes = 0;
  TSR_RETURN_IF_ERROR(tsr_parse_share_or_size(v, &ppm, &bytes));
  c->min_lease_ppm = ppm;
  c->min_lease_bytes = bytes;
  return NULL;
}

TSR_MUST_USE static tsr_status_t tsr__set_audit_max_size(tsr_config_t *c, const char *v) {
  return tsr__size(v, UINT64_C(64) << 10, true, &c->audit_max_bytes);
}

TSR_MUST_USE static tsr_status_t tsr__set_audit_keep(tsr_config_t *c, const char *v) {
  return tsr__u32(v, 0, 1000, &c->audit_keep);
}

TSR_MUST_USE static tsr_status_t tsr__set_audit_deny_rate(tsr_config_t *c, const char *v) {
  return tsr__u32(v, 0, UINT32_MAX, &c->audit_deny_rate);
}

TSR_MUST_USE static tsr_status_t tsr__set_busy_poll(tsr_config_t *c, const char *v) {
  if (strcmp(v, "0") == 0) {
    c->busy_poll_ns = 0;
    return NULL;
  }
  uint64_t ns = 0;
  TSR_RETURN_IF_ERROR(tsr_parse_duration(v, &ns));
  if (ns > TSR_CONFIG_BUSY_POLL_MAX_NS)
    return tsr_status_make(TSR_INVALID_ARGUMENT, "'%s' is too long (at most 10ms, or 0 to sleep at once)", v);
  c->busy_poll_ns = ns;
  return NULL;
}

TSR_MUST_USE static tsr_status_t tsr__set_log_level(tsr_config_t *c, const char *v) {
  int level = tsr_log_level_parse(v);
  if (level < 0) return tsr_status_make(TSR_INVALID_ARGUMENT, "'%s' (use error, warn, info or debug)", v);
  c->log_level = level;
  return NULL;
}

TSR_MUST_USE static tsr_status_t tsr__set_region_dir(tsr_config_t *c, const char *v) {
  return tsr__string(v, true, c->region_dir, sizeof(c->region_dir));
}

TSR_MUST_USE static tsr_status_t tsr__set_on_expiry(tsr_config_t *c, const char *v) {
  if (!tsr_lease_action_parse(v, &c->on_expiry))
    return tsr_status_make(TSR_INVALID_ARGUMENT, "'%s' (use revoke or signal)", v);
  return NULL;
}

TSR_MUST_USE static tsr_status_t tsr__set_over_limit(tsr_config_t *c, const char *v) {
  if (!tsr_lease_over_limit_parse(v, &c->over_limit))
    return tsr_status_make(TSR_INVALID_ARGUMENT, "'%s' (use signal or log)", v);
  return NULL;
}

/* A duration from `min` to `max`, or "0" where `zero_off` (it turns the
 * feature off). Out of range names both bounds as people write them
 * ("'2h' is out of range (1ms to 1h)"). */
TSR_MUST_USE static tsr_status_t tsr__duration_in(const char *v, uint64_t min, uint64_t max, bool zero_off,
                                                  uint64_t *out) {
  if (zero_off && strcmp(v, "0") == 0) {
    *out = 0;
    return NULL;
  }
  uint64_t ns = 0;
  TSR_RETURN_IF_ERROR(tsr_parse_duration(v, &ns));
  if (ns < min || ns > max) {
    char lo[32], hi[32];
    tsr_time_format_duration(min, lo, sizeof(lo));
    tsr_time_format_duration(max, hi, sizeof(hi));
    return tsr_status_make(TSR_INVALID_ARGUMENT, "'%s' is out of range (%s to %s%s)", v, lo, hi,
                           zero_off ? ", or 0 for never" : "");
  }
  *out = ns;
  return NULL;
}

TSR_MUST_USE static tsr_status_t tsr__set_expiry_grace(tsr_config_t *c, const char *v) {
  return tsr__duration_in(v, TSR_NS_PER_MS, 3600 * TSR_NS_PER_S, false, &c->expiry_grace_ns);
}

TSR_MUST_USE static tsr_status_t tsr__set_backstop_period(tsr_config_t *c, const char *v) {
  return tsr__duration_in(v, TSR_NS_PER_MS, 3600 * TSR_NS_PER_S, true, &c->backstop_period_ns);
}

TSR_MUST_USE static tsr_status_t tsr__set_policy(tsr_config_t *c, const char *v) {
  if (strcmp(v, "pass") == 0)
    c->policy_deny = false;
  else if (strcmp(v, "deny") == 0)
    c->policy_deny = true;
  else
    return tsr_status_make(TSR_INVALID_ARGUMENT, "'%s' (use pass or deny)", v);
  return NULL;
}

TSR_MUST_USE static tsr_status_t tsr__set_share_burst(tsr_config_t *c, const char *v) {
  return tsr__duration_in(v, TSR_NS_PER_MS, 10 * TSR_NS_PER_S, false, &c->share_burst_ns);
}

TSR_MUST_USE static tsr_status_t tsr__set_stream_share(tsr_config_t *c, const char *v) {
  uint32_t ppm = 0;
  TSR_RETURN_IF_ERROR(tsr_parse_share(v, &ppm));
  if (ppm == 0) return tsr_status_make(TSR_INVALID_ARGUMENT, "'%s': a stream needs a share above 0", v);
  c->stream_share_ppm = ppm;
  return NULL;
}

TSR_MUST_USE static tsr_status_t tsr__set_share_switch_cost(tsr_config_t *c, const char *v) {
  uint32_t ppm = 0;
  TSR_RETURN_IF_ERROR(tsr_parse_share(v, &ppm));
  if (ppm > TSR_PPM_ONE / 2) return tsr_status_make(TSR_INVALID_ARGUMENT, "'%s' is out of range (0%% to 50%%)", v);
  c->share_switch_cost_ppm = ppm;
  return NULL;
}

tsr_status_t tsr_config_parse_listen(const char *text, struct sockaddr_storage *out, socklen_t *out_len) {
  memset(out, 0, sizeof(*out));
  const char *colon = strrchr(text, ':');
  if (!colon || colon == text || !colon[1])
    return tsr_status_make(TSR_INVALID_ARGUMENT, "metrics '%s': write HOST:PORT (127.0.0.1:9464, [::1]:9464) or off",
                           text);
  char *end = NULL;
  errno = 0;
  unsigned long port = strtoul(colon + 1, &end, 10);
  if (errno || *end || port == 0 || port > 65535 || colon[1] < '0' || colon[1] > '9')
    return tsr_status_make(TSR_INVALID_ARGUMENT, "metrics '%s': the port must be 1 to 65535", text);
  char host[64];
  size_t hl = (size_t)(colon - text);
  if (hl >= sizeof(host)) return tsr_status_make(TSR_INVALID_ARGUMENT, "metrics '%s': host too long", text);
  memcpy(host, text, hl);
  host[hl] = '\0';
  if (host[0] == '[') {
    if (hl < 3 || host[hl - 1] != ']')
      return tsr_status_make(TSR_INVALID_ARGUMENT, "metrics '%s': an IPv6 host goes in brackets: [::1]:9464", text);
    host[hl - 1] = '\0';
    struct sockaddr_in6 *a = (struct sockaddr_in6 *)out;
    if (inet_pton(AF_INET6, host + 1, &a->sin6_addr) != 1)
      return tsr_status_make(TSR_INVALID_ARGUMENT, "metrics '%s': '%s' is not an IPv6 address", text, host + 1);
    a->sin6_family = AF_INET6;
    a->sin6_port = htons((uint16_t)port);
    *out_len = sizeof(*a);
    return NULL;
  }
  struct sockaddr_in *a = (struct sockaddr_in *)out;
  if (strcmp(host, "localhost") == 0) snprintf(host, sizeof(host), "127.0.0.1");
  if (inet_pton(AF_INET, host, &a->sin_addr) != 1)
    return tsr_status_make(TSR_INVALID_ARGUMENT, "metrics '%s': '%s' is not an IPv4 address (or localhost, or [IPv6])",
                           text, host);
  a->sin_family = AF_INET;
  a->sin_port = htons((uint16_t)port);
  *out_len = sizeof(*a);
  return NULL;
}

TSR_MUST_USE static tsr_status_t tsr__set_metrics(tsr_config_t *c, const char *v) {
  if (strcmp(v, "off") != 0) {
    struct sockaddr_storage addr;
    socklen_t len;
    TSR_RETURN_IF_ERROR(tsr_config_parse_listen(v, &addr, &len));
  }
  return tsr__string(v, false, c->metrics, sizeof(c->metrics));
}

/* Long enough for a scraper across a network to send a request, short
 * enough that a client trickling one never holds its slot for long. */
TSR_MUST_USE static tsr_status_t tsr__set_metrics_request_timeout(tsr_config_t *c, const char *v) {
  return tsr__duration_in(v, 100 * TSR_NS_PER_MS, 60 * TSR_NS_PER_S, false, &c->metrics_request_timeout_ns);
}

TSR_MUST_USE static tsr_status_t tsr__set_metrics_group(tsr_config_t *c, const char *v) {
  return tsr__string(v, false, c->metrics_group, sizeof(c->metrics_group));
}

TSR_MUST_USE static tsr_status_t tsr__set_metrics_remote(tsr_config_t *c, const char *v) {
  if (strcmp(v, "counts") == 0)
    c->metrics_remote_full = false;
  else if (strcmp(v, "full") == 0)
    c->metrics_remote_full = true;
  else
    return tsr_status_make(TSR_INVALID_ARGUMENT, "'%s' (use counts or full)", v);
  return NULL;
}

TSR_MUST_USE static tsr_status_t tsr__set_audit_log(tsr_config_t *c, const char *v) {
  return tsr__string(v, true, c->audit_log, sizeof(c->audit_log));
}

/* ---- keys ---------------------------------------------------------------- */

typedef enum tsr__key_e {
  TSR__KEY_STATE_DIR,
  TSR__KEY_SOCKET,
  TSR__KEY_SOCKET_MODE,
  TSR__KEY_ADMIN_GROUP,
  TSR__KEY_DEVICES,
  TSR__KEY_SYNC,
  TSR__KEY_MAX_LEASE,
  TSR__KEY_CLIENT_TIMEOUT,
  TSR__KEY_MAX_CLIENTS,
  TSR__KEY_MAX_CLIENTS_PER_USER,
  TSR__KEY_ADMIN_RESERVED_CLIENTS,
  TSR__KEY_MAX_QUEUED_BYTES,
  TSR__KEY_MAX_QUEUED_BYTES_PER_USER,
  TSR__KEY_MAX_LEASES_PER_USER,
  TSR__KEY_MIN_LEASE,
  TSR__KEY_AUDIT_MAX_SIZE,
  TSR__KEY_AUDIT_KEEP,
  TSR__KEY_AUDIT_DENY_RATE,
  TSR__KEY_BUSY_POLL,
  TSR__KEY_LOG_LEVEL,
  TSR__KEY_AUDIT_LOG,
  TSR__KEY_REGION_DIR,
  TSR__KEY_ON_EXPIRY,
  TSR__KEY_OVER_LIMIT,
  TSR__KEY_EXPIRY_GRACE,
  TSR__KEY_BACKSTOP_PERIOD,
  TSR__KEY_POLICY,
  TSR__KEY_SHARE_BURST,
  TSR__KEY_STREAM_SHARE,
  TSR__KEY_SHARE_SWITCH_COST,
  TSR__KEY_METRICS,
  TSR__KEY_METRICS_REQUEST_TIMEOUT,
  TSR__KEY_METRICS_GROUP,
  TSR__KEY_METRICS_REMOTE,
  TSR__KEY_COUNT
} tsr__key_t;

typedef struct tsr__daemon_key_s {
  const char *name;
  tsr_status_t (*set)(tsr_config_t *c, const char *value);
} tsr__daemon_key_t;

static const tsr__daemon_key_t tsr__daemon_keys[TSR__KEY_COUNT] = {
    [TSR__KEY_STATE_DIR] = {"state_dir", tsr__set_state_dir},
    [TSR__KEY_SOCKET] = {"socket", tsr__set_socket},
    [TSR__KEY_SOCKET_MODE] = {"socket_mode", tsr__set_socket_mode},
    [TSR__KEY_ADMIN_GROUP] = {"admin_group", tsr__set_admin_group},
    [TSR__KEY_DEVICES] = {"devices", tsr__set_devices},
    [TSR__KEY_SYNC] = {"sync", tsr__set_sync},
    [TSR__KEY_MAX_LEASE] = {"max_lease", tsr__set_max_lease},
    [TSR__KEY_CLIENT_TIMEOUT] = {"client_timeout", tsr__set_client_timeout},
    [TSR__KEY_MAX_CLIENTS] = {"max_clients", tsr__set_max_clients},
    [TSR__KEY_MAX_CLIENTS_PER_USER] = {"max_clients_per_user", tsr__set_max_clients_per_user},
    [TSR__KEY_ADMIN_RESERVED_CLIENTS] = {"admin_reserved_clients", tsr__set_admin_reserved_clients},
    [TSR__KEY_MAX_QUEUED_BYTES] = {"max_queued_bytes", tsr__set_max_queued_bytes},
    [TSR__KEY_MAX_QUEUED_BYTES_PER_USER] = {"max_queued_bytes_per_user", tsr__set_max_queued_bytes_per_user},
    [TSR__KEY_MAX_LEASES_PER_USER] = {"max_leases_per_user", tsr__set_max_leases_per_user},
    [TSR__KEY_MIN_LEASE] = {"min_lease", tsr__set_min_lease},
    [TSR__KEY_AUDIT_MAX_SIZE] = {"audit_max_size", tsr__set_audit_max_size},
    [TSR__KEY_AUDIT_KEEP] = {"audit_keep", tsr__set_audit_keep},
    [TSR__KEY_AUDIT_DENY_RATE] = {"audit_deny_rate", tsr__set_audit_deny_rate},
    [TSR__KEY_BUSY_POLL] = {"busy_poll", tsr__set_busy_poll},
    [TSR__KEY_LOG_LEVEL] = {"log_level", tsr__set_log_level},
    [TSR__KEY_AUDIT_LOG] = {"audit_log", tsr__set_audit_log},
    [TSR__KEY_REGION_DIR] = {"region_dir", tsr__set_region_dir},
    [TSR__KEY_ON_EXPIRY] = {"on_expiry", tsr__set_on_expiry},
    [TSR__KEY_OVER_LIMIT] = {"over_limit", tsr__set_over_limit},
    [TSR__KEY_EXPIRY_GRACE] = {"expiry_grace", tsr__set_expiry_grace},
    [TSR__KEY_BACKSTOP_PERIOD] = {"backstop_period", tsr__set_backstop_period},
    [TSR__KEY_POLICY] = {"policy", tsr__set_policy},
    [TSR__KEY_SHARE_BURST] = {"share_burst", tsr__set_share_burst},
    [TSR__KEY_STREAM_SHARE] = {"stream_share", tsr__set_stream_share},
    [TSR__KEY_SHARE_SWITCH_COST] = {"share_switch_cost", tsr__set_share_switch_cost},
    [TSR__KEY_METRICS] = {"metrics", tsr__set_metrics},
    [TSR__KEY_METRICS_REQUEST_TIMEOUT] = {"metrics_request_timeout", tsr__set_metrics_request_timeout},
    [TSR__KEY_METRICS_GROUP] = {"metrics_group", tsr__set_metrics_group},
    [TSR__KEY_METRICS_REMOTE] = {"metrics_remote", tsr__set_metrics_remote},
};

TSR_MUST_USE static tsr_status_t tsr__set_dev_name(tsr_device_t *d, const char *v) {
  return tsr__string(v, false, d->name, sizeof(d->name));
}

TSR_MUST_USE static tsr_status_t tsr__set_dev_memory(tsr_device_t *d, const char *v) {
  return tsr__size(v, 1, false, &d->total_bytes);
}

TSR_MUST_USE static tsr_status_t tsr__set_dev_sms(tsr_device_t *d, const char *v) {
  return tsr__u32(v, 0, 100000, &d->sm_count);
}

TSR_MUST_USE static tsr_status_t tsr__set_dev_uuid(tsr_device_t *d, const char *v) {
  return tsr__string(v, false, d->uuid, sizeof(d->uuid));
}

TSR_MUST_USE static tsr_status_t tsr__set_dev_kind(tsr_device_t *d, const char *v) {
  if (strcmp(v, "cuda") == 0)
    d->kind = TSR_DEVICE_KIND_CUDA;
  else if (strcmp(v, "opencl") == 0)
    d->kind = TSR_DEVICE_KIND_OPENCL;
  else
    return tsr_status_make(TSR_INVALID_ARGUMENT, "'%s' is neither cuda nor opencl", v);
  return NULL;
}

TSR_MUST_USE static tsr_status_t tsr__set_dev_pci(tsr_device_t *d, const char *v) {
  if (!tsr_device_pci_normalize(v, d->pci))
    return tsr_status_make(TSR_INVALID_ARGUMENT,
                           "'%s' is not a PCI bus id (domain:bus:device.function, e.g. 0000:3b:00.0)", v);
  return NULL;
}

/* The N of the device's /dev/nvidiaN: what Slurm's gres.conf names it by
 * (the Slurm plugin leases the device whose minor is the number of the
 * file Slurm gave the job). Only a CUDA device has one (tsr__check_whole). */
TSR_MUST_USE static tsr_status_t tsr__set_dev_minor(tsr_device_t *d, const char *v) {
  tsr_status_t st = tsr__u32(v, 0, TSR_DEVICE_MINOR_MAX, &d->minor);
  if (st) return tsr_status_annotate(st, "not a device minor number (the N of /dev/nvidiaN)");
  d->has_minor = true;
  return NULL;
}

TSR_MUST_USE static tsr_status_t tsr__set_dev_opencl(tsr_device_t *d, const char *v) {
  size_t n = strlen(v);
  const char *star = memchr(v, '*', n);
  if (n == 0 || strcmp(v, "*") == 0)
    return tsr_status_make(TSR_INVALID_ARGUMENT, "give the OpenCL device's name (clinfo -l), or its beginning and '*'");
  if (star && star != v + n - 1) return tsr_status_make(TSR_INVALID_ARGUMENT, "'*' may only end the name");
  return tsr__string(v, false, d->opencl, sizeof(d->opencl));
}

typedef enum tsr__dev_key_e {
  TSR__DEV_NAME,
  TSR__DEV_MEMORY,
  TSR__DEV_SMS,
  TSR__DEV_UUID,
  TSR__DEV_KIND,
  TSR__DEV_PCI,
  TSR__DEV_OPENCL,
  TSR__DEV_MINOR,
  TSR__DEV_KEY_COUNT
} tsr__dev_key_t;

typedef struct tsr__device_key_s {
  const char *name;
  tsr_status_t (*set)(tsr_device_t *d, const char *value);
} tsr__device_key_t;

static const tsr__device_key_t tsr__device_keys[TSR__DEV_KEY_COUNT] = {
    [TSR__DEV_NAME] = {"name", tsr__set_dev_name},       [TSR__DEV_MEMORY] = {"memory", tsr__set_dev_memory},
    [TSR__DEV_SMS] = {"sms", tsr__set_dev_sms},          [TSR__DEV_UUID] = {"uuid", tsr__set_dev_uuid},
    [TSR__DEV_KIND] = {"kind", tsr__set_dev_kind},       [TSR__DEV_PCI] = {"pci", tsr__set_dev_pci},
    [TSR__DEV_OPENCL] = {"opencl", tsr__set_dev_opencl}, [TSR__DEV_MINOR] = {"minor", tsr__set_dev_minor},
};

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
  unsigned device;                      /* with TSR__IN_DEVICE */
  int key_line[TSR__KEY_COUNT];         /* where each [daemon] key was set; 0 = not here */
  int dev_line[TSR_CONFIG_MAX_DEVICES]; /* first [device.N] header; 0 = none */
  int dev_key_line[TSR_CONFIG_MAX_DEVICES][TSR__DEV_KEY_COUNT];
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

static int tsr__daemon_key(tsr__parse_t *p, const char *key, const char *value) {
  int k = 0;
  while (k < TSR__KEY_COUNT && strcmp(key, tsr__daemon_keys[k].name) != 0) k++;
  if (k == TSR__KEY_COUNT) return tsr__fail(p, p->line, "unknown key '%s' in [daemon]", key);
  if (p->key_line[k]) return tsr__fail(p, p->line, "duplicate key '%s' (set on line %d)", key, p->key_line[k]);
  p->key_line[k] = p->line;
  tsr_status_t why = tsr__daemon_keys[k].set(p->c, value);
  return why ? tsr__fail_value(p, key, why) : 1;
}

static int tsr__device_key(tsr__parse_t *p, const char *key, const char *value) {
  int k = 0;
  while (k < TSR__DEV_KEY_COUNT && strcmp(key, tsr__device_keys[k].name) != 0) k++;
  if (k == TSR__DEV_KEY_COUNT)
    return tsr__fail(p, p->line, "unknown device key '%s' (use name, memory, sms, uuid, kind, pci, opencl, minor)",
                     key);
  int *seen = &p->dev_key_line[p->device][k];
  if (*seen) return tsr__fail(p, p->line, "duplicate key '%s' (set on line %d)", key, *seen);
  *seen = p->line;
  tsr_status_t why = tsr__device_keys[k].set(&p->c->devices[p->device], value);
  return why ? tsr__fail_value(p, key, why) : 1;
}

/* inih's handler: one "key = value" the gate let through. The section is
 * the gate's (inih's copy says the same). */
static int tsr__on_key(void *user, const char *section, const char *key, const char *value, int lineno) {
  tsr__parse_t *p = user;
  (void)section;
  (void)lineno;
  if (key[0] == '\0') return tsr__fail(p, p->line, "missing key before '='");
  switch (p->in) {
    case TSR__IN_DAEMON: return tsr__daemon_key(p, key, value);
    case TSR__IN_DEVICE: return tsr__device_key(p, key, value);
    case TSR__IN_NONE: break;
  }
  return tsr__fail(p, p->line, "key '%s' outside any section (put it under [daemon])", key);
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
    if (!p->dev_key_line[i][TSR__DEV_MEMORY]) tsr__fail(p, p->dev_line[i], "[device.%zu] needs memory = <size>", i);
    tsr_device_t *d = &c->devices[i];
    if (!p->dev_key_line[i][TSR__DEV_NAME] && d->kind == TSR_DEVICE_KIND_OPENCL)
      snprintf(d->name, sizeof(d->name), "OpenCL %s", d->opencl[0] ? d->opencl : d->pci);
    else if (!p->dev_key_line[i][TSR__DEV_NAME])
      snprintf(d->name, sizeof(d->name), "GPU %zu", i);
    if (d->kind == TSR_DEVICE_KIND_OPENCL && !d->pci[0] && !d->opencl[0])
      tsr__fail(p, p->dev_key_line[i][TSR__DEV_KIND],
                "[device.%zu] is an OpenCL device: say how to find it (opencl = <device name> "
                "or pci = <bus id>)",
                i);
    /* a minor names an NVIDIA GPU's /dev/nvidiaN, which Slurm gives a job:
     * an OpenCL-only device has none, and a job given that file must
     * never be leased on it */
    if (d->kind == TSR_DEVICE_KIND_OPENCL && d->has_minor)
      tsr__fail(p, tsr__later(p->dev_key_line[i][TSR__DEV_MINOR], p->dev_key_line[i][TSR__DEV_KIND]),
                "[device.%zu] is an OpenCL device: minor = %" PRIu32
                " names an NVIDIA GPU's "
                "/dev/nvidiaN, which it has none of (drop minor, or kind = cuda)",
                i, d->minor);
    /* one device file is one GPU: two devices with one minor would let a
     * job given one of them be leased on the other */
    for (size_t j = 0; j < i && d->has_minor; j++)
      if (c->devices[j].has_minor && c->devices[j].minor == d->minor)
        tsr__fail(p, p->dev_key_line[i][TSR__DEV_MINOR],
                  "[device.%zu] has minor = %" PRIu32
                  " as [device.%zu] has (line %d): each "
                  "/dev/nvidiaN is one device",
                  i, d->minor, j, p->dev_key_line[j][TSR__DEV_MINOR]);
  }
  if (n > 0) c->device_count = n;

  const int *kl = p->key_line;
  if (c->admin_reserved_clients >= c->max_clients)
    tsr__fail(p, tsr__later(kl[TSR__KEY_ADMIN_RESERVED_CLIENTS], kl[TSR__KEY_MAX_CLIENTS]),
              "admin_reserved_clients (%" PRIu32 "%s) must be less than max_clients (%" PRIu32
              "%s): users need at least one connection",
              c->admin_reserved_clients, kl[TSR__KEY_ADMIN_RESERVED_CLIENTS] ? "" : ", the default", c->max_clients,
              kl[TSR__KEY_MAX_CLIENTS] ? "" : ", the default");
  if (c->max_queued_bytes_per_user > c->max_queued_bytes) {
    char per_user[32], total[32];
    tsr_format_size(c->max_queued_bytes_per_user, per_user, sizeof(per_user));
    tsr_format_size(c->max_queued_bytes, total, sizeof(total));
    tsr__fail(p, tsr__later(kl[TSR__KEY_MAX_QUEUED_BYTES_PER_USER], kl[TSR__KEY_MAX_QUEUED_BYTES]),
              "max_queued_bytes_per_user (%s%s) is more than max_queued_bytes (%s%s)", per_user,
              kl[TSR__KEY_MAX_QUEUED_BYTES_PER_USER] ? "" : ", the default", total,
              kl[TSR__KEY_MAX_QUEUED_BYTES] ? "" : ", the default");
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
