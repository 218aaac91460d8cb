# Who sees what on /metrics, and a slow client cannot silence it; with real
# users (needs root, as CI runs):
#   - audiences: root, an admin (admin_group) and a member of metrics_group
#     see every lease's series; alice sees the node-wide series and her own
#     lease's, never bob's; a user with no lease sees the node-wide series;
#     a scraper on another host (a network namespace) sees the node-wide
#     series, everything with metrics_remote = full; every audience gets a
#     valid exposition; the series the tenant's processes report carry
#     source="reported", the lease's own settings do not;
#   - a slow-loris client run as an ordinary user (slowloris.py: as many
#     connections as it can, a header line every second, never a whole
#     request) holds at most 4 connections, each closed by the request
#     deadline (metrics_request_timeout, 2s here) though it keeps sending;
#     meanwhile root and another user get every scrape within a second, and
#     the attacker's own user within the deadline plus a second;
#   - the same from many remote addresses, enough to fill every connection
#     the daemon takes: local and remote scrapes still get in within a
#     second.
source "$(dirname "$0")/../lease/lib.sh"
HERE=$(cd "$(dirname "$0")" && pwd)
command -v curl >/dev/null || skip "curl is missing (Debian: curl)"
[ -x /usr/bin/python3 ] || skip "/usr/bin/python3 is missing (the users run it; Debian: python3)"
real_users -- tsr-alice tsr-bob tsr-mallory tsr-prom tsr-madmin
getent group tsr-prometheus >/dev/null || groupadd tsr-prometheus
id -nG tsr-prom | grep -qw tsr-prometheus || usermod -aG tsr-prometheus tsr-prom
getent group tsr-madmins >/dev/null || groupadd tsr-madmins
id -nG tsr-madmin | grep -qw tsr-madmins || usermod -aG tsr-madmins tsr-madmin
cp "$HERE/slowloris.py" "$T_DIR/bin/"
chmod 755 "$T_DIR/bin/slowloris.py"
mkdir -p "$T_DIR/loris"
chown tsr-mallory "$T_DIR/loris"

TIMEOUT_S=2
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
HOST=127.0.0.1
url() { echo "http://$HOST:$port/metrics"; }
# scrape_as USER|root FILE: one scrape that must be whole within a second
scrape_as() {
  if [ "$1" = root ]; then
    curl -sf --max-time 1 "$(url)" >"$2"
  else
    as "$1" curl -sf --max-time 1 "$(url)" >"$2"
  fi
}
samples() { grep -v '^#' "$1" || true; }
now_ms() { date +%s%3N; }

write_config "admin_group = tsr-madmins" "metrics_group = tsr-prometheus" "metrics_request_timeout = ${TIMEOUT_S}s"
start_daemon --metrics "127.0.0.1:$port"

t --as tsr-alice lease create --device 0 --mem 10% --for 1h --json
expect_rc 0 "alice creates"; A=$(json_field id)
t --as tsr-bob lease create --device 1 --mem 10% --for 1h --json
expect_rc 0 "bob creates"; B=$(json_field id)
for i in $(seq 1 50); do
  scrape_as root "$T_DIR/root" || true
  grep -q '^tessera_leases{state="active"} 2$' "$T_DIR/root" && break
  sleep 0.1
done
mem_a="tessera_lease_memory_bytes{device=\"0\",lease=\"$A\",user=\"tsr-alice\"}"
mem_b="tessera_lease_memory_bytes{device=\"1\",lease=\"$B\",user=\"tsr-bob\"}"

# ---- audiences --------------------------------------------------------------------------
for who in root tsr-alice tsr-bob tsr-mallory tsr-prom tsr-madmin; do
  scrape_as "$who" "$T_DIR/$who" || fail "$who: no scrape"
  python3 "$HERE/check_exposition.py" <"$T_DIR/$who" || fail "$who: the exposition is not valid"
  grep -q '^tessera_leases{state="active"} 2$' "$T_DIR/$who" || fail "$who: no node-wide lease count"
  for dev in 0 1; do
    want=$(awk -v s="tessera_device_leased_bytes{device=\"$dev\"}" '$1 == s {print $2}' "$T_DIR/root")
    got=$(awk -v s="tessera_device_leased_bytes{device=\"$dev\"}" '$1 == s {print $2}' "$T_DIR/$who")
    [ -n "$want" ] && [ "$got" = "$want" ] || fail "$who: leased bytes of device $dev are '$got', not '$want'"
  done
  # the same families for everyone (HELP and TYPE are node-wide)
  [ "$(grep -c '^# TYPE' "$T_DIR/$who")" = "$(grep -c '^# TYPE' "$T_DIR/root")" ] \
    || fail "$who: not the same families as root"
