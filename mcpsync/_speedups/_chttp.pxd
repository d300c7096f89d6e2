# Types for the compiled build of _pyhttp.py (Cython pure-Python mode): setup.py copies
# this file next to the generated _chttp.py. The .py stays the one source.
cimport cython

cdef bint _COMPILED
cdef Py_ssize_t _CHUNK
cdef Py_ssize_t _MAX_FIELDS
cdef object _HEAD
cdef tuple _OTHERS
cdef bytes _JSON
cdef bytes _ANSWER
cdef bytes _RESULT

# The head of an answer the JSON lane takes, in one pass over its bytes: the offset of the
# body when p[0:n] begins with a whole head of the common shape (*declared: its
# Content-Length; the answer is whole when the rest of p is exactly that long), else -1. The same rules as
# _pyhttp.simple_answer's pure-Python reading (a regular expression and searches): see there.
cdef extern from *:
    """
    #include <string.h>
    static const unsigned char mcpsync_token[256] = {
        ['!'] = 1, ['#'] = 1, ['$'] = 1, ['%'] = 1, ['&'] = 1, [39] = 1, ['*'] = 1, ['+'] = 1, ['-'] = 1,
        ['.'] = 1, ['^'] = 1, ['_'] = 1, ['`'] = 1, ['|'] = 1, ['~'] = 1,
        ['0'] = 1, ['1'] = 1, ['2'] = 1, ['3'] = 1, ['4'] = 1, ['5'] = 1, ['6'] = 1, ['7'] = 1, ['8'] = 1, ['9'] = 1,
        ['A'] = 1, ['B'] = 1, ['C'] = 1, ['D'] = 1, ['E'] = 1, ['F'] = 1, ['G'] = 1, ['H'] = 1, ['I'] = 1,
        ['J'] = 1, ['K'] = 1, ['L'] = 1, ['M'] = 1, ['N'] = 1, ['O'] = 1, ['P'] = 1, ['Q'] = 1, ['R'] = 1,
        ['S'] = 1, ['T'] = 1, ['U'] = 1, ['V'] = 1, ['W'] = 1, ['X'] = 1, ['Y'] = 1, ['Z'] = 1,
        ['a'] = 1, ['b'] = 1, ['c'] = 1, ['d'] = 1, ['e'] = 1, ['f'] = 1, ['g'] = 1, ['h'] = 1, ['i'] = 1,
        ['j'] = 1, ['k'] = 1, ['l'] = 1, ['m'] = 1, ['n'] = 1, ['o'] = 1, ['p'] = 1, ['q'] = 1, ['r'] = 1,
        ['s'] = 1, ['t'] = 1, ['u'] = 1, ['v'] = 1, ['w'] = 1, ['x'] = 1, ['y'] = 1, ['z'] = 1,
    };
    /* s (n bytes) equals the lower-case ASCII word w, ignoring case */
    static int mcpsync_is(const unsigned char *s, Py_ssize_t n, const char *w) {
        Py_ssize_t k;
        if ((size_t)n != strlen(w)) return 0;
        for (k = 0; k < n; k++) {
            unsigned char c = s[k];
            if (c >= 'A' && c <= 'Z') c += 32;
            if (c != (unsigned char)w[k]) return 0;
        }
        return 1;
    }
    static Py_ssize_t mcpsync_simple_head(const char *data, Py_ssize_t n, Py_ssize_t *declared) {
        const unsigned char *p = (const unsigned char *)data;
        Py_ssize_t i = 13, name, name_len, value, value_len, length = -1, fields = 0, k;
        int json = 0, typed = 0, kept = 0;
        if (n < 15 || memcmp(p, "HTTP/1.1 200 ", 13) != 0) return -1;
        while (i < n && p[i] >= 0x20 && p[i] <= 0x7e) i++;  /* the reason */
        if (i + 1 >= n || p[i] != 13 || p[i + 1] != 10) return -1;
        i += 2;
        for (;;) {
            if (i + 1 >= n) return -1;
            if (p[i] == 13) {
                if (p[i + 1] != 10) return -1;
                i += 2;
                break;
            }
            name = i;
            while (i < n && mcpsync_token[p[i]]) i++;
            if (i == name || i >= n || p[i] != ':') return -1;
            name_len = i - name;
            i++;
            while (i < n && (p[i] == ' ' || p[i] == 9)) i++;
            value = i;
            while (i < n && (p[i] == 9 || (p[i] >= 0x20 && p[i] <= 0x7e))) i++;
            if (i + 1 >= n || p[i] != 13 || p[i + 1] != 10) return -1;
            value_len = i - value;
            i += 2;
            if (++fields > 100) return -1;
            if (mcpsync_is(p + name, name_len, "content-length")) {
                if (length >= 0 || value_len < 1 || value_len > 15) return -1;
                length = 0;
                for (k = value; k < value + value_len; k++) {
                    if (p[k] < '0' || p[k] > '9') return -1;
                    length = length * 10 + (p[k] - '0');
                }
            } else if (mcpsync_is(p + name, name_len, "content-type")) {
                if (typed) return -1;
                typed = 1;
                json = mcpsync_is(p + value, value_len, "application/json");
            } else if (mcpsync_is(p + name, name_len, "connection")) {
                if (!mcpsync_is(p + value, value_len, "keep-alive")) return -1;
                if (kept) return -1;  /* twice */
                kept = 1;
            } else if (mcpsync_is(p + name, name_len, "transfer-encoding")
                       || mcpsync_is(p + name, name_len, "content-encoding")
                       || mcpsync_is(p + name, name_len, "set-cookie")
                       || mcpsync_is(p + name, name_len, "upgrade")
                       || mcpsync_is(p + name, name_len, "proxy-connection")) {
                return -1;
            }
        }
        if (length < 0 || !json) return -1;
        *declared = length;
        return i;
    }
    #include <errno.h>
    #include <stdio.h>
    #include <poll.h>
    #include <time.h>
    #include <sys/socket.h>
    #ifndef MSG_NOSIGNAL
    #define MSG_NOSIGNAL 0
    #endif
    #define MCPSYNC_HTTP_CHUNK 65536
    #define MCPSYNC_HTTP_OUT 8192
    /* an answer's first read, parsed and copied out before the GIL is let go again */
    static char mcpsync_http_chunk[MCPSYNC_HTTP_CHUNK];
    /* the decimal digits of v in out (at least 21 bytes): their count */
    static int mcpsync_digits(char *out, unsigned long long v) {
        char tmp[24];
        int k = 0, m;
        do {
            tmp[k++] = (char)('0' + v % 10);
            v /= 10;
        } while (v);
        for (m = 0; m < k; m++) out[m] = tmp[k - 1 - m];
        return k;
    }
    static double mcpsync_http_now(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
    }
    /* wait until fd is ready for events or the deadline passes, the GIL let go: 1 ready,
       0 the deadline passed, -1 an error raised (a signal handler's included) */
    static int mcpsync_http_wait(int fd, short events, double deadline) {
        for (;;) {
            double left = deadline - mcpsync_http_now();
            struct pollfd p;
            int r, ms;
            if (left <= 0) return 0;
            if (left > 2e6) left = 2e6;
            ms = (int)(left * 1000.0);
            if ((double)ms < left * 1000.0) ms++;
            p.fd = fd;
            p.events = events;
            p.revents = 0;
            Py_BEGIN_ALLOW_THREADS
            r = poll(&p, 1, ms);
            Py_END_ALLOW_THREADS
            if (r > 0) return 1;
            if (r < 0) {
                if (errno != EINTR) {
                    PyErr_SetFromErrno(PyExc_OSError);
                    return -1;
                }
                if (PyErr_CheckSignals() < 0) return -1;
            }
        }
    }
    /* One request on the plain socket fd (kept alive, idle): "POST" line host block, its
       Content-Length, the body, written whole (within timeout s in all), then one read of
       the answer (waiting at most timeout s), as sendall and recv on a socket with that
       timeout would (TimeoutError "timed out", OSError); a body that did not come with its
       head is waited for (each wait at most timeout s, none past until: monotonic s).
       *state: -2 the idle socket was closed by the server or has bytes nobody asked for
       (nothing sent; None); 1 an answer of the common shape (mcpsync_simple_head) whose body
       is at most limit bytes came whole: the body; 0 anything else: all that was read
       (b"": the server closed). */
    static PyObject *mcpsync_http_exchange(int fd, const char *line, Py_ssize_t line_n, const char *host,
            Py_ssize_t host_n, const char *block, Py_ssize_t block_n, const char *body, Py_ssize_t body_n,
            double timeout, double until, Py_ssize_t limit, int *state) {
        struct pollfd idle;
        PyObject *whole;
        Py_ssize_t length = 0, got;
        double wait;
        char stack[MCPSYNC_HTTP_OUT], digits[24], *out = stack, *w;
        int digits_n, r;
        Py_ssize_t total, sent = 0, at;
        ssize_t n;
        double deadline;
        idle.fd = fd;
        idle.events = POLLIN;
        idle.revents = 0;
        if (poll(&idle, 1, 0) != 0) {
            *state = -2;
            Py_RETURN_NONE;
        }
        digits_n = mcpsync_digits(digits, (unsigned long long)body_n);
        total = 4 + line_n + host_n + block_n + 16 + digits_n + 4 + body_n;
        if (total > MCPSYNC_HTTP_OUT) {
            out = (char *)PyMem_Malloc((size_t)total);
            if (out == NULL) return PyErr_NoMemory();
        }
        w = out;
        memcpy(w, "POST", 4); w += 4;
        memcpy(w, line, (size_t)line_n); w += line_n;
        memcpy(w, host, (size_t)host_n); w += host_n;
        memcpy(w, block, (size_t)block_n); w += block_n;
        memcpy(w, "Content-Length: ", 16); w += 16;
        memcpy(w, digits, (size_t)digits_n); w += digits_n;
        memcpy(w, "\\r\\n\\r\\n", 4); w += 4;
        memcpy(w, body, (size_t)body_n);
        deadline = mcpsync_http_now() + timeout;
        while (sent < total) {
            n = send(fd, out + sent, (size_t)(total - sent), MSG_DONTWAIT | MSG_NOSIGNAL);
            if (n >= 0) {
                sent += n;
                continue;
            }
            if (errno == EINTR) {
                if (PyErr_CheckSignals() < 0) goto failed;
                continue;
            }
            if (errno != EAGAIN && errno != EWOULDBLOCK) {
                PyErr_SetFromErrno(PyExc_OSError);
                goto failed;
            }
            r = mcpsync_http_wait(fd, POLLOUT, deadline);
            if (r < 0) goto failed;
            if (r == 0) {
                PyErr_SetString(PyExc_TimeoutError, "timed out");
                goto failed;
            }
        }
        if (out != stack) PyMem_Free(out);
        deadline = mcpsync_http_now() + timeout;
        for (;;) {
            n = recv(fd, mcpsync_http_chunk, MCPSYNC_HTTP_CHUNK, MSG_DONTWAIT);
            if (n >= 0) break;
            if (errno == EINTR) {
                if (PyErr_CheckSignals() < 0) return NULL;
                continue;
            }
            if (errno != EAGAIN && errno != EWOULDBLOCK) {
                PyErr_SetFromErrno(PyExc_OSError);
                return NULL;
            }
            r = mcpsync_http_wait(fd, POLLIN, deadline);
            if (r < 0) return NULL;
            if (r == 0) {
                PyErr_SetString(PyExc_TimeoutError, "timed out");
                return NULL;
            }
        }
        at = mcpsync_simple_head(mcpsync_http_chunk, (Py_ssize_t)n, &length);
        if (at < 0 || length > limit || (Py_ssize_t)n - at > length) {
            *state = 0;
            return PyBytes_FromStringAndSize(mcpsync_http_chunk, (Py_ssize_t)n);
        }
        if ((Py_ssize_t)n - at == length) {
            *state = 1;
            return PyBytes_FromStringAndSize(mcpsync_http_chunk + at, length);
        }
        /* the head came alone (as uvicorn writes it) or the body is on its way: up to
           MCPSYNC_HTTP_CHUNK bytes of body are read here, into an answer of its own (the
           module's buffer is free for other threads once the GIL is let go), each wait at
           most timeout s and none past the deadline; the server's close or anything else
           hands what came to the general reader */
        got = (Py_ssize_t)n;
        if (length > MCPSYNC_HTTP_CHUNK) {
            *state = 0;
            return PyBytes_FromStringAndSize(mcpsync_http_chunk, got);
        }
        whole = PyBytes_FromStringAndSize(NULL, at + length);
        if (whole == NULL) return NULL;
        memcpy(PyBytes_AS_STRING(whole), mcpsync_http_chunk, (size_t)got);
        while (got < at + length) {
            n = recv(fd, PyBytes_AS_STRING(whole) + got, (size_t)(at + length - got), MSG_DONTWAIT);
            if (n > 0) {
                got += n;
                continue;
            }
            if (n == 0) break;  /* closed early: the general reader says so */
            if (errno == EINTR) {
                if (PyErr_CheckSignals() < 0) goto dropped;
                continue;
            }
            if (errno != EAGAIN && errno != EWOULDBLOCK) {
                PyErr_SetFromErrno(PyExc_OSError);
                goto dropped;
            }
            wait = mcpsync_http_now() + timeout;
            r = mcpsync_http_wait(fd, POLLIN, wait < until ? wait : until);
            if (r < 0) goto dropped;
            if (r == 0) {
                PyErr_SetString(PyExc_TimeoutError, "timed out");
                goto dropped;
            }
        }
        if (got == at + length) {
            PyObject *body = PyBytes_FromStringAndSize(PyBytes_AS_STRING(whole) + at, length);
            Py_DECREF(whole);
            *state = 1;
            return body;
        }
        *state = 0;
        if (_PyBytes_Resize(&whole, got) < 0) return NULL;
        return whole;
      dropped:
        Py_DECREF(whole);
        return NULL;
      failed:
        if (out != stack) PyMem_Free(out);
        return NULL;
    }
    /* body (n bytes) is {"jsonrpc":"2.0","id":<rid>,"result":...}: the plain result of the request rid */
    /* a == b for an auth hook's headers (a dict of str, usually of one field): as dict
       equality, compared directly; anything but exact dicts of str is left to ==. -1: an
       error raised */
    static int mcpsync_same_headers(PyObject *a, PyObject *b) {
        Py_ssize_t pos = 0;
        PyObject *k, *v, *w;
        if (a == b) return 1;
        if (!PyDict_CheckExact(a) || !PyDict_CheckExact(b)) return PyObject_RichCompareBool(a, b, Py_EQ);
        if (PyDict_GET_SIZE(a) != PyDict_GET_SIZE(b)) return 0;
        while (PyDict_Next(a, &pos, &k, &v)) {
            if (!PyUnicode_CheckExact(k) || !PyUnicode_CheckExact(v)) return PyObject_RichCompareBool(a, b, Py_EQ);
            w = PyDict_GetItemWithError(b, k);
            if (w == NULL) return PyErr_Occurred() ? -1 : 0;
            if (w == v) continue;
            if (!PyUnicode_CheckExact(w)) return PyObject_RichCompareBool(a, b, Py_EQ);
            if (PyUnicode_GET_LENGTH(w) != PyUnicode_GET_LENGTH(v) || PyUnicode_KIND(w) != PyUnicode_KIND(v)
                    || memcmp(PyUnicode_DATA(w), PyUnicode_DATA(v),
                              (size_t)(PyUnicode_GET_LENGTH(v) * PyUnicode_KIND(v))) != 0) return 0;
        }
        return 1;
    }
    static int mcpsync_is_result(const char *body, Py_ssize_t n, long long rid) {
        static const char lead[] = "{\\"jsonrpc\\":\\"2.0\\",\\"id\\":";
        static const char rest[] = ",\\"result\\":";
        char digits[24];
        Py_ssize_t k = (Py_ssize_t)sizeof lead - 1, d, r = (Py_ssize_t)sizeof rest - 1;
        if (rid < 0) return 0;
        d = mcpsync_digits(digits, (unsigned long long)rid);
        return n > k + d + r && memcmp(body, lead, (size_t)k) == 0 && memcmp(body + k, digits, (size_t)d) == 0
            && memcmp(body + k + d, rest, (size_t)r) == 0 && body[n - 1] == '}';
    }
    """
    Py_ssize_t _simple_head "mcpsync_simple_head"(const char *data, Py_ssize_t n, Py_ssize_t *declared)
    object _exchange "mcpsync_http_exchange"(int fd, const char *line, Py_ssize_t line_n, const char *host,
        Py_ssize_t host_n, const char *block, Py_ssize_t block_n, const char *body, Py_ssize_t body_n, double timeout,
        double until, Py_ssize_t limit, int *state)
    bint _is_result "mcpsync_is_result"(const char *body, Py_ssize_t n, long long rid) noexcept
    double _c_monotonic "mcpsync_http_now"() noexcept
    int _same_headers "mcpsync_same_headers"(object a, object b) except -1

