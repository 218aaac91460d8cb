# Expiry by the deadline timer: a short lease is active before its deadline
# and released after it, without anyone asking. (Lateness is measured by
# bench/lease, not here: this checks behaviour only.)
source "$(dirname "$0")/lib.sh"
start_daemon
t lease create --device 0 --mem 30% --for 700ms --json; expect_rc 0; ID=$(json_field id)
t lease show "$ID" --json; [ "$(json_field state)" = active ] && pass || fail "active before the deadline"
t devices --json; expect_out '"available_bytes": 60129542144' "memory held"
sleep 1.5
t lease show "$ID" --json; expect_rc 0
[ "$(json_field state)" = expired ] && pass || fail "expired after the deadline: $OUT"
t devices --json; expect_out '"available_bytes": 85899345920' "memory back (L2)"
ls "$T_STATE"/*.lock >/dev/null 2>&1 && fail "lock file still there" || pass
grep -q '"event":"expire"' "$T_STATE/audit.log" && pass || fail "audit expire"
# The timer is armed at the earliest deadline; when that lease is released
# first, the timer is left early and re-armed when it fires: the later lease
# must still expire, and the released one must not be expired.
# (The times leave room for a machine busy with other tests: the release
# must come before the early deadline, the first look before the late one.)
t lease create --device 0 --mem 10% --for 1500ms --json; expect_rc 0; EARLY=$(json_field id)
t lease create --device 0 --mem 10% --for 3s --json; expect_rc 0; LATE=$(json_field id)
t lease release "$EARLY"; expect_rc 0
sleep 1.7
t lease show "$LATE" --json; [ "$(json_field state)" = active ] && pass || fail "late lease active at 1.7 s: $OUT"
t lease show "$EARLY" --json; [ "$(json_field state)" = released ] && pass || fail "early lease stays released: $OUT"
sleep 1.8
t lease show "$LATE" --json; [ "$(json_field state)" = expired ] && pass || fail "late lease expired after 3 s: $OUT"
# a lease longer than max_lease is refused
stop_daemon
write_config "max_lease = 1h"
start_daemon
t lease create --device 0 --mem 10% --for 2h; expect_rc 2 "over max_lease"; expect_err "longer than this node allows"
finish
