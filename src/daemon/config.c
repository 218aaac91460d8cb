/* config.c: strict INI configuration for tesserad (see config.h). */
#include "daemon/config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/ini.h"
#include "base/log.h"
#include "base/time.h"
#include "base/units.h"

void tsr_config_defaults(tsr_config_t *c) {
  memset(c, 0, sizeof(*c));
  snprintf(c->state_dir, sizeof(c->state_dir), "%s", TSR_DEFAULT_STATE_DIR);
  snprintf(c->socket, sizeof(c->socket), "%s", TSR_DEFAULT_SOCKET);
  c->socket_mode = 0666;
  snprintf(c->admin_group, sizeof(c->admin_group), "tessera-admin");
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
}

typedef struct {
  tsr_config_t *c;
  const char *name;
  bool seen_daemon[16];
  bool dev_seen[TSR_CONFIG_MAX_DEVICES];
  unsigned dev_keys[TSR_CONFIG_MAX_DEVICES]; /* bit per key */
} tsr__parse_t;

/* The line number is added by tsr_ini_parse. */
static tsr_status_t tsr__fail(const char *fmt, const char *a, const char *b) {
  char msg[512];
  snprintf(msg, sizeof(msg), fmt, a, b);
  return tsr_status_make(TSR_INVALID_ARGUMENT, "%s", msg);
}

static bool tsr__copy(char *dst, size_t cap, const char *v) {
  size_t n = strlen(v);
  if (n == 0 || n >= cap) return false;
  memcpy(dst, v, n + 1);
  return true;
}

static const char *const tsr__daemon_keys[] = {
    "state_dir", "socket", "socket_mode", "admin_group", "devices", "sync",
    "max_lease", "client_timeout", "max_clients", "log_level", "audit_log", "busy_poll", NULL,
};

static tsr_status_t tsr__daemon_key(tsr__parse_t *p, const char *key, const char *v) {
  tsr_config_t *c = p->c;
  int k = -1;
  for (int i = 0; tsr__daemon_keys[i]; i++)
    if (strcmp(key, tsr__daemon_keys[i]) == 0) k = i;
  if (k < 0) return tsr__fail("unknown key '%s' in [daemon]%s", key, "");
  if (p->seen_daemon[k]) return tsr__fail("duplicate key '%s'%s", key, "");
  p->seen_daemon[k] = true;
  tsr_status_t st = NULL;
  uint64_t u = 0;
  bool ok = true;
  switch (k) {
    case 0: ok = v[0] == '/' && tsr__copy(c->state_dir, sizeof(c->state_dir), v); break;
    case 1: ok = v[0] == '/' && tsr__copy(c->socket, sizeof(c->socket), v); break;
    case 2: {
      char *end = NULL;
      errno = 0;
      unsigned long m = strtoul(v, &end, 8);
      ok = !errno && end && *end == '\0' && *v && m <= 0777;
      c->socket_mode = (uint32_t)m;
      break;
    }
    case 3: ok = tsr__copy(c->admin_group, sizeof(c->admin_group), v); break;
    case 4:
      if (strcmp(v, "auto") == 0) c->devices_from = TSR_DEVICES_AUTO;
      else if (strcmp(v, "nvml") == 0) c->devices_from = TSR_DEVICES_NVML;
      else if (strcmp(v, "config") == 0) c->devices_from = TSR_DEVICES_CONFIG;
      else return tsr__fail("devices must be auto, nvml or config, not '%s'%s", v, "");
      break;
    case 5:
      if (strcmp(v, "full") == 0) c->sync = TSR_LEASE_SYNC_FULL;
      else if (strcmp(v, "none") == 0) c->sync = TSR_LEASE_SYNC_NONE;
      else return tsr__fail("sync must be full or none, not '%s'%s", v, "");
      break;
    case 6: st = tsr_parse_duration(v, &c->max_lease_ns); ok = !st && c->max_lease_ns > 0; break;
    case 7: st = tsr_parse_duration(v, &c->client_timeout_ns); ok = !st && c->client_timeout_ns > 0; break;
    case 8: st = tsr_parse_u64(v, &u); ok = !st && u >= 1 && u <= 65536; c->max_clients = (uint32_t)u; break;
    case 9: c->log_level = tsr_log_level_parse(v); ok = c->log_level >= 0; break;
    case 10: ok = v[0] == '/' && tsr__copy(c->audit_log, sizeof(c->audit_log), v); break;
    case 11:
      if (strcmp(v, "0") == 0) {
        c->busy_poll_ns = 0;
        break;
      }
      st = tsr_parse_duration(v, &c->busy_poll_ns);
      ok = !st && c->busy_poll_ns <= TSR_CONFIG_BUSY_POLL_MAX_NS;
      if (ok || st) break;
      return tsr__fail("bad value for busy_poll (at most 10ms, or 0 to sleep at once)%s%s", "", "");
  }
  if (!ok) {
    char why[300] = "";
    if (st) snprintf(why, sizeof(why), " (%s)", tsr_status_message(st));
    tsr_status_free(st);
    return tsr__fail("bad value for %s%s", key, why);
  }
  return NULL;
}

