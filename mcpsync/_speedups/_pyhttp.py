"""The Streamable HTTP transport's common request in one call: :class:`JSONLane`, the
answer it takes as it comes (:func:`simple_answer`), and the facts of each outgoing
message the layer above hands it (:func:`facts_of`, ``_channel.message_facts``).

A request whose answer is the common one (``200``, ``Content-Length``, ``application/json``,
the whole of it in the first read) needs none of the general path's layers: the lane
takes an idle kept-alive socket, writes the request (its header lines encoded once per
kind of request, the auth hook's merged in once per change of its headers), reads the
answer, checks its head in one pass and hands the body to the receive queue, the socket
back to its pool. Everything else (no idle socket, no facts, a first request, an answer
of any other shape, an error) goes the general way, the answer already read handed on
as it is (see ``streamable_http``): the lane decides before it sends whether it serves
a request, and after it reads whether it understood the answer, never half of either.

This file is the single source of both implementations: imported as is it is the
pure-Python twin; ``setup.py`` compiles a copy of it with Cython (pure-Python mode,
types from ``_chttp.pxd``) into the ``_chttp`` extension. Keep it in the subset of
Python that Cython compiles unchanged.
"""

import queue
import re
import time

from msgspec import Raw as _Raw

try:  # compiled, ``cython.compiled`` is True (Cython resolves it); imported as is, False
    import cython
except ImportError:  # the pure-Python package: Cython is only a build requirement
    _COMPILED = False
else:
    _COMPILED = cython.compiled

__all__ = ["JSONLane", "simple_answer", "facts_of"]

_CHUNK = 65536  # the first read of an answer (the fast path's own)
_MAX_FIELDS = 100  # as the general path allows (_fastconn.MAX_FIELDS)
#: the head of an answer the lane takes: HTTP/1.1 200, fields of a token name and visible
#: ASCII (or tab) values, CRLF line ends; anything else (a bare LF, a folded line, bytes past
#: ASCII, whitespace before a colon) is the general parser's (httptools) to judge
_HEAD = re.compile(rb"HTTP/1\.1 200 [\x20-\x7e]*\r\n((?:[!#$%&'*+\-.^_`|~0-9A-Za-z]+:[\t\x20-\x7e]*\r\n)*)\r\n")
#: fields that make an answer the general path's: framing, codings, cookies, protocol switches
_OTHERS = (b"\ntransfer-encoding:", b"\ncontent-encoding:", b"\nset-cookie:", b"\nupgrade:", b"\nproxy-connection:")
_JSON = b"application/json"
_ANSWER = b'{"jsonrpc":"2.0","id":'
_RESULT = b',"result":'
_LARGE = 1 << 62  # request ids checked in C (as long long) below this
_NO_WAIT, _NO_TIMEOUT = (False,), (None,)  # (the pure twin's take: see JSONLane.wait_first)


def _field(head, name):
    """The value (leading whitespace cut) of the field ``name`` (b"\\nname:") in ``head``
    (lower-cased, from the status line's LF to its last field's CRLF); None when it is
    missing, b"\\n" (never a value) when it is there twice."""
    at = head.find(name)
    if at < 0:
        return None
    if head.find(name, at + len(name)) >= 0:
        return b"\n"
    return head[at + len(name):head.find(b"\r", at)].lstrip(b" \t")


def simple_answer(data):
    """The body of ``data`` when it is one whole answer of the common shape, else None.

    The shape: ``HTTP/1.1 200``, at most 100 fields, one ``Content-Length`` whose body is
    exactly the rest of ``data``, one ``Content-Type: application/json``, no
    ``Transfer-Encoding``, ``Content-Encoding``, ``Set-Cookie``, ``Upgrade``,
    ``Proxy-Connection``, and ``Connection`` only as ``keep-alive``. What this takes, the
    general parser reads alike (tests/unit/test_simple_answer.py holds the two side by side).
    Names and the values of ``Content-Type`` and ``Connection`` are read ignoring case.
    """
    if _COMPILED:  # the same rules in one pass over the bytes (_chttp.pxd)
        declared = 0
        at = _simple_head(data, len(data), cython.address(declared))
        return data[at:] if at >= 0 and len(data) - at == declared else None
    m = _HEAD.match(data)
    if m is None:
        return None
    start = m.start(1) - 1  # the status line's LF: every field's name follows one
    head = data[start:m.end(1)].lower()
    if head.count(b"\n") > _MAX_FIELDS + 1:
        return None
    for name in _OTHERS:
        if head.find(name) >= 0:  # (not ``in``: bytes' ``in`` tries the name as an int first, an exception)
            return None
    length = _field(head, b"\ncontent-length:")
    if length is None or not length.isdigit() or len(length) > 15:
        return None
    body = m.end()
    if len(data) - body != int(length):
        return None
    ctype = _field(head, b"\ncontent-type:")
    if ctype != _JSON:
        return None
    keep = _field(head, b"\nconnection:")
    if keep is not None and keep != b"keep-alive":
        return None
    return data[body:]


