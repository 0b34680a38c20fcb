/* The per-stream receive loop in C: recvmsg with the kernel's receive stamp, HTTP/1.1 framing
 * (head, chunked, content-length, close-delimited), SSE line splitting, and every `data:` line's
 * stamp into arrays sized up front. No Python object is made per event on the read path: the
 * reactor hands a whole epoll batch to `read_ready`, which reads every ready stream back to back.
 *
 * It is a line-for-line port of harness.client.http_stream.ResponseParser (the pure-Python reader,
 * kept as the fallback where this extension cannot be built): the same fast path for one whole
 * chunk holding one event, the same CR/LF rules, the same error kinds and messages, the same stamp
 * on every line. tests/client/test_native_reader.py feeds both the same recorded segments and
 * asserts they agree on every stamp and byte. The rare decisions (parsing the response head, a
 * chunk size that is not plain hex) call the Python helpers the pure reader uses, so they cannot
 * drift apart. JSON decoding and histogram recording stay off this path (harness.client.sse runs
 * after the stream has ended).
 */
#define _GNU_SOURCE /* memmem */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>

#define READ_SIZE 65536
#define HEAD_LIMIT 65536
#define MAX_EVENTS 4096

typedef struct {
    char *p;
    Py_ssize_t len, cap;
} Buf;

static int buf_reserve(Buf *b, Py_ssize_t extra) {
    Py_ssize_t want = b->len + extra;
    if (want <= b->cap) return 0;
    Py_ssize_t cap = b->cap ? b->cap : 256;
    while (cap < want) cap *= 2;
    char *p = PyMem_Realloc(b->p, (size_t)cap);
    if (p == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    b->p = p;
    b->cap = cap;
    return 0;
}

static int buf_add(Buf *b, const char *s, Py_ssize_t n) {
    if (n <= 0) return 0;
    if (buf_reserve(b, n) < 0) return -1;
    memcpy(b->p + b->len, s, (size_t)n);
    b->len += n;
    return 0;
}

static void buf_free(Buf *b) {
    PyMem_Free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}

/* the Python side, looked up once: the same exception class and helpers as the pure reader */
static PyObject *StreamError_cls, *parse_head_fn, *chunk_size_fn, *StreamResult_cls;
static char read_buf[READ_SIZE];

static int load_python_side(void) {
    if (StreamError_cls != NULL) return 0;
    PyObject *m = PyImport_ImportModule("harness.client.http_stream");
    if (m == NULL) return -1;
    StreamError_cls = PyObject_GetAttrString(m, "StreamError");
    parse_head_fn = PyObject_GetAttrString(m, "_parse_head");
    chunk_size_fn = PyObject_GetAttrString(m, "_chunk_size");
    StreamResult_cls = PyObject_GetAttrString(m, "StreamResult");
    Py_DECREF(m);
    if (!StreamError_cls || !parse_head_fn || !chunk_size_fn || !StreamResult_cls) {
        Py_CLEAR(StreamError_cls);
        Py_CLEAR(parse_head_fn);
        Py_CLEAR(chunk_size_fn);
        Py_CLEAR(StreamResult_cls);
        return -1;
    }
    return 0;
}

static void raise_stream(const char *kind, const char *detail) {
    PyObject *exc = PyObject_CallFunction(StreamError_cls, "ss", kind, detail);
    if (exc != NULL) {
        PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
        Py_DECREF(exc);
    }
}

static inline int64_t mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts); /* time.perf_counter_ns() on Linux */
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

typedef struct {
    PyObject_HEAD
    PyObject *res;   /* the StreamResult handed to the caller */
    PyObject *error; /* the StreamError a read_ready read ended with */
    int done, head_done, chunked, sse, trailer, complete;
    long long length; /* -1: none */
    long long received;
    long long need; /* bytes left in the current chunk; -1: expecting a size line */
    long long reads, end_ns, head_ns;
    Py_ssize_t max_line;
    Buf buf;     /* a partial head, size line or trailer line */
    Buf pending; /* decoded body bytes not yet ending in a line end */
    Buf body;    /* a non-SSE body */
    Buf text;    /* the data: lines, back to back */
    int64_t *stamps;
    Py_ssize_t *ends; /* line i is text[ends[i-1]:ends[i]] */
    Py_ssize_t nlines, lcap, synced;
    int fd, kernel;
    long long offset_ns; /* wall - perf at send: turns CLOCK_REALTIME stamps into perf_counter_ns */
} Parser;

