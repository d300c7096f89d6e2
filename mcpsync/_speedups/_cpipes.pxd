# Types for the compiled build of _pypipes.py (Cython pure-Python mode): setup.py
# copies this file next to the generated _cpipes.py. The .py stays the one source.
cimport cython

cdef Py_ssize_t _EDGE
cdef Py_ssize_t _CHUNK
cdef Py_ssize_t _SMALL
cdef double _INSTANT

@cython.locals(ms=double)
cdef int _millis(double timeout)

cdef bytes _without_cr(bytes frame)
cdef bint _worth_keeping(bytes frame)

@cython.final
cdef class LineFramer:
    cdef public Py_ssize_t max_size
    cdef bytearray _buf
    cdef bint _discarding
    cdef Py_ssize_t _discard_size
    cdef bytes _head
    cdef bytes _tail
    cdef readonly list first
    cdef readonly object ready
    cdef object _pending
    cdef object _source
    cdef int _source_fd
    cdef object _poller
    cdef int _poll_fd
    cdef bint _eager
    cdef bint _big

    cpdef list feed(self, bytes data)
    @cython.locals(first=list)
    cpdef list pop(self)
    @cython.locals(first=list)
    cpdef promote(self)
    @cython.locals(first=list, lone=Py_ssize_t, state=int)
    cpdef Py_ssize_t read(self, int fd)
    @cython.locals(first=list, deadline=double, eager=bint, started=double, n=Py_ssize_t)
    cpdef Py_ssize_t wait_message(self, int fd, object timeout)
    @cython.locals(start=Py_ssize_t, n=Py_ssize_t, nl=Py_ssize_t, stop=Py_ssize_t, size=Py_ssize_t, out=list, buf=bytearray,
                   frame=bytes, held=Py_ssize_t, drop=bint, discarding=bint, discard_size=Py_ssize_t, before=bytes,
                   first=list)
    cdef _frame(self, bytes data)

# The stdio pipe's reads, waits and writes (LineFramer.read, LineFramer.wait_message,
# write_line). A small read keeps the GIL from the read(2) until its bytes are copied out
# of the module's buffer (no Python code runs between), so threads never share the buffer;
# reads and writes of non-blocking pipes never wait. poll(2) lets the GIL go, and so does a
# big read, into bytes of its own (as os.read: a flood leaves the other threads their turn). An EINTR
# runs the signal handlers (an exception they raise is raised: nothing read or written
# yet) and goes on; another error raises OSError, as os.read / os.write do.
cdef extern from *:
    """
    #include <errno.h>
    #include <string.h>
    #include <unistd.h>
    #include <poll.h>
    #include <time.h>
    #include <sys/uio.h>
    #define MCPSYNC_CHUNK 65536
    static char mcpsync_chunk[MCPSYNC_CHUNK];
    /* one read(2) of fd: into the buffer above (copied out) or, when big, into bytes of its
       own (as os.read); *state: -1 nothing in (None), 0 the end (b""), 1 a chunk, 2 one whole
       message of at most lone_max bytes and its newline (CR) alone: the message, cut to it */
    static PyObject *mcpsync_read(int fd, Py_ssize_t lone_max, int big, int *state) {
        PyObject *b = NULL;
        char *p = mcpsync_chunk;
        ssize_t n;
        Py_ssize_t m;
        if (big) {
            b = PyBytes_FromStringAndSize(NULL, MCPSYNC_CHUNK);
            if (b == NULL) return NULL;
            p = PyBytes_AS_STRING(b);
        }
        for (;;) {
            if (b == NULL) {
                n = read(fd, p, MCPSYNC_CHUNK);
            } else {  /* (as os.read: big reads let the GIL go, so that a flood leaves other threads their turn) */
                Py_BEGIN_ALLOW_THREADS
                n = read(fd, p, MCPSYNC_CHUNK);
                Py_END_ALLOW_THREADS
            }
            if (n >= 0) break;
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                Py_XDECREF(b);
                *state = -1;
                Py_RETURN_NONE;
            }
            if (errno == EINTR) {
                if (PyErr_CheckSignals() < 0) {
                    Py_XDECREF(b);
                    return NULL;
                }
                continue;
            }
            Py_XDECREF(b);
            PyErr_SetFromErrno(PyExc_OSError);
            return NULL;
        }
        *state = n > 0 ? 1 : 0;
        m = (Py_ssize_t)n;
        if (n > 1 && (Py_ssize_t)n <= lone_max && p[n - 1] == '\\n' && (unsigned char)p[0] > 32
                && memchr(p, '\\n', (size_t)(n - 1)) == NULL) {
            m = (Py_ssize_t)n - 1;
            if (p[m - 1] == '\\r') m--;
            *state = 2;
        }
        if (b == NULL) return PyBytes_FromStringAndSize(p, m);
        if (m != MCPSYNC_CHUNK && _PyBytes_Resize(&b, m) < 0) return NULL;
        return b;
    }
    /* poll(2) of one descriptor for input, the GIL let go: its answer (0: nothing came
       in time, or an EINTR whose handlers raised nothing); an error raises OSError */
    static int mcpsync_poll_in(int fd, int timeout_ms) {
        struct pollfd p;
        int r;
        p.fd = fd;
        p.events = POLLIN;
        p.revents = 0;
        Py_BEGIN_ALLOW_THREADS
        r = poll(&p, 1, timeout_ms);
        Py_END_ALLOW_THREADS
        if (r >= 0) return r;
        if (errno == EINTR) return PyErr_CheckSignals() < 0 ? -3 : 0;
        PyErr_SetFromErrno(PyExc_OSError);
        return -3;
    }
    /* CLOCK_MONOTONIC in seconds, as time.monotonic() reads it on Linux */
    static double mcpsync_monotonic(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
    }
    /* writev(2) of a message and its newline: the bytes written (0: no room); an error raises OSError */
    static Py_ssize_t mcpsync_write_line(int fd, const char *data, Py_ssize_t size) {
        struct iovec iov[2];
        iov[0].iov_base = (void *)data;
        iov[0].iov_len = (size_t)size;
        iov[1].iov_base = (void *)"\\n";
        iov[1].iov_len = 1;
        for (;;) {
            ssize_t n = writev(fd, iov, 2);
            if (n >= 0) return (Py_ssize_t)n;
            if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
            if (errno == EINTR) {
                if (PyErr_CheckSignals() < 0) return -1;
                continue;
            }
            PyErr_SetFromErrno(PyExc_OSError);
            return -1;
        }
    }
    """
    object _read "mcpsync_read"(int fd, Py_ssize_t lone_max, bint big, int *state)
    int _poll_in "mcpsync_poll_in"(int fd, int timeout_ms) except -3
    double _c_monotonic "mcpsync_monotonic"() noexcept
    Py_ssize_t _write_line "mcpsync_write_line"(int fd, const char *data, Py_ssize_t size) except -1

