/* The pure parts of /metrics' access rules: the line filter over a tagged
 * snapshot, the audience decision, who counts as the same client, the
 * admission of a new connection; and the peer lookup over a real loopback
 * connection (NETLINK_SOCK_DIAG needs no privilege). */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <ifaddrs.h>
#include <linux/netlink.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "daemon/metrics.h"
#include "daemon/metrics_peer.h"

/* node-wide, alice's (uid 1001) lease, bob's (1002), node-wide, alice's */
static const char TEXT[] =
    "# HELP a x\n# TYPE a gauge\n"
    "a{lease=\"1\"} 1\n"
    "a{lease=\"2\"} 2\n"
    "b 3\n"
    "a{lease=\"3\"} 4\n";

static tsr_metrics_snapshot_t snapshot(tsr_metrics_run_t *runs) {
  const char *p = TEXT;
  size_t ends[6];
  const char *marks[] = {"a{lease=\"1\"}", "a{lease=\"2\"}", "b 3", "a{lease=\"3\"}"};
  for (int i = 0; i < 4; i++) ends[i] = (size_t)(strstr(p, marks[i]) - p);
  runs[0] = (tsr_metrics_run_t){.end = ends[0]};
  runs[1] = (tsr_metrics_run_t){.end = ends[1], .lease = true, .owner = 1001};
  runs[2] = (tsr_metrics_run_t){.end = ends[2], .lease = true, .owner = 1002};
  runs[3] = (tsr_metrics_run_t){.end = ends[3]};
  runs[4] = (tsr_metrics_run_t){.end = sizeof(TEXT) - 1, .lease = true, .owner = 1001};
  return (tsr_metrics_snapshot_t){.text = (char *)TEXT, .len = sizeof(TEXT) - 1, .runs = runs, .run_count = 5};
}

static void expect_filter(tsr_metrics_audience_t a, const char *want) {
  tsr_metrics_run_t runs[5];
  tsr_metrics_snapshot_t s = snapshot(runs);
  size_t len = 99;
  char *got = tsr_metrics_snapshot_filter(&s, a, &len);
  cr_assert_not_null(got);
  cr_assert_str_eq(got, want);
  cr_assert_eq(len, strlen(want));
  free(got);
}

Test(metrics_filter, each_audience_gets_its_lines_in_order) {
  expect_filter((tsr_metrics_audience_t){.scope = TSR_METRICS_SCOPE_ALL}, TEXT);
  expect_filter((tsr_metrics_audience_t){.scope = TSR_METRICS_SCOPE_OWN, .uid = 1001},
                "# HELP a x\n# TYPE a gauge\na{lease=\"1\"} 1\nb 3\na{lease=\"3\"} 4\n");
  expect_filter((tsr_metrics_audience_t){.scope = TSR_METRICS_SCOPE_OWN, .uid = 1002},
                "# HELP a x\n# TYPE a gauge\na{lease=\"2\"} 2\nb 3\n");
  expect_filter((tsr_metrics_audience_t){.scope = TSR_METRICS_SCOPE_OWN, .uid = 0},
                "# HELP a x\n# TYPE a gauge\nb 3\n");
  expect_filter((tsr_metrics_audience_t){.scope = TSR_METRICS_SCOPE_COUNTS, .uid = 1001},
                "# HELP a x\n# TYPE a gauge\nb 3\n");
}

Test(metrics_filter, empty_and_bad_runs) {
  tsr_metrics_snapshot_t empty = {0};
  size_t len = 99;
  char *got = tsr_metrics_snapshot_filter(&empty, (tsr_metrics_audience_t){.scope = TSR_METRICS_SCOPE_ALL}, &len);
  cr_assert_not_null(got);
  cr_assert_eq(len, 0);
  cr_assert_str_eq(got, "");
  free(got);
  /* a run past the text is cut at its end, never read beyond */
  tsr_metrics_run_t runs[] = {{.end = 4}, {.end = 1000, .lease = true, .owner = 7}};
  tsr_metrics_snapshot_t s = {.text = "abcdefgh", .len = 8, .runs = runs, .run_count = 2};
  got = tsr_metrics_snapshot_filter(&s, (tsr_metrics_audience_t){.scope = TSR_METRICS_SCOPE_OWN, .uid = 7}, &len);
  cr_assert_str_eq(got, "abcdefgh");
  free(got);
  got = tsr_metrics_snapshot_filter(&s, (tsr_metrics_audience_t){.scope = TSR_METRICS_SCOPE_OWN, .uid = 8}, &len);
  cr_assert_str_eq(got, "abcd");
  free(got);
}

