/* test_config_keys.c: the keys' tables (config_keys.c) and each kind of
 * value they read. Every key, of either section, is named below with a good
 * value: a key added to a table and not here fails `every_key_is_sampled`. */
#include <criterion/criterion.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "daemon/config.h"
#include "daemon/config_keys.h"

static tsr_config_t c, base;

static void parse_ok(const char *text) {
  tsr_config_defaults(&c);
  tsr_status_t st = tsr_config_parse(text, "t.conf", &c);
  cr_assert_null(st, "%s: %s", text, tsr_status_message(st));
}

/* The message must be exactly `want`. */
static void parse_bad(const char *text, const char *want) {
  tsr_config_defaults(&c);
  tsr_status_t st = tsr_config_parse(text, "t.conf", &c);
  cr_assert_not_null(st, "accepted: %s", text);
  cr_assert_eq(tsr_status_code(st), TSR_INVALID_ARGUMENT);
  cr_assert_str_eq(tsr_status_message(st), want);
  tsr_status_free(st);
}

static void daemon_bad(const char *key, const char *value, const char *why) {
  char text[512], want[512];
  snprintf(text, sizeof(text), "[daemon]\n%s = %s\n", key, value);
  snprintf(want, sizeof(want), "t.conf:2: bad value for %s: %s", key, why);
  parse_bad(text, want);
}

/* A good value of each key, unlike its default. */
typedef struct {
  const char *key, *value;
} sample_t;

static const sample_t daemon_samples[] = {
    {"state_dir", "/srv/t"},
    {"socket", "/srv/t.sock"},
    {"socket_mode", "0600"},
    {"admin_group", "gpuadm"},
    {"devices", "config"},
    {"sync", "none"},
    {"max_lease", "2h"},
    {"client_timeout", "5s"},
    {"max_clients", "999"},
    {"max_clients_per_user", "3"},
    {"admin_reserved_clients", "7"},
    {"max_queued_bytes", "512MiB"},
    {"max_queued_bytes_per_user", "2MiB"},
    {"max_leases_per_user", "9"},
    {"max_queued_per_user", "3"},
    {"min_lease", "25%"},
    {"audit_max_size", "1GiB"},
    {"audit_keep", "77"},
    {"audit_deny_rate", "123456"},
    {"busy_poll", "7ms"},
    {"log_level", "debug"},
    {"audit_log", "/var/log/t.log"},
    {"region_dir", "/dev/shm/t"},
    {"on_expiry", "signal"},
    {"over_limit", "log"},
    {"expiry_grace", "3s"},
    {"backstop_period", "0"},
    {"policy", "deny"},
    {"share_burst", "2s"},
    {"stream_share", "25%"},
    {"share_switch_cost", "12.5%"},
    {"metrics", "[::1]:9999"},
    {"metrics_request_timeout", "30s"},
    {"metrics_group", "prometheus"},
    {"metrics_remote", "full"},
};

/* Each after "[device.0]\nmemory = 1GiB\npci = 0000:3b:00.0\n" (the base:
 * an OpenCL device needs a pci or an opencl). */
static const sample_t device_samples[] = {
    {"name", "Demo GPU"}, {"memory", "2GiB"}, {"sms", "132"},      {"uuid", "GPU-1"},
    {"kind", "opencl"},   {"pci", NULL},      {"opencl", "gfx9*"}, {"minor", "3"},
};
#define DEVICE_BASE "[device.0]\nmemory = 1GiB\npci = 0000:3b:00.0\n"

#define COUNT_OF(a) (sizeof(a) / sizeof((a)[0]))

static const sample_t *sample_of(const sample_t *samples, size_t n, const char *key) {
  for (size_t i = 0; i < n; i++)
    if (strcmp(samples[i].key, key) == 0) return &samples[i];
  return NULL;
}

Test(config_keys, every_key_is_sampled) {
  cr_assert_eq(tsr_config_daemon_keys.count, COUNT_OF(daemon_samples));
  for (size_t i = 0; i < tsr_config_daemon_keys.count; i++) {
    const char *name = tsr_config_daemon_keys.key[i].name;
    cr_assert_not_null(sample_of(daemon_samples, COUNT_OF(daemon_samples), name), "[daemon] %s has no sample", name);
  }
  cr_assert_eq(tsr_config_device_keys.count, COUNT_OF(device_samples));
  for (size_t i = 0; i < tsr_config_device_keys.count; i++) {
    const char *name = tsr_config_device_keys.key[i].name;
    cr_assert_not_null(sample_of(device_samples, COUNT_OF(device_samples), name), "[device] %s has no sample", name);
  }
}