done
pass
for who in root tsr-prom tsr-madmin; do
  grep -qF "$mem_a " "$T_DIR/$who" && grep -qF "$mem_b " "$T_DIR/$who" \
    || fail "$who sees not every lease: $(samples "$T_DIR/$who" | grep tessera_lease_memory)"
done
pass
grep -qF "$mem_a " "$T_DIR/tsr-alice" || fail "alice does not see her own lease"
samples "$T_DIR/tsr-alice" | grep -q "lease=\"$B\"\|user=\"tsr-bob\"" && fail "alice sees bob's lease"
lease_families=$(grep -c '^# TYPE tessera_lease_' "$T_DIR/root")
[ "$lease_families" -ge 1 ] && [ "$(samples "$T_DIR/tsr-alice" | grep -c "lease=\"$A\"")" = "$lease_families" ] \
  || fail "alice does not see all $lease_families series of her lease"
grep -qF "$mem_b " "$T_DIR/tsr-bob" || fail "bob does not see his own lease"
samples "$T_DIR/tsr-bob" | grep -q "lease=\"$A\"\|user=\"tsr-alice\"" && fail "bob sees alice's lease"
samples "$T_DIR/tsr-mallory" | grep -q '^tessera_lease_' && fail "a user without a lease sees a lease's series"
pass
# what the tenant reports is marked; what the daemon holds is not; used <= memory
for s in used_bytes peak_bytes processes allocation_denials_total throttled_seconds_total; do
  grep -q "^tessera_lease_$s{device=\"0\",lease=\"$A\",source=\"reported\",user=\"tsr-alice\"} " "$T_DIR/root" \
    || fail "tessera_lease_$s lacks source=\"reported\": $(grep "^tessera_lease_$s" "$T_DIR/root")"
  grep -q "^# HELP tessera_lease_$s .*source=\"reported\": a tenant can forge it" "$T_DIR/root" \
    || fail "tessera_lease_$s's HELP does not say it is reported"
done
for s in memory_bytes sm_share deadline_seconds; do
  grep "^tessera_lease_$s{" "$T_DIR/root" | grep -q source= && fail "tessera_lease_$s is marked reported"
done
used=$(awk -v l="lease=\"$A\"" '$1 ~ /^tessera_lease_used_bytes/ && index($1, l) {print $2}' "$T_DIR/root")
mem=$(awk -v s="$mem_a" '$1 == s {print $2}' "$T_DIR/root")
[ -n "$used" ] && [ -n "$mem" ] && [ "$used" -le "$mem" ] || fail "used ($used) is not within memory ($mem)"
pass

# ---- a slow-loris user ---------------------------------------------------------------------
# Its refills come every 3 s from its start: its first round is closed at
# the deadline (2 s), and the next round opens at 3 s.
as tsr-mallory /usr/bin/python3 "$T_DIR/bin/slowloris.py" 127.0.0.1 "$port" --for 7 --want 64 --trickle 1 \
  --refill 3 --ready "$T_DIR/loris/ready" --report "$T_DIR/loris/report" >/dev/null &
LORIS=$!
for i in $(seq 1 100); do [ -s "$T_DIR/loris/ready" ] && break; sleep 0.05; done
[ -s "$T_DIR/loris/ready" ] || fail "the slow-loris client did not start"
# other users, at once and while the attacker keeps trying
others() {
  local who
  for who in root tsr-bob root tsr-alice; do
    scrape_as "$who" "$T_DIR/during" || { fail "$who: no scrape within 1 s under attack ($1)"; continue; }
    grep -q '^tessera_leases{state="active"} 2$' "$T_DIR/during" || fail "$who: an empty scrape under attack ($1)"
  done
}
others "at once"
# the attacker's own user: once the deadline frees its connections
t0=$(now_ms)
ok_own=
while [ $(($(now_ms) - t0)) -lt $(((TIMEOUT_S + 1) * 1000 + 500)) ]; do
  if as tsr-mallory curl -sf --max-time 1 -o /dev/null "$(url)"; then ok_own=$(($(now_ms) - t0)); break; fi
  sleep 0.05
done
[ -n "$ok_own" ] && [ "$ok_own" -le $(((TIMEOUT_S + 1) * 1000)) ] \
  || fail "the attacker's own user got no scrape within ${TIMEOUT_S}s + 1s (${ok_own:-none} ms)"
