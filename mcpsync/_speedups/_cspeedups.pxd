# Types for the compiled build of _pyspeedups.py (Cython pure-Python mode): setup.py
# copies this file next to the generated _cspeedups.py. The .py stays the one source.
cimport cython

cdef class TTLCache:
    cdef public object ttl
    cdef public Py_ssize_t maxsize
    cdef object _clock
    cdef dict _data
    cdef object _lock
    cdef public Py_ssize_t hits
    cdef public Py_ssize_t misses

    @cython.locals(expires=double, lock=object)
    cpdef object get(self, object key, object default=*)
    @cython.locals(entry=tuple, expires=double, lock=object)
    cpdef object peek(self, object key, object default=*)

cdef Py_ssize_t _SUB_BITS
cdef Py_ssize_t _SUB
cdef Py_ssize_t _MAX_EXP

@cython.locals(e=Py_ssize_t, x=cython.longlong)
cpdef Py_ssize_t bucket_index(cython.longlong v)

cdef class Histogram:
    cdef public list counts
    cdef public cython.longlong count
    cdef public cython.longlong total_us
    cdef public cython.longlong min_us
    cdef public cython.longlong max_us

    cpdef record_us(self, cython.longlong v)
    cdef void _note(self, cython.longlong v)

cdef class CallTally(Histogram):
    cdef public Py_ssize_t successes
    cdef public Py_ssize_t errors
    cdef public Py_ssize_t timeouts
    cdef public Py_ssize_t slots
    cdef public list ring_t
    cdef public list ring_n
    cdef public object first

    @cython.locals(sec=cython.longlong, slot=Py_ssize_t, seen=cython.longlong)
    cpdef add(self, double start, double end, str outcome, bint latency=*)
    cpdef tuple numbers(self)

@cython.locals(n=Py_ssize_t, item=tuple, last=CallTally, last_server=object, last_tool=object, server=object, tool=object)
cpdef Py_ssize_t fold_calls(object pop, dict tallies, object missing)

@cython.final
cdef class CallQueue:
    cdef public object queue
    cdef public Py_ssize_t batch
    cdef public object drain
    cdef public dict tallies
    cdef public object missing
    cdef object _last_server
    cdef object _last_tool
    cdef CallTally _last

    @cython.locals(tally=CallTally)
    cpdef record(self, object server, object tool, object start, object end, object outcome)

@cython.final
cdef class Gate:
    cdef public bint shut

cdef class FastPath:
    cdef Gate _gate
    cdef Gate _reconnect_gate
    cdef object _ok
    cdef object _mark
    cdef CallQueue _calls
    cdef object _record
    cdef object _server
    cdef object _clock
    cdef bint _c_clock
    cdef object _success
    cdef object _failed

    cpdef object begin(self)
    @cython.locals(calls=CallQueue, end=double)
    cpdef succeeded(self, object tool, object start)

cdef bint _COMPILED

@cython.final
cdef class IdleReturn:
    cdef object _clock
    cdef bint _c_clock
    cdef object _returned
    cdef object _waiters
    cdef object _settle

    cpdef give_back(self, object entry, bint broken=*)

@cython.final
cdef class CallAnswer:
    cdef object _decode
    cdef bytes _start
    cdef object _errors

    @cython.locals(raw=bytes)
    cpdef object take(self, object data)

# CLOCK_MONOTONIC in seconds, as time.monotonic() reads it on Linux (no call into Python)
cdef extern from *:
    """
    #include <time.h>
    static double mcpsync_fast_monotonic(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
    }
    """
    double _c_monotonic "mcpsync_fast_monotonic"() noexcept
