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

/* ------------------------------------------------------------------ after the stream: scan
 * harness.client.sse.interpret's loop over the events, for the two OpenAI adapters, in C: one
 * JSON decode of the whole stream (orjson, passed in), then per event the same checks and the
 * same content rule as the Python adapters. It runs after the stream has ended (never between a
 * socket and its read). Anything unusual (a malformed event, an error event, an odd shape, bad
 * usage) returns None: the Python loop then runs and raises its exact error. */

enum { KIND_CHAT = 0, KIND_COMPLETIONS = 1 };

static PyObject *s_choices, *s_delta, *s_content, *s_reasoning_content, *s_reasoning, *s_text, *s_usage, *s_error,
    *s_completion_tokens, *s_prompt_tokens, *s_total_tokens, *s_prompt_tokens_details, *s_cached_tokens;

static int intern_keys(void) {
    if (s_choices != NULL) return 0;
#define KEY(var, text) if ((var = PyUnicode_InternFromString(text)) == NULL) return -1
    KEY(s_choices, "choices");
    KEY(s_delta, "delta");
    KEY(s_content, "content");
    KEY(s_reasoning_content, "reasoning_content");
    KEY(s_reasoning, "reasoning");
    KEY(s_text, "text");
    KEY(s_usage, "usage");
    KEY(s_error, "error");
    KEY(s_completion_tokens, "completion_tokens");
    KEY(s_prompt_tokens, "prompt_tokens");
    KEY(s_total_tokens, "total_tokens");
    KEY(s_prompt_tokens_details, "prompt_tokens_details");
    KEY(s_cached_tokens, "cached_tokens");
#undef KEY
    return 0;
}

#define BAIL 1 /* not a clean event: the Python loop decides */

/* a token count: absent, null, or an int that is not a bool and not negative */
static int count_ok(PyObject *v) {
    if (v == NULL || v == Py_None) return 1;
    if (!PyLong_Check(v) || PyBool_Check(v)) return 0;
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (x == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    return overflow > 0 || (overflow == 0 && x >= 0);
}

/* sse._check_usage: 0 fine, BAIL otherwise */
static int usage_ok(PyObject *usage) {
    if (!PyDict_Check(usage)) return BAIL;
    if (!count_ok(PyDict_GetItemWithError(usage, s_prompt_tokens))) return BAIL;
    if (!count_ok(PyDict_GetItemWithError(usage, s_completion_tokens))) return BAIL;
    if (!count_ok(PyDict_GetItemWithError(usage, s_total_tokens))) return BAIL;
    PyObject *details = PyDict_GetItemWithError(usage, s_prompt_tokens_details);
    if (details != NULL && details != Py_None) {
        if (!PyDict_Check(details)) return BAIL;
        if (PyDict_Size(details)) {
            PyObject *cached = PyDict_GetItemWithError(details, s_cached_tokens);
            if (cached != NULL && cached != Py_None && (!PyLong_Check(cached) || PyBool_Check(cached))) return BAIL;
        }
    }
    if (PyErr_Occurred()) PyErr_Clear();
    return 0;
}

/* adapters.base.text_field: *out = new ref ("" when absent or null); BAIL when not a string */
static int text_field(PyObject *obj, PyObject *key, PyObject *empty, PyObject **out) {
    PyObject *v = PyDict_GetItemWithError(obj, key);
    if (v == NULL && PyErr_Occurred()) return -1;
    if (v == NULL || v == Py_None) v = empty;
    else if (!PyUnicode_Check(v)) return BAIL;
    Py_INCREF(v);
    *out = v;
    return 0;
}

/* the adapter's content(event): *text = new ref or NULL (no choice); BAIL on an odd shape */
static int content_of(PyObject *event, int kind, PyObject *empty, PyObject **text) {
    *text = NULL;
    PyObject *choices = PyDict_GetItemWithError(event, s_choices);
    if (choices == NULL) return PyErr_Occurred() ? -1 : 0;
    int truth = PyObject_IsTrue(choices);
    if (truth < 0) return -1;
    if (!truth) return 0;
    if (!PyList_Check(choices)) return BAIL;
    PyObject *choice = PyList_GET_ITEM(choices, 0);
    if (!PyDict_Check(choice)) return BAIL;
    if (kind == KIND_COMPLETIONS) return text_field(choice, s_text, empty, text);
    PyObject *delta = PyDict_GetItemWithError(choice, s_delta);
    if (delta == NULL && PyErr_Occurred()) return -1;
    if (delta != NULL) {
        truth = PyObject_IsTrue(delta);
        if (truth < 0) return -1;
        if (!truth) delta = NULL;
        else if (!PyDict_Check(delta)) return BAIL;
    }
    if (delta == NULL) { /* `choice.get("delta") or {}`: no content, no reasoning */
        Py_INCREF(empty);
        *text = empty;
        return 0;
    }
    PyObject *content, *reasoning;
    int r = text_field(delta, s_content, empty, &content);
    if (r) return r;
    r = text_field(delta, s_reasoning_content, empty, &reasoning);
    if (r) {
        Py_DECREF(content);
        return r;
    }
    if (PyUnicode_GET_LENGTH(reasoning) == 0) {
        Py_DECREF(reasoning);
        r = text_field(delta, s_reasoning, empty, &reasoning);
        if (r) {
            Py_DECREF(content);
            return r;
        }
    }
    if (PyUnicode_GET_LENGTH(reasoning) == 0) {
        Py_DECREF(reasoning);
        *text = content;
        return 0;
    }
    *text = PyUnicode_Concat(reasoning, content);
    Py_DECREF(reasoning);
    Py_DECREF(content);
    return *text == NULL ? -1 : 0;
}

static inline int is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

/* The skeleton of a stream's content events. Engines send every token as the same JSON object
 * but for the text (vLLM: {"id":..,"object":..,"created":..,"model":..,"choices":[{"index":0,
 * "delta":{"content":"TEXT"},"logprobs":null,"finish_reason":null}]}). Once one event has been
 * decoded in full and its text found at exactly one `"content":"` (chat) or `"text":"`
 * (completions), a later event whose bytes before and after that string are the same bytes is the
 * same object with another text: only the string is decoded. Exact, not a heuristic: in JSON a raw
 * `"` only delimits strings, so equal bytes around one well-formed string are the same document. */
typedef struct {
    const char *p;    /* the skeleton event's payload (inside a line the caller keeps alive) */
    const char *tail; /* its text's closing quote: the suffix starts there */
    Py_ssize_t pre, suf; /* bytes before the text's first character; bytes from its closing quote */
} Skeleton;

/* the end of a JSON string body starting at s (index of its closing quote), or -1 when it is not
 * one well-formed string body up to `end` (a raw control byte, a lone backslash at the end) */
static Py_ssize_t string_end(const char *s, Py_ssize_t n, int *escaped) {
    *escaped = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"') return i;
        if (c < 0x20) return -1;
        if (c == '\\') {
            *escaped = 1;
            i++;
        }
    }
    return -1;
}

