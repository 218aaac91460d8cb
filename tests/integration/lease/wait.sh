# lease create --wait, as two real users and root: a create that does not
# fit waits (its id and place said on stderr, `lease list --queued` shows it
# to its owner, counts it to others, shows it to an admin) and is granted
# as soon as a release makes room; one that waits too long is refused; one
# withdrawn by `lease release ID` or by its client going away is gone from
# the queue; a later request goes ahead only if it fits now and ends before
# the head is sure to fit (a create without --wait, or a grow, that would
# delay the head is refused; an admin's create without --wait is not held); a user may have at most max_queued_per_user waiting; a
# daemon that stops answers every waiter; /metrics shows the queue's length,
# outcomes and waits; bad input is refused.
source "$(dirname "$0")/lib.sh"
command -v curl >/dev/null || skip "curl is missing (Debian: curl)"
real_users -- tsr-alice tsr-bob
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
write_config "max_queued_per_user = 2" "metrics = 127.0.0.1:$port"
start_daemon
metric() { curl -sf --max-time 5 "http://127.0.0.1:$port/metrics" | awk -v s="$1" '$1 == s {print $2}'; }
# metric_is SERIES VALUE: the snapshot is rewritten at most every 250 ms
metric_is() {
  local got=
  for _ in $(seq 1 40); do got=$(metric "$1"); [ "$got" = "$2" ] && return 0; sleep 0.1; done
  fail "$1 is '$got', not $2"
}
# bg NAME USER ARGS...: a tessera command in the background; its output in
# $T_DIR/NAME.{out,err,rc}, its pid in BGPID
bg() {
  local name=$1 user=$2
  shift 2
  : >"$T_DIR/$name.err"
  rm -f "$T_DIR/$name.rc"
  (
    set +e
    as "$user" "$TESSERA" --socket "$T_SOCK" "$@" >"$T_DIR/$name.out" 2>"$T_DIR/$name.err"
    echo $? >"$T_DIR/$name.rc"
  ) &
  BGPID=$!
}
# queued_id NAME: waits for NAME's "request N waits" line; its N
queued_id() {
  for _ in $(seq 1 100); do
    grep -q "waits, number" "$T_DIR/$1.err" 2>/dev/null && break
    sleep 0.05
  done
  sed -n 's/.*request \([0-9]*\) waits.*/\1/p' "$T_DIR/$1.err"
}
# done_rc NAME: waits (at most 10 s) for NAME to end; its exit status
done_rc() {
  for _ in $(seq 1 200); do [ -s "$T_DIR/$1.rc" ] && break; sleep 0.05; done
  cat "$T_DIR/$1.rc" 2>/dev/null || echo none
}

# ---- waits, then granted at the release that makes room ----------------------
t --as tsr-alice lease create --device 0 --mem 60% --for 1h --json; expect_rc 0 "alice takes 60%"; A=$(json_field id)
bg w1 tsr-bob lease create --device 0 --mem 50% --for 10m --wait 30s --json
Q=$(queued_id w1)
[ -n "$Q" ] && pass || fail "bob's create says it waits: $(cat "$T_DIR/w1.err")"
grep -q "number 1 in the device's queue" "$T_DIR/w1.err" && pass || fail "position 1: $(cat "$T_DIR/w1.err")"
t --as tsr-bob lease list --queued --json; expect_rc 0
[ "$(json_field id)" = "$Q" ] && [ "$(json_field position)" = 1 ] && [ "$(json_field owner)" = tsr-bob ] &&
  [ "$(json_field state)" = queued ] && pass || fail "bob sees his request: $OUT"
t --as tsr-bob lease list --queued; expect_out "^$Q +0 +1 +40 GiB +50%" "the table"
t --as tsr-alice lease list --queued --all; expect_out "1 request of other users waits" "alice is told a count"
t --as tsr-alice lease list --queued --all --json; expect_out '^\[\]$' "and sees no details"
t lease list --queued --all --json; expect_out "\"owner\": \"tsr-bob\"" "root sees it"
t --as tsr-bob lease show "$Q"; expect_rc 1 "a queued id is no lease yet"; expect_err "waiting for capacity"
metric_is 'tessera_queue_length{device="0"}' 1
t --as tsr-alice top --once; expect_out "^GPU 0 .*  1 waiting$" "top says how many wait, to anyone"
t --as tsr-alice lease release "$A"; expect_rc 0 "alice releases"
[ "$(done_rc w1)" = 0 ] && pass || fail "bob's create granted: rc $(cat "$T_DIR/w1.rc" 2>/dev/null) $(cat "$T_DIR/w1.err")"
OUT=$(cat "$T_DIR/w1.out")
[ "$(json_field id)" = "$Q" ] && [ "$(json_field owner)" = tsr-bob ] && [ "$(json_field state)" = active ] &&
  pass || fail "the lease has the request's id: $OUT"
