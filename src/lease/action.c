/* action.c: the names of a lease's expiry action and of its over-limit
 * action (lease/lease.h), shared by the lock files, the protocol, the
 * configuration and the CLI. */
#include <string.h>

#include "lease/lease.h"

const char *tsr_lease_action_name(tsr_lease_action_t action) {
  switch (action) {
    case TSR_LEASE_ACTION_DEFAULT: return "default";
    case TSR_LEASE_ACTION_REVOKE: return "revoke";
    case TSR_LEASE_ACTION_SIGNAL: return "signal";
  }
  return "?";
}

bool tsr_lease_action_parse(const char *text, tsr_lease_action_t *out) {
  if (!text) return false;
  if (strcmp(text, "revoke") == 0)
    *out = TSR_LEASE_ACTION_REVOKE;
  else if (strcmp(text, "signal") == 0)
    *out = TSR_LEASE_ACTION_SIGNAL;
  else
    return false;
  return true;
}

const char *tsr_lease_over_limit_name(tsr_lease_over_limit_t over_limit) {
  switch (over_limit) {
    case TSR_LEASE_OVER_LIMIT_DEFAULT: return "default";
    case TSR_LEASE_OVER_LIMIT_SIGNAL: return "signal";
    case TSR_LEASE_OVER_LIMIT_LOG: return "log";
  }
  return "?";
}

bool tsr_lease_over_limit_parse(const char *text, tsr_lease_over_limit_t *out) {
  if (!text) return false;
  if (strcmp(text, "signal") == 0)
    *out = TSR_LEASE_OVER_LIMIT_SIGNAL;
  else if (strcmp(text, "log") == 0)
    *out = TSR_LEASE_OVER_LIMIT_LOG;
  else
    return false;
  return true;
}