static tsr_metrics_peer_t local(uint32_t uid) {
  tsr_metrics_peer_t p = {.kind = TSR_METRICS_PEER_LOCAL, .uid = uid};
  p.addr[10] = p.addr[11] = 0xff;
  p.addr[12] = 127;
  p.addr[15] = 1;
  return p;
}

static tsr_metrics_peer_t remote(uint8_t last) {
  tsr_metrics_peer_t p = {.kind = TSR_METRICS_PEER_REMOTE};
  p.addr[10] = p.addr[11] = 0xff;
  p.addr[12] = 10;
  p.addr[15] = last;
  return p;
}

Test(metrics_audience, who_sees_what) {
  tsr_metrics_peer_t alice = local(1001), far = remote(5), unknown = local(0);
  unknown.kind = TSR_METRICS_PEER_UNKNOWN;
  tsr_metrics_audience_t a = tsr_metrics_audience_decide(&alice, false, true);
  cr_assert_eq(a.scope, TSR_METRICS_SCOPE_OWN, "an ordinary local user sees her own leases");
  cr_assert_eq(a.uid, 1001);
  cr_assert_eq(tsr_metrics_audience_decide(&alice, true, false).scope, TSR_METRICS_SCOPE_ALL,
               "root, admins and metrics_group see everything");
  cr_assert_eq(tsr_metrics_audience_decide(&far, false, false).scope, TSR_METRICS_SCOPE_COUNTS);
  cr_assert_eq(tsr_metrics_audience_decide(&far, true, false).scope, TSR_METRICS_SCOPE_COUNTS,
               "privilege is a local uid's, never a remote peer's");
  cr_assert_eq(tsr_metrics_audience_decide(&far, false, true).scope, TSR_METRICS_SCOPE_ALL, "metrics_remote = full");
  cr_assert_eq(tsr_metrics_audience_decide(&unknown, true, true).scope, TSR_METRICS_SCOPE_COUNTS,
               "a local peer whose uid is unknown sees the counts, whatever metrics_remote says");
}

Test(metrics_audience, same_client) {
  tsr_metrics_peer_t a = local(1001), a2 = local(1001), b = local(1002), r = remote(5), r2 = remote(5), r3 = remote(6),
                     u = local(0);
  u.kind = TSR_METRICS_PEER_UNKNOWN;
  cr_assert(tsr_metrics_peer_same_client(&a, &a2));
  cr_assert(!tsr_metrics_peer_same_client(&a, &b), "two local users are two clients, on one address");
  cr_assert(tsr_metrics_peer_same_client(&r, &r2));
  cr_assert(!tsr_metrics_peer_same_client(&r, &r3));
  cr_assert(!tsr_metrics_peer_same_client(&a, &u), "a known uid is not an unknown peer of the same address");
  tsr_metrics_peer_t root = local(0);
  cr_assert(!tsr_metrics_peer_same_client(&root, &u), "uid 0 is not 'unknown'");
  /* unknown peers are one client, whatever address each comes from (a
   * local user can pick any of 127.0.0.0/8) */
  tsr_metrics_peer_t u2 = u;
  u2.addr[14] = 7;
  cr_assert(tsr_metrics_peer_same_client(&u, &u2), "two unknown peers are two clients");
  /* a remote IPv6 host is its /64 */
  tsr_metrics_peer_t v6 = {.kind = TSR_METRICS_PEER_REMOTE, .addr = {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 1}};
  tsr_metrics_peer_t v6b = v6, v6c = v6;
  v6b.addr[15] = 9;
  v6c.addr[7] = 2;
  cr_assert(tsr_metrics_peer_same_client(&v6, &v6b), "one /64, two addresses: two clients");
  cr_assert(!tsr_metrics_peer_same_client(&v6, &v6c), "two /64s are one client");
}

