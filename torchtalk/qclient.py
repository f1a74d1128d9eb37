"""The client side of the query server (Note [Query server] in
torchtalk/qserver.py), and where its socket is: cheap to import, as
`torchtalk query` asks before it imports anything heavy.

Example:
    >>> ping(resolve_db(source="~/pytorch"))  # doctest: +SKIP
    {'pid': 4242, 'db': '...', 'socket': '/tmp/torchtalk-0/32f4f2afe9e62e9c.sock', 'warm': True, ...}
"""

from __future__ import annotations

import json
import os
import socket
import struct
from pathlib import Path

from torchtalk.paths import switched_on

PROTOCOL = 1
ENV = "TORCHTALK_SERVER"  # "0": `torchtalk query` never asks a server
CONNECT_TIMEOUT_S = 0.5  # to connect and, for a ping, to be answered
# the longest socket path, in bytes: sun_path holds 108 on Linux, 104 on
# macOS, its NUL included; a longer one cannot be bound or connected to
MAX_PATH = 100
NAME_LEN = len("0123456789abcdef.sock")  # a socket's name: 16 hex digits of the DB's path


# ------------------------------------------------------------------ where


def socket_dir(create: bool = False) -> Path | None:
    """The directory of this user's sockets: `$XDG_RUNTIME_DIR/torchtalk`, else
    `/tmp/torchtalk-<uid>`; the first that is (or, `create`, can be made) a
    directory of this user's that no one else can enter, with room for a
    socket's name within MAX_PATH. None when neither is."""
    base = os.environ.get("XDG_RUNTIME_DIR")
    tried = [Path(base) / "torchtalk"] if base else []
    for d in (*tried, Path(f"/tmp/torchtalk-{os.getuid()}")):
        if len(os.fsencode(d)) + 1 + NAME_LEN > MAX_PATH:
            continue
        if create:
            try:
                os.mkdir(d, 0o700)
            except FileExistsError:
                pass
            except OSError:
                continue
        if private_dir(d):
            return d
    return None


def private_dir(d: Path) -> bool:
    """`d` is a directory (not a link) owned by this user, closed to others."""
    import stat

    try:
        st = os.lstat(d)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o077


def socket_path(db: str | Path, create: bool = False) -> Path | None:
    """The socket a server of fact DB `db` listens at (None: no private directory).

    Example:
        >>> socket_path("/root/.cache/torchtalk/db/pytorch-v2.6.0-db853c0f65f9.duckdb")  # doctest: +SKIP
        PosixPath('/tmp/torchtalk-0/8c1f0e3a9b2d4c61.sock')
    """
    import hashlib

    d = socket_dir(create)
    if d is None:
        return None
    return d / (hashlib.sha1(str(Path(db).resolve()).encode()).hexdigest()[:16] + ".sock")  # NAME_LEN long


def peer_uid(sock: socket.socket) -> int:
    """The uid of the process at the other end of Unix socket `sock` (SO_PEERCRED)."""
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return struct.unpack("3i", creds)[1]


def same_user(sock: socket.socket) -> bool:
    """The peer of `sock` runs as this process's user."""
    try:
        return peer_uid(sock) == os.getuid()
    except OSError:
        return False


# ------------------------------------------------------------------ client


def enabled() -> bool:
    """Whether `torchtalk query` asks a server ($TORCHTALK_SERVER, default on)."""
    return switched_on(ENV)


def call(db: str | Path, message: dict, timeout: float | None = None, meanwhile=None) -> dict | None:
    """Send `message` to the server of `db`, return its reply; None when no
    server of this user answers, or its reply is cut short. `timeout`: for
    the reply too (None: connecting only is bounded). `meanwhile()` is run
    once the message is sent, while the server works on it."""
    path = socket_path(db)
    if path is None:
        return None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(CONNECT_TIMEOUT_S)
        sock.connect(str(path))
        if not same_user(sock):
            return None
        sock.settimeout(timeout)
        sock.sendall(json.dumps(message).encode() + b"\n")
        if meanwhile is not None:
            meanwhile()
        data = bytearray()
        while chunk := sock.recv(1 << 16):
            data += chunk
    except OSError:  # nobody listens (no file, a stale one), or it went away
        return None
    finally:
        sock.close()
    try:
        reply = json.loads(data)
    except ValueError:
        return None
    return reply if isinstance(reply, dict) else None


def ping(db: str | Path, timeout: float = CONNECT_TIMEOUT_S) -> dict | None:
    """The status of the server of `db` (`QueryServer.status`), or None when none answers."""
    return call(db, {"op": "ping", "protocol": PROTOCOL}, timeout)


def ask_query(request: dict, db: str | Path, out, err, note=None) -> int | None:
    """Have the server of `db` answer `torchtalk query`'s `request`
    (`torchtalk.cli.query.to_request`): its writes replayed on `out` and
    `err`, then, after an answer (exit 0), the stale-index note `note()`
    computes while the server works (None: none); its exit code returned;
    None when it was not answered there (nothing written then: the caller
    runs the query itself)."""
    said: list = []

    def meanwhile() -> None:
        try:
            said.append(note())
        except Exception as exc:  # noqa: BLE001 - the run in the process says it, after its answer
            said.append(exc)

    reply = call(db, {"op": "query", "protocol": PROTOCOL, "client": client_key(), **request},
                 meanwhile=meanwhile if note else None)
    if reply is None or "declined" in reply or (said and isinstance(said[0], Exception)):
        return None
    writes, code = reply.get("writes"), reply.get("code")
    if not isinstance(code, int) or not isinstance(writes, list) or not all(
            isinstance(w, list) and len(w) == 2 and w[0] in (1, 2) and isinstance(w[1], str) for w in writes):
        return None
    for fd, text in writes:
        (out if fd == 1 else err).write(text)
    if code == 0 and said and said[0]:
        err.write(said[0])
    return code


def client_key() -> dict:
    """What must be the same on both sides for the server's answer to be this
    process's: the torchtalk package (its code and its rules), its version,
    the config dir (the user's rules)."""
    import torchtalk
    from torchtalk.paths import config_dir

    return {"package": os.path.dirname(os.path.abspath(torchtalk.__file__)), "version": torchtalk.__version__,
            "config": str(config_dir())}