/* What a table promises the reader: names and fields found again, fields
 * inside their struct and wide enough for their bounds, a setter exactly
 * where the kind is CUSTOM, words exactly where it is CHOICE. */
static void check_table(const tsr_config_keys_t *keys, size_t struct_size) {
  for (size_t i = 0; i < keys->count; i++) {
    const tsr_config_key_t *k = &keys->key[i];
    cr_assert(k->name && k->name[0]);
    cr_assert_eq(tsr_config_key_find(keys, k->name), (int)i, "%s is not found as itself", k->name);
    cr_assert_eq(tsr_config_key_of_field(keys, k->offset), (int)i, "%s shares its field", k->name);
    cr_assert(k->offset + k->size <= struct_size, "%s: field out of its struct", k->name);
    cr_assert_eq(k->set != NULL, k->kind == TSR_CONFIG_KIND_CUSTOM, "%s: setter and kind disagree", k->name);
    cr_assert_eq(k->words != NULL, k->kind == TSR_CONFIG_KIND_CHOICE, "%s: words and kind disagree", k->name);
    switch (k->kind) {
      case TSR_CONFIG_KIND_PATH:
      case TSR_CONFIG_KIND_TEXT: cr_assert(k->size >= 2, "%s: no room for text", k->name); break;
      case TSR_CONFIG_KIND_COUNT:
        cr_assert(k->size == 4 || k->size == 8, "%s", k->name);
        cr_assert(k->min <= k->max, "%s", k->name);
        cr_assert(k->size == 8 || k->max <= UINT32_MAX, "%s: max does not fit its field", k->name);
        break;
      case TSR_CONFIG_KIND_SIZE:
      case TSR_CONFIG_KIND_POSITIVE_DURATION: cr_assert_eq(k->size, 8, "%s", k->name); break;
      case TSR_CONFIG_KIND_DURATION:
        cr_assert_eq(k->size, 8, "%s", k->name);
        cr_assert(k->min > 0 && k->min <= k->max, "%s", k->name);
        break;
      case TSR_CONFIG_KIND_CHOICE:
        cr_assert(k->size == 1 || k->size == 4, "%s", k->name);
        cr_assert(k->words[0].word && k->words[1].word, "%s: a choice of fewer than two", k->name);
        for (const tsr_config_word_t *w = k->words; w->word; w++)
          cr_assert(k->size == 4 || w->value <= 1, "%s: %s does not fit a bool", k->name, w->word);
        break;
      case TSR_CONFIG_KIND_CUSTOM: break;
    }
  }
  cr_assert_eq(tsr_config_key_find(keys, "nonesuch"), -1);
  cr_assert_eq(tsr_config_key_find(keys, ""), -1);
  cr_assert_eq(tsr_config_key_of_field(keys, struct_size), -1);
}

Test(config_keys, tables_are_sound) {
  check_table(&tsr_config_daemon_keys, sizeof(tsr_config_t));
  check_table(&tsr_config_device_keys, sizeof(tsr_device_t));
  cr_assert_leq(tsr_config_daemon_keys.count, TSR_CONFIG_DAEMON_KEYS_MAX);
  cr_assert_leq(tsr_config_device_keys.count, TSR_CONFIG_DEVICE_KEYS_MAX);
}

Test(config_keys, key_names) {
  char names[256];
  tsr_config_key_names(&tsr_config_device_keys, names, sizeof(names));
  cr_assert_str_eq(names, "name, memory, sms, uuid, kind, pci, opencl, minor");
  /* cut to fit, never past the buffer */
  char small[12];
  memset(small, 'x', sizeof(small));
  tsr_config_key_names(&tsr_config_device_keys, small, sizeof(small));
  cr_assert_str_eq(small, "name, memor");
}

/* The bytes of `a` and `b` that differ lie in [lo, hi) or [lo2, hi2), and
 * some do. */
