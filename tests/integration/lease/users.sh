# Ownership across real users: created with useradd, the CLI run as each with
# runuser. Identity comes from the socket's peer credentials, so this is the
# only honest way to test it. Needs root (CI runs as root).
source "$(dirname "$0")/lib.sh"
[ "$(id -u)" -eq 0 ] || skip "needs root to create users (CI runs as root)"
command -v useradd >/dev/null && command -v runuser >/dev/null || skip "needs useradd and runuser"

getent group tsr-admins >/dev/null || groupadd tsr-admins
for u in tsr-alice tsr-bob tsr-carol; do
  id "$u" >/dev/null 2>&1 || useradd --no-create-home --shell /usr/sbin/nologin "$u"
done
id tsr-admin >/dev/null 2>&1 || useradd --no-create-home --shell /usr/sbin/nologin -G tsr-admins tsr-admin
id -nG tsr-admin | grep -qw tsr-admins || usermod -aG tsr-admins tsr-admin

# the users must be able to run the binaries wherever the build lives
mkdir -p "$T_DIR/bin"
cp "$TESSERA" "$TESSERAD" "$T_DIR/bin/"
chmod 755 "$T_DIR/bin" "$T_DIR/bin/"*
TESSERA=$T_DIR/bin/tessera
TESSERAD=$T_DIR/bin/tesserad

write_config "admin_group = tsr-admins"
start_daemon

t --as tsr-alice lease create --device 0 --mem 25% --for 1h --json
expect_rc 0 "alice creates"; A=$(json_field id)
[ "$(json_field owner)" = tsr-alice ] && pass || fail "owner is alice"
t --as tsr-bob lease create --device 0 --mem 10% --for 1h --json
expect_rc 0 "bob creates"; B=$(json_field id)

# a user cannot release another's lease
t --as tsr-bob lease release "$A";   expect_rc 1 "bob releases alice's"; expect_err "belongs to tsr-alice"
t --as tsr-alice lease show "$A";     expect_out "state +active" "alice's lease survives bob"
# ... and does not see it among their own; --all shows an ordinary user her
# own and a count of the others' (who holds what is for admins), an admin all
t --as tsr-bob lease list --json;     expect_rc 0
grep -q "\"id\": $A," <<<"$OUT" && fail "bob's list shows alice's lease" || pass
t --as tsr-bob lease list --all --json; expect_rc 0
grep -q "\"id\": $A," <<<"$OUT" && fail "bob's list --all shows alice's lease: $OUT" || pass
grep -q "\"id\": $B," <<<"$OUT" && pass || fail "bob's list --all lacks his own lease: $OUT"
t --as tsr-bob lease list --all; expect_rc 0; expect_out "^and 1 lease of other users" "bob's count of the others'"
grep -q "tsr-alice" <<<"$OUT" && fail "bob's list names alice: $OUT" || pass
t --as tsr-bob lease show "$A"; expect_rc 1 "bob shows alice's lease"; expect_err "another user's"
t lease list --all --json; expect_rc 0
grep -q "\"id\": $A," <<<"$OUT" && pass || fail "root's list --all lacks alice's lease"

# the (device, fraction) lock: bob may not take the fraction alice holds on device 0
t --as tsr-bob lease create --device 0 --mem 25% --for 1h; expect_rc 1 "lock rule"; expect_err "locked by tsr-alice"
t --as tsr-bob lease create --device 1 --mem 25% --for 1h; expect_rc 0 "same fraction, other device"

# a user cannot create for another user; an admin (group member or root) can
t --as tsr-bob lease create --device 0 --mem 5% --for 1h --user tsr-alice
expect_rc 1 "bob creates for alice"; expect_err "only an admin"
t --as tsr-admin lease create --device 0 --mem 5% --for 1h --user tsr-carol --json
expect_rc 0 "group admin creates for carol"
C=$(json_field id)
[ "$(json_field owner)" = tsr-carol ] && pass || fail "owner carol"
[ "$(json_field creator)" = tsr-admin ] && pass || fail "creator admin"
t --as tsr-carol lease release "$C";  expect_rc 0 "carol releases her lease made by the admin"
t lease create --device 0 --mem 6% --for 1h --user tsr-bob --json
expect_rc 0 "root creates for bob"
t --as tsr-admin lease create --device 0 --mem 5% --for 1h --user nosuchuser-xyz
expect_rc 1 "unknown user"; expect_err "no user 'nosuchuser-xyz'"

# an admin can release anyone's lease
t --as tsr-admin lease release "$A";  expect_rc 0 "admin releases alice's"
t lease release "$B";                 expect_rc 0 "root releases bob's"

# the audit log names who did what, including the denials
AUDIT=$T_STATE/audit.log
grep '"actor":"tsr-bob"' "$AUDIT" | grep '"code":"permission_denied"' | grep -q '"op":"lease.release"' && pass || fail "audit: bob's denied release"
grep '"event":"release"' "$AUDIT" | grep '"actor":"tsr-admin"' | grep -q '"owner":"tsr-alice"' && pass || fail "audit: admin release"
# every audit line is one JSON object with the same keys a parser expects
bad=$(grep -cv '^{"event":"[a-z]*","time":"[^"]*","time_ns":[0-9]*.*}$' "$AUDIT" || true)
[ "$bad" -eq 0 ] && pass || fail "$bad malformed audit lines"

# a job label: the scheduler's (an admin) only; listed, filtered on, kept in the
# lock file across a restart; the labelled lease stays its owner's alone
t --as tsr-admin lease create --device 1 --mem 5% --for 1h --user tsr-carol --job slurm:4711 --json
expect_rc 0 "an admin labels carol's lease with a job"; J=$(json_field id)
[ "$(json_field job)" = slurm:4711 ] && pass || fail "the reply carries the job"
t --as tsr-carol lease create --device 1 --mem 5% --for 1h --job 4712
expect_rc 1 "a user labels a lease"; expect_one_line_err "only an admin may label a lease with a job id"
t --as tsr-carol lease create --device 1 --mem 5% --for 1h --job "a b"
expect_rc 2 "a malformed job id"; expect_err "is not a job id"
t --as tsr-admin lease list --all --job slurm:4711 --json; expect_rc 0
[ "$(grep -c '"id":' <<<"$OUT")" = 1 ] && grep -q "\"id\": $J," <<<"$OUT" && pass || fail "list --job finds the one lease: $OUT"
t --as tsr-admin lease list --all --job 9999; expect_rc 0; expect_out "no active leases of job 9999"
t --as tsr-carol lease list; expect_out "JOB" "carol's table shows the job column"; expect_out "slurm:4711"
t --as tsr-bob lease release "$J"; expect_rc 1 "bob releases the job's lease"
stop_daemon
start_daemon
t --as tsr-carol lease show "$J"; expect_rc 0; expect_out "^job +slurm:4711" "the job survives a restart"
grep -q '^job: slurm:4711$' "$T_STATE"/gpu_1_*_"$J".lock && pass || fail "the lock file names the job"

# lock files are the seed's format and name the owner
f=$(ls "$T_STATE"/gpu_1_0250_*.lock)
grep -q '^user: tsr-bob$' "$f" && grep -q '^fraction: 0.25$' "$f" && grep -q '^device: 1$' "$f" && pass || fail "lock file contents: $(cat "$f")"
finish
