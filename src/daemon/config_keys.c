/* config_keys.c: the keys of tesserad's configuration, one entry each in a
 * table per section, and the readers of their values (see config_keys.h for
 * the table's shape, config.h for what each key means). */
#include "daemon/config_keys.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/time.h"
#include "base/units.h"
#include "daemon/config.h"

/* ---- values --------------------------------------------------------------
 * Each reader takes one value or says what is wrong with it; the caller adds
 * "<file>:<line>: bad value for <key>: ". None writes unless the value is
 * good. */

TSR_MUST_USE static tsr_status_t tsr__string(const char *v, bool absolute, char *dst, size_t cap) {
  size_t n = strlen(v);
  if (n == 0) return tsr_status_make(TSR_INVALID_ARGUMENT, "empty");
  if (absolute && v[0] != '/') return tsr_status_make(TSR_INVALID_ARGUMENT, "'%s' is not an absolute path", v);
  if (n >= cap) return tsr_status_make(TSR_INVALID_ARGUMENT, "longer than %zu bytes", cap - 1);
  memcpy(dst, v, n + 1);
  return NULL;
}

TSR_MUST_USE static tsr_status_t tsr__count(const char *v, uint64_t min, uint64_t max, uint64_t *out) {
  uint64_t u = 0;
  tsr_status_t st = tsr_parse_u64(v, &u);
  if (st || u < min || u > max) {
    tsr_status_free(st);
    return tsr_status_make(TSR_INVALID_ARGUMENT, "'%s' is not a whole number from %" PRIu64 " to %" PRIu64, v, min,
                           max);
  }
  *out = u;
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

/* One of `words` ("'x' (use a, b or c)" otherwise). */
TSR_MUST_USE static tsr_status_t tsr__choice(const char *v, const tsr_config_word_t *words, uint64_t *out) {
  for (const tsr_config_word_t *w = words; w->word; w++)
    if (strcmp(v, w->word) == 0) {
      *out = w->value;
      return NULL;
    }
  char list[128];
  size_t used = 0;
  list[0] = '\0';
  for (const tsr_config_word_t *w = words; w->word && used < sizeof(list); w++) {
    const char *sep = w == words ? "" : w[1].word ? ", " : " or ";
    int n = snprintf(list + used, sizeof(list) - used, "%s%s", sep, w->word);
    used += n > 0 ? (size_t)n : 0;
  }
  return tsr_status_make(TSR_INVALID_ARGUMENT, "'%s' (use %s)", v, list);
}

/* ---- keys with values of their own ------------------------------------- */

TSR_MUST_USE static tsr_status_t tsr__set_socket_mode(void *section, const char *v) {
  tsr_config_t *c = section;
  char *end = NULL;
  errno = 0;
  unsigned long m = strtoul(v, &end, 8);
  if (errno || !end || *end || !*v || !isdigit((unsigned char)v[0]) || m > 0777)
    return tsr_status_make(TSR_INVALID_ARGUMENT, "'%s' is not an octal mode 0..0777", v);
  c->socket_mode = (uint32_t)m;
  return NULL;
}

/* A share or a size, never a bare number: "256" could mean 256 bytes or
 * (as a lock file writes a share) 25600%. "0" alone is clear: no minimum. */
TSR_MUST_USE static tsr_status_t tsr__set_min_lease(void *section, const char *v) {
  tsr_config_t *c = section;
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

/* "0" or a duration of at most 10ms ("0s" too: polling no time is not
 * polling). */
TSR_MUST_USE static tsr_status_t tsr__set_busy_poll(void *section, const char *v) {
  tsr_config_t *c = section;
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

/* The next three take the names their own modules parse (base/log,
 * lease/action), so that the names have one owner. */
TSR_MUST_USE static tsr_status_t tsr__set_log_level(void *section, const char *v) {
  tsr_config_t *c = section;
  int level = tsr_log_level_parse(v);
  if (level < 0) return tsr_status_make(TSR_INVALID_ARGUMENT, "'%s' (use error, warn, info or debug)", v);
  c->log_level = level;
  return NULL;
}

TSR_MUST_USE static tsr_status_t tsr__set_on_expiry(void *section, const char *v) {
  tsr_config_t *c = section;
  if (!tsr_lease_action_parse(v, &c->on_expiry))
    return tsr_status_make(TSR_INVALID_ARGUMENT, "'%s' (use revoke or signal)", v);
  return NULL;
}

TSR_MUST_USE static tsr_status_t tsr__set_over_limit(void *section, const char *v) {
  tsr_config_t *c = section;
  if (!tsr_lease_over_limit_parse(v, &c->over_limit))
    return tsr_status_make(TSR_INVALID_ARGUMENT, "'%s' (use signal or log)", v);
  return NULL;
}

TSR_MUST_USE static tsr_status_t tsr__set_stream_share(void *section, const char *v) {
  tsr_config_t *c = section;
  uint32_t ppm = 0;
  TSR_RETURN_IF_ERROR(tsr_parse_share(v, &ppm));
  if (ppm == 0) return tsr_status_make(TSR_INVALID_ARGUMENT, "'%s': a stream needs a share above 0", v);
  c->stream_share_ppm = ppm;
  return NULL;
}

TSR_MUST_USE static tsr_status_t tsr__set_share_switch_cost(void *section, const char *v) {
  tsr_config_t *c = section;
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

/* "off", or an address tsr_config_parse_listen takes, kept as written. */
TSR_MUST_USE static tsr_status_t tsr__set_metrics(void *section, const char *v) {
  tsr_config_t *c = section;
  if (strcmp(v, "off") != 0) {
    struct sockaddr_storage addr;
    socklen_t len;
    TSR_RETURN_IF_ERROR(tsr_config_parse_listen(v, &addr, &len));
  }
  return tsr__string(v, false, c->metrics, sizeof(c->metrics));
}

TSR_MUST_USE static tsr_status_t tsr__set_dev_kind(void *section, const char *v) {
  tsr_device_t *d = section;
  if (strcmp(v, "cuda") == 0)
    d->kind = TSR_DEVICE_KIND_CUDA;
  else if (strcmp(v, "opencl") == 0)
    d->kind = TSR_DEVICE_KIND_OPENCL;
  else
    return tsr_status_make(TSR_INVALID_ARGUMENT, "'%s' is neither cuda nor opencl", v);
  return NULL;
}

TSR_MUST_USE static tsr_status_t tsr__set_dev_pci(void *section, const char *v) {
  tsr_device_t *d = section;
  if (!tsr_device_pci_normalize(v, d->pci))
    return tsr_status_make(TSR_INVALID_ARGUMENT,
                           "'%s' is not a PCI bus id (domain:bus:device.function, e.g. 0000:3b:00.0)", v);
  return NULL;
}

TSR_MUST_USE static tsr_status_t tsr__set_dev_opencl(void *section, const char *v) {
  tsr_device_t *d = section;
  size_t n = strlen(v);
  const char *star = memchr(v, '*', n);
  if (n == 0 || strcmp(v, "*") == 0)
    return tsr_status_make(TSR_INVALID_ARGUMENT, "give the OpenCL device's name (clinfo -l), or its beginning and '*'");
  if (star && star != v + n - 1) return tsr_status_make(TSR_INVALID_ARGUMENT, "'*' may only end the name");
  return tsr__string(v, false, d->opencl, sizeof(d->opencl));
}

/* The N of the device's /dev/nvidiaN: what Slurm's gres.conf names it by
 * (the Slurm plugin leases the device whose minor is the number of the
 * file Slurm gave the job). Only a CUDA device has one (config.c checks). */
TSR_MUST_USE static tsr_status_t tsr__set_dev_minor(void *section, const char *v) {
  tsr_device_t *d = section;
  uint64_t minor = 0;
  tsr_status_t st = tsr__count(v, 0, TSR_DEVICE_MINOR_MAX, &minor);
  if (st) return tsr_status_annotate(st, "not a device minor number (the N of /dev/nvidiaN)");
  d->minor = (uint32_t)minor;
  d->has_minor = true;
  return NULL;
}

/* ---- the tables ------------------------------------------------------------ */

/* Field `f` of struct `S`, which must be of type `T` (a key pointed at a
 * field of another type does not compile). */
#define TSR__FIELD(S, f, T) \
  .offset = offsetof(S, f) + 0 * sizeof(_Generic(((S *)0)->f, T : 1)), .size = sizeof(((S *)0)->f)
#define TSR__IN_CONFIG(f, T) TSR__FIELD(tsr_config_t, f, T)
#define TSR__IN_DEVICE(f, T) TSR__FIELD(tsr_device_t, f, T)

#define TSR__MIB (UINT64_C(1) << 20)
#define TSR__HOUR (3600 * TSR_NS_PER_S)

static const tsr_config_word_t tsr__devices_words[] = {
    {"auto", TSR_DEVICES_AUTO}, {"nvml", TSR_DEVICES_NVML}, {"config", TSR_DEVICES_CONFIG}, {NULL, 0}};
static const tsr_config_word_t tsr__sync_words[] = {
    {"full", TSR_LEASE_SYNC_FULL}, {"none", TSR_LEASE_SYNC_NONE}, {NULL, 0}};
static const tsr_config_word_t tsr__policy_words[] = {{"pass", false}, {"deny", true}, {NULL, 0}};
static const tsr_config_word_t tsr__remote_words[] = {{"counts", false}, {"full", true}, {NULL, 0}};

static const tsr_config_key_t tsr__daemon[] = {
    {"state_dir", TSR_CONFIG_KIND_PATH, TSR__IN_CONFIG(state_dir, char *)},
    {"socket", TSR_CONFIG_KIND_PATH, TSR__IN_CONFIG(socket, char *)},
    {"socket_mode", TSR_CONFIG_KIND_CUSTOM, TSR__IN_CONFIG(socket_mode, uint32_t), .set = tsr__set_socket_mode},
    {"admin_group", TSR_CONFIG_KIND_TEXT, TSR__IN_CONFIG(admin_group, char *)},
    {"devices", TSR_CONFIG_KIND_CHOICE, TSR__IN_CONFIG(devices_from, tsr_devices_from_t), .words = tsr__devices_words},
    {"sync", TSR_CONFIG_KIND_CHOICE, TSR__IN_CONFIG(sync, tsr_lease_sync_t), .words = tsr__sync_words},
    {"max_lease", TSR_CONFIG_KIND_POSITIVE_DURATION, TSR__IN_CONFIG(max_lease_ns, uint64_t)},
    {"client_timeout", TSR_CONFIG_KIND_POSITIVE_DURATION, TSR__IN_CONFIG(client_timeout_ns, uint64_t)},
    {"max_clients", TSR_CONFIG_KIND_COUNT, TSR__IN_CONFIG(max_clients, uint32_t), .min = 1, .max = 65536},
    {"max_clients_per_user", TSR_CONFIG_KIND_COUNT, TSR__IN_CONFIG(max_clients_per_user, uint32_t), .max = 65536},
    /* checked against max_clients after the whole file (config.c) */
    {"admin_reserved_clients", TSR_CONFIG_KIND_COUNT, TSR__IN_CONFIG(admin_reserved_clients, uint32_t), .max = 65535},
    {"max_queued_bytes", TSR_CONFIG_KIND_SIZE, TSR__IN_CONFIG(max_queued_bytes, uint64_t), .min = TSR__MIB},
    /* checked against max_queued_bytes after the whole file (config.c) */
    {"max_queued_bytes_per_user", TSR_CONFIG_KIND_SIZE, TSR__IN_CONFIG(max_queued_bytes_per_user, uint64_t),
     .min = TSR__MIB},
    {"max_leases_per_user", TSR_CONFIG_KIND_COUNT, TSR__IN_CONFIG(max_leases_per_user, uint32_t), .max = UINT32_MAX},
    {"max_queued_per_user", TSR_CONFIG_KIND_COUNT, TSR__IN_CONFIG(max_queued_per_user, uint32_t), .max = UINT32_MAX},
    {"min_lease", TSR_CONFIG_KIND_CUSTOM, TSR__IN_CONFIG(min_lease_ppm, uint32_t), .set = tsr__set_min_lease},
    {"audit_max_size", TSR_CONFIG_KIND_SIZE, TSR__IN_CONFIG(audit_max_bytes, uint64_t), .min = UINT64_C(64) << 10,
     .zero_off = true},
    {"audit_keep", TSR_CONFIG_KIND_COUNT, TSR__IN_CONFIG(audit_keep, uint32_t), .max = 1000},
    {"audit_deny_rate", TSR_CONFIG_KIND_COUNT, TSR__IN_CONFIG(audit_deny_rate, uint32_t), .max = UINT32_MAX},
    {"busy_poll", TSR_CONFIG_KIND_CUSTOM, TSR__IN_CONFIG(busy_poll_ns, uint64_t), .set = tsr__set_busy_poll},
    {"log_level", TSR_CONFIG_KIND_CUSTOM, TSR__IN_CONFIG(log_level, int), .set = tsr__set_log_level},
    {"audit_log", TSR_CONFIG_KIND_PATH, TSR__IN_CONFIG(audit_log, char *)},
    {"region_dir", TSR_CONFIG_KIND_PATH, TSR__IN_CONFIG(region_dir, char *)},
    {"on_expiry", TSR_CONFIG_KIND_CUSTOM, TSR__IN_CONFIG(on_expiry, tsr_lease_action_t), .set = tsr__set_on_expiry},
    {"over_limit", TSR_CONFIG_KIND_CUSTOM, TSR__IN_CONFIG(over_limit, tsr_lease_over_limit_t),
     .set = tsr__set_over_limit},
    {"expiry_grace", TSR_CONFIG_KIND_DURATION, TSR__IN_CONFIG(expiry_grace_ns, uint64_t), .min = TSR_NS_PER_MS,
     .max = TSR__HOUR},
    {"backstop_period", TSR_CONFIG_KIND_DURATION, TSR__IN_CONFIG(backstop_period_ns, uint64_t), .min = TSR_NS_PER_MS,
     .max = TSR__HOUR, .zero_off = true},
    {"policy", TSR_CONFIG_KIND_CHOICE, TSR__IN_CONFIG(policy_deny, bool), .words = tsr__policy_words},
    {"share_burst", TSR_CONFIG_KIND_DURATION, TSR__IN_CONFIG(share_burst_ns, uint64_t), .min = TSR_NS_PER_MS,
     .max = 10 * TSR_NS_PER_S},
    {"stream_share", TSR_CONFIG_KIND_CUSTOM, TSR__IN_CONFIG(stream_share_ppm, uint32_t), .set = tsr__set_stream_share},
    {"share_switch_cost", TSR_CONFIG_KIND_CUSTOM, TSR__IN_CONFIG(share_switch_cost_ppm, uint32_t),
     .set = tsr__set_share_switch_cost},
    {"metrics", TSR_CONFIG_KIND_CUSTOM, TSR__IN_CONFIG(metrics, char *), .set = tsr__set_metrics},
    /* long enough for a scraper across a network to send a request, short
     * enough that a client trickling one never holds its slot for long */
    {"metrics_request_timeout", TSR_CONFIG_KIND_DURATION, TSR__IN_CONFIG(metrics_request_timeout_ns, uint64_t),
     .min = 100 * TSR_NS_PER_MS, .max = 60 * TSR_NS_PER_S},
    {"metrics_group", TSR_CONFIG_KIND_TEXT, TSR__IN_CONFIG(metrics_group, char *)},
    {"metrics_remote", TSR_CONFIG_KIND_CHOICE, TSR__IN_CONFIG(metrics_remote_full, bool), .words = tsr__remote_words},
};

/* In the order the "unknown device key" message lists them. */
static const tsr_config_key_t tsr__device[] = {
    {"name", TSR_CONFIG_KIND_TEXT, TSR__IN_DEVICE(name, char *)},
    {"memory", TSR_CONFIG_KIND_SIZE, TSR__IN_DEVICE(total_bytes, uint64_t), .min = 1},
    {"sms", TSR_CONFIG_KIND_COUNT, TSR__IN_DEVICE(sm_count, uint32_t), .max = 100000},
    {"uuid", TSR_CONFIG_KIND_TEXT, TSR__IN_DEVICE(uuid, char *)},
    {"kind", TSR_CONFIG_KIND_CUSTOM, TSR__IN_DEVICE(kind, tsr_device_kind_t), .set = tsr__set_dev_kind},
    {"pci", TSR_CONFIG_KIND_CUSTOM, TSR__IN_DEVICE(pci, char *), .set = tsr__set_dev_pci},
    {"opencl", TSR_CONFIG_KIND_CUSTOM, TSR__IN_DEVICE(opencl, char *), .set = tsr__set_dev_opencl},
    {"minor", TSR_CONFIG_KIND_CUSTOM, TSR__IN_DEVICE(minor, uint32_t), .set = tsr__set_dev_minor},
};

#define TSR__COUNT_OF(a) (sizeof(a) / sizeof((a)[0]))
_Static_assert(TSR__COUNT_OF(tsr__daemon) <= TSR_CONFIG_DAEMON_KEYS_MAX, "raise TSR_CONFIG_DAEMON_KEYS_MAX");
_Static_assert(TSR__COUNT_OF(tsr__device) <= TSR_CONFIG_DEVICE_KEYS_MAX, "raise TSR_CONFIG_DEVICE_KEYS_MAX");

const tsr_config_keys_t tsr_config_daemon_keys = {tsr__daemon, TSR__COUNT_OF(tsr__daemon)};
const tsr_config_keys_t tsr_config_device_keys = {tsr__device, TSR__COUNT_OF(tsr__device)};

/* ---- lookup and dispatch ---------------------------------------------------- */

int tsr_config_key_find(const tsr_config_keys_t *keys, const char *name) {
  for (size_t i = 0; i < keys->count; i++)
    if (strcmp(name, keys->key[i].name) == 0) return (int)i;
  return -1;
}

int tsr_config_key_of_field(const tsr_config_keys_t *keys, size_t offset) {
  for (size_t i = 0; i < keys->count; i++)
    if (keys->key[i].offset == offset) return (int)i;
  return -1;
}

void tsr_config_key_names(const tsr_config_keys_t *keys, char *buf, size_t cap) {
  size_t used = 0;
  if (cap > 0) buf[0] = '\0';
  for (size_t i = 0; i < keys->count && used < cap; i++) {
    int n = snprintf(buf + used, cap - used, "%s%s", i ? ", " : "", keys->key[i].name);
    used += n > 0 ? (size_t)n : 0;
  }
}

/* Stores `v` in a number field of `size` bytes (the table's types are
 * checked where it names them: unsigned integers, enums and bools). */
static void tsr__store(void *field, size_t size, uint64_t v) {
  if (size == sizeof(uint64_t)) {
    memcpy(field, &v, sizeof(v));
  } else if (size == sizeof(uint32_t)) {
    uint32_t u = (uint32_t)v;
    memcpy(field, &u, sizeof(u));
  } else if (size == sizeof(bool)) {
    bool b = v != 0;
    memcpy(field, &b, sizeof(b));
  }
}

tsr_status_t tsr_config_key_set(const tsr_config_keys_t *keys, int index, void *section, const char *value) {
  const tsr_config_key_t *k = &keys->key[index];
  char *field = (char *)section + k->offset;
  uint64_t v = 0;
  switch (k->kind) {
    case TSR_CONFIG_KIND_PATH: return tsr__string(value, true, field, k->size);
    case TSR_CONFIG_KIND_TEXT: return tsr__string(value, false, field, k->size);
    case TSR_CONFIG_KIND_COUNT: TSR_RETURN_IF_ERROR(tsr__count(value, k->min, k->max, &v)); break;
    case TSR_CONFIG_KIND_SIZE: TSR_RETURN_IF_ERROR(tsr__size(value, k->min, k->zero_off, &v)); break;
    case TSR_CONFIG_KIND_POSITIVE_DURATION: TSR_RETURN_IF_ERROR(tsr__positive_duration(value, &v)); break;
    case TSR_CONFIG_KIND_DURATION: TSR_RETURN_IF_ERROR(tsr__duration_in(value, k->min, k->max, k->zero_off, &v)); break;
    case TSR_CONFIG_KIND_CHOICE: TSR_RETURN_IF_ERROR(tsr__choice(value, k->words, &v)); break;
    case TSR_CONFIG_KIND_CUSTOM: return k->set(section, value);
  }
  tsr__store(field, k->size, v);
  return NULL;
}
