"""The scheduler's address, checked before connecting: one line for a web address, a port where
nothing listens, or a host that does not answer; Dask's own log lines kept quiet while connected."""

from __future__ import annotations

import logging
import os
import socket

SCHEDULER_ENV = "DASK_SCHEDULER_ADDRESS"   # what Dask's own tools read
CONNECT_TIMEOUT = 20.0                     # seconds to reach the scheduler and hear it answer


def scheduler_address(option: str | None = None) -> str | None:
    """The scheduler to grade on: --scheduler, else DASK_SCHEDULER_ADDRESS; None grades locally."""
    return option or os.environ.get(SCHEDULER_ENV) or None


def one_line(err: BaseException) -> str:
    text = (str(err).strip().splitlines() or [""])[0][:200]
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


def _host_port(address: str) -> tuple[str, int]:
    rest = address.strip().split("://", 1)[-1].rstrip("/")
    host, _, port = rest.rpartition(":")
    if not host or not port.isdigit():
        host, port = rest, "8786"   # Dask's default port
    return host.strip("[]"), int(port)


def address_problem(address: str) -> str | None:
    """One line when `address` cannot be a scheduler's address (a web address, an unknown scheme)."""
    a = address.strip()
    scheme = a.split("://", 1)[0].lower() if "://" in a else "tcp"
    if scheme in ("http", "https"):
        return (f"{address} is a web address (the scheduler's dashboard?): give the scheduler's own address, "
                f"tcp://HOST:8786 by default (`dask scheduler` prints it: 'Scheduler at: tcp://...')")
    if scheme not in ("tcp", "tls", "ucx", "inproc", "ws", "wss"):
        return f"{address}: not a Dask scheduler address (tcp://HOST:PORT, or tls://, ucx://)"
    return None


def unreachable(address: str, timeout: float) -> str | None:
    """One line when nothing accepts a connection at a tcp:// or tls:// address (at once for a
    closed port, within `timeout` s for a host that does not answer)."""
    if address.split("://", 1)[0].lower() not in ("tcp", "tls") and "://" in address:
        return None
    host, port = _host_port(address)
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as err:
        why = err.strerror or one_line(err)
        return (f"cannot reach the Dask scheduler at {address}: {why} (is `dask scheduler` running on "
                f"{host}, port {port}, and reachable from here?)")
    return None


_levels: dict[str, int] = {}


def quiet_dask(quiet: bool) -> None:
    """While the grader is connected, Dask's own log lines (a lost connection, its reconnection
    attempts, their tracebacks) stay quiet: the command says in one line what happened. Dask
    gives some of its loggers levels of their own (distributed.client...), so each is set."""
    if quiet:
        names = ["distributed", "tornado"] + [n for n in logging.root.manager.loggerDict
                                              if n.startswith(("distributed.", "tornado."))]
        for name in names:
            log = logging.getLogger(name)
            _levels.setdefault(name, log.level)
            log.setLevel(logging.CRITICAL + 1)
    else:
        for name, level in list(_levels.items()):
            logging.getLogger(name).setLevel(level)
            del _levels[name]
