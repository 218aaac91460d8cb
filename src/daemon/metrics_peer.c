/* metrics_peer.c: who is on the other end of a /metrics connection, what
 * that client may see, and whether one more of its connections is let in.
 *
 * A TCP peer carries no credentials, but a peer on this host is a socket of
 * this host's network namespace, and the kernel will name its owner: an
 * exact NETLINK_SOCK_DIAG lookup (inet_diag, no privilege needed) of the
 * socket whose source is the peer's address and port and whose destination
 * is ours. A peer the kernel has no socket for is on another host, unless
 * its address is one of this host's: a local client whose socket the exact
 * lookup misses (one bound to a device, SO_BINDTODEVICE, which any user may
 * set) is unknown, never remote, and sees the counts. The lookup runs once
 * per connection, right after accept, in the metrics thread; the kernel
 * answers it within the send, so it never waits. */
#include <errno.h>
#include <ifaddrs.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/socket.h>

#include "base/time.h"
#include "daemon/metrics.h"
#include "daemon/metrics_peer.h"

/* An IPv4 address (4 bytes, network order) as ::ffff:a.b.c.d. */
static void tsr__map4(const void *v4, uint8_t out[16]) {
  memset(out, 0, 10);
  out[10] = out[11] = 0xff;
  memcpy(out + 12, v4, 4);
}

/* An address as 16 bytes (IPv4 as ::ffff:a.b.c.d) and its port (network
 * order). False for anything but IPv4 and IPv6. (Copied out of the storage
 * with memcpy: reading it through a cast pointer breaks strict aliasing.) */
static bool tsr__addr16(const struct sockaddr_storage *sa, uint8_t out[16], uint16_t *out_port) {
  if (sa->ss_family == AF_INET) {
    struct sockaddr_in a;
    memcpy(&a, sa, sizeof(a));
    tsr__map4(&a.sin_addr, out);
    *out_port = a.sin_port;
    return true;
  }
  if (sa->ss_family == AF_INET6) {
    struct sockaddr_in6 a;
    memcpy(&a, sa, sizeof(a));
    memcpy(out, &a.sin6_addr, 16);
    *out_port = a.sin6_port;
    return true;
  }
  return false;
}

static bool tsr__v4mapped(const uint8_t a[16]) {
  static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return memcmp(a, prefix, 12) == 0;
}

static bool tsr__loopback(const uint8_t a[16]) {
  static const uint8_t one[16] = {[15] = 1};
  return (tsr__v4mapped(a) && a[12] == 127) || memcmp(a, one, 16) == 0;
}

/* What inet_diag says of the socket it found, in our terms: 1 and *out_uid
 * when it is the client's socket held by a process, 0 when there is no such
 * socket, -1 when it cannot tell. */