static int add_line(Parser *P, int64_t stamp, const char *s, Py_ssize_t n) {
    if (P->nlines == P->lcap) {
        Py_ssize_t cap = P->lcap ? P->lcap * 2 : 64;
        int64_t *st = PyMem_Realloc(P->stamps, (size_t)cap * sizeof(int64_t));
        if (st == NULL) goto nomem;
        P->stamps = st;
        Py_ssize_t *en = PyMem_Realloc(P->ends, (size_t)cap * sizeof(Py_ssize_t));
        if (en == NULL) goto nomem;
        P->ends = en;
        P->lcap = cap;
    }
    if (buf_add(&P->text, s, n) < 0) return -1;
    P->stamps[P->nlines] = stamp;
    P->ends[P->nlines] = P->text.len;
    P->nlines++;
    return 0;
nomem:
    PyErr_NoMemory();
    return -1;
}

static inline int is_data(const char *s, Py_ssize_t n) { return n >= 5 && memcmp(s, "data:", 5) == 0; }

/* ResponseParser._lines: split the pending bytes at LF, CRLF or a lone CR; keep `data:` lines */
static int split_lines(Parser *P, int64_t stamp, Py_ssize_t scanned) {
    char *p = P->pending.p;
    Py_ssize_t n = P->pending.len, start = 0, i = scanned;
    while (i < n) {
        char c = p[i];
        if (c == '\n' || c == '\r') {
            if (is_data(p + start, i - start) && add_line(P, stamp, p + start, i - start) < 0) return -1;
            if (c == '\r' && i + 1 < n && p[i + 1] == '\n') i++;
            start = i + 1;
        }
        i++;
    }
    if (start > 0) {
        memmove(p, p + start, (size_t)(n - start));
        P->pending.len = n - start;
    }
    if (P->pending.len > P->max_line) {
        char msg[96];
        snprintf(msg, sizeof msg, "SSE line longer than %zd MiB without a line end; cut", P->max_line >> 20);
        raise_stream("malformed", msg);
        return -1;
    }
    return 0;
}

static int finish(Parser *P, int64_t stamp) {
    if (is_data(P->pending.p, P->pending.len)) {
        if (add_line(P, stamp, P->pending.p, P->pending.len) < 0) return -1;
        P->pending.len = 0;
    }
    P->end_ns = stamp;
    P->done = 1;
    return 0;
}

static int keep_body(Parser *P, const char *s, Py_ssize_t n) {
    if (buf_add(&P->body, s, n) < 0) return -1;
    if (P->body.len > P->max_line) {
        char msg[96];
        snprintf(msg, sizeof msg, "non-streamed body larger than %zd MiB; cut", P->max_line >> 20);
        raise_stream("malformed", msg);
        return -1;
    }
    return 0;
}

static int check_length(Parser *P) {
    if (P->length >= 0 && P->received >= P->length) {
        P->complete = 1;
        return finish(P, P->end_ns);
    }
    return 0;
}

static int feed_plain(Parser *P, const char *d, Py_ssize_t n, int64_t stamp) {
    P->received += n;
    if (P->sse) {
        Py_ssize_t scanned = P->pending.len;
        if (buf_add(&P->pending, d, n) < 0) return -1;
        if (split_lines(P, stamp, scanned) < 0) return -1;
    } else if (keep_body(P, d, n) < 0) {
        return -1;
    }
    return check_length(P);
}

static const char *find_crlf(const char *d, Py_ssize_t from, Py_ssize_t size) {
    const char *p = d + from, *end = d + size;
    while (p < end) {
        const char *cr = memchr(p, '\r', (size_t)(end - p));
        if (cr == NULL || cr + 1 >= end) return NULL;
        if (cr[1] == '\n') return cr;
        p = cr + 1;
    }
    return NULL;
}

/* int(size_field, 16) for plain hex; anything else goes to the Python helper (same errors) */
static int chunk_size(const char *s, Py_ssize_t n, long long *out) {
    if (n > 0 && n <= 15) {
        long long v = 0;
        Py_ssize_t i;
        for (i = 0; i < n; i++) {
            char c = s[i];
            int d;
            if (c >= '0' && c <= '9') d = c - '0';
            else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
            else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
            else break;
            v = v * 16 + d;
        }
        if (i == n) {
            *out = v;
            return 0;
        }
    }
    PyObject *r = PyObject_CallFunction(chunk_size_fn, "y#", s, n);
    if (r == NULL) return -1;
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(r, &overflow);
    Py_DECREF(r);
    if (v == -1 && PyErr_Occurred()) return -1;
    if (overflow > 0) v = LLONG_MAX / 4; /* a chunk larger than anything: read until the deadline */
    if (overflow < 0) v = -1;
    *out = v;
    return 0;
}

