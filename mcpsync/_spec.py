"""A client's recipe that travels to worker processes, and one client per process.

A :class:`~mcpsync.Client` holds threads, pipes and sockets: it cannot cross a process
boundary. What travels (pickled by ``multiprocessing``, Ray, Dask or Celery) is a
:class:`ClientSpec`, and each worker process turns it into its own client with
:meth:`ClientSpec.client` (or :func:`process_client`): built once per process, shared by
the process's threads, closed when the process exits, and built anew in a child made by
``os.fork()`` (the parent's client belongs to the parent).

Secrets never travel in a spec: OAuth tokens come from the OS keyring of the machine the
worker runs on (``oauth=`` takes the arguments of :class:`mcpsync.auth.OAuth`, not an
instance), and a header value may name an environment variable (``"Bearer ${TOKEN}"``)
that is read in the worker.

Example:
    >>> import pickle
    >>> from mcpsync import ClientSpec
    >>> spec = ClientSpec.stdio("python", ["-m", "mcpsync.server.demo"], name="demo")
    >>> pickle.loads(pickle.dumps(spec)) == spec
    True
    >>> # in each worker process:
    >>> client = spec.client()                                     # doctest: +SKIP
    >>> client.call_tool("echo", {"message": "hi"}).text           # doctest: +SKIP
    'hi'
"""

from __future__ import annotations

import atexit
import dataclasses
import json
import logging
import os
import pickle
import re
import ssl
import sys
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping, Sequence

if TYPE_CHECKING:
    from ._client import Client

__all__ = ["ClientSpec", "process_client", "close_process_clients"]

log = logging.getLogger("mcpsync.spec")

_KINDS = ("stdio", "http", "sse", "websocket", "grpc", "config")
#: Header names whose literal values are credentials: they must come from the worker's
#: environment (``${VAR}``) or the keyring (``oauth=``), never from the spec.
_SECRET_HEADER = re.compile(r"authorization|cookie|token|secret|api[-_]?key|password", re.I)
#: Names of ``oauth=`` arguments and grant fields whose literal values are credentials (a
#: DPoP key, a token store holding tokens too: the worker makes its own)
_SECRET_FIELD = re.compile(r"secret|private_key|password|(^|_)token$|^dpop$|^storage$", re.I)
#: Keyword options that are live objects: a spec asks for their recipe instead.
_LIVE_OPTIONS = {
    "auth": "pass oauth={...} (the arguments of mcpsync.auth.OAuth): the worker builds its own OAuth, "
    "whose tokens come from that machine's OS keyring",
    "transport": "a spec names its transport by kind (ClientSpec.stdio/http/sse/websocket/grpc)",
    "token": "put the token in the worker's environment and send headers={'Authorization': 'Bearer ${VAR}'}",
}