sleep 0.5
others "later"
sleep 1
others "after its refill"
wait "$LORIS" || fail "the slow-loris client failed"
report=$(cat "$T_DIR/loris/report" 2>/dev/null || echo '{}')
echo "slow loris: $report"
field() { python3 -c 'import json,sys; print(json.loads(sys.argv[1]).get(sys.argv[2], ""))' "$report" "$1"; }
[ "$(field max_held)" = 4 ] || fail "the attacker held $(field max_held) connections at once, not 4"
[ "$(field closed_by_server)" -ge 4 ] 2>/dev/null || fail "the server closed $(field closed_by_server) of its connections"
python3 - "$(field longest_closed)" "$(field longest_open)" "$TIMEOUT_S" <<'EOF' || fail "a trickling connection outlived the deadline: $report"
import sys
closed, still, limit = float(sys.argv[1] or 0), float(sys.argv[2] or 0), float(sys.argv[3])
# closed at the deadline, not before (it was let in) nor long after
sys.exit(0 if limit - 0.3 <= closed <= limit + 1 and still <= limit + 1 else 1)
EOF
pass
stop_daemon

# ---- remote scrapers (a network namespace beside this one) ------------------------------
NS=tsrm$$
netns_down() {
  ip netns del "$NS" 2>/dev/null || true
  ip link del "${NS}a" 2>/dev/null || true
}
trap 'rc=$?; netns_down; set +e; (exit $rc); cleanup' EXIT
netns_up() {
  command -v ip >/dev/null || return 1
  ip netns add "$NS" &&
    ip link add "${NS}a" type veth peer name "${NS}b" &&
    ip link set "${NS}b" netns "$NS" &&
    ip addr add 198.18.7.1/24 dev "${NS}a" && ip link set "${NS}a" up &&
    ip netns exec "$NS" ip link set lo up &&
    ip netns exec "$NS" ip addr add 198.18.7.2/24 dev "${NS}b" &&
    for i in $(seq 10 29); do ip netns exec "$NS" ip addr add "198.18.7.$i/24" dev "${NS}b" || return 1; done &&
    ip netns exec "$NS" ip link set "${NS}b" up
} >/dev/null 2>&1
if ! netns_up; then
  netns_down
  echo "SKIP (part): cannot make a network namespace with a veth pair here; remote scrapers not tested"
  finish
  exit $?
fi
HOST=198.18.7.1
remote_scrape() { ip netns exec "$NS" curl -sf --max-time 1 "$(url)" >"$1"; }
start_daemon --metrics "$HOST:$port"
for i in $(seq 1 30); do remote_scrape "$T_DIR/remote" && break; sleep 0.1; done
python3 "$HERE/check_exposition.py" <"$T_DIR/remote" || fail "remote: the exposition is not valid"
grep -q '^tessera_leases{state="active"} 2$' "$T_DIR/remote" || fail "remote: no node-wide lease count"
samples "$T_DIR/remote" | grep -q '^tessera_lease_' && fail "a remote scraper sees leases under metrics_remote = counts"
# a local user through the same (non-loopback) address is still local
scrape_as tsr-alice "$T_DIR/alice-veth" || fail "alice: no scrape on $HOST"
grep -qF "$mem_a " "$T_DIR/alice-veth" && ! grep -qF "$mem_b " "$T_DIR/alice-veth" \
  || fail "alice on $HOST is not seen as alice"
pass

# enough remote addresses to fill the daemon's every connection (20 x 4 > 64)
sources=$(seq -s, -f '198.18.7.%g' 10 29)
ip netns exec "$NS" /usr/bin/python3 "$T_DIR/bin/slowloris.py" "$HOST" "$port" --for 4 --want 4 --trickle 1 \
  --refill 1 --sources "$sources" --ready "$T_DIR/loris/ready2" --report "$T_DIR/loris/report2" >/dev/null &
LORIS=$!
for i in $(seq 1 100); do [ -s "$T_DIR/loris/ready2" ] && break; sleep 0.05; done
for round in 1 2 3; do
  others "remote flood, round $round"
  remote_scrape "$T_DIR/remote" || fail "a remote scraper got no scrape within 1 s under a remote flood"
  sleep 0.5
done
wait "$LORIS" || fail "the remote slow-loris client failed"
report=$(cat "$T_DIR/loris/report2" 2>/dev/null || echo '{}')
echo "remote slow loris: $report"
[ "$(field max_held)" -le 64 ] 2>/dev/null && [ "$(field max_held)" -ge 40 ] \
  || fail "the remote flood held $(field max_held) connections (at most 64, and it should fill most)"
pass
stop_daemon

# metrics_remote = full
write_config "admin_group = tsr-madmins" "metrics_group = tsr-prometheus" "metrics_remote = full"
start_daemon --metrics "$HOST:$port"
for i in $(seq 1 30); do remote_scrape "$T_DIR/remote" && break; sleep 0.1; done
grep -qF "$mem_a " "$T_DIR/remote" && grep -qF "$mem_b " "$T_DIR/remote" \
  || fail "a remote scraper does not see every lease under metrics_remote = full"
python3 "$HERE/check_exposition.py" <"$T_DIR/remote" || fail "remote (full): the exposition is not valid"
pass
stop_daemon

finish