static int feed_chunked(Parser *P, const char *data, Py_ssize_t n, int64_t stamp) {
    const char *d = data;
    Py_ssize_t size = n, pos = 0;
    int from_buf = 0;
    if (P->buf.len) {
        if (buf_add(&P->buf, data, n) < 0) return -1;
        d = P->buf.p;
        size = P->buf.len;
        from_buf = 1;
    }
    int sse = P->sse;
    while (pos < size) {
        if (P->trailer) {
            const char *eol = find_crlf(d, pos, size);
            if (eol == NULL) break;
            int empty = (eol - d) == pos;
            pos = (eol - d) + 2;
            if (empty) {
                P->complete = 1;
                break;
            }
            continue;
        }
        if (P->need < 0) {
            const char *eol = find_crlf(d, pos, size);
            if (eol == NULL) break; /* partial size line: wait for more */
            Py_ssize_t field = pos, field_len = (eol - d) - pos;
            pos = (eol - d) + 2;
            if (field_len == 0) continue; /* the CRLF that ends a chunk */
            long long need;
            if (chunk_size(d + field, field_len, &need) < 0) return -1;
            long long end = (long long)pos + need;
            if (sse && need > 2 && P->pending.len == 0 && end + 2 <= size && d[end - 2] == '\n' && d[end - 1] == '\n'
                && pos + 5 <= size && memcmp(d + pos, "data:", 5) == 0
                && memchr(d + pos, '\n', (size_t)need) == d + end - 2) {
                /* fast path, the common case: one whole chunk holding exactly one SSE event */
                if (add_line(P, stamp, d + pos, (Py_ssize_t)need - 2) < 0) return -1;
                pos = (Py_ssize_t)end;
                continue;
            }
            P->need = need;
            if (need == 0) P->trailer = 1; /* last chunk; the body ends at the empty line after it */
            continue;
        }
        Py_ssize_t take = P->need < size - pos ? (Py_ssize_t)P->need : size - pos;
        const char *piece = d + pos;
        pos += take;
        P->need -= take;
        if (P->need == 0) P->need = -1;
        if (sse) {
            if (buf_add(&P->pending, piece, take) < 0) return -1;
        } else if (keep_body(P, piece, take) < 0) {
            return -1;
        }
    }
    if (pos < size && !P->complete) {
        if (from_buf) {
            memmove(P->buf.p, P->buf.p + pos, (size_t)(size - pos));
            P->buf.len = size - pos;
        } else {
            P->buf.len = 0;
            if (buf_add(&P->buf, d + pos, size - pos) < 0) return -1;
        }
    } else {
        P->buf.len = 0;
    }
    if (sse && P->pending.len && split_lines(P, stamp, 0) < 0) return -1;
    if (P->complete) return finish(P, stamp);
    return 0;
}

static int parse_head(Parser *P, const char *head, Py_ssize_t n) {
    PyObject *r = PyObject_CallFunction(parse_head_fn, "Oy#", P->res, head, n);
    if (r == NULL) return -1;
    PyObject *length = NULL;
    int chunked, sse;
    if (!PyArg_ParseTuple(r, "pOp", &chunked, &length, &sse)) {
        Py_DECREF(r);
        return -1;
    }
    P->chunked = chunked;
    P->sse = sse;
    P->length = -1;
    if (length != Py_None) {
        P->length = PyLong_AsLongLong(length);
        if (P->length == -1 && PyErr_Occurred()) {
            Py_DECREF(r);
            return -1;
        }
        if (P->length < 0) P->length = 0; /* int("-5") would have been a length nothing reaches */
    }
    Py_DECREF(r);
    return 0;
}