static void differ_only_in(const void *a, const void *b, size_t n, size_t lo, size_t hi, size_t lo2, size_t hi2,
                           const char *what) {
  const unsigned char *x = a, *y = b;
  bool any = false;
  for (size_t i = 0; i < n; i++) {
    if (x[i] == y[i]) continue;
    any = true;
    cr_assert((i >= lo && i < hi) || (i >= lo2 && i < hi2), "%s changed byte %zu, outside its field", what, i);
  }
  cr_assert(any, "%s changed nothing", what);
}

Test(config_keys, each_daemon_key_fills_its_field_alone) {
  tsr_config_defaults(&base);
  for (size_t i = 0; i < COUNT_OF(daemon_samples); i++) {
    char text[256];
    snprintf(text, sizeof(text), "[daemon]\n%s = %s\n", daemon_samples[i].key, daemon_samples[i].value);
    parse_ok(text);
    int k = tsr_config_key_find(&tsr_config_daemon_keys, daemon_samples[i].key);
    cr_assert_geq(k, 0);
    const tsr_config_key_t *key = &tsr_config_daemon_keys.key[k];
    /* min_lease is a share or a size: it may set either of two fields */
    size_t lo2 = 0, hi2 = 0;
    if (strcmp(key->name, "min_lease") == 0)
      lo2 = offsetof(tsr_config_t, min_lease_bytes), hi2 = lo2 + sizeof(c.min_lease_bytes);
    differ_only_in(&base, &c, sizeof(c), key->offset, key->offset + key->size, lo2, hi2, text);
  }
}

Test(config_keys, each_device_key_fills_its_field_alone) {
  parse_ok(DEVICE_BASE);
  base = c;
  for (size_t i = 0; i < COUNT_OF(device_samples); i++) {
    if (!device_samples[i].value) continue; /* pci: in the base */
    char text[256];
    int k = tsr_config_key_find(&tsr_config_device_keys, device_samples[i].key);
    cr_assert_geq(k, 0);
    const tsr_config_key_t *key = &tsr_config_device_keys.key[k];
    /* memory replaces the base's */
    snprintf(text, sizeof(text), "[device.0]\n%spci = 0000:3b:00.0\n%s = %s\n",
             strcmp(key->name, "memory") == 0 ? "" : "memory = 1GiB\n", key->name, device_samples[i].value);
    parse_ok(text);
    /* minor sets has_minor too; an OpenCL device without a name is named
     * for its pci */
    size_t lo2 = 0, hi2 = 0;
    if (strcmp(key->name, "minor") == 0) lo2 = offsetof(tsr_device_t, has_minor), hi2 = lo2 + sizeof(bool);
    if (strcmp(key->name, "kind") == 0) lo2 = offsetof(tsr_device_t, name), hi2 = lo2 + TSR_DEVICE_NAME_MAX;
    differ_only_in(&base.devices[0], &c.devices[0], sizeof(tsr_device_t), key->offset, key->offset + key->size, lo2,
                   hi2, text);
  }
}

Test(config_keys, every_key_once_per_section) {
  for (size_t i = 0; i < COUNT_OF(daemon_samples); i++) {
    char text[256], want[256];
    const sample_t *s = &daemon_samples[i];
    snprintf(text, sizeof(text), "[daemon]\n%s = %s\n\n%s = %s\n", s->key, s->value, s->key, s->value);
    snprintf(want, sizeof(want), "t.conf:4: duplicate key '%s' (set on line 2)", s->key);
    parse_bad(text, want);
    /* [daemon]'s keys are not a device's, nor the other way round */
    snprintf(text, sizeof(text), DEVICE_BASE "%s = %s\n", s->key, s->value);
    snprintf(want, sizeof(want),
             "t.conf:4: unknown device key '%s' (use name, memory, sms, uuid, kind, pci, opencl, minor)", s->key);
    parse_bad(text, want);
  }
  for (size_t i = 0; i < COUNT_OF(device_samples); i++) {
    char text[256], want[256];
    const sample_t *s = &device_samples[i];
    const char *v = s->value ? s->value : "0000:3b:00.0";
    const char *other = strcmp(s->key, "memory") == 0 ? "name = x" : "memory = 1GiB";
    snprintf(text, sizeof(text), "[device.0]\n%s = %s\n%s\n[device.1]\nmemory = 1GiB\n[device.0]\n%s = %s\n", s->key, v,
             other, s->key, v);
    snprintf(want, sizeof(want), "t.conf:7: duplicate key '%s' (set on line 2)", s->key);
    parse_bad(text, want);
    snprintf(text, sizeof(text), "[daemon]\n%s = %s\n", s->key, v);
    snprintf(want, sizeof(want), "t.conf:2: unknown key '%s' in [daemon]", s->key);
    parse_bad(text, want);
  }
}