Test(metrics_admission, limits_and_eviction) {
  tsr_metrics_conn_t c[6];
  tsr_metrics_conn_t *v[6];
  for (int i = 0; i < 6; i++) {
    c[i] = (tsr_metrics_conn_t){.peer = local(1001), .accepted_ns = (uint64_t)(100 + i), .fd = -1};
    v[i] = &c[i];
  }
  tsr_metrics_peer_t alice = local(1001), bob = local(1002);
  size_t victim = 99;
  /* per client: 3 of alice's are enough to refuse her a fourth */
  cr_assert_eq(tsr_metrics_admission_decide(v, 3, &alice, 3, 10, 20, &victim), TSR_METRICS_REFUSE_CLIENT);
  cr_assert_eq(tsr_metrics_admission_decide(v, 3, &bob, 3, 10, 20, &victim), TSR_METRICS_ADMIT);
  /* a closing connection no longer counts */
  c[1].closing = true;
  cr_assert_eq(tsr_metrics_admission_decide(v, 3, &alice, 3, 10, 20, &victim), TSR_METRICS_ADMIT);
  c[1].closing = false;
  /* full (total 3): bob is let in by closing the oldest still sending its request */
  c[0].answered = true;
  cr_assert_eq(tsr_metrics_admission_decide(v, 3, &bob, 4, 3, 20, &victim), TSR_METRICS_ADMIT_EVICT);
  cr_assert_eq(victim, 1, "the oldest still sending, not the oldest (answered)");
  c[1].answered = c[2].answered = true;
  cr_assert_eq(tsr_metrics_admission_decide(v, 3, &bob, 4, 3, 20, &victim), TSR_METRICS_ADMIT_EVICT);
  cr_assert_eq(victim, 0, "with none sending, the oldest");
  /* a connection already shut down is never chosen again, and frees its place in the total */
  c[0].closing = true;
  cr_assert_eq(tsr_metrics_admission_decide(v, 3, &bob, 4, 3, 20, &victim), TSR_METRICS_ADMIT);
  c[0].closing = false;
  /* every slot taken (closing ones too): refused */
  c[3].closing = c[4].closing = c[5].closing = true;
  cr_assert_eq(tsr_metrics_admission_decide(v, 6, &bob, 4, 10, 6, &victim), TSR_METRICS_REFUSE_FULL);
  cr_assert_eq(tsr_metrics_admission_decide(NULL, 0, &bob, 4, 0, 6, &victim), TSR_METRICS_REFUSE_FULL);
}

/* A connection let in since libmicrohttpd last ran has not been read yet:
 * the next newcomer never evicts it (with every older one answered, it
 * would otherwise be the only one "still sending"). */
Test(metrics_admission, a_fresh_connection_is_never_the_victim) {
  tsr_metrics_conn_t c[3];
  tsr_metrics_conn_t *v[3];
  for (int i = 0; i < 3; i++) {
    c[i] = (tsr_metrics_conn_t){
        .peer = local((uint32_t)(1000 + i)), .accepted_ns = (uint64_t)(100 + i), .answered = true, .fd = -1};
    v[i] = &c[i];
  }
  c[2].answered = false;
  c[2].fresh = true;
  tsr_metrics_peer_t bob = local(2000);
  size_t victim = 99;
  cr_assert_eq(tsr_metrics_admission_decide(v, 3, &bob, 4, 3, 20, &victim), TSR_METRICS_ADMIT_EVICT);
  cr_assert_eq(victim, 0, "the oldest answered one, not the fresh one (victim %zu)", victim);
  c[0].fresh = c[1].fresh = true;
  cr_assert_eq(tsr_metrics_admission_decide(v, 3, &bob, 4, 3, 20, &victim), TSR_METRICS_REFUSE_FULL,
               "all fresh: the newcomer is refused");
  cr_assert_not(tsr_metrics_pick_victim(v, 3, &victim));
}

/* A loopback connection: the kernel names the client's uid (ours); a client
 * whose socket is gone (time-wait, uid 0 in inet_diag) is not taken for
 * root, nor, on a loopback address, for a remote peer. */
Test(metrics_peer, finds_the_uid_of_a_loopback_client) {
  int diag = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
  if (diag < 0) cr_skip_test("no NETLINK_SOCK_DIAG here");
  int lfd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t alen = sizeof(a);
  cr_assert_eq(bind(lfd, (struct sockaddr *)&a, sizeof(a)), 0);
  cr_assert_eq(listen(lfd, 4), 0);
  cr_assert_eq(getsockname(lfd, (struct sockaddr *)&a, &alen), 0);
  int cfd = socket(AF_INET, SOCK_STREAM, 0);
  cr_assert_eq(connect(cfd, (struct sockaddr *)&a, sizeof(a)), 0);
  struct sockaddr_storage peer;
  socklen_t plen = sizeof(peer);
  int sfd = accept(lfd, (struct sockaddr *)&peer, &plen);
  cr_assert_geq(sfd, 0);

  tsr_metrics_peer_t p = tsr_metrics_peer_find(diag, sfd, &peer);
  cr_assert_eq(p.kind, TSR_METRICS_PEER_LOCAL);
  cr_assert_eq(p.uid, (uint32_t)geteuid());
  cr_assert_eq(p.addr[12], 127);

  p = tsr_metrics_peer_find(-1, sfd, &peer);
  cr_assert_eq(p.kind, TSR_METRICS_PEER_UNKNOWN, "without the diag socket nobody is known");

  close(cfd); /* the client's end becomes a time-wait socket (uid 0 in inet_diag) */
  usleep(50 * 1000);
  p = tsr_metrics_peer_find(diag, sfd, &peer);
  cr_assert_eq(p.kind, TSR_METRICS_PEER_UNKNOWN, "a closed client is neither root nor remote (kind %d, uid %u)", p.kind,
               p.uid);
  close(sfd);
  close(lfd);
  close(diag);
}