static int feed(Parser *P, const char *data, Py_ssize_t n, int64_t stamp) {
    P->reads++;
    P->end_ns = stamp;
    if (!P->head_done) {
        if (buf_add(&P->buf, data, n) < 0) return -1;
        const char *b = P->buf.p;
        Py_ssize_t blen = P->buf.len, end = -1;
        const char *hit = memmem(b, (size_t)blen, "\r\n\r\n", 4);
        if (hit != NULL) end = hit - b;
        if (end < 0) {
            if (blen > HEAD_LIMIT) {
                raise_stream("malformed", "response head larger than 64 KiB");
                return -1;
            }
            return 0;
        }
        P->head_ns = stamp;
        Py_ssize_t rest_len = blen - end - 4;
        char *rest = NULL;
        if (rest_len > 0) {
            rest = PyMem_Malloc((size_t)rest_len);
            if (rest == NULL) {
                PyErr_NoMemory();
                return -1;
            }
            memcpy(rest, b + end + 4, (size_t)rest_len);
        }
        P->buf.len = 0;
        if (parse_head(P, b, end) < 0) {
            PyMem_Free(rest);
            return -1;
        }
        P->head_done = 1;
        int r;
        if (rest_len == 0) r = check_length(P);
        else r = P->chunked ? feed_chunked(P, rest, rest_len, stamp) : feed_plain(P, rest, rest_len, stamp);
        PyMem_Free(rest);
        return r;
    }
    return P->chunked ? feed_chunked(P, data, n, stamp) : feed_plain(P, data, n, stamp);
}

static int eof(Parser *P, int64_t stamp) {
    if (!P->head_done) {
        if (P->reads == 0) raise_stream("stale_connection", "closed before the response head");
        else raise_stream("disconnect", "closed inside the response head");
        return -1;
    }
    P->complete = P->chunked ? P->trailer : (P->length < 0);
    return finish(P, stamp);
}

/* one read of the parser's socket: 1 done, 0 more to come (or nothing there yet), -1 error set */
static int read_once(Parser *P) {
    Py_ssize_t n;
    int64_t stamp, now;
    for (;;) {
        if (P->kernel) {
            struct iovec iov = {read_buf, READ_SIZE};
            union {
                char space[CMSG_SPACE(sizeof(struct timespec))];
                struct cmsghdr align;
            } control;
            struct msghdr msg;
            memset(&msg, 0, sizeof msg);
            msg.msg_iov = &iov;
            msg.msg_iovlen = 1;
            msg.msg_control = control.space;
            msg.msg_controllen = sizeof control.space;
            n = recvmsg(P->fd, &msg, 0);
            now = mono_ns();
            stamp = now;
            if (n >= 0) {
                for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c != NULL; c = CMSG_NXTHDR(&msg, c)) {
                    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS
                        && c->cmsg_len >= CMSG_LEN(sizeof(struct timespec))) {
                        struct timespec ts;
                        memcpy(&ts, CMSG_DATA(c), sizeof ts);
                        stamp = (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec - P->offset_ns;
                        if (stamp > now) stamp = now; /* a stamp is never later than now (clock steps) */
                        break;
                    }
                }
            }
        } else {
            n = recv(P->fd, read_buf, READ_SIZE, 0);
            stamp = mono_ns();
        }
        if (n >= 0) break;
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
        raise_stream("disconnect", strerror(errno));
        return -1;
    }
    int r = n ? feed(P, read_buf, n, stamp) : eof(P, stamp);
    if (r < 0) return -1;
    return P->done;
}

/* ------------------------------------------------------------------ the Python type */
static void Parser_dealloc(Parser *P) {
    Py_XDECREF(P->res);
    Py_XDECREF(P->error);
    buf_free(&P->buf);
    buf_free(&P->pending);
    buf_free(&P->body);
    buf_free(&P->text);
    PyMem_Free(P->stamps);
    PyMem_Free(P->ends);
    Py_TYPE(P)->tp_free((PyObject *)P);
}

static int Parser_init(Parser *P, PyObject *args, PyObject *kw) {
    static char *names[] = {"max_line", "fd", "kernel", "offset_ns", "expected_events", NULL};
    Py_ssize_t max_line = 32 << 20, expected = 0;
    int fd = -1, kernel = 0;
    long long offset = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|nipLn", names, &max_line, &fd, &kernel, &offset, &expected))
        return -1;
    if (load_python_side() < 0) return -1;
    if (P->res != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "_native.Parser is initialised once");
        return -1;
    }
    P->res = PyObject_CallNoArgs(StreamResult_cls);
    if (P->res == NULL) return -1;
    P->max_line = max_line;
    P->fd = fd;
    P->kernel = kernel;
    P->offset_ns = offset;
    P->length = -1;
    P->need = -1;
    Py_ssize_t cap = expected > 0 ? expected + 8 : 64; /* every stamp of the answer, sized up front */
    P->stamps = PyMem_Malloc((size_t)cap * sizeof(int64_t));
    P->ends = PyMem_Malloc((size_t)cap * sizeof(Py_ssize_t));
    if (P->stamps == NULL || P->ends == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    P->lcap = cap;
    return 0;
}