/* ---- each kind's messages, exactly ---------------------------------------- */

Test(config_keys, path) {
  parse_ok("[daemon]\nregion_dir = /dev/shm/t\n");
  cr_assert_str_eq(c.region_dir, "/dev/shm/t");
  daemon_bad("region_dir", "dev/shm", "'dev/shm' is not an absolute path");
  daemon_bad("region_dir", "", "empty");
  char text[400], want[64];
  /* 255 bytes fit char[256]; 256 do not */
  snprintf(text, sizeof(text), "[daemon]\nregion_dir = /%0254d\n", 0);
  parse_ok(text);
  cr_assert_eq(strlen(c.region_dir), 255);
  snprintf(text, sizeof(text), "[daemon]\nregion_dir = /%0255d\n", 0);
  snprintf(want, sizeof(want), "t.conf:2: bad value for region_dir: longer than 255 bytes");
  parse_bad(text, want);
  /* the socket's field is smaller: sun_path's limit */
  snprintf(text, sizeof(text), "[daemon]\nsocket = /%0106d\n", 0);
  parse_ok(text);
  snprintf(text, sizeof(text), "[daemon]\nsocket = /%0107d\n", 0);
  parse_bad(text, "t.conf:2: bad value for socket: longer than 107 bytes");
}

Test(config_keys, text) {
  daemon_bad("metrics_group", "", "empty");
  parse_ok("[daemon]\nmetrics_group = relative/is/fine\n");
  cr_assert_str_eq(c.metrics_group, "relative/is/fine");
  char text[256];
  snprintf(text, sizeof(text), "[daemon]\nmetrics_group = %063d\n", 0);
  parse_ok(text);
  snprintf(text, sizeof(text), "[daemon]\nmetrics_group = %064d\n", 0);
  parse_bad(text, "t.conf:2: bad value for metrics_group: longer than 63 bytes");
  snprintf(text, sizeof(text), "[device.0]\nmemory = 1GiB\nuuid = %096d\n", 0);
  parse_bad(text, "t.conf:3: bad value for uuid: longer than 95 bytes");
}

Test(config_keys, count) {
  daemon_bad("max_leases_per_user", "4294967296", "'4294967296' is not a whole number from 0 to 4294967295");
  daemon_bad("max_clients", "0", "'0' is not a whole number from 1 to 65536");
  daemon_bad("audit_keep", "-1", "'-1' is not a whole number from 0 to 1000");
  daemon_bad("audit_keep", "", "'' is not a whole number from 0 to 1000");
  parse_ok("[daemon]\nmax_clients = 65536\nadmin_reserved_clients = 65535\n");
  cr_assert_eq(c.max_clients, 65536);
  cr_assert_eq(c.admin_reserved_clients, 65535);
  parse_bad("[device.0]\nmemory = 1GiB\nsms = 100001\n",
            "t.conf:3: bad value for sms: '100001' is not a whole number from 0 to 100000");
  parse_ok("[device.0]\nmemory = 1GiB\nsms = 100000\n");
  cr_assert_eq(c.devices[0].sm_count, 100000);
}

Test(config_keys, size) {
  daemon_bad("max_queued_bytes", "1000KiB", "'1000KiB' is less than 1 MiB");
  daemon_bad("audit_max_size", "1KiB", "'1KiB' is less than 64 KiB (0 turns it off)");
  parse_ok("[daemon]\naudit_max_size = 0\n");
  cr_assert_eq(c.audit_max_bytes, 0);
  parse_bad("[device.0]\nmemory = 0\n", "t.conf:2: bad value for memory: '0' is less than 1 B");
  parse_ok("[device.0]\nmemory = 1\n");
  cr_assert_eq(c.devices[0].total_bytes, 1);
}

Test(config_keys, durations) {
  daemon_bad("client_timeout", "0s", "must be more than 0");
  parse_ok("[daemon]\nclient_timeout = 1ns\n");
  cr_assert_eq(c.client_timeout_ns, 1);
  daemon_bad("expiry_grace", "0s", "'0s' is out of range (1ms to 1h)");
  parse_ok("[daemon]\nbackstop_period = 0\n");
  cr_assert_eq(c.backstop_period_ns, 0);
  daemon_bad("backstop_period", "0s", "'0s' is out of range (1ms to 1h, or 0 for never)");
}