static int tsr__diag_uid(int diag_fd, int family, const uint8_t peer[16], uint16_t peer_port, const uint8_t self[16],
                         uint16_t self_port, uint32_t *out_uid) {
  static uint32_t seq; /* the metrics thread's only */
  struct {
    struct nlmsghdr nlh;
    struct inet_diag_req_v2 r;
  } req;
  memset(&req, 0, sizeof(req));
  req.nlh.nlmsg_len = sizeof(req);
  req.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
  req.nlh.nlmsg_flags = NLM_F_REQUEST; /* no NLM_F_DUMP: the exact lookup of one socket */
  req.nlh.nlmsg_seq = ++seq;
  req.r.sdiag_family = (uint8_t)family;
  req.r.sdiag_protocol = IPPROTO_TCP;
  req.r.idiag_states = ~0u;
  /* the client's socket: its source is the peer, its destination is us */
  req.r.id.idiag_sport = peer_port;
  req.r.id.idiag_dport = self_port;
  if (family == AF_INET) {
    memcpy(&req.r.id.idiag_src[0], peer + 12, 4);
    memcpy(&req.r.id.idiag_dst[0], self + 12, 4);
  } else {
    memcpy(req.r.id.idiag_src, peer, 16);
    memcpy(req.r.id.idiag_dst, self, 16);
  }
  req.r.id.idiag_cookie[0] = req.r.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
  struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
  if (sendto(diag_fd, &req, sizeof(req), 0, (struct sockaddr *)&kernel, sizeof(kernel)) != (ssize_t)sizeof(req))
    return -1;
  union {
    struct nlmsghdr align;
    char buf[8192];
  } u;
  for (int tries = 0; tries < 8; tries++) {
    ssize_t got = recv(diag_fd, u.buf, sizeof(u.buf), MSG_DONTWAIT);
    if (got < 0 && errno == EINTR) continue;
    /* the kernel answers within sendto: nothing there is no answer (never
     * waited for: the metrics thread serves everyone) */
    if (got <= 0) return -1;
    size_t left = (size_t)got;
    for (struct nlmsghdr *h = &u.align; NLMSG_OK(h, left); h = NLMSG_NEXT(h, left)) {
      if (h->nlmsg_seq != seq) continue; /* the answer to an earlier lookup given up on */
      if (h->nlmsg_type == NLMSG_ERROR) {
        if (h->nlmsg_len < NLMSG_LENGTH(sizeof(struct nlmsgerr))) return -1;
        const struct nlmsgerr *e = NLMSG_DATA(h);
        return e->error == -ENOENT ? 0 : -1;
      }
      if (h->nlmsg_type == NLMSG_DONE) return 0;
      if (h->nlmsg_type != SOCK_DIAG_BY_FAMILY || h->nlmsg_len < NLMSG_LENGTH(sizeof(struct inet_diag_msg))) return -1;
      const struct inet_diag_msg *m = NLMSG_DATA(h);
      /* The lookup falls back to a listening socket on the peer's port, and
       * a socket its process closed lives on as a time-wait socket, which
       * reports uid 0: only the very socket, still held by a process (it
       * has an inode), names its user. */
      uint8_t src[16], dst[16];
      if (m->idiag_family == AF_INET) {
        tsr__map4(&m->id.idiag_src[0], src);
        tsr__map4(&m->id.idiag_dst[0], dst);
      } else {
        memcpy(src, m->id.idiag_src, 16);
        memcpy(dst, m->id.idiag_dst, 16);
      }
      if (m->idiag_state == TCP_LISTEN || m->idiag_inode == 0 || m->id.idiag_sport != peer_port ||
          m->id.idiag_dport != self_port || memcmp(src, peer, 16) != 0 || memcmp(dst, self, 16) != 0)
        return -1;
      *out_uid = m->idiag_uid;
      return 1;
    }
  }
  return -1;
}

/* The interfaces' addresses are looked up again at most every few seconds
 * (a cache of the metrics thread's own). */
bool tsr_metrics_addr_local(const uint8_t a[16]) {
  static uint8_t cached[64][16];
  static size_t ncached;
  static uint64_t taken_ns;
  if (tsr__loopback(a)) return true;
  uint64_t now = tsr_time_mono_ns();
  if (!taken_ns || now - taken_ns >= 5 * TSR_NS_PER_S) {
    struct ifaddrs *list = NULL;
    if (getifaddrs(&list) == 0) {
      ncached = 0;
      for (struct ifaddrs *i = list; i && ncached < 64; i = i->ifa_next) {
        uint16_t port;
        struct sockaddr_storage ss;
        if (!i->ifa_addr || (i->ifa_addr->sa_family != AF_INET && i->ifa_addr->sa_family != AF_INET6)) continue;
        memcpy(&ss, i->ifa_addr,
               i->ifa_addr->sa_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6));
        if (tsr__addr16(&ss, cached[ncached], &port)) ncached++;
      }
      freeifaddrs(list);
      taken_ns = now;
    }
  }
  for (size_t i = 0; i < ncached; i++)
    if (memcmp(cached[i], a, 16) == 0) return true;
  return false;
}

