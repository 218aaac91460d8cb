#!/usr/bin/env bash
# conformance.sh PROBE REAL: runs probe_driver against the fake (the PROBE
# binary is linked with it) and checks that every answer the real driver
# gave (REAL, real_h100.txt) is the fake's answer too, and that no section
# of the probe fails against the fake. Lines whose key has ".info." (facts
# of one machine), ".exit" (the real driver crashes on a few NULL
# arguments; the fake answers them) and the keys listed below (each with
# why the fake differs on purpose) are not compared.
set -u
probe=$1
real=$2
out=$(mktemp)
trap 'rm -f "$out"' EXIT
fail=0
for s in $("$probe" list); do
  # the real driver crashes in two sections; the fake never may (a
  # sanitizer's report ends a section with an error too)
  if ! "$probe" "$s" >>"$out" 2>&1; then
    echo "section $s of the probe failed against the fake:"
    tail -20 "$out"
    fail=1
  fi
done

# key -> why the fake answers differently
declare -A differs=(
  # A query right after a record on a stream the H100 had just finished:
  # NOT_READY there (the GPU had not yet reached the record), SUCCESS on the
  # fake's idle timeline. Timing, not behaviour.
  [capture.event_query_recorded_again]=1
  # A destroyed context destroyed again: the H100 answered
  # CONTEXT_IS_DESTROYED (709) in two runs and INVALID_CONTEXT (201) in one;
  # the fake always answers 709.
  [ctx_double_destroy.second]=1
  # The H100 freed a pointer of a reset primary context with success once the
  # context was retained again; the fake treats it as freed by the reset.
  [primary_reset.old_ptr_after_reset]=1
  # The real driver clamps an oversized malloc heap / printf FIFO and takes
  # them lazily; the fake charges them when set and refuses what cannot fit.
  [limits.set_heap_1t]=1
  [limits.set_fifo_1t]=1
)

checked=0
while IFS= read -r line; do
  [[ $line == *" = "* ]] || continue
  key=${line%% = *}
  [[ $key == *.info.* || $key == *.exit ]] && continue
  [[ -n ${differs[$key]:-} ]] && continue
  checked=$((checked + 1))
  got=$(grep -m1 -F -- "$key = " "$out" | grep -F -x -- "$line" || true)
  if [[ -z $got ]]; then
    echo "differs: real '$line', fake '$(grep -m1 -F -- "$key = " "$out" || echo '(no answer)')'"
    fail=1
  fi
done <"$real"
echo "$checked answers compared with the real driver's"
exit $fail
