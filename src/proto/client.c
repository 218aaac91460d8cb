/* client.c: a blocking line client for the daemon's socket. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include "proto/proto.h"

struct tsr_proto_client_s {
  int fd;
  char *buf; /* bytes received; the first `consumed` are the last reply's line */
  size_t len, cap, consumed;
};

tsr_status_t tsr_proto_client_connect(const char *path, tsr_proto_client_t **out) {
  *out = NULL;
  struct sockaddr_un addr = {.sun_family = AF_UNIX};
  size_t len = path ? strlen(path) : 0;
  if (!path || len >= sizeof(addr.sun_path))
    return tsr_status_make(TSR_INVALID_ARGUMENT, "socket path '%s' is too long", path ? path : "");
  memcpy(addr.sun_path, path, len + 1);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return tsr_status_from_errno(errno, "socket");
  if (connect(fd, (struct sockaddr *)&addr, sizeof(addr)) != 0) {
    int err = errno;
    close(fd);
    if (err == ENOENT || err == ECONNREFUSED)
      return tsr_status_make(TSR_UNAVAILABLE,
                             "no tessera daemon at %s (start one with 'tesserad', or point "
                             "--socket or TESSERA_SOCKET at a running one)",
                             path);
    return tsr_status_from_errno(err, "connect to %s", path);
  }
  tsr_proto_client_t *c = calloc(1, sizeof(*c));
  if (!c) {
    close(fd);
    return tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory");
  }
  c->fd = fd;
  *out = c;
  return NULL;
}

void tsr_proto_client_close(tsr_proto_client_t *c) {
  if (!c) return;
  close(c->fd);
  free(c->buf);
  free(c);
}

/* Sends `len` bytes and a newline. */
TSR_MUST_USE static tsr_status_t tsr__send_line(tsr_proto_client_t *c, const char *line, size_t len) {
  struct iovec iov[2] = {{(void *)line, len}, {(void *)"\n", 1}};
  struct msghdr msg = {.msg_iov = iov, .msg_iovlen = 2};
  size_t left = len + 1;
  while (left) {
    ssize_t w = sendmsg(c->fd, &msg, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EINTR) continue;
      return tsr_status_from_errno(errno, "send to the daemon");
    }
    left -= (size_t)w;
    while (w > 0 && msg.msg_iovlen) { /* skip what went */
      size_t k = (size_t)w < msg.msg_iov[0].iov_len ? (size_t)w : msg.msg_iov[0].iov_len;
      msg.msg_iov[0].iov_base = (char *)msg.msg_iov[0].iov_base + k;
      msg.msg_iov[0].iov_len -= k;
      w -= (ssize_t)k;
      if (msg.msg_iov[0].iov_len == 0) msg.msg_iov++, msg.msg_iovlen--;
    }
  }
  return NULL;
}

tsr_status_t tsr_proto_client_call_line(tsr_proto_client_t *c, const char *line, size_t len, const char **out_reply,
                                        size_t *out_len) {
  *out_reply = NULL;
  *out_len = 0;
  /* the previous reply's line is consumed now that its caller is done with it */
  if (c->consumed) {
    memmove(c->buf, c->buf + c->consumed, c->len - c->consumed);
    c->len -= c->consumed;
    c->consumed = 0;
  }
  tsr_status_t st = tsr__send_line(c, line, len);
  if (st) {
    /* The daemon may have refused the connection (busy) and closed it before
     * reading anything: its one line is still there to read, and says why. */
    if (tsr_status_code(st) == TSR_IO_ERROR || tsr_status_code(st) == TSR_UNAVAILABLE) {
      struct pollfd p = {.fd = c->fd, .events = POLLIN};
      if (c->cap < 8192) {
        char *b = realloc(c->buf, 8192);
        if (b) c->buf = b, c->cap = 8192;
      }
      if (c->len == 0 && poll(&p, 1, 100) == 1 && c->cap >= 8192) {
        ssize_t r = recv(c->fd, c->buf, c->cap, MSG_DONTWAIT);
        char *nl = r > 0 ? memchr(c->buf, '\n', (size_t)r) : NULL;
        if (nl) {
          tsr_status_free(st);
          c->len = (size_t)r;
          *out_reply = c->buf;
          *out_len = (size_t)(nl - c->buf);
          c->consumed = *out_len + 1;
          return NULL;
        }
      }
    }
    return st;
  }
  return tsr_proto_client_read_line(c, out_reply, out_len);
}

