"""The class's JupyterHub: where it listens (loopback unless served over TLS, on ports only root may
take), its state folder (root's alone, with the cookie secret and the proxy's token), the class
record it reads and its configuration (a copy of jupyterhub_config.py)."""

from __future__ import annotations

import ipaddress
import json
import re
from pathlib import Path
from urllib.parse import urlsplit

from utils.classroom.owned import folder, private_file, root_file, secret_file
from utils.classroom.room import LOCAL_ORIGINS, Classroom, ToolError

HUB_CONFIG_EXAMPLE = Path(__file__).with_name("jupyterhub_config.py")


def default_subdomain_host(bind_url: str, behind_proxy: bool, ssl_cert: str, one_origin: bool) -> str:
    """The origin per user a class gets where none is given: on loopback (and not served through a
    reverse proxy or with TLS, whose names need wildcard DNS), http://class.localhost:PORT, whose
    subdomains every browser resolves to this machine. "" (one origin) with --one-origin."""
    url = urlsplit(bind_url)
    if one_origin or behind_proxy or ssl_cert or not url.hostname:
        return ""
    try:
        loopback = ipaddress.ip_address(url.hostname).is_loopback
    except ValueError:
        loopback = url.hostname == "localhost"
    return f"http://{LOCAL_ORIGINS}:{url.port or 80}" if loopback else ""


def check_bind(room: Classroom) -> None:
    """The hub listens on loopback unless an address is named; then only over TLS (certificate and
    key given), or behind a reverse proxy, in which case the hub itself stays on loopback."""
    url = urlsplit(room.bind_url)
    if url.scheme not in ("http", "https") or not url.hostname:
        raise ToolError(f"--address {room.bind_url!r}: give HOST:PORT or http(s)://HOST:PORT")
    host = url.hostname
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = host == "localhost"
    if bool(room.ssl_cert) != bool(room.ssl_key):
        raise ToolError("give both --ssl-cert and --ssl-key, or neither")
    for f in (room.ssl_cert, room.ssl_key):
        if f and not Path(f).is_file():
            raise ToolError(f"no such file: {f}")
    if room.ssl_cert and url.scheme != "https":
        room.bind_url = url._replace(scheme="https").geturl()
    if room.subdomain_host:
        sub = urlsplit(room.subdomain_host)
        if sub.scheme not in ("http", "https") or not sub.hostname or sub.path not in ("", "/"):
            raise ToolError(f"--subdomain-host {room.subdomain_host!r}: give a URL such as https://class.example.org")
        if sub.scheme != "https" and sub.hostname != "localhost" and not sub.hostname.endswith(".localhost"):
            raise ToolError(f"--subdomain-host {room.subdomain_host}: use https (the users' servers would get cookies "
                            "and passwords over plain HTTP)")
    if loopback:
        return
    if room.behind_proxy:
        raise ToolError(f"--behind-proxy keeps the hub on loopback (the reverse proxy on this server reaches "
                        f"it there); leave out --address {host} or --behind-proxy")
    if not room.ssl_cert:
        raise ToolError(f"the hub would listen on {host} over plain HTTP, sending the class's Unix passwords in "
                        "clear: give --ssl-cert and --ssl-key, or keep it on loopback behind a reverse proxy "
                        "with TLS (--behind-proxy; docs/instructors.md shows one)")


_HOST_NAME = re.compile(r"(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,62}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,62}[A-Za-z0-9])?)*")


def check_hub_address(room: Classroom) -> None:
    """--hub-address: the hub's API on one address of the cluster's network, for servers that run
    as Slurm jobs on other nodes (then over TLS, internal_ssl); never loopback (the default
    without it), nor every address at once."""
    addr = room.hub_address
    if not addr:
        return
    if not room.slurm:
        raise ToolError(f"--hub-address {addr}: the hub's API leaves loopback only for servers that run on other "
                        "machines; give it with --slurm-partition, or leave it out")
    try:
        ip = ipaddress.ip_address(addr)
    except ValueError:
        ip = None
    if ip is None and not _HOST_NAME.fullmatch(addr):
        raise ToolError(f"--hub-address {addr!r}: give an IP address or a host name of this server")
    if (ip is None and (addr == "localhost" or addr.endswith(".localhost"))) or (
            ip is not None and (ip.is_loopback or ip.is_unspecified or ip.is_multicast)):
        raise ToolError(f"--hub-address {addr}: give this server's one address on the cluster's network (not "
                        "loopback, which is the default without it, nor every address)")


def unprivileged_port_start() -> int:
    """The lowest port an ordinary user may listen on (Linux: net.ipv4.ip_unprivileged_port_start)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_unprivileged_port_start").read_text())
    except (OSError, ValueError):
        return 1024


def check_ports(room: Classroom) -> None:
    """The public port, the hub's and the proxy API's: distinct, and each one only root may take."""
    public = urlsplit(room.bind_url).port or (443 if room.bind_url.startswith("https") else 80)
    ports = {"the hub's public port (--address)": public, "the hub's own port (--hub-port)": room.hub_port,
             "the proxy's API port (--proxy-api-port)": room.proxy_api_port}
    if len(set(ports.values())) != len(ports):
        raise ToolError(f"the hub's three ports must differ: {', '.join(f'{k} {v}' for k, v in ports.items())}")
    start = unprivileged_port_start()
    for what, port in ports.items():
        if not 0 < port < 65536:
            raise ToolError(f"{what}: {port} is not a port")
        if port >= start:
            raise ToolError(f"{what} is {port}, which any user may listen on (ports from {start} up are "
                            "unprivileged here): while the hub or its proxy restarts, a student holding it would "
                            "receive passwords or the proxy's token. Choose a port below " + str(min(start, 1024)) +
                            (" (and sysctl net.ipv4.ip_unprivileged_port_start=1024)" if start < 1024 else ""))


def hub_state(room: Classroom) -> None:
    """The hub's own folder: root's, 0700, with the cookie secret and the proxy's token in it
    (0600) and, once the hub runs, its database (users, cookie ids, hashed tokens)."""
    state = Path(room.hub_state)
    state.parent.mkdir(parents=True, exist_ok=True)
    folder(room, state, uid=0, mode=0o700, what="the hub's state folder, root alone")
    secret_file(room, state / "jupyterhub_cookie_secret", "the hub's cookie secret")
    secret_file(room, state / "proxy_token", "the token between the hub and its proxy")
    private_file(room, state / "jupyterhub.sqlite")


def hub_files(room: Classroom) -> Path:
    """The class record (PREFIX/classroom.json, 0644) and the hub's configuration beside it, a copy of
    jupyterhub_config.py (one that differs is kept, and said)."""
    prefix = Path(room.prefix)
    prefix.mkdir(parents=True, exist_ok=True)
    root_file(room, room.record, json.dumps(room.state(), indent=2, sort_keys=True) + "\n", "the class record")
    hub = prefix / "jupyterhub_config.py"
    example = HUB_CONFIG_EXAMPLE.read_text()
    if not hub.exists():
        hub.write_text(example)
        room.did(f"wrote {hub} (JupyterHub: PAM logins, one local process per user)")
    elif hub.read_text() != example:
        room.todo.append(f"{hub} differs from {HUB_CONFIG_EXAMPLE} and was kept; compare them")
    return hub
