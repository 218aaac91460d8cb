# lease renew, as two real users: the owner moves her lease's deadline later
# and earlier, another user may not, an admin may; the lease then ends at the
# new deadline (not the old one), the move is in the lock file across a
# restart, in the audit log and in the region; a renewal reaches at most
# max_lease from now; bad input changes nothing.
source "$(dirname "$0")/lib.sh"
real_users -- tsr-alice tsr-bob
write_config "max_lease = 1h"
start_daemon

t --as tsr-alice lease create --device 0 --mem 20% --for 1s --json; expect_rc 0 "alice creates"; A=$(json_field id)
OLD=$(json_field deadline_ns)
t --as tsr-alice lease renew "$A" --for 30m --json; expect_rc 0 "alice renews her own"
NEW=$(json_field deadline_ns)
[ "$NEW" -gt $((OLD + 1700000000000)) ] && pass || fail "the deadline moved about 30 min: $OLD -> $NEW"
[ "$(json_field state)" = active ] && pass || fail "renewed lease active: $OUT"
t --as tsr-alice lease renew "$A" --for 2h; expect_rc 2 "past max_lease"; expect_err "at most 1h from now"
t --as tsr-bob lease renew "$A" --for 10m; expect_rc 1 "bob renews alice's"; expect_err "belongs to tsr-alice"
t --as tsr-bob lease renew 999999 --for 10m; expect_rc 1 "no such lease"; expect_err "no active lease 999999"
# the old deadline (1 s) passes: the lease stays
sleep 1.5
t --as tsr-alice lease show "$A" --json; [ "$(json_field state)" = active ] && pass || fail "expired at the old deadline: $OUT"
t devices --json; expect_out '"available_bytes": 68719476736' "memory still held after the old deadline"
# the region was told: the daemon's own check finds it saying the lease's words
t --as tsr-alice lease show "$A" --json; [ "$(json_field tampered)" = false ] && pass || fail "the region disagrees with the renewed lease: $OUT"
# the lock file says the new deadline
ls "$T_STATE"/*_"$A".lock >/dev/null 2>&1 && pass || fail "lock file of lease $A"
WANT_LOCK=$(date -u -d "@$((NEW / 1000000000))" +%Y-%m-%dT%H:%M:%S)
grep -q "^deadline: $WANT_LOCK" "$T_STATE"/*_"$A".lock && pass || fail "lock file says the new deadline $WANT_LOCK: $(grep deadline "$T_STATE"/*_"$A".lock)"
# --until, by the admin (root), and shorter: the lease ends at it
UNTIL=$(date -u -d '+2 seconds' +%Y-%m-%dT%H:%M:%SZ)
t lease renew "$A" --until "$UNTIL" --json; expect_rc 0 "root renews until $UNTIL"
[ "$(json_field owner)" = tsr-alice ] && pass || fail "the owner stays alice"
sleep 3.5
t --as tsr-alice lease show "$A" --json; [ "$(json_field state)" = expired ] && pass || fail "not expired at the shortened deadline: $OUT"
t --as tsr-alice lease renew "$A" --for 10m; expect_rc 1 "an ended lease"; expect_err "no active lease"
# the audit log has each renew with its actor
AUDIT=$T_STATE/audit.log
[ "$(grep '"event":"renew"' "$AUDIT" | grep -c "\"lease\":$A,")" -eq 2 ] && pass || fail "two renew lines in the audit log"
grep '"event":"renew"' "$AUDIT" | grep -q '"actor":"tsr-alice"' && pass || fail "audit: alice's renew"
grep '"op":"lease.renew"' "$AUDIT" | grep '"actor":"tsr-bob"' | grep -q permission_denied && pass || fail "audit: bob's denied renew"

# across a restart: the renewed deadline is what comes back
t --as tsr-bob lease create --device 1 --mem 10% --for 1m --json; expect_rc 0; B=$(json_field id)
t --as tsr-bob lease renew "$B" --for 50m --json; expect_rc 0; WANT=$(json_field deadline_ns)
stop_daemon
start_daemon
t --as tsr-bob lease show "$B" --json; expect_rc 0
[ "$(json_field state)" = active ] && [ "$(json_field deadline_ns)" = "$WANT" ] && pass || fail "restart lost the renewal: $OUT"

# bad input: a usage error, nothing sent
t --as tsr-bob lease renew "$B"; expect_rc 2 "neither --for nor --until"; expect_err "one of --for and --until"
t --as tsr-bob lease renew "$B" --for 1m --until 2030-01-01T00:00:00Z; expect_rc 2 "both"
t --as tsr-bob lease renew; expect_rc 2 "no id"; expect_err "needs a lease ID"
t --as tsr-bob lease renew "$B" --for soon; expect_rc 2 "bad duration"; expect_err "^tessera: --for"
t --as tsr-bob lease renew "$B" --until yesterday; expect_rc 2 "bad time"; expect_err "not a time"
t --as tsr-bob lease renew "$B" --until 2020-01-01T00:00:00Z; expect_rc 2 "a past time"; expect_err "not in the future"
t --as tsr-bob lease show "$B" --json; [ "$(json_field deadline_ns)" = "$WANT" ] && pass || fail "a refused renew moved it: $OUT"
finish