static tsr_status_t tsr__device_key(tsr__parse_t *p, unsigned idx, const char *key, const char *v) {
  static const char *const keys[] = {"name", "memory", "sms", "uuid", NULL};
  tsr_device_t *d = &p->c->devices[idx];
  int k = -1;
  for (int i = 0; keys[i]; i++)
    if (strcmp(key, keys[i]) == 0) k = i;
  if (k < 0) return tsr__fail("unknown device key '%s' (use name, memory, sms, uuid)%s", key, "");
  if (p->dev_keys[idx] & (1u << k)) return tsr__fail("duplicate key '%s'%s", key, "");
  p->dev_keys[idx] |= 1u << k;
  tsr_status_t st = NULL;
  uint64_t u = 0;
  bool ok = true;
  switch (k) {
    case 0: ok = tsr__copy(d->name, sizeof(d->name), v); break;
    case 1: st = tsr_parse_size(v, &d->total_bytes); ok = !st && d->total_bytes > 0; break;
    case 2: st = tsr_parse_u64(v, &u); ok = !st && u <= 100000; d->sm_count = (uint32_t)u; break;
    case 3: ok = tsr__copy(d->uuid, sizeof(d->uuid), v); break;
  }
  if (!ok) {
    char why[300] = "";
    if (st) snprintf(why, sizeof(why), " (%s)", tsr_status_message(st));
    tsr_status_free(st);
    return tsr__fail("bad value for %s%s", key, why);
  }
  return NULL;
}

static tsr_status_t tsr__handler(void *user, const char *section, const char *key,
                                 const char *value, int line) {
  tsr__parse_t *p = user;
  (void)line;
  if (strcmp(section, "daemon") == 0) return key ? tsr__daemon_key(p, key, value) : NULL;
  if (strncmp(section, "device.", 7) == 0) {
    const char *num = section + 7;
    char *end = NULL;
    unsigned long idx = strtoul(num, &end, 10);
    if (!*num || *end || (num[0] == '0' && num[1]) || idx >= TSR_CONFIG_MAX_DEVICES)
      return tsr__fail("bad device section [%s] (use [device.0] ... [device.63])%s",
                       section, "");
    if (!p->dev_seen[idx]) {
      p->dev_seen[idx] = true;
      tsr_device_t *d = &p->c->devices[idx];
      memset(d, 0, sizeof(*d));
      d->index = (uint32_t)idx;
      d->source = TSR_DEVICE_FROM_CONFIG;
      d->mig = TSR_DEVICE_MIG_UNKNOWN;
    }
    return key ? tsr__device_key(p, (unsigned)idx, key, value) : NULL;
  }
  if (section[0] == '\0')
    return tsr__fail("key '%s' outside any section (put it under [daemon])%s", key, "");
  return tsr__fail("unknown section [%s] (use [daemon] or [device.N])%s", section, "");
}

static tsr_status_t tsr__finish(tsr__parse_t *p, tsr_status_t st) {
  if (st) return st;
  size_t n = 0;
  while (n < TSR_CONFIG_MAX_DEVICES && p->dev_seen[n]) n++;
  for (size_t i = n; i < TSR_CONFIG_MAX_DEVICES; i++)
    if (p->dev_seen[i])
      return tsr_status_make(TSR_INVALID_ARGUMENT,
                             "%s: [device.%zu] without [device.%zu]: number devices 0..N-1",
                             p->name, i, n);
  for (size_t i = 0; i < n; i++) {
    if (!(p->dev_keys[i] & 2u))
      return tsr_status_make(TSR_INVALID_ARGUMENT, "%s: [device.%zu] needs memory = <size>",
                             p->name, i);
    if (!(p->dev_keys[i] & 1u)) snprintf(p->c->devices[i].name, TSR_DEVICE_NAME_MAX, "GPU %zu", i);
  }
  if (n > 0) p->c->device_count = n;
  return NULL;
}

tsr_status_t tsr_config_parse(const char *text, const char *name, tsr_config_t *config) {
  tsr__parse_t p = {.c = config, .name = name};
  return tsr__finish(&p, tsr_ini_parse(text, name, tsr__handler, &p));
}

tsr_status_t tsr_config_load(const char *path, tsr_config_t *config) {
  tsr__parse_t p = {.c = config, .name = path};
  return tsr__finish(&p, tsr_ini_parse_file(path, tsr__handler, &p));
}