Test(config_keys, choice) {
  daemon_bad("devices", "all", "'all' (use auto, nvml or config)");
  daemon_bad("devices", "", "'' (use auto, nvml or config)");
  daemon_bad("policy", "allow", "'allow' (use pass or deny)");
  daemon_bad("sync", "Full", "'Full' (use full or none)");
  daemon_bad("metrics_remote", "all", "'all' (use counts or full)");
  static const struct {
    const char *text;
    tsr_devices_from_t want;
  } devices[] = {{"auto", TSR_DEVICES_AUTO}, {"nvml", TSR_DEVICES_NVML}, {"config", TSR_DEVICES_CONFIG}};
  for (size_t i = 0; i < COUNT_OF(devices); i++) {
    char text[64];
    snprintf(text, sizeof(text), "[daemon]\ndevices = %s\n", devices[i].text);
    parse_ok(text);
    cr_assert_eq(c.devices_from, devices[i].want);
  }
  parse_ok("[daemon]\npolicy = deny\nmetrics_remote = full\n");
  cr_assert(c.policy_deny && c.metrics_remote_full);
  parse_ok("[daemon]\npolicy = pass\nmetrics_remote = counts\n");
  cr_assert(!c.policy_deny && !c.metrics_remote_full);
}

/* The checks across keys find the keys' lines by field: either order, the
 * later line, "the default" for a key not in the file. */
Test(config_keys, checks_across_keys_name_the_later_line) {
  parse_bad("[daemon]\nadmin_reserved_clients = 4\n\nmax_clients = 4\n",
            "t.conf:4: admin_reserved_clients (4) must be less than max_clients (4): users need at least one "
            "connection");
  parse_bad("[daemon]\nmax_clients = 4\n\nadmin_reserved_clients = 4\n",
            "t.conf:4: admin_reserved_clients (4) must be less than max_clients (4): users need at least one "
            "connection");
  parse_bad("[daemon]\n\nadmin_reserved_clients = 1024\n",
            "t.conf:3: admin_reserved_clients (1024) must be less than max_clients (1024, the default): users need at "
            "least one connection");
  parse_bad("[daemon]\nmax_queued_bytes = 2MiB\n\nmax_queued_bytes_per_user = 3MiB\n",
            "t.conf:4: max_queued_bytes_per_user (3 MiB) is more than max_queued_bytes (2 MiB)");
  parse_bad("[daemon]\nmax_queued_bytes_per_user = 3MiB\n\nmax_queued_bytes = 2MiB\n",
            "t.conf:4: max_queued_bytes_per_user (3 MiB) is more than max_queued_bytes (2 MiB)");
  parse_bad("[daemon]\n\nmax_queued_bytes_per_user = 300MiB\n",
            "t.conf:3: max_queued_bytes_per_user (300 MiB) is more than max_queued_bytes (256 MiB, the default)");
  /* a device's memory, kind and minor, found the same way */
  parse_bad("[device.0]\nname = x\n", "t.conf:1: [device.0] needs memory = <size>");
  parse_bad("[device.0]\nmemory = 1GiB\n\nkind = opencl\n",
            "t.conf:4: [device.0] is an OpenCL device: say how to find it (opencl = <device name> or pci = <bus id>)");
  parse_bad("[device.0]\nmemory = 1GiB\nkind = opencl\nopencl = x\n\nminor = 2\n",
            "t.conf:6: [device.0] is an OpenCL device: minor = 2 names an NVIDIA GPU's /dev/nvidiaN, which it has "
            "none of (drop minor, or kind = cuda)");
  parse_bad("[device.0]\nmemory = 1GiB\nminor = 2\n[device.1]\nminor = 2\nmemory = 1GiB\n",
            "t.conf:5: [device.1] has minor = 2 as [device.0] has (line 3): each /dev/nvidiaN is one device");
  /* a name given is kept; none given is made up */
  parse_ok("[device.0]\nmemory = 1GiB\nname = Mine\n[device.1]\nmemory = 1GiB\n");
  cr_assert_str_eq(c.devices[0].name, "Mine");
  cr_assert_str_eq(c.devices[1].name, "GPU 1");
}