def _freeze(value: Any) -> Any:
    """A hashable, comparable form of an option value (mappings sorted, lists as tuples)."""
    if isinstance(value, Mapping):
        return tuple(sorted((str(k), _freeze(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, (set, frozenset)):
        return frozenset(_freeze(v) for v in value)
    try:
        hash(value)
    except TypeError:  # an unhashable value that pickles: compared by its pickle
        return ("pickled", pickle.dumps(value))
    return value


@dataclass(frozen=True, eq=False)
class ClientSpec:
    """How to build a :class:`~mcpsync.Client`: a plain, picklable value.

    Make one with :meth:`stdio`, :meth:`http`, :meth:`sse`, :meth:`websocket`,
    :meth:`grpc` (the same arguments as the Client's constructors) or
    :meth:`from_config`; send it to workers; call :meth:`client` there.

    Every option must pickle (policies, strings, numbers, module-level functions);
    a lambda or a live object (an ``ssl.SSLContext`` as ``verify``, say) is refused when
    the spec is made, naming the option. Paths (``verify``, ``cert``) travel as they
    are: each worker reads them on its own machine.
    Two specs are equal when they build the same client, and each process keeps one
    client per distinct spec.

    Attributes:
        kind: ``"stdio"``, ``"http"``, ``"sse"``, ``"websocket"``, ``"grpc"`` or
            ``"config"`` (an ``mcpServers`` entry, expanded in the worker).
        target: the command and its arguments, the URL, or the config entry's name.
        options: the keyword options of the constructor.
        config: for ``"config"``: the ``mcpServers`` document (JSON text) holding the
            entry, its ``${VAR}`` templates unexpanded.

    Example:
        >>> from mcpsync import Timeouts
        >>> spec = ClientSpec.http("https://mcp.example.com/mcp", timeouts=Timeouts(request=10.0),
        ...                        headers={"Authorization": "Bearer ${MCP_TOKEN}"})
        >>> spec
        ClientSpec.http('https://mcp.example.com/mcp', headers=..., timeouts=Timeouts(connect=10.0, request=10.0, idle=300.0, keepalive=60.0, close=2.0, progress_cap=None, start=60.0))
    """

    kind: str
    target: tuple[Any, ...]
    options: tuple[tuple[str, Any], ...] = ()
    config: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in _KINDS:
            raise ValueError(f"kind must be one of {', '.join(_KINDS)}, not {self.kind!r}")
        opts = dict(self.options)
        for name, why in _LIVE_OPTIONS.items():
            if name in opts:
                raise TypeError(f"ClientSpec: option {name!r} cannot travel to workers; {why}")
        headers = opts.get("headers")
        if headers:
            for k, v in dict(headers).items():
                if _SECRET_HEADER.search(str(k)) and "${" not in str(v):
                    raise ValueError(
                        f"ClientSpec: header {k!r} holds a literal credential, which would travel with the spec; "
                        f"write it as '${{VAR}}' (read from the worker's environment) or use oauth= (OS keyring)"
                    )
        for name, value in (("verify", opts.get("verify")), ("oauth's verify", dict(opts.get("oauth") or {}).get("verify"))):
            if isinstance(value, ssl.SSLContext):
                raise TypeError(
                    f"ClientSpec: {name} is an ssl.SSLContext, which cannot travel to workers; pass what it is made "
                    "from instead: a CA file or directory, verify='system', and cert=(certfile, keyfile)"
                )
        for name, value in self.options:
            try:
                pickle.dumps(value)
            except Exception as exc:
                raise TypeError(
                    f"ClientSpec: option {name!r} cannot be pickled ({exc}); a spec travels to other processes, "
                    "so its options must be values or module-level functions"
                ) from None
        object.__setattr__(self, "_key", (self.kind, _freeze(self.target), _freeze(self.options), self.config))

    # ------------------------------------------------------------------ constructors

    @classmethod
    def _make(cls, kind: str, target: tuple[Any, ...], options: Mapping[str, Any], config: str | None = None) -> "ClientSpec":
        return cls(kind, target, tuple(sorted(options.items())), config)

    @classmethod
    def stdio(cls, command: str, args: Sequence[str] = (), **options: Any) -> "ClientSpec":
        """The recipe of ``Client.stdio(command, args, **options)``."""
        from .transports._factory import stdio_args

        return cls._make("stdio", (command, tuple(stdio_args(command, args))), options)

    @classmethod
    def http(cls, url: str, *, oauth: Mapping[str, Any] | None = None, **options: Any) -> "ClientSpec":
        """The recipe of ``Client.http(url, **options)``.

        Args:
            url: the MCP endpoint.
            oauth: the keyword arguments of :class:`mcpsync.auth.OAuth` (``grant`` with
                secrets as ``Env("NAME")``, ``scopes``, ``interactive=False`` ...); each worker
                builds its own OAuth for ``url`` with the default storage, the OS keyring.
            **options: the other keyword options of :meth:`Client.http`; header values
                may be ``${VAR}`` templates, expanded from the worker's environment.
        """
        if oauth is not None:
            options["oauth"] = dict(oauth)
        return cls._make("http", (url,), options)

    @classmethod
    def sse(cls, url: str, *, oauth: Mapping[str, Any] | None = None, **options: Any) -> "ClientSpec":
        """The recipe of ``Client.sse(url, **options)``; ``oauth`` as for :meth:`http`."""
        if oauth is not None:
            options["oauth"] = dict(oauth)
        return cls._make("sse", (url,), options)

    @classmethod
    def websocket(cls, url: str, **options: Any) -> "ClientSpec":
        """The recipe of ``Client.websocket(url, **options)``."""
        return cls._make("websocket", (url,), options)

    @classmethod
    def grpc(cls, target: str, **options: Any) -> "ClientSpec":
        """The recipe of ``Client.grpc(target, **options)``."""
        return cls._make("grpc", (target,), options)

    @classmethod
    def from_config(cls, source: str | os.PathLike[str] | Mapping[str, Any], name: str, **options: Any) -> "ClientSpec":
        """The recipe of server ``name`` of an ``mcpServers`` configuration.

        The entry is read and checked now (a bad entry raises :class:`ConfigError`
        here, not in every worker) and travels as written: its ``${VAR}`` templates are
        expanded in the worker, from the worker's environment, so secrets kept in
        variables never travel.

        Args:
            source: a configuration file's path, or the parsed document (a mapping).
            name: the server's key under ``mcpServers``.
            **options: keyword options of the Client; they win over the entry's.

        Raises:
            ConfigError: the document or the entry is invalid, or ``name`` is not in it.
        """
        from ._config import ConfigError, parse_config

        where = None
        if isinstance(source, Mapping):
            doc = source
        else:
            where = os.fspath(source)
            try:
                with open(where, encoding="utf-8") as fh:
                    doc = json.load(fh)
            except (OSError, ValueError) as exc:
                raise ConfigError(f"cannot read {where}: {exc}", source=where) from exc
        servers = doc.get("mcpServers") if isinstance(doc, Mapping) else None
        if not isinstance(servers, Mapping) or name not in servers:
            raise ConfigError(f"no server {name!r} under mcpServers", source=where, server=name)
        entry = {"mcpServers": {name: servers[name]}}
        try:
            parse_config(entry, source=where, strict=True)
        except ConfigError as exc:
            if "is not set" not in str(exc):
                raise  # a variable only the workers have is theirs to expand
        return cls._make("config", (name,), options, json.dumps(entry, sort_keys=True))

    # ------------------------------------------------------------------ value semantics

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ClientSpec) and self._key == other._key  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash(self._key)  # type: ignore[attr-defined]

    def __repr__(self) -> str:
        shown = ", ".join(f"{k}=..." if k in ("headers", "oauth", "env") else f"{k}={v!r}" for k, v in self.options)
        what = self.target[0] if self.kind != "stdio" else " ".join([self.target[0], *self.target[1]])
        return f"ClientSpec.{self.kind}({what!r}{', ' + shown if shown else ''})"

    def __reduce__(self) -> Any:
        oauth = dict(self.options).get("oauth")
        found = _literal_secrets(oauth, "oauth") if oauth is not None else []
        if found:  # pickled means sent: to a worker, a queue, a log
            raise TypeError(
                f"ClientSpec: {found[0]} holds a literal secret, which would travel with the spec; write it as "
                f"Env('NAME') (mcpsync.auth.Env: read from the worker's environment when its OAuth is made)"
            )
        return (ClientSpec, (self.kind, self.target, self.options, self.config))

    # ------------------------------------------------------------------ building

    def build(self, **overrides: Any) -> Client:
        """A new :class:`~mcpsync.Client` from this recipe (the caller owns and closes it).

        Most code wants :meth:`client` (one per process) instead.
        """
        from ._client import Client

        options = {**dict(self.options), **overrides}
        if self.kind == "config":
            from ._config import parse_config

            entry = parse_config(json.loads(self.config or "{}"))[self.target[0]]
            return Client.from_config(entry, **options)
        if "headers" in options and options["headers"] is not None:
            from ._config import expand

            options["headers"] = {k: expand(str(v), field=f"headers.{k}") for k, v in dict(options["headers"]).items()}
        options.pop("oauth", None)
        auth = self.oauth()
        if auth is not None:
            options["auth"] = auth
        if self.kind == "stdio":
            command, args = self.target
            return Client.stdio(command, list(args), **options)
        client: Client = getattr(Client, self.kind)(self.target[0], **options)
        return client

    def oauth(self) -> Any:
        """A new :class:`mcpsync.auth.OAuth` for this spec's ``oauth=`` arguments (None
        without them); its store is the default, the OS keyring of this machine."""
        args = dict(self.options).get("oauth")
        if args is None:
            return None
        from .auth import OAuth

        return OAuth(self.target[0], **args)

    def client(self) -> Client:
        """This process's client for the spec: see :func:`process_client`."""
        return process_client(self)


def _literal_secrets(value: Any, where: str, depth: int = 0) -> list[str]:
    """Where ``value`` (the ``oauth=`` arguments, a grant in them) holds a credential as a
    literal (a string, bytes, a key object) rather than an ``Env``."""
    if depth > 4 or value is None:
        return []
    if isinstance(value, Mapping):
        items: list[tuple[str, Any]] = [(str(k), v) for k, v in value.items()]
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        items = [(f.name, getattr(value, f.name, None)) for f in dataclasses.fields(value)]
        where = f"{where} ({type(value).__name__})"
    else:
        return []
    out: list[str] = []
    for name, v in items:
        at = f"{where}.{name}"
        if _SECRET_FIELD.search(name) and v is not None and not isinstance(v, bool) and type(v).__name__ != "Env" \
                and not callable(v):
            out.append(at)
        else:
            out += _literal_secrets(v, at, depth + 1)
    return out


# ----------------------------------------------------------------------------- one per process

_lock = threading.Lock()
_clients: dict[ClientSpec, Client] = {}
_pid = os.getpid()


def _forget_in_child() -> None:
    # After os.fork() the parent's clients belong to the parent: closing them here
    # would end its sessions (an HTTP DELETE, a stdin close). Forget them; the child
    # builds its own on first use.
    global _lock, _pid
    _lock = threading.Lock()  # a parent thread may have held it at the fork
    _clients.clear()
    _pid = os.getpid()


os.register_at_fork(after_in_child=_forget_in_child)


def process_client(spec: ClientSpec) -> Client:
    """This process's :class:`~mcpsync.Client` for ``spec``.

    Built on first use in each process (thread-safe: concurrent first calls get the
    same client), shared by every thread of the process, closed when the process exits
    (``atexit``), and built anew in a child made by ``os.fork()``. A client that was
    closed is replaced on the next call.

    Args:
        spec: the recipe.

    Returns:
        The process's client; do not close it yourself (see
        :func:`close_process_clients`).
    """
    client = _clients.get(spec)
    if client is not None and not client.closed and _pid == os.getpid():
        return client
    with _lock:
        if _pid != os.getpid():  # pragma: no cover - the at-fork hook did this already
            _forget_in_child()
        client = _clients.get(spec)
        if client is None or client.closed:
            client = _clients[spec] = spec.build()
            _close_at_exit()
            log.debug("process %d: built a client for %r", os.getpid(), spec)
        return client


_registered_pid = 0


def _close_at_exit() -> None:
    """Make sure this process closes its clients when it ends. ``atexit`` covers a
    normal exit and a ``spawn``ed ``multiprocessing`` child; a ``fork``ed one leaves
    through ``os._exit`` after running only ``multiprocessing``'s own finalizers, so
    one is registered there too (under ``_lock``)."""
    global _registered_pid
    if _registered_pid == os.getpid():
        return
    _registered_pid = os.getpid()
    util = sys.modules.get("multiprocessing.util")
    if util is not None:
        util.Finalize(None, close_process_clients, exitpriority=10)


def close_process_clients() -> None:
    """Close every client this process built with :func:`process_client` (at exit, or
    before a worker hands its process back)."""
    with _lock:
        clients = list(_clients.values())
        _clients.clear()
    for client in reversed(clients):
        try:
            client.close()
        except Exception:  # pragma: no cover - close is best effort at exit
            log.debug("closing a process client failed", exc_info=True)


atexit.register(close_process_clients)
