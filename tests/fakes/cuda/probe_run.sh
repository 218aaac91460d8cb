#!/usr/bin/env bash
# probe_run.sh PROBE: runs every section of probe_driver in its own process
# and prints its lines, then "SECTION.exit = STATUS" for each.
set -u
probe=$1
for s in $("$probe" list); do
  "$probe" "$s"
  echo "$s.exit = $?"
done