/* a string body's text: UTF-8 without escapes decoded here, anything else by `loads` (which
 * then rules on escapes exactly as for a whole event); NULL with no error set: not a string */
static PyObject *string_text(const char *s, Py_ssize_t n, int escaped, PyObject *loads) {
    if (!escaped) {
        PyObject *t = PyUnicode_DecodeUTF8(s, n, "strict");
        if (t == NULL) PyErr_Clear();
        return t;
    }
    PyObject *quoted = PyBytes_FromStringAndSize(NULL, n + 2);
    if (quoted == NULL) return NULL;
    char *q = PyBytes_AS_STRING(quoted);
    q[0] = '"';
    memcpy(q + 1, s, (size_t)n);
    q[n + 1] = '"';
    PyObject *t = PyObject_CallOneArg(loads, quoted);
    Py_DECREF(quoted);
    if (t == NULL || !PyUnicode_CheckExact(t)) {
        PyErr_Clear();
        Py_XDECREF(t);
        return NULL;
    }
    return t;
}

/* Can this fully decoded event (payload p[0:n]) be the skeleton? Only a plain content event: no
 * error, no usage, the text from exactly one string field whose value is `text`. */
static int make_skeleton(Skeleton *sk, PyObject *event, PyObject *text, int kind, const char *p, Py_ssize_t n,
                         PyObject *loads) {
    if (PyDict_GetItemWithError(event, s_error) != NULL) return 0;
    PyObject *u = PyDict_GetItemWithError(event, s_usage);
    if ((u != NULL && u != Py_None) || PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    if (kind == KIND_CHAT) { /* the text must be delta.content alone: no reasoning field that counts */
        PyObject *choice = PyList_GET_ITEM(PyDict_GetItem(event, s_choices), 0);
        PyObject *delta = PyDict_GetItem(choice, s_delta);
        if (delta == NULL || !PyDict_Check(delta)) return 0;
        PyObject *r1 = PyDict_GetItem(delta, s_reasoning_content), *r2 = PyDict_GetItem(delta, s_reasoning);
        if ((r1 != NULL && r1 != Py_None) || (r2 != NULL && r2 != Py_None)) return 0;
    }
    const char *key = kind == KIND_CHAT ? "\"content\":\"" : "\"text\":\"";
    Py_ssize_t klen = (Py_ssize_t)strlen(key);
    const char *hit = memmem(p, (size_t)n, key, (size_t)klen);
    if (hit == NULL || memmem(hit + 1, (size_t)(p + n - hit - 1), key, (size_t)klen) != NULL) return 0;
    Py_ssize_t pre = (hit - p) + klen;
    int escaped;
    Py_ssize_t end = string_end(p + pre, n - pre, &escaped);
    if (end < 0) return 0;
    PyObject *mine = string_text(p + pre, end, escaped, loads);
    if (mine == NULL) return 0;
    int same = PyUnicode_Compare(mine, text) == 0;
    Py_DECREF(mine);
    if (!same) return 0;
    sk->p = p;
    sk->tail = p + pre + end;
    sk->pre = pre;
    sk->suf = n - pre - end;
    return 1;
}

/* the text of an event that matches the skeleton, or NULL (no error set): decode it in full */
static PyObject *skeleton_text(const Skeleton *sk, const char *p, Py_ssize_t n, PyObject *loads) {
    if (sk->p == NULL || n < sk->pre + sk->suf) return NULL;
    if (memcmp(p, sk->p, (size_t)sk->pre) != 0) return NULL;
    if (memcmp(p + n - sk->suf, sk->tail, (size_t)sk->suf) != 0) return NULL;
    int escaped;
    Py_ssize_t len = n - sk->pre - sk->suf;
    if (string_end(p + sk->pre, len + 1, &escaped) != len) return NULL; /* one string, up to that quote */
    return string_text(p + sk->pre, len, escaped, loads);
}

/* scan(lines, kind, loads) -> (chunk_ns, texts, cumulative, usage, usage_event, done, done_ns, role_ns,
 * last_choice_event, coalesced) or None */
static PyObject *scan(PyObject *Py_UNUSED(mod), PyObject *args) {
    PyObject *lines, *loads;
    int kind;
    if (!PyArg_ParseTuple(args, "O!iO", &PyList_Type, &lines, &kind, &loads)) return NULL;
    if (intern_keys() < 0) return NULL;
    Py_ssize_t n = PyList_GET_SIZE(lines);
    PyObject *result = NULL, *chunk_ns = NULL, *texts = NULL, *cumulative = NULL, *empty = NULL;
    PyObject *decoded = NULL; /* the events decoded in full, kept alive for usage/usage_event */
    PyObject *usage = Py_None, *usage_event = Py_None, *last_choice = Py_None, *done_ns = Py_None, *role_ns = Py_None;
    const char *last_fast = NULL; /* the last choice event when it came through the skeleton */
    Py_ssize_t last_fast_len = 0;
    Skeleton sk = {NULL, NULL, 0, 0};
    int finished_done = 0;
    Py_ssize_t coalesced = 0;
    PyObject *prev_stamp = NULL;
    chunk_ns = PyList_New(0);
    texts = PyList_New(0);
    cumulative = PyList_New(0);
    decoded = PyList_New(0);
    empty = PyUnicode_New(0, 0);
    if (!chunk_ns || !texts || !cumulative || !decoded || !empty) goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PyList_GET_ITEM(lines, i);
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 2 || !PyBytes_Check(PyTuple_GET_ITEM(item, 1))
            || !PyLong_Check(PyTuple_GET_ITEM(item, 0)))
            goto bail; /* not what a reader makes: let Python handle it */
        PyObject *stamp = PyTuple_GET_ITEM(item, 0), *line = PyTuple_GET_ITEM(item, 1);
        const char *p = PyBytes_AS_STRING(line);
        Py_ssize_t a = 5, b = PyBytes_GET_SIZE(line);
        if (b < a) a = b;
        while (a < b && is_space(p[a])) a++;
        while (b > a && is_space(p[b - 1])) b--;
        if (b - a == 6 && memcmp(p + a, "[DONE]", 6) == 0) {
            finished_done = 1;
            done_ns = stamp;
            continue;
        }
        if (b == a) continue;
        const char *payload = p + a;
        Py_ssize_t plen = b - a;
        PyObject *text = skeleton_text(&sk, payload, plen, loads); /* the same event but for its text */
        if (text == NULL && PyErr_Occurred()) goto done;
        int usage_true = 0;
        PyObject *ev_usage = NULL;
        if (text != NULL) {
            last_fast = payload;
            last_fast_len = plen;
            last_choice = NULL;
        } else {
            PyObject *pl = PyBytes_FromStringAndSize(payload, plen);
            if (pl == NULL) goto done;
            PyObject *event = PyObject_CallOneArg(loads, pl);
            Py_DECREF(pl);
            if (event == NULL) {
                PyErr_Clear();
                goto bail; /* not JSON: the Python loop says where */
            }
            if (PyList_Append(decoded, event) < 0) {
                Py_DECREF(event);
                goto done;
            }
            Py_DECREF(event); /* `decoded` keeps it */
            if (!PyDict_CheckExact(event)) goto bail;
            PyObject *err = PyDict_GetItemWithError(event, s_error);
            if (err == NULL && PyErr_Occurred()) goto done;
            if (err != NULL) { /* an error event without choices: the Python loop raises server_error */
                PyObject *ch = PyDict_GetItemWithError(event, s_choices);
                if (ch == NULL && PyErr_Occurred()) goto done;
                int t = ch == NULL ? 0 : PyObject_IsTrue(ch);
                if (t < 0) goto done;
                if (!t) goto bail;
            }
            ev_usage = PyDict_GetItemWithError(event, s_usage);
            if (ev_usage == NULL && PyErr_Occurred()) goto done;
            if (ev_usage != NULL && ev_usage != Py_None) {
                if (usage_ok(ev_usage)) goto bail;
                usage_true = PyDict_Size(ev_usage) > 0;
                if (usage_true) {
                    usage = ev_usage;
                    usage_event = event;
                }
            }
            int r = content_of(event, kind, empty, &text);
            if (r < 0) goto done;
            if (r == BAIL) goto bail;
            if (text == NULL) continue;
            last_choice = event;
            last_fast = NULL;
            if (sk.p == NULL && PyUnicode_GET_LENGTH(text) > 0
                && make_skeleton(&sk, event, text, kind, payload, plen, loads) < 0) {
                Py_DECREF(text);
                goto done;
            }
        }
        if (PyUnicode_GET_LENGTH(text) > 0) {
            PyObject *cum = Py_None;
            if (usage_true) {
                cum = PyDict_GetItemWithError(ev_usage, s_completion_tokens);
                if (cum == NULL) {
                    if (PyErr_Occurred()) {
                        Py_DECREF(text);
                        goto done;
                    }
                    cum = Py_None;
                }
            }
            if (PyList_Append(chunk_ns, stamp) < 0 || PyList_Append(texts, text) < 0
                || PyList_Append(cumulative, cum) < 0) {
                Py_DECREF(text);
                goto done;
            }
            if (prev_stamp != NULL) { /* content chunks that shared a read (and so its stamp) */
                int same = PyObject_RichCompareBool(prev_stamp, stamp, Py_EQ);
                if (same < 0) {
                    Py_DECREF(text);
                    goto done;
                }
                coalesced += same;
            }
            prev_stamp = stamp;
        } else if (role_ns == Py_None && PyList_GET_SIZE(chunk_ns) == 0) {
            role_ns = stamp;
        }
        Py_DECREF(text);
    }
    PyObject *last_event = NULL;
    if (last_choice == NULL) { /* the last choice event came through the skeleton: decode it now */
        PyObject *pl = PyBytes_FromStringAndSize(last_fast, last_fast_len);
        if (pl == NULL) goto done;
        last_event = PyObject_CallOneArg(loads, pl);
        Py_DECREF(pl);
        if (last_event == NULL) goto done; /* it matched a decoded event's bytes: it is JSON */
        last_choice = last_event;
    }
    result = Py_BuildValue("(OOOOOOOOOn)", chunk_ns, texts, cumulative, usage, usage_event,
                           finished_done ? Py_True : Py_False, done_ns, role_ns, last_choice, coalesced);
    Py_XDECREF(last_event);
    goto done;
bail:
    result = Py_None;
    Py_INCREF(result);
done:
    Py_XDECREF(chunk_ns);
    Py_XDECREF(texts);
    Py_XDECREF(cumulative);
    Py_XDECREF(decoded);
    Py_XDECREF(empty);
    return result;
}

static PyMethodDef module_methods[] = {
    {"read_ready", read_ready, METH_VARARGS,
     "read_ready(epfd, parsers) -> (finished fds, ready count): read every ready stream once"},
    {"scan", scan, METH_VARARGS,
     "scan(lines, kind, loads) -> the SSE events' content, usage and marks (harness.client.sse), or None"},
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
    PyModule_AddIntConstant(m, "KIND_CHAT", KIND_CHAT);
    PyModule_AddIntConstant(m, "KIND_COMPLETIONS", KIND_COMPLETIONS);
    return m;
}
