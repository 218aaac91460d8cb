# lease resize, as two real users: the owner grows and shrinks her lease's
# memory (as a share or a size) and its SM share; a grow needs the room
# (another user's lease keeps it), checked with the lease's own share counted
# free; another user may not resize it, an admin may; a share can change but
# not be added to a lease without one or taken from one with it; the new
# size is in the lock file (named by it) across a restart, in the audit log,
# and in the region (the daemon's own check finds it saying the lease's
# words); bad input is refused and changes nothing. What a running tenant
# sees of a resize: tests/integration/shim/resize.sh.
source "$(dirname "$0")/lib.sh"
real_users -- tsr-alice tsr-bob
write_config
start_daemon
GIB=1073741824

t --as tsr-alice lease create --device 0 --mem 40% --for 1h --json; expect_rc 0 "alice creates"; A=$(json_field id)
t --as tsr-bob lease create --device 0 --mem 50% --for 1h --sm 50% --json; expect_rc 0 "bob creates"; B=$(json_field id)
# 10% is left: alice may take it, not more
t --as tsr-alice lease resize "$A" --mem 60%; expect_rc 1 "a grow past the room"
expect_err "has 40 GiB free .* with the lease's own 32 GiB; it would need 48 GiB"
t --as tsr-alice lease show "$A" --json; [ "$(json_field fraction_ppm)" = 400000 ] && pass || fail "a refused grow changed it: $OUT"
# bob's fraction is his (the lock files' rule), as for a create
t --as tsr-alice lease resize "$A" --mem 50%; expect_rc 1 "bob's fraction"; expect_err "is locked by tsr-bob"
t --as tsr-alice lease resize "$A" --mem 49.5% --json; expect_rc 0 "alice grows into the room left"
[ "$(json_field fraction_ppm)" = 495000 ] && pass || fail "49.5%: $OUT"
ABYTES=$(json_field bytes)
[ "$(json_field id)" = "$A" ] && [ "$(json_field state)" = active ] && pass || fail "the same lease, active: $OUT"
t devices --json; expect_out "\"available_bytes\": $((40 * GIB - ABYTES))," "0.5% of device 0 left"
# shrink, as a size: 16 GiB of device 0 is 20%
t --as tsr-alice lease resize "$A" --mem 16GiB; expect_rc 0 "alice shrinks to a size"
expect_out "lease $A resized: 16 GiB \\(20%\\) of device 0, SM share not limited" "the human line"
t devices --json; expect_out "\"available_bytes\": $((24 * GIB))," "24 GiB back"
# bob may not, root (an admin) may
t --as tsr-bob lease resize "$A" --mem 30%; expect_rc 1 "bob resizes alice's"; expect_err "belongs to tsr-alice"
t lease resize "$A" --mem 25% --json; expect_rc 0 "root resizes alice's"
[ "$(json_field owner)" = tsr-alice ] && [ "$(json_field fraction_ppm)" = 250000 ] && pass || fail "root's resize: $OUT"
# the SM share: bob's changes within what is unclaimed; alice's has none
t --as tsr-bob lease resize "$B" --sm 80% --json; expect_rc 0 "bob's share to 80%"
[ "$(json_field sm_ppm)" = 800000 ] && [ "$(json_field fraction_ppm)" = 500000 ] && pass || fail "share moved, memory kept: $OUT"
t --as tsr-alice lease create --device 0 --mem 5% --sm 30% --for 1h; expect_rc 1 "80% claimed: 30% more does not fit"
t --as tsr-bob lease resize "$B" --sm 30% --mem 40% --json; expect_rc 0 "both at once"
[ "$(json_field sm_ppm)" = 300000 ] && [ "$(json_field fraction_ppm)" = 400000 ] && pass || fail "both moved: $OUT"
t --as tsr-alice lease resize "$A" --sm 20%; expect_rc 1 "a share added"; expect_err "has no SM share"
t --as tsr-bob lease resize "$B" --sm 0%; expect_rc 2 "--sm 0%"; expect_err "more than 0"
# the regions say the new words: the daemon's check finds nothing amiss
for id in "$A" "$B"; do
  t lease show "$id" --json; [ "$(json_field tampered)" = false ] && pass || fail "region of $id disagrees: $OUT"
done
# the lock file is named by the new fraction, and the old one is gone
[ "$(ls "$T_STATE"/*_"$A".lock | wc -l)" -eq 1 ] && pass || fail "one lock file of lease $A: $(ls "$T_STATE")"
grep -q "^fraction: 0.25" "$T_STATE"/*_"$A".lock && pass || fail "lock file says 25%: $(cat "$T_STATE"/*_"$A".lock)"
# the audit log has each resize with its actor
AUDIT=$T_STATE/audit.log
[ "$(grep '"event":"resize"' "$AUDIT" | grep -c "\"lease\":$A,")" -eq 3 ] && pass || fail "three resize lines of $A"
grep '"event":"resize"' "$AUDIT" | grep "\"lease\":$A," | grep -q '"actor":"root"' && pass || fail "audit: root's resize"
grep '"op":"lease.resize"' "$AUDIT" | grep '"actor":"tsr-bob"' | grep -q permission_denied && pass || fail "audit: bob's denied resize"
# across a restart: the resized lease is what comes back
stop_daemon
start_daemon
t --as tsr-bob lease show "$B" --json; expect_rc 0
[ "$(json_field sm_ppm)" = 300000 ] && [ "$(json_field bytes)" = $((32 * GIB)) ] && pass || fail "restart lost the resize: $OUT"
t devices --json; expect_out "\"available_bytes\": $((28 * GIB))," "after the restart 80 - 20 - 32 GiB free"
t lease show "$A" --json; [ "$(json_field tampered)" = false ] && pass || fail "adopted region of $A flagged: $OUT"

# bad input: refused, nothing changed
t --as tsr-bob lease resize "$B"; expect_rc 2 "neither --mem nor --sm"; expect_err "needs --mem, --sm or both"
t --as tsr-bob lease resize; expect_rc 2 "no id"; expect_err "needs a lease ID"
t --as tsr-bob lease resize "$B" --mem lots; expect_rc 2 "bad --mem"; expect_err "^tessera: --mem"
t --as tsr-bob lease resize "$B" --mem 0%; expect_rc 2 "--mem 0%"; expect_err "more than 0"
t --as tsr-bob lease resize "$B" --mem 200GiB; expect_rc 2 "more than the device"; expect_err "more than device 0 has"
t --as tsr-bob lease resize "$B" --mem 150%; expect_rc 2 "a share over 100%"
t --as tsr-bob lease resize 999999 --mem 10%; expect_rc 1 "no such lease"; expect_err "no active lease 999999"
t --as tsr-bob lease resize "$B" --mem 10% extra; expect_rc 2 "extra argument"; expect_err "unexpected argument"
t --as tsr-bob lease show "$B" --json
[ "$(json_field sm_ppm)" = 300000 ] && [ "$(json_field bytes)" = $((32 * GIB)) ] && pass || fail "refused resizes changed it: $OUT"
t lease resize --help; expect_rc 0; expect_out "usage: tessera lease resize ID"
finish