B=$Q
grep -q "request $Q of tsr-bob granted after" "$T_LOG" && pass || fail "the grant is logged"
metric_is 'tessera_queue_requests_total{outcome="granted"}' 1
metric_is 'tessera_queue_wait_seconds_count' 1
metric_is 'tessera_queue_length{device="0"}' 0
t --as tsr-bob lease release "$B"; expect_rc 0

# ---- a wait that runs out -------------------------------------------------------------
t --as tsr-alice lease create --device 0 --mem 60% --for 1h --json; expect_rc 0; A=$(json_field id)
t --as tsr-bob lease create --device 0 --mem 50% --for 10m --wait 1s; expect_rc 1 "not granted in 1 s"
expect_err "not granted within 1s: device 0 had no room"
metric_is 'tessera_queue_requests_total{outcome="timed_out"}' 1

# ---- withdrawn: by lease release of its id, and by its client going away ----------
bg w2 tsr-bob lease create --device 0 --mem 50% --for 10m --wait 1m
Q=$(queued_id w2)
t --as tsr-alice lease release "$Q"; expect_rc 1 "alice withdraws bob's"; expect_err "belongs to tsr-bob"
t --as tsr-bob lease release "$Q"; expect_rc 0 "bob withdraws his"; expect_out "request $Q withdrawn"
[ "$(done_rc w2)" = 1 ] && pass || fail "the waiting create ends refused: rc $(cat "$T_DIR/w2.rc" 2>/dev/null)"
grep -q "withdrawn by tsr-bob" "$T_DIR/w2.err" && pass || fail "and says why: $(cat "$T_DIR/w2.err")"
bg w3 tsr-bob lease create --device 0 --mem 50% --for 10m --wait 1m
Q=$(queued_id w3)
pkill -INT -f -- "--for 10m --wait 1m" || true
for _ in $(seq 1 100); do grep -q "request $Q of tsr-bob withdrawn: its connection closed" "$T_LOG" && break; sleep 0.05; done
grep -q "request $Q of tsr-bob withdrawn: its connection closed" "$T_LOG" && pass || fail "Ctrl-C withdraws it"
t lease list --queued --all --json; expect_out '^\[\]$' "nothing waits"
metric_is 'tessera_queue_requests_total{outcome="withdrawn"}' 2

# ---- backfill: only what ends before the head is sure to fit ----------------------------
t --as tsr-alice lease release "$A"; expect_rc 0
t --as tsr-alice lease create --device 0 --mem 60% --for 8s --json; expect_rc 0 "alice: 60% for 8 s"; A=$(json_field id)
t --as tsr-alice lease create --device 0 --mem 5% --for 1h --json; expect_rc 0 "and 5% for an hour"; L=$(json_field id)
bg head tsr-bob lease create --device 0 --mem 50% --for 10m --wait 30s --json
H=$(queued_id head)
[ -n "$H" ] && pass || fail "bob's 50% is the head: $(cat "$T_DIR/head.err")"
# 30% for 2 s fits now and ends long before alice's lease: it goes ahead
t --as tsr-alice lease create --device 0 --mem 30% --for 2s --wait 10s --json; expect_rc 0 "a short one is backfilled"
grep -q "waits" <<<"$ERR" && fail "the backfilled create waited: $ERR" || pass
# 30% for 1 h fits now but would still hold its room when the head is due
t --as tsr-alice lease create --device 0 --mem 30% --for 1h; expect_rc 1 "one that would delay the head, no --wait"
expect_err "1 request waiting for its room ahead of this one"
# a grow is a request for more: one that holds its room past the head's
# turn is refused; a shrink is not
t --as tsr-alice lease resize "$L" --mem 8%; expect_rc 1 "a grow that would delay the head"
expect_err "1 request waiting for its room; growing lease $L until its deadline would go ahead of them"
t --as tsr-alice lease resize "$L" --mem 4%; expect_rc 0 "a shrink"
# an admin's create without --wait is not held behind the queue (a
# scheduler's plugin has decided already)
t lease create --device 0 --mem 5% --for 1h --user tsr-alice --json; expect_rc 0 "root's create goes ahead"
t lease release "$(json_field id)"; expect_rc 0
bg tail tsr-alice lease create --device 0 --mem 30% --for 1h --wait 30s --json
T2=$(queued_id tail)
grep -q "number 2 in the device's queue" "$T_DIR/tail.err" && pass || fail "it queues behind the head: $(cat "$T_DIR/tail.err")"
# alice's 60% ends: the head is granted, then the one behind it (80% in all)
[ "$(done_rc head)" = 0 ] && pass || fail "the head granted when alice's lease expired: $(cat "$T_DIR/head.err")"
[ "$(done_rc tail)" = 0 ] && pass || fail "then the tail: $(cat "$T_DIR/tail.err")"
hs=$(grep -o "request $H of tsr-bob granted" "$T_LOG" | head -1)
[ -n "$hs" ] && pass || fail "head's grant logged"
t lease list --all --json; expect_out "\"id\": $H," "the head's lease"; expect_out "\"id\": $T2," "the tail's lease"
for id in $(t lease list --all --json >/dev/null; grep -o '"id": [0-9]*' <<<"$OUT" | grep -o '[0-9]*'); do t lease release "$id" >/dev/null; done

