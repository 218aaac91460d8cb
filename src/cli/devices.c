/* devices.c: `tessera devices`: the node's GPUs and what is leased on each. */
#include <stdio.h>
#include <stdlib.h>

#include "base/array.h"
#include "base/units.h"
#include "cli/cli.h"
#include "cli/client.h"
#include "proto/requests.h"

static void tsr__print_device(const tsr_cli_device_t *d) {
  char total[32], avail[32], sm[16], smheld[16];
  tsr_format_size(d->memory_bytes, total, sizeof(total));
  tsr_format_size(d->available_bytes, avail, sizeof(avail));
  if (d->sm_count)
    snprintf(sm, sizeof(sm), "%u", d->sm_count);
  else
    snprintf(sm, sizeof(sm), "?");
  tsr_format_percent(d->sm_committed_ppm, smheld, sizeof(smheld));
  printf("%-3u %-28.28s %-6s %-10s %-10s %-5s %-7s %-7u %-9s %s\n", d->index, d->name, d->kind, total, avail, sm,
         smheld, d->leases, d->mig, d->source);
}

int tsr_cli_devices_call(const tsr_cli_globals_t *g, tsr_cli_reply_t *r, const tsr_json_member_t **out_list) {
  *out_list = NULL;
  tsr_json_writer_t w = {0};
  tsr_proto_plain_write(&w, TSR_PROTO_DEVICES);
  int rc = tsr_cli_call(g, &w, r);
  tsr_json_writer_free(&w);
  if (rc) return rc;
  *out_list = tsr_cli_reply_member(r, "devices", TSR_JSON_ARRAY);
  return *out_list ? TSR_EXIT_OK : TSR_EXIT_INTERNAL;
}

int tsr_cli_devices_main(const tsr_cli_globals_t *g, int argc, char **argv) {
  static const char usage[] =
      "usage: tessera devices [--json]\n"
      "\n"
      "Lists the node's GPUs as the daemon sees them (from NVML, or declared in its\n"
      "configuration), with the memory and SM share that leases hold on each. KIND\n"
      "is cuda (a GPU NVML finds, also reached through NVIDIA's OpenCL) or opencl (a\n"
      "device only OpenCL reaches, declared in the configuration).\n";
  bool json;
  int parsed = tsr_cli_parse_flags(argc, argv, usage, 0, &json, NULL);
  if (parsed) return parsed < 0 ? TSR_EXIT_OK : parsed;
  tsr_cli_reply_t r = {0};
  const tsr_json_member_t *list = NULL;
  int rc = tsr_cli_devices_call(g, &r, &list);
  if (!rc && json) {
    rc = tsr_cli_print_json(list->value, list->value_len);
  } else if (!rc) {
    /* every device is read before the first line, so a bad one prints no half table */
    tsr_cli_device_t *devs = NULL;
    size_t count = 0, cap = 0;
    tsr_json_member_t item;
    for (size_t cur = 0; !rc && tsr_json_array_next(list->value, list->value_len, &cur, &item);) {
      tsr_cli_device_t *grown = tsr_array_grow(devs, &cap, count + 1, sizeof(*devs), 8);
      if (!grown) {
        rc = tsr_cli_fail(tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory"));
        break;
      }
      devs = grown;
      rc = tsr_cli_fail(tsr_cli_device_parse(item.value, item.value_len, &devs[count++]));
    }
    if (!rc) {
      printf("%-3s %-28s %-6s %-10s %-10s %-5s %-7s %-7s %-9s %s\n", "#", "NAME", "KIND", "MEMORY", "FREE", "SMS",
             "SM HELD", "LEASES", "MIG", "SOURCE");
      for (size_t i = 0; i < count; i++) tsr__print_device(&devs[i]);
    }
    free(devs);
  }
  tsr_cli_reply_close(&r);
  return rc;
}