cpdef Py_ssize_t write_line(int fd, bytes message) except -1

cdef bint _COMPILED

# epoll_ctl(EPOLL_CTL_MOD) under the GIL: 0, or the errno (no Python error); without
# epoll (macOS) ENOSYS, so the extension still builds there (stdio uses epoll on Linux only)
cdef extern from *:
    """
    #include <errno.h>
    #ifdef __linux__
    #include <string.h>
    #include <sys/epoll.h>
    static int mcpsync_epoll_turn(int epfd, int fd, int on) {
        struct epoll_event ev;
        memset(&ev, 0, sizeof(ev));
        ev.events = on ? EPOLLIN : 0;
        ev.data.fd = fd;  /* as select.epoll sets it: poll() reports the fd */
        return epoll_ctl(epfd, EPOLL_CTL_MOD, fd, &ev) < 0 ? errno : 0;
    }
    #else
    static int mcpsync_epoll_turn(int epfd, int fd, int on) {
        (void)epfd; (void)fd; (void)on;
        return ENOSYS;
    }
    #endif
    """
    int _epoll_turn "mcpsync_epoll_turn"(int epfd, int fd, bint on)

@cython.final
cdef class EpollSwitch:
    cdef object _epoll
    cdef int _epfd
    cdef int _fd

    cpdef int turn(self, bint on)

@cython.final
cdef class IdleGate:
    cdef EpollSwitch _switch
    cdef double _grace
    cdef object _clock
    cdef public double last
    cdef public bint paused

    cpdef arrive(self, double now)
    cpdef leave(self)

cdef class PipeEnds:
    cdef public LineFramer _framer
    cdef public list _first
    cdef public object _ready
    cdef public object _wait_message
    cdef public list _wbaton
    cdef public list _wwaiters
    cdef public object _wake_writer
    cdef public int _in_fd
    cdef public int _out_fd
    cdef public bint _closed
    cdef public bint _reading
    cdef public bint _spoke

    @cython.locals(baton=list, fd=int, n=Py_ssize_t)
    cpdef send(self, bytes message, object timeout=*, object facts=*)
    @cython.locals(first=list, fd=int, n=Py_ssize_t)
    cpdef bint wait_first(self, object timeout) except -1