/* An IPv4 address of this host that is not loopback, and its interface's
 * name, or false. */
static bool host_addr(struct sockaddr_in *out, char dev[32]) {
  struct ifaddrs *list = NULL;
  cr_assert_eq(getifaddrs(&list), 0);
  bool found = false;
  for (struct ifaddrs *i = list; i && !found; i = i->ifa_next)
    if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET &&
        (ntohl(((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr) >> 24) != 127) {
      memcpy(out, i->ifa_addr, sizeof(*out));
      snprintf(dev, 32, "%s", i->ifa_name);
      found = true;
    }
  freeifaddrs(list);
  return found;
}

/* Whether this host has IPv4 address `a` (network order). */
static bool host_has(uint32_t a) {
  struct ifaddrs *list = NULL;
  cr_assert_eq(getifaddrs(&list), 0);
  bool found = false;
  for (struct ifaddrs *i = list; i; i = i->ifa_next)
    if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET && ((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr == a)
      found = true;
  freeifaddrs(list);
  return found;
}

static void map4(const struct in_addr *in, uint8_t out[16]) {
  memset(out, 0, 16);
  out[10] = out[11] = 0xff;
  memcpy(out + 12, in, 4);
}

/* Which addresses are this host's: what tells a local client the lookup
 * misses from a remote one. */
Test(metrics_peer, this_hosts_addresses_are_local) {
  uint8_t a[16];
  struct in_addr lo = {htonl(INADDR_LOOPBACK)}, test_net = {htonl(0xcb0071fe)}; /* 203.0.113.254 */
  map4(&lo, a);
  cr_assert(tsr_metrics_addr_local(a));
  map4(&test_net, a);
  if (!host_has(test_net.s_addr))
    cr_assert_not(tsr_metrics_addr_local(a), "203.0.113.254 (TEST-NET-3) is taken for this host's");
  static const uint8_t six_one[16] = {[15] = 1};
  cr_assert(tsr_metrics_addr_local(six_one), "::1");
  struct sockaddr_in mine;
  char dev[32];
  if (!host_addr(&mine, dev)) cr_skip_test("this host has no IPv4 address but loopback");
  map4(&mine.sin_addr, a);
  cr_assert(tsr_metrics_addr_local(a), "this host's own address is not local");
}

/* A local client whose socket the exact lookup cannot see (bound to a
 * device: SO_BINDTODEVICE, open to any user) is unknown (the counts),
 * never remote (which metrics_remote = full would show everything). */
Test(metrics_peer, a_local_client_the_lookup_misses_is_never_remote) {
  int diag = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
  if (diag < 0) cr_skip_test("no NETLINK_SOCK_DIAG here");
  struct sockaddr_in a;
  char dev[32];
  if (!host_addr(&a, dev)) cr_skip_test("this host has no IPv4 address but loopback");
  a.sin_port = 0;
  socklen_t alen = sizeof(a);
  int lfd = socket(AF_INET, SOCK_STREAM, 0);
  cr_assert_eq(bind(lfd, (struct sockaddr *)&a, sizeof(a)), 0);
  cr_assert_eq(listen(lfd, 4), 0);
  cr_assert_eq(getsockname(lfd, (struct sockaddr *)&a, &alen), 0);
  int cfd = socket(AF_INET, SOCK_STREAM, 0);
  if (setsockopt(cfd, SOL_SOCKET, SO_BINDTODEVICE, dev, (socklen_t)strlen(dev) + 1) != 0)
    cr_skip_test("SO_BINDTODEVICE refused here");
  cr_assert_eq(connect(cfd, (struct sockaddr *)&a, sizeof(a)), 0);
  struct sockaddr_storage peer;
  socklen_t plen = sizeof(peer);
  int sfd = accept(lfd, (struct sockaddr *)&peer, &plen);
  cr_assert_geq(sfd, 0);
  tsr_metrics_peer_t p = tsr_metrics_peer_find(diag, sfd, &peer);
  cr_assert_neq(p.kind, TSR_METRICS_PEER_REMOTE, "a client on this host was taken for a remote one");
  if (p.kind == TSR_METRICS_PEER_LOCAL) cr_assert_eq(p.uid, (uint32_t)geteuid());
  close(cfd);
  close(sfd);
  close(lfd);
  close(diag);
}