static int ready(Parser *P) {
    if (P->res == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "_native.Parser used before __init__");
        return 0;
    }
    return 1;
}

static PyObject *Parser_feed(Parser *P, PyObject *args) {
    if (!ready(P)) return NULL;
    Py_buffer data;
    long long stamp;
    if (!PyArg_ParseTuple(args, "y*L", &data, &stamp)) return NULL;
    int r = feed(P, data.buf, data.len, stamp);
    PyBuffer_Release(&data);
    if (r < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *Parser_eof(Parser *P, PyObject *arg) {
    if (!ready(P)) return NULL;
    long long stamp = PyLong_AsLongLong(arg);
    if (stamp == -1 && PyErr_Occurred()) return NULL;
    if (eof(P, stamp) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *Parser_read(Parser *P, PyObject *Py_UNUSED(ignored)) {
    if (!ready(P)) return NULL;
    int r = read_once(P);
    if (r < 0) return NULL;
    return PyBool_FromLong(r);
}

static int set_ll(PyObject *o, const char *name, long long v) {
    PyObject *x = PyLong_FromLongLong(v);
    if (x == NULL) return -1;
    int r = PyObject_SetAttrString(o, name, x);
    Py_DECREF(x);
    return r;
}

/* bring the StreamResult up to date: lines made since the last call, counters, the body */
static PyObject *Parser_get_res(Parser *P, void *Py_UNUSED(closure)) {
    if (!ready(P)) return NULL;
    PyObject *res = P->res;
    if (P->synced < P->nlines) {
        PyObject *lines = PyObject_GetAttrString(res, "lines");
        if (lines == NULL) return NULL;
        for (Py_ssize_t i = P->synced; i < P->nlines; i++) {
            Py_ssize_t a = i ? P->ends[i - 1] : 0;
            PyObject *item = Py_BuildValue("(Ly#)", (long long)P->stamps[i], P->text.p + a, P->ends[i] - a);
            if (item == NULL || PyList_Append(lines, item) < 0) {
                Py_XDECREF(item);
                Py_DECREF(lines);
                return NULL;
            }
            Py_DECREF(item);
        }
        Py_DECREF(lines);
        P->synced = P->nlines;
    }
    if (set_ll(res, "reads", P->reads) < 0 || set_ll(res, "end_ns", P->end_ns) < 0) return NULL;
    if (P->head_done && set_ll(res, "head_ns", P->head_ns) < 0) return NULL;
    if (PyObject_SetAttrString(res, "complete", P->complete ? Py_True : Py_False) < 0) return NULL;
    if (P->done) {
        PyObject *body = PyBytes_FromStringAndSize(P->body.p, P->body.len);
        if (body == NULL) return NULL;
        int r = PyObject_SetAttrString(res, "body", body);
        Py_DECREF(body);
        if (r < 0) return NULL;
    }
    Py_INCREF(res);
    return res;
}

static PyObject *Parser_get_done(Parser *P, void *Py_UNUSED(closure)) { return PyBool_FromLong(P->done); }

static PyObject *Parser_get_error(Parser *P, void *Py_UNUSED(closure)) {
    PyObject *e = P->error ? P->error : Py_None;
    Py_INCREF(e);
    return e;
}

static PyObject *Parser_get_status(Parser *P, void *Py_UNUSED(closure)) {
    if (!ready(P)) return NULL;
    return PyObject_GetAttrString(P->res, "status");
}

static PyObject *Parser_get_lines(Parser *P, void *Py_UNUSED(closure)) {
    return PyLong_FromSsize_t(P->nlines);
}

static PyMethodDef Parser_methods[] = {
    {"feed", (PyCFunction)Parser_feed, METH_VARARGS, "feed(data, stamp_ns): one read and its arrival stamp"},
    {"eof", (PyCFunction)Parser_eof, METH_O, "eof(stamp_ns): the peer closed the connection"},
    {"read", (PyCFunction)Parser_read, METH_NOARGS,
     "read() -> done: one recvmsg of the parser's socket, stamped and fed; StreamError on a failure"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Parser_getset[] = {
    {"res", (getter)Parser_get_res, NULL, "the StreamResult, brought up to date", NULL},
    {"done", (getter)Parser_get_done, NULL, "the response is complete (or ended)", NULL},
    {"error", (getter)Parser_get_error, NULL, "the StreamError a read_ready read ended with", NULL},
    {"status", (getter)Parser_get_status, NULL, "the HTTP status (0 before the head)", NULL},
    {"n_lines", (getter)Parser_get_lines, NULL, "data: lines read so far", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject ParserType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "harness.client._native.Parser",
    .tp_basicsize = sizeof(Parser),
    .tp_dealloc = (destructor)Parser_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Incremental HTTP/1.1 response parser and stamped reader (native ResponseParser).",
    .tp_methods = Parser_methods,
    .tp_getset = Parser_getset,
    .tp_init = (initproc)Parser_init,
    .tp_new = PyType_GenericNew,
};

/* read_ready(epfd, parsers) -> (finished fds, ready fds): one epoll batch read back to back */
static PyObject *read_ready(PyObject *Py_UNUSED(mod), PyObject *args) {
    int epfd;
    PyObject *parsers;
    static struct epoll_event events[MAX_EVENTS];
    if (!PyArg_ParseTuple(args, "iO!", &epfd, &PyDict_Type, &parsers)) return NULL;
    int n;
    do {
        n = epoll_wait(epfd, events, MAX_EVENTS, 0);
    } while (n < 0 && errno == EINTR);
    if (n < 0) return PyErr_SetFromErrno(PyExc_OSError);
    PyObject *finished = PyList_New(0);
    if (finished == NULL) return NULL;
    for (int i = 0; i < n; i++) {
        PyObject *key = PyLong_FromLong(events[i].data.fd);
        if (key == NULL) goto fail;
        PyObject *obj = PyDict_GetItemWithError(parsers, key); /* borrowed */
        if (obj == NULL) {
            Py_DECREF(key);
            if (PyErr_Occurred()) goto fail;
            continue; /* removed since it was registered */
        }
        if (!PyObject_TypeCheck(obj, &ParserType)) {
            Py_DECREF(key);
            PyErr_SetString(PyExc_TypeError, "read_ready: parsers must map fds to _native.Parser");
            goto fail;
        }
        Parser *P = (Parser *)obj;
        if (!ready(P)) {
            Py_DECREF(key);
            goto fail;
        }
        Py_INCREF(obj); /* a head callback runs Python, which may drop it from the dict */
        int r = read_once(P);
        if (r < 0) {
            PyObject *type, *value, *tb;
            PyErr_Fetch(&type, &value, &tb);
            PyErr_NormalizeException(&type, &value, &tb);
            if (value == NULL || !PyObject_IsInstance(value, StreamError_cls)) {
                PyErr_Restore(type, value, tb); /* not a stream failure: a bug, let it surface */
                Py_DECREF(obj);
                Py_DECREF(key);
                goto fail;
            }
            Py_XDECREF(type);
            Py_XDECREF(tb);
            Py_XSETREF(P->error, value);
            P->done = 1;
        }
        Py_DECREF(obj);
        if (r != 0 && PyList_Append(finished, key) < 0) {
            Py_DECREF(key);
            goto fail;
        }
        Py_DECREF(key);
    }
    return Py_BuildValue("(Ni)", finished, n);
fail:
    Py_DECREF(finished);
    return NULL;
}

static PyMethodDef module_methods[] = {
    {"read_ready", read_ready, METH_VARARGS,
     "read_ready(epfd, parsers) -> (finished fds, ready count): read every ready stream once"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "harness.client._native",
    "The native hot path: stamped reads, HTTP framing and SSE lines in C (see _native.c).", -1, module_methods,
};

PyMODINIT_FUNC PyInit__native(void) {
    if (PyType_Ready(&ParserType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module_def);
    if (m == NULL) return NULL;
    Py_INCREF(&ParserType);
    if (PyModule_AddObject(m, "Parser", (PyObject *)&ParserType) < 0) {
        Py_DECREF(&ParserType);
        Py_DECREF(m);
        return NULL;
    }
    PyModule_AddIntConstant(m, "READ_SIZE", READ_SIZE);
    return m;
}