@cython.locals(at=Py_ssize_t)
cdef object _field(bytes head, bytes name)

@cython.locals(start=Py_ssize_t, at=Py_ssize_t, body=Py_ssize_t, head=bytes, declared=Py_ssize_t)
cpdef object simple_answer(bytes data)

@cython.final
cdef class JSONLane:
    cdef object exchange
    cdef object read_timeout
    cdef Py_ssize_t limit
    cdef object auth
    cdef object put
    cdef dict kinds
    cdef object remember
    cdef dict blocks
    cdef object general
    cdef object answered
    cdef object delivered
    cdef object resume
    cdef object auth_failed
    cdef object auth_merge
    cdef object wire_of
    cdef list first
    cdef object take
    cdef object waiting
    cdef public bint open
    cdef public object legacy
    cdef public bint succeeded
    cdef tuple _way
    cdef tuple _kind

    cdef object _route(self, pools, url)

    @cython.locals(state=int, read=double, deadline=double, fd=int, way=tuple, kind=tuple, last=tuple)
    cpdef send(self, message, timeout=*, facts=*)
    cpdef wait_first(self, timeout)

@cython.final
cdef class _Facts:
    cdef object facts_type
    cdef frozenset safe
    cdef dict name_keys
    cdef object meta_version
    cdef object mapping
    cdef tuple raw_meta

    cdef object version_of(self, meta)
    @cython.locals(known=tuple)
    cpdef facts(self, id, method, params, decode=*, headers=*)
