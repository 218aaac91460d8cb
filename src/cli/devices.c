/* devices.c: `tessera devices`: the node's GPUs and what is leased on each. */
#include <stdio.h>
#include <string.h>

#include "base/units.h"
#include "cli/cli.h"
#include "cli/client.h"

int tsr_cli_devices_main(const tsr_cli_globals_t *g, int argc, char **argv) {
  static const char usage[] =
      "usage: tessera devices [--json]\n"
      "\n"
      "Lists the node's GPUs as the daemon sees them (from NVML, or declared in its\n"
      "configuration), with the memory and SM share that leases hold on each.\n";
  bool json;
  int parsed = tsr_cli_parse_flags(argc, argv, usage, 0, &json, NULL);
  if (parsed) return parsed < 0 ? TSR_EXIT_OK : parsed;
  json_t *reply;
  int rc = tsr_cli_call(g, json_pack("{s:s}", "op", "devices"), &reply);
  if (rc) return rc;
  json_t *list = json_object_get(reply, "devices");
  if (json) {
    tsr_cli_print_json(list);
  } else {
    printf("%-3s %-28s %-10s %-10s %-5s %-7s %-7s %-9s %s\n", "#", "NAME", "MEMORY", "FREE", "SMS",
           "SM HELD", "LEASES", "MIG", "SOURCE");
    size_t i;
    json_t *d;
    json_array_foreach(list, i, d) {
      char total[32], avail[32], sm[16], smheld[16];
      tsr_format_size((uint64_t)json_integer_value(json_object_get(d, "memory_bytes")), total, sizeof(total));
      tsr_format_size((uint64_t)json_integer_value(json_object_get(d, "available_bytes")), avail, sizeof(avail));
      json_t *smc = json_object_get(d, "sm_count");
      if (json_is_integer(smc))
        snprintf(sm, sizeof(sm), "%lld", (long long)json_integer_value(smc));
      else
        snprintf(sm, sizeof(sm), "?");
      tsr_format_percent((uint32_t)json_integer_value(json_object_get(d, "sm_committed_ppm")), smheld,
                         sizeof(smheld));
      printf("%-3lld %-28.28s %-10s %-10s %-5s %-7s %-7lld %-9s %s\n",
             (long long)json_integer_value(json_object_get(d, "index")),
             json_string_value(json_object_get(d, "name")), total, avail, sm, smheld,
             (long long)json_integer_value(json_object_get(d, "leases")),
             json_string_value(json_object_get(d, "mig")),
             json_string_value(json_object_get(d, "source")));
    }
  }
  json_decref(reply);
  return TSR_EXIT_OK;
}