tsr_metrics_peer_t tsr_metrics_peer_find(int diag_fd, int fd, const struct sockaddr_storage *peer) {
  tsr_metrics_peer_t p = {.kind = TSR_METRICS_PEER_UNKNOWN};
  struct sockaddr_storage self = {0}; /* getsockname fills it */
  socklen_t slen = sizeof(self);
  uint8_t self16[16];
  uint16_t peer_port = 0, self_port = 0;
  if (!tsr__addr16(peer, p.addr, &peer_port) || getsockname(fd, (struct sockaddr *)&self, &slen) != 0 ||
      !tsr__addr16(&self, self16, &self_port))
    return p;
  if (diag_fd < 0) return p;
  uint32_t uid = 0;
  int found = tsr__diag_uid(diag_fd, self.ss_family, p.addr, peer_port, self16, self_port, &uid);
  if (found == 1) {
    p.kind = TSR_METRICS_PEER_LOCAL;
    p.uid = uid;
  } else if (found == 0 && memcmp(p.addr, self16, 16) != 0 && !tsr_metrics_addr_local(p.addr)) {
    p.kind = TSR_METRICS_PEER_REMOTE;
  }
  return p;
}

bool tsr_metrics_peer_same_client(const tsr_metrics_peer_t *a, const tsr_metrics_peer_t *b) {
  if (a->kind != b->kind) return false;
  switch (a->kind) {
    case TSR_METRICS_PEER_LOCAL: return a->uid == b->uid;
    case TSR_METRICS_PEER_UNKNOWN: return true; /* local, but not whose: one client, whatever its address */
    case TSR_METRICS_PEER_REMOTE: break;
  }
  /* a remote IPv6 host has a /64 of its own to pick addresses from */
  return memcmp(a->addr, b->addr, tsr__v4mapped(a->addr) ? 16 : 8) == 0;
}

tsr_metrics_audience_t tsr_metrics_audience_decide(const tsr_metrics_peer_t *peer, bool privileged, bool remote_full) {
  switch (peer->kind) {
    case TSR_METRICS_PEER_LOCAL:
      if (privileged) return (tsr_metrics_audience_t){.scope = TSR_METRICS_SCOPE_ALL};
      return (tsr_metrics_audience_t){.scope = TSR_METRICS_SCOPE_OWN, .uid = peer->uid};
    case TSR_METRICS_PEER_REMOTE:
      return (tsr_metrics_audience_t){.scope = remote_full ? TSR_METRICS_SCOPE_ALL : TSR_METRICS_SCOPE_COUNTS};
    case TSR_METRICS_PEER_UNKNOWN: break;
  }
  return (tsr_metrics_audience_t){.scope = TSR_METRICS_SCOPE_COUNTS};
}

bool tsr_metrics_pick_victim(tsr_metrics_conn_t *const *conns, size_t count, size_t *out_victim) {
  size_t oldest_sending = count, oldest = count;
  for (size_t i = 0; i < count; i++) {
    const tsr_metrics_conn_t *c = conns[i];
    if (c->closing || c->fresh) continue; /* on its way out, or not read yet */
    if (oldest == count || c->accepted_ns < conns[oldest]->accepted_ns) oldest = i;
    if (!c->answered && (oldest_sending == count || c->accepted_ns < conns[oldest_sending]->accepted_ns))
      oldest_sending = i;
  }
  /* the oldest one still sending its request is the likeliest to be a slow
   * client's (a scrape sends its request at once); with none, the oldest
   * still being answered */
  size_t victim = oldest_sending < count ? oldest_sending : oldest;
  if (victim == count) return false;
  *out_victim = victim;
  return true;
}

tsr_metrics_admission_t tsr_metrics_admission_decide(tsr_metrics_conn_t *const *conns, size_t count,
                                                     const tsr_metrics_peer_t *peer, size_t per_client, size_t total,
                                                     size_t slots, size_t *out_victim) {
  size_t mine = 0, live = 0;
  for (size_t i = 0; i < count; i++) {
    const tsr_metrics_conn_t *c = conns[i];
    if (c->closing) continue; /* already on its way out */
    live++;
    if (tsr_metrics_peer_same_client(&c->peer, peer)) mine++;
  }
  if (mine >= per_client) return TSR_METRICS_REFUSE_CLIENT;
  if (count >= slots) return TSR_METRICS_REFUSE_FULL;
  if (live < total) return TSR_METRICS_ADMIT;
  return tsr_metrics_pick_victim(conns, count, out_victim) ? TSR_METRICS_ADMIT_EVICT : TSR_METRICS_REFUSE_FULL;
}