# ---- each user's bound ------------------------------------------------------------------------
t --as tsr-alice lease create --device 1 --mem 100% --for 1h; expect_rc 0 "alice fills device 1"
bg b1 tsr-bob lease create --device 1 --mem 10% --for 1m --wait 1m
bg b2 tsr-bob lease create --device 1 --mem 10% --for 1m --wait 1m
queued_id b1 >/dev/null; queued_id b2 >/dev/null
t --as tsr-bob lease create --device 1 --mem 10% --for 1m --wait 1m; expect_rc 1 "a third waiting create"
expect_err "tsr-bob has 2 requests waiting for capacity, the most this node allows"
bg b3 root lease create --device 1 --mem 10% --for 1m --wait 1m --user tsr-bob
queued_id b3 >/dev/null && pass || fail "an admin is not held to it"
metric_is 'tessera_queue_length{device="1"}' 3
# ---- a daemon that stops answers every waiter -----------------------------------------------
stop_daemon
for n in b1 b2 b3; do
  [ "$(done_rc $n)" != none ] && grep -q "tesserad is stopping: request [0-9]* was not granted" "$T_DIR/$n.err" &&
    pass || fail "$n was told: $(cat "$T_DIR/$n.err")"
done
start_daemon
t lease list --queued --all --json; expect_out '^\[\]$' "the queue is not kept across a restart"
# a daemon killed outright: the waiter is told it went away, exit 3
bg k1 tsr-bob lease create --device 1 --mem 10% --for 1m --wait 1m
K=$(queued_id k1)
kill9_daemon
[ "$(done_rc k1)" = 3 ] && grep -q "tesserad went away while request $K waited (it stopped or restarted): nothing was granted" \
  "$T_DIR/k1.err" && pass || fail "a killed daemon's waiter: rc $(cat "$T_DIR/k1.rc" 2>/dev/null), $(cat "$T_DIR/k1.err")"
start_daemon
t lease list --all --json; grep -q "\"id\": $K," <<<"$OUT" && fail "the killed daemon's waiter got a lease: $OUT" || pass

# ---- bad input ---------------------------------------------------------------------------------
t --as tsr-bob lease create --device 1 --mem 10% --for 1m --wait soon; expect_rc 2 "bad --wait"; expect_err "^tessera: --wait"
t --as tsr-bob lease create --device 1 --mem 10% --for 1m --wait 0s; expect_rc 2 "--wait 0s"; expect_err "more than 0s"
t --as tsr-bob lease create --device 1 --mem 10% --for 1m --wait 400d; expect_rc 2 "--wait past max_lease"; expect_err "waits at most max_lease"
t --as tsr-bob lease create --device 1 --mem 150% --for 1m --wait 1m; expect_rc 2 "a share that never fits"
t --as tsr-bob lease create --device 7 --mem 10% --for 1m --wait 1m; expect_rc 1 "no such device"; expect_err "no device 7"
t lease list --queued --all --json; expect_out '^\[\]$' "none of it queued"
finish