class JSONLane:
    """One Streamable HTTP transport's common request, sent and answered in one call.

    Built by the transport from what it holds, and kept told of what changes:

    * ``exchange`` — its :class:`~mcpsync.transports._http_exchange.HTTPExchange` (the URL,
      the client's pools, :meth:`failure` to translate a transport error);
    * ``options`` — its ``HTTPOptions`` (read timeout, auth hook, size limit);
    * ``put`` — the receive queue's put; ``kinds`` / ``remember`` — what a URL speaks;
    * ``blocks`` — the transport's header blocks by kind of request (``_headers``' cache);
    * ``general(message, timeout, facts)`` — the transport's general send;
    * ``answered(message, facts, deadline, read, block, sent, resp)`` — the general path
      from an answer this lane read but does not take (a ``FastResponse``; ``block`` the
      kind's headers, ``sent`` those sent: the auth hook's merged in);
    * ``delivered(message, facts, body)`` — the general path for a 200 JSON body that is
      not this request's plain result (an error answer, a batch, another id);
    * ``resume(pool, conn, chunk, deadline, read)`` — the general parser's reading of an
      answer from its first read on (``_fasthttp.resume``);
    * ``auth_failed(exc, url)`` / ``auth_merge(auth, block, given, url)`` — the auth hook's
      failure as the general path tells it, and its headers merged into a block;
    * ``wire_of(block)`` — a header block's wire form, made and kept (``_fasthttp.wire_of``);
    * ``first`` — the transport's ``next_message`` box; ``take(block, timeout)`` — the receive
      queue's ``get``; ``waiting(timeout)`` — the transport's ``wait_first`` past its first
      step (what is in ``first`` when it is not a plain message, or the wait for one).

    ``open`` (False once the transport closed or switched to HTTP+SSE), ``legacy`` (the
    legacy era's header kind: the session id and version, None before a session) and
    ``succeeded`` (a POST was answered) are the transport's to set; the lane sets
    ``succeeded`` too.
    """

    def __init__(self, exchange, options, put, kinds, remember, blocks, general, answered, delivered, resume,
                 auth_failed, auth_merge, wire_of, first, take, waiting):
        self.exchange = exchange
        self.read_timeout = options.read_timeout
        self.limit = options.max_message_size
        self.auth = options.auth
        self.put = put
        self.kinds = kinds
        self.remember = remember
        self.blocks = blocks
        self.general = general
        self.answered = answered
        self.delivered = delivered
        self.resume = resume
        self.auth_failed = auth_failed
        self.auth_merge = auth_merge
        self.wire_of = wire_of
        self.first = first
        self.take = take
        self.waiting = waiting
        self.open = True
        self.legacy = None
        self.succeeded = False
        # what the last requests found, each one tuple replaced whole (so that a thread reads
        # one consistent set whatever others do meanwhile): the route (the client's pools, the
        # URL, the cookie jar, the origin's pool, its lock, its idle list (one list for the
        # pool's life), its size, the request line's rest, the Host line); the kind's header
        # block (the legacy key, or the modern era's version, method and name: compared by
        # identity). (The auth hook's last merge is the block's own: HeaderBlock.authed.)
        self._way = (None, None, None, None, None, None, 0, b"", b"")
        self._kind = (None, None, None, None, None)

    def _route(self, pools, url):
        """The route to ``url`` through ``pools`` (kept as ``_way``), or None when the
        general path must find it (urllib3's pools, a URL not requested yet)."""
        if not pools.fast:
            return None
        target = pools.main.targets.get(url)
        if target is None:
            return None
        origin = target[0]
        way = (pools, url, pools.cookies, origin, origin.lock, origin.idle, origin.maxsize, target[1], target[2])
        self._way = way
        return way

    def wait_first(self, timeout):
        """The transport's ``wait_first`` for a reader alone: the next queued message (an
        answer the lane put there on its way back) moved into ``first``, True; what is not a
        plain message, or nothing queued yet: the transport's own wait, given the rest of
        ``timeout``. The move keeps no point between the take and the keeping where a signal
        handler runs (compiled, it is C; pure, a ``for`` stores the take into the box)."""
        first = self.first
        if first[0] is None:
            try:
                if _COMPILED:
                    first[0] = self.take(False, None)
                else:
                    for first[0] in map(self.take, _NO_WAIT, _NO_TIMEOUT):
                        break
            except queue.Empty:
                return self.waiting(timeout)
        if first[0].__class__ is bytes:
            return True
        return self.waiting(timeout)

    def send(self, message, timeout=None, facts=None):
        """Send ``message`` (its answer goes to the receive queue), as the transport's
        ``send`` does: here when it is a request the lane serves, else the general way."""
        if facts is None or not self.open:
            return self.general(message, timeout, facts)
        rid = facts.id
        if rid.__class__ is not int or message[:1] != b"{":
            return self.general(message, timeout, facts)
        version = facts.modern_version
        method = facts.method
        if method == "initialize":
            return self.general(message, timeout, facts)
        if version is None:
            key = self.legacy
            if key is None:
                return self.general(message, timeout, facts)
            kind = self._kind
            if key is kind[0]:  # the kind of the last request (blocks are made by content: still its)
                block = kind[4]
            else:
                block = self.blocks.get(key)  # made by the general path's first request of the kind
                if block is not None:
                    self._kind = (key, None, None, None, block)
        elif not facts.headers:
            name = facts.name
            kind = self._kind
            if version is kind[1] and method is kind[2] and name is kind[3]:
                block = kind[4]
            else:
                block = self.blocks.get(("M", version, method, name))
                if block is not None:
                    self._kind = (None, version, method, name, block)
        else:
            return self.general(message, timeout, facts)  # headers of the call's own (Mcp-Param-*)
        if block is None or timeout is None or timeout <= 0:
            return self.general(message, timeout, facts)  # (formatted, checked, timed there)
        exchange = self.exchange
        pools = exchange.pools
        url = exchange.url
        if pools is None:
            return self.general(message, timeout, facts)
        way = self._way
        if pools is not way[0] or url is not way[1]:
            way = self._route(pools, url)
            if way is None:
                return self.general(message, timeout, facts)
        if way[2].held:
            return self.general(message, timeout, facts)  # (the jar's headers are merged there)
        sent = block
        auth = self.auth
        if auth is not None:
            try:  # (asked on every request, as the general path asks it)
                given = auth.headers(url, "POST")
            except Exception as exc:
                error = self.auth_failed(exc, url)
                if error is exc:
                    raise
                raise error from exc
            last = block.authed  # (the kind's last merge: the hook, a copy of its headers, the merged block)
            if last is not None and last[0] is auth and (_same_headers(given, last[1]) if _COMPILED else given == last[1]):
                sent = last[2]  # the same again
            else:
                sent = self.auth_merge(auth, block, given, url)
            wire = sent.wire
            if wire is None:
                wire = self.wire_of(sent)  # (a new merge: checked already)
        else:
            wire = block.wire
            if wire is None:
                wire = self.wire_of(block)
        pool = way[3]
        idle = way[5]
        conn = None
        if _COMPILED:  # (no signal is handled between these C calls)
            lock = way[4]
            lock.acquire()
            try:
                if idle:
                    conn = idle.pop()
            finally:
                lock.release()
        else:
            with pool.lock:
                if idle:
                    conn = idle.pop()
        if conn is None:
            return self.general(message, timeout, facts)  # (the general path waits or connects)
        read = self.read_timeout
        if timeout < read:
            read = timeout if timeout > 0.001 else 0.001
        deadline = (_c_monotonic() if _COMPILED else time.monotonic()) + timeout
        line = way[7]
        host = b"" if wire[1] else way[8]
        head = wire[0]
        body = chunk = resp = None
        state = -2
        try:
            fd = conn.fd
            if _COMPILED and fd >= 0:
                # one call into C (_chttp.pxd): the idle socket checked, the request written,
                # the answer's first read taken, and checked, as the lines below do
                got = _exchange(fd, line, len(line), host, len(host), head, len(head), message, len(message),
                                read, deadline, self.limit, cython.address(state))
                if state == 1:
                    body = got
                elif state == 0:
                    chunk = got
            else:
                poller = conn.poller
                if not (poller.poll(0) if poller is not None else conn.dropped()):  # (else closed while idle)
                    sock = conn.sock
                    sock.settimeout(read)
                    sock.sendall(b"".join((b"POST", line, host, head, b"Content-Length: ",
                                           str(len(message)).encode("ascii"), b"\r\n\r\n", message)))
                    chunk = sock.recv(_CHUNK)
                    body = simple_answer(chunk)
                    if body is not None and len(body) <= self.limit:
                        chunk = None
                    else:
                        body = None
            if chunk is not None:  # the general parser's now: it gives the socket back or closes it
                held, conn = conn, None
                held.sock.settimeout(read)  # (its later reads keep to it)
                resp = self.resume(pool, held, chunk, deadline, read)
        except BaseException as exc:
            if conn is not None:
                pool.discard(conn)
            if isinstance(exc, Exception):
                raise exchange.failure(exc, url) from exc
            raise
        if resp is not None:
            self.answered(message, facts, deadline, read, block, sent, resp)
            return None
        if body is None:  # the server closed the idle socket (or wrote to it unasked): nothing was sent
            pool.discard(conn)
            return self.general(message, timeout, facts)
        if _COMPILED:  # given back, as _OriginPool.put does
            lock = way[4]
            lock.acquire()
            try:
                if not pool.closed and len(idle) < way[6]:
                    idle.append(conn)
                    if pool.waiting:
                        pool.cond.notify()
                    conn = None
            finally:
                lock.release()
        else:
            with pool.lock:
                if not pool.closed and len(idle) < way[6]:
                    idle.append(conn)
                    if pool.waiting:
                        pool.cond.notify()
                    conn = None
        if conn is not None:
            pool.put(conn)  # no room, or closed: closed and counted out there
        self.succeeded = True
        if self.kinds.get(url) != "streamable":
            self.remember(url, "streamable")
        if _COMPILED and rid < _LARGE and rid >= 0:
            if _is_result(body, len(body), rid):
                self.put(body)
                return None
        elif body.startswith(_ANSWER + str(rid).encode("ascii") + _RESULT) and body.endswith(b"}"):
            self.put(body)
            return None
        self.delivered(message, facts, body)
        return None


