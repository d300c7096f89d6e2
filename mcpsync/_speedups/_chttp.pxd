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
# body when p[0:n] is one whole answer of the common shape, else -1. The same rules as
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
    static Py_ssize_t mcpsync_simple_head(const char *data, Py_ssize_t n) {
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
        if (length < 0 || !json || n - i != length) return -1;
        return i;
    }
    """
    Py_ssize_t _simple_head "mcpsync_simple_head"(const char *data, Py_ssize_t n)

@cython.locals(at=Py_ssize_t)
cdef object _field(bytes head, bytes name)

@cython.locals(start=Py_ssize_t, at=Py_ssize_t, body=Py_ssize_t, head=bytes)
cpdef object simple_answer(bytes data)

@cython.final
cdef class JSONLane:
    cdef object exchange
    cdef object read_timeout
    cdef object limit
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
    cdef public bint open
    cdef public object legacy
    cdef public bint succeeded
