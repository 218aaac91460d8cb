/* fuzz_config.c: libFuzzer target for tesserad's configuration parser
 * (src/daemon/config.c: its line gate, inih behind it, and every key).
 *
 * Every input, as a C string (up to its first NUL), is parsed over the
 * defaults. Each must give a status or a configuration, never crash (ASan,
 * UBSan). Beyond the sanitizers:
 *  - a refusal is INVALID_ARGUMENT and names the file and a line that
 *    exists: "fuzz.conf:<n>: ..." with 1 <= n <= the number of lines;
 *  - an accepted configuration keeps every promise of config.h: paths
 *    absolute, ranges, min_lease one of share or size, the checks between
 *    keys, devices numbered and sized;
 *  - parsing is deterministic: the same text gives the same bytes.
 * Built and run by run.sh (registered with ctest as fuzz.config). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/config.h"

#include "../check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static tsr_config_t g_a, g_b;

static void tsr__check_refusal(tsr_status_t st, const char *text) {
  FUZZ_CHECK(tsr_status_code(st) == TSR_INVALID_ARGUMENT);
  const char *msg = tsr_status_message(st);
  FUZZ_CHECK(strncmp(msg, "fuzz.conf:", 10) == 0);
  char *end = NULL;
  unsigned long line = strtoul(msg + 10, &end, 10);
  FUZZ_CHECK(end != msg + 10 && end[0] == ':' && end[1] == ' ' && end[2] != '\0');
  unsigned long lines = 1;
  for (const char *p = text; *p; p++)
    if (*p == '\n' && p[1]) lines++;
  FUZZ_CHECK(line >= 1 && line <= lines);
}

static void tsr__check_config(const tsr_config_t *c) {
  FUZZ_CHECK(strnlen(c->state_dir, sizeof(c->state_dir)) < sizeof(c->state_dir));
  FUZZ_CHECK(strnlen(c->socket, sizeof(c->socket)) < sizeof(c->socket));
  FUZZ_CHECK(strnlen(c->admin_group, sizeof(c->admin_group)) < sizeof(c->admin_group));
  FUZZ_CHECK(strnlen(c->audit_log, sizeof(c->audit_log)) < sizeof(c->audit_log));
  FUZZ_CHECK(c->state_dir[0] == '/' && c->socket[0] == '/' && c->admin_group[0] != '\0');
  FUZZ_CHECK(c->audit_log[0] == '\0' || c->audit_log[0] == '/');
  FUZZ_CHECK(c->socket_mode <= 0777);
  FUZZ_CHECK(c->devices_from <= TSR_DEVICES_CONFIG);
  FUZZ_CHECK(c->sync == TSR_LEASE_SYNC_FULL || c->sync == TSR_LEASE_SYNC_NONE);
  FUZZ_CHECK(c->max_lease_ns > 0 && c->client_timeout_ns > 0);
  FUZZ_CHECK(c->max_clients >= 1 && c->max_clients <= 65536);
  FUZZ_CHECK(c->max_clients_per_user <= 65536);
  FUZZ_CHECK(c->admin_reserved_clients < c->max_clients);
  FUZZ_CHECK(c->max_queued_bytes >= (UINT64_C(1) << 20));
  FUZZ_CHECK(c->max_queued_bytes_per_user >= (UINT64_C(1) << 20));
  FUZZ_CHECK(c->max_queued_bytes_per_user <= c->max_queued_bytes);
  FUZZ_CHECK(c->min_lease_ppm <= 1000000);
  FUZZ_CHECK(c->min_lease_ppm == 0 || c->min_lease_bytes == 0);
  FUZZ_CHECK(c->audit_max_bytes == 0 || c->audit_max_bytes >= (UINT64_C(64) << 10));
  FUZZ_CHECK(c->audit_keep <= 1000);
  FUZZ_CHECK(c->busy_poll_ns <= TSR_CONFIG_BUSY_POLL_MAX_NS);
  FUZZ_CHECK(c->log_level >= 0 && c->log_level <= 3);
  FUZZ_CHECK(c->device_count <= TSR_CONFIG_MAX_DEVICES);
  for (size_t i = 0; i < c->device_count; i++) {
    const tsr_device_t *d = &c->devices[i];
    FUZZ_CHECK(d->index == i && d->source == TSR_DEVICE_FROM_CONFIG);
    FUZZ_CHECK(d->total_bytes > 0 && d->sm_count <= 100000);
    FUZZ_CHECK(d->name[0] != '\0' && strnlen(d->name, sizeof(d->name)) < sizeof(d->name));
    FUZZ_CHECK(strnlen(d->uuid, sizeof(d->uuid)) < sizeof(d->uuid));
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = malloc(size + 1);
  if (!text) return 0;
  memcpy(text, data, size);
  text[size] = '\0';
  tsr_config_defaults(&g_a);
  tsr_status_t st = tsr_config_parse(text, "fuzz.conf", &g_a);
  if (st) {
    tsr__check_refusal(st, text);
    tsr_status_free(st);
  } else {
    tsr__check_config(&g_a);
    tsr_config_defaults(&g_b);
    FUZZ_CHECK(tsr_config_parse(text, "fuzz.conf", &g_b) == NULL);
    FUZZ_CHECK(memcmp(&g_a, &g_b, sizeof(g_a)) == 0);
  }
  free(text);
  return 0;
}