# ------------------------------------------------------------------ a message's facts


def facts_of(facts_type, safe_methods, name_keys, meta_version, mapping):
    """``_channel.message_facts``, made of ``_channel``'s own parts: the facts type (a
    msgspec Struct: id, method, modern_version, name, safe_to_resend, cancels, headers), the
    methods safe to resend, the params member each method names, where ``_meta`` names the
    version, and the Mapping ABC. The one implementation; see ``_channel.message_facts``."""
    lane = _Facts(facts_type, safe_methods, name_keys, meta_version, mapping)
    return lane.facts


class _Facts:
    """The parts :func:`facts_of` binds, and the last undecoded ``_meta`` read with the
    version it names (replaced whole: safe across threads)."""

    def __init__(self, facts_type, safe_methods, name_keys, meta_version, mapping):
        self.facts_type = facts_type
        self.safe = safe_methods
        self.name_keys = name_keys
        self.meta_version = meta_version
        self.mapping = mapping
        self.raw_meta = (None, None)

    def version_of(self, meta):
        """The protocol version a (decoded) ``_meta`` names, or None."""
        if type(meta) is not dict and not isinstance(meta, self.mapping):
            return None
        version = meta.get(self.meta_version)
        return version if type(version) is str else None

    def facts(self, id, method, params, decode=None, headers=None):
        """See ``_channel.message_facts``."""
        if params is None:
            return self.facts_type(id, method, None, None, method in self.safe, None, headers)
        if type(params) is not dict and not isinstance(params, self.mapping):
            return None
        get = params.get
        modern = name = cancels = None
        meta = get("_meta")
        if meta is not None:
            if type(meta) is _Raw and decode is not None:
                # undecoded JSON, the same object call after call (a session encodes its _meta
                # once per value): its version is kept with it, so it is decoded only when new
                known = self.raw_meta
                if known[0] is meta:
                    modern = known[1]
                else:
                    modern = self.version_of(decode(meta))
                    self.raw_meta = (meta, modern)
            else:
                # exact types first: isinstance(…, Mapping) goes through the ABC machinery
                if type(meta) is not dict and not isinstance(meta, self.mapping):
                    meta = decode(meta) if decode is not None else None
                modern = self.version_of(meta)
        if method == "tools/call":
            tool = get("name")
            name = tool if type(tool) is str else None
        elif method == "notifications/cancelled":
            cancels = get("requestId")
        elif method is not None:
            key = self.name_keys.get(method)
            if key is not None:
                value = get(key)
                name = value if type(value) is str else None
        return self.facts_type(id, method, modern, name, method in self.safe, cancels, headers)
