/* client.c: a blocking line client for the daemon's socket. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "proto/proto.h"

struct tsr_proto_client_s {
  int fd;
  char *buf; /* bytes received past the last reply line */
  size_t len, cap;
};

tsr_status_t tsr_proto_client_connect(const char *path, tsr_proto_client_t **out) {
  *out = NULL;
  struct sockaddr_un addr = {.sun_family = AF_UNIX};
  if (!path || strlen(path) >= sizeof(addr.sun_path))
    return tsr_status_make(TSR_INVALID_ARGUMENT, "socket path '%s' is too long", path ? path : "");
  strcpy(addr.sun_path, path);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return tsr_status_from_errno(errno, "socket");
  if (connect(fd, (struct sockaddr *)&addr, sizeof(addr)) != 0) {
    int err = errno;
    close(fd);
    if (err == ENOENT || err == ECONNREFUSED)
      return tsr_status_make(TSR_UNAVAILABLE,
                             "no tessera daemon at %s (start one with 'tesserad', or point "
                             "--socket or TESSERA_SOCKET at a running one)", path);
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

tsr_status_t tsr_proto_client_call(tsr_proto_client_t *c, json_t *req, json_t **out_reply) {
  *out_reply = NULL;
  char *line = json_dumps(req, JSON_COMPACT);
  if (!line) return tsr_status_make(TSR_INTERNAL, "cannot encode the request");
  size_t n = strlen(line);
  line[n] = '\n'; /* json_dumps leaves room for the NUL we overwrite */
  size_t off = 0;
  while (off < n + 1) {
    ssize_t w = send(c->fd, line + off, n + 1 - off, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      free(line);
      return tsr_status_from_errno(err, "send to the daemon");
    }
    off += (size_t)w;
  }
  free(line);
  for (;;) {
    char *nl = c->len ? memchr(c->buf, '\n', c->len) : NULL;
    if (nl) {
      size_t len = (size_t)(nl - c->buf);
      json_error_t err;
      json_t *reply = json_loadb(c->buf, len, 0, &err);
      memmove(c->buf, nl + 1, c->len - len - 1);
      c->len -= len + 1;
      if (!reply || !json_is_object(reply)) {
        json_decref(reply);
        return tsr_status_make(TSR_DATA_LOSS, "the daemon sent a malformed reply: %s", err.text);
      }
      *out_reply = reply;
      return NULL;
    }
    if (c->cap - c->len < 4096) {
      size_t cap = c->cap ? c->cap * 2 : 8192;
      if (cap > (64u << 20)) return tsr_status_make(TSR_DATA_LOSS, "reply larger than 64 MiB");
      char *b = realloc(c->buf, cap);
      if (!b) return tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory");
      c->buf = b;
      c->cap = cap;
    }
    ssize_t r = recv(c->fd, c->buf + c->len, c->cap - c->len, 0);
    if (r < 0) {
      if (errno == EINTR) continue;
      return tsr_status_from_errno(errno, "receive from the daemon");
    }
    if (r == 0) return tsr_status_make(TSR_UNAVAILABLE, "the daemon closed the connection");
    c->len += (size_t)r;
  }
}

tsr_status_t tsr_proto_reply_status(const json_t *reply, const char **out_code) {
  if (out_code) *out_code = NULL;
  if (json_is_true(json_object_get(reply, "ok"))) return NULL;
  json_t *e = json_object_get(reply, "error");
  const char *code = json_string_value(json_object_get(e, "code"));
  const char *msg = json_string_value(json_object_get(e, "message"));
  if (!code) code = "internal";
  if (out_code) *out_code = code;
  tsr_status_code_t sc;
  if (!tsr_status_code_from_name(code, &sc)) sc = TSR_INVALID_ARGUMENT;
  if (strcmp(code, TSR_PROTO_ERR_UNKNOWN_USER) == 0) sc = TSR_NOT_FOUND;
  if (strcmp(code, TSR_PROTO_ERR_BUSY) == 0) sc = TSR_UNAVAILABLE;
  return tsr_status_make(sc, "%s", msg ? msg : code);
}