tsr_status_t tsr_proto_client_read_line(tsr_proto_client_t *c, const char **out_reply, size_t *out_len) {
  *out_reply = NULL;
  *out_len = 0;
  if (c->consumed) {
    memmove(c->buf, c->buf + c->consumed, c->len - c->consumed);
    c->len -= c->consumed;
    c->consumed = 0;
  }
  size_t scanned = 0;
  for (;;) {
    char *nl = c->len > scanned ? memchr(c->buf + scanned, '\n', c->len - scanned) : NULL;
    if (nl) {
      *out_reply = c->buf;
      *out_len = (size_t)(nl - c->buf);
      c->consumed = *out_len + 1;
      return NULL;
    }
    scanned = c->len;
    if (c->cap - c->len < 4096) {
      size_t cap = c->cap ? c->cap * 2 : 8192;
      if (cap > (64u << 20)) return tsr_status_make(TSR_DATA_LOSS, "reply larger than 64 MiB");
      char *b = realloc(c->buf, cap);
      if (!b) return tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory");
      c->buf = b;
      c->cap = cap;
    }
    /* Wait in poll(), not in a blocking recv: a task asleep in recv is also
     * woken each time the daemon reads our request and frees its buffer
     * (the socket's "writable" wake-up), a cross-CPU wake-up for nothing.
     * poll asks for POLLIN only, and the kernel filters the others out. */
    struct pollfd p = {.fd = c->fd, .events = POLLIN};
    if (poll(&p, 1, -1) < 0) {
      if (errno == EINTR) continue;
      return tsr_status_from_errno(errno, "wait for the daemon");
    }
    ssize_t r = recv(c->fd, c->buf + c->len, c->cap - c->len, MSG_DONTWAIT);
    if (r < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
      return tsr_status_from_errno(errno, "receive from the daemon");
    }
    if (r == 0) return tsr_status_make(TSR_UNAVAILABLE, "the daemon closed the connection");
    c->len += (size_t)r;
  }
}

/* The status of a scanned reply: NULL when "ok" is true. */
TSR_MUST_USE static tsr_status_t tsr__members_status(const tsr_json_member_t *m, size_t n, char *code_out,
                                                     size_t code_cap) {
  bool ok = false;
  if (tsr_json_get_bool(tsr_json_find(m, n, "ok"), &ok) && ok) return NULL;
  const tsr_json_member_t *e = tsr_json_find(m, n, "error");
  tsr_json_member_t em[8];
  size_t en = 0;
  tsr_json_error_t err;
  char code[64] = "", msg[1024] = "";
  if (e && e->type == TSR_JSON_OBJECT && tsr_json_scan_object(e->value, e->value_len, em, 8, &en, &err)) {
    if (!tsr_json_get_string(tsr_json_find(em, en, "code"), code, sizeof(code))) code[0] = '\0';
    if (!tsr_json_get_string(tsr_json_find(em, en, "message"), msg, sizeof(msg))) msg[0] = '\0';
  }
  if (code_out && code_cap) snprintf(code_out, code_cap, "%s", code);
  return tsr_proto_error_status(code[0] ? code : NULL, msg[0] ? msg : NULL);
}

/* Scans a reply line (its top-level members into m[cap]). */
TSR_MUST_USE static tsr_status_t tsr__scan_reply(const char *line, size_t len, tsr_json_member_t *m, size_t cap,
                                                 size_t *out_n) {
  tsr_json_error_t err;
  if (!tsr_json_scan_object(line, len, m, cap, out_n, &err))
    return tsr_status_make(TSR_DATA_LOSS, "the daemon sent a malformed reply: %s", err.message);
  return NULL;
}

tsr_status_t tsr_proto_reply_status(const char *line, size_t len, char *code, size_t code_cap) {
  if (code && code_cap) code[0] = '\0';
  tsr_json_member_t m[16];
  size_t n;
  TSR_RETURN_IF_ERROR(tsr__scan_reply(line, len, m, 16, &n));
  return tsr__members_status(m, n, code, code_cap);
}

tsr_status_t tsr_proto_client_call_lease(tsr_proto_client_t *c, const char *line, size_t len, tsr_lease_t *out_lease) {
  const char *reply;
  size_t n;
  TSR_RETURN_IF_ERROR(tsr_proto_client_call_line(c, line, len, &reply, &n));
  tsr_json_member_t m[8];
  size_t count;
  TSR_RETURN_IF_ERROR(tsr__scan_reply(reply, n, m, 8, &count));
  TSR_RETURN_IF_ERROR(tsr__members_status(m, count, NULL, 0));
  const tsr_json_member_t *l = tsr_json_find(m, count, "lease");
  if (!l || l->type != TSR_JSON_OBJECT) return tsr_status_make(TSR_DATA_LOSS, "the daemon's reply carries no lease");
  return tsr_proto_lease_parse(l->value, l->value_len, out_lease);
}
