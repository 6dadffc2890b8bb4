# JupyterHub for a class on one Linux server, as `python -m utils.classroom setup` lays it out.
# setup copies this file to PREFIX/jupyterhub_config.py beside the class record classroom.json
# (instructor, students, environment, the hub's state folder and address); start the hub as root
# in its state folder:
#
#     cd PREFIX/hub && PREFIX/env/bin/jupyterhub -f PREFIX/jupyterhub_config.py
#
# Users log in with their Unix password (PAM); each user's server is a local process running as
# that user in the shared environment, in their home folder. The hub listens where the record
# says: loopback unless the setup was given an address with a TLS certificate and key. With
# --slurm-partition each server is a Slurm job; with --hub-address too, on any node of the cluster.
import json
import os

c = get_config()  # noqa: F821 - provided by JupyterHub

_here = os.path.dirname(os.path.abspath(__file__))
with open(os.environ.get("CLASSROOM_RECORD", os.path.join(_here, "classroom.json"))) as _f:
    _class = json.load(_f)

c.JupyterHub.authenticator_class = "pam"
c.JupyterHub.spawner_class = "localprocess"
# only the class logs in; the instructor may start and stop everyone's server
c.Authenticator.allowed_users = {_class["instructor"], *_class["students"]}
c.Authenticator.admin_users = {_class["instructor"]}

# each user's server and kernels: the shared environment, started in the user's home
_bin = os.path.join(_class["env"], "bin")
c.Spawner.cmd = [os.path.join(_bin, "jupyterhub-singleuser")]
# each user's Jupyter runtime folder PREFIX/run/UID, theirs alone (0700; the setup makes it): the
# connection files and the Unix sockets of their kernels (the environment's etc/jupyter names
# the ipc transport), where no one else can reach them
_run = os.path.join(_class["prefix"], "run")


def _runtime_dir(spawner):
    import pwd
    return os.path.join(_run, str(pwd.getpwnam(spawner.user.name).pw_uid))


c.Spawner.environment = {"PATH": os.pathsep.join([_bin, "/usr/local/bin", "/usr/bin", "/bin"]),
                         "JUPYTER_RUNTIME_DIR": _runtime_dir}
c.Spawner.notebook_dir = "~"
c.Spawner.default_url = "/lab"
c.Spawner.start_timeout = 120

# The hub's state: root's folder, mode 0700 (the setup makes it): the database (users, cookie
# ids, server ports, hashed tokens), the cookie secret and the proxy's token, 0600.
_state = _class.get("hub_state") or os.path.join(_here, "hub")
c.JupyterHub.db_url = "sqlite:///" + os.path.join(_state, "jupyterhub.sqlite")
c.JupyterHub.cookie_secret_file = os.path.join(_state, "jupyterhub_cookie_secret")
with open(os.path.join(_state, "proxy_token")) as _f:
    c.ConfigurableHTTPProxy.auth_token = _f.read().strip()
c.ConfigurableHTTPProxy.pid_file = os.path.join(_state, "jupyterhub-proxy.pid")


def _checked_proxy_class():
    """JupyterHub's proxy, where a proxy left running by an earlier hub is stopped only when the
    process now at the PID its pid file holds is that proxy: running configurable-http-proxy and
    started no later than the file was written. JupyterHub's own signals whatever process has the
    number (as root), and after a reboot or a crash PIDs come round to others' processes."""
    import psutil
    from jupyterhub.proxy import ConfigurableHTTPProxy

    class CheckedPidProxy(ConfigurableHTTPProxy):
        def _check_previous_process(self):
            if not self.pid_file or not os.path.exists(self.pid_file):
                return
            try:
                written = os.stat(self.pid_file).st_mtime
                with open(self.pid_file) as f:
                    proc = psutil.Process(int(f.read().strip()))
                ours = proc.create_time() <= written + 1 and any("configurable-http-proxy" in a for a in proc.cmdline())
            except (OSError, ValueError, psutil.Error):
                proc, ours = None, False
            if ours:
                self.log.warning("Stopping the proxy an earlier hub left running (pid %s)", proc.pid)
                for stop in (proc.terminate, proc.kill):   # psutil's: never a later process with its PID
                    try:
                        stop()
                        proc.wait(3)
                        break
                    except psutil.TimeoutExpired:
                        continue
                    except psutil.Error:
                        break
            elif proc is not None:
                self.log.warning("The proxy pid file names pid %s, which is not the proxy now; left alone", proc.pid)
            self._remove_process_files()

    return CheckedPidProxy


c.JupyterHub.proxy_class = _checked_proxy_class()

# Where the hub listens: loopback (default, a privileged port), or an address the setup accepted only with TLS.
# Behind a reverse proxy with TLS on this server (setup --behind-proxy) it stays on loopback.
c.JupyterHub.bind_url = _class.get("bind_url") or "http://127.0.0.1:880"
# The hub's own port and the proxy's API: loopback, privileged ports (only root may listen there),
# so that no student can take one while the hub or its proxy restarts and receive the logins
# the proxy forwards or the token the hub sends.
c.JupyterHub.hub_bind_url = f"http://127.0.0.1:{_class.get('hub_port', 881)}"
c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{_class.get('proxy_api_port', 882)}"
# Each user's server on an origin of its own (https://NAME.HOST), where the setup was given
# --subdomain-host: a page a student's server serves cannot act on another user's server with
# that user's cookies. Without it every server shares the hub's origin (docs/instructors.md).
if _class.get("subdomain_host"):
    c.JupyterHub.subdomain_host = _class["subdomain_host"]
if _class.get("ssl_cert"):
    c.JupyterHub.ssl_cert = _class["ssl_cert"]
    c.JupyterHub.ssl_key = _class["ssl_key"]

# Each user's server as a Slurm job, where the setup was given --slurm-partition (docs/slurm.md):
# batchspawner's SlurmSpawner submits it as the user (sbatch through runuser, the hub being root),
# with the partition, memory, time limit and generic resources of the record, and the same
# command, environment and runtime folder as a local server. Homes, the exchange, the environment
# and PREFIX/run must be mounted at the same paths on the compute nodes.
_slurm = _class.get("slurm") or {}
if _slurm:
    import shutil as _shutil

    c.JupyterHub.spawner_class = "batchspawner.SlurmSpawner"
    # batchspawner runs it through its batchspawner-singleuser, which tells the hub the port it takes
    c.Spawner.cmd = [os.path.join(_bin, "jupyterhub-singleuser")]
    c.BatchSpawnerBase.batchspawner_singleuser_cmd = os.path.join(_bin, "batchspawner-singleuser")
    c.BatchSpawnerBase.exec_prefix = (_shutil.which("runuser") or "/usr/sbin/runuser") + " -u {username} --"
    c.BatchSpawnerBase.req_partition = _slurm["partition"]
    c.BatchSpawnerBase.req_memory = _slurm.get("memory") or ""
    c.BatchSpawnerBase.req_runtime = _slurm.get("time") or ""
    c.SlurmSpawner.req_gres = _slurm.get("gres") or ""
    # the Slurm commands read SLURM_CONF where the site sets it in the hub's environment
    c.Spawner.env_keep = ["PATH", "LANG", "LC_ALL", "JUPYTERHUB_SINGLEUSER_APP", "SLURM_CONF"]
    # a job may wait in the queue before its server starts
    c.Spawner.start_timeout = 600

# The servers' jobs on other nodes, where the setup was given --hub-address (docs/slurm.md): the hub's
# API on that one address of the cluster's network and each server on its node's address, every
# connection among the hub, its proxy and the servers over TLS with JupyterHub's own CA
# (internal_ssl: each side shows a certificate the CA signed and refuses a peer without one). The
# CA's keys stay in the hub's state folder, root's alone; each server's key and certificate go to
# its user's runtime folder (theirs alone, on the shared file system), where the job reads them.
_address = _class.get("hub_address") or ""
if _slurm and _address:
    import ipaddress as _ipaddress

    def _alt_name(host):
        try:
            return f"IP:{_ipaddress.ip_address(host)}"
        except ValueError:
            return f"DNS:{host}"

    _host = f"[{_address}]" if ":" in _address else _address
    c.JupyterHub.internal_ssl = True
    c.JupyterHub.internal_certs_location = os.path.join(_state, "internal-ssl")
    c.JupyterHub.trusted_alt_names = [_alt_name(_address)]
    c.JupyterHub.hub_bind_url = c.JupyterHub.hub_connect_url = f"https://{_host}:{_class.get('hub_port', 881)}"
    c.ConfigurableHTTPProxy.api_url = f"https://127.0.0.1:{_class.get('proxy_api_port', 882)}"
    # the job binds its server on its node's address as Slurm knows it (NodeAddr), where the proxy
    # reaches it: the hub names the host _NODE_ADDRESS (a name that resolves nowhere, so a job
    # without this prologue fails to start rather than listen on every address) and the job
    # puts its node's address in its place
    _NODE_ADDRESS = "node-address.invalid"
    c.BatchSpawnerBase.req_prologue = "\n".join([
        'node_addr=$(scontrol show node -o "$SLURMD_NODENAME" | tr " " "\\n" | sed -n "s/^NodeAddr=//p")',
        '[ -n "$node_addr" ] || { echo "no NodeAddr for node $SLURMD_NODENAME" >&2; exit 1; }',
        'case "$node_addr" in *:*) node_addr="[$node_addr]" ;; esac',
        f'export JUPYTERHUB_SERVICE_URL="${{JUPYTERHUB_SERVICE_URL/{_NODE_ADDRESS}/$node_addr}}"'])

    def _cluster_spawner():
        import asyncio
        import contextlib
        import pwd
        from urllib.parse import urlsplit

        from batchspawner import SlurmSpawner

        class ClusterSlurmSpawner(SlurmSpawner):
            """batchspawner's SlurmSpawner for servers on the partition's nodes, over internal_ssl."""

            async def nodes(self):
                """{node name: its address (NodeAddr)} for the partition's nodes, as sinfo lists them."""
                proc = await asyncio.create_subprocess_exec(
                    "sinfo", "-h", "-N", "-p", self.req_partition, "-o", "%N %o",
                    stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL)
                out, _ = await proc.communicate()
                return dict(line.split()[:2] for line in out.decode().splitlines() if len(line.split()) >= 2)

            def get_env(self):
                env = super().get_env()
                url = urlsplit(env["JUPYTERHUB_SERVICE_URL"])
                env["JUPYTERHUB_SERVICE_URL"] = url._replace(netloc=f"{_NODE_ADDRESS}:{url.port or 0}").geturl()
                return env

            async def start(self):
                name, port = await super().start()
                self.ip = (await self.nodes()).get(name, name)   # where the job's server listens
                return self.ip, port

            async def move_certs(self, paths):
                """The server's key and certificate and the CA bundle it trusts, copied into the
                user's runtime folder (0600, the user's); written through the folder's descriptor,
                never following a link the user left there. The hub keeps only its CA."""
                user = pwd.getpwnam(self.user.name)
                folder = _runtime_dir(self)
                dfd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
                moved = {}
                try:
                    if os.fstat(dfd).st_uid != user.pw_uid:
                        raise RuntimeError(f"{folder} is not {user.pw_name}'s: no certificates written there")
                    for kind, src in paths.items():
                        name = "jupyterhub-" + os.path.basename(src)
                        with contextlib.suppress(FileNotFoundError):
                            os.unlink(name, dir_fd=dfd)
                        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=dfd)
                        with open(fd, "wb") as f:
                            os.fchown(f.fileno(), user.pw_uid, user.pw_gid)
                            with open(src, "rb") as data:
                                f.write(data.read())
                        moved[kind] = os.path.join(folder, name)
                finally:
                    os.close(dfd)
                for kind in ("keyfile", "certfile"):
                    os.unlink(paths[kind])
                return moved

        return ClusterSlurmSpawner

    c.JupyterHub.spawner_class = _cluster_spawner()

    async def _node_names(spawner):
        """Each server's certificate names every node of its partition (the job's node is known
        only once the certificate is made) and, with an origin per user, the user's own host name,
        which the proxy checks it against."""
        nodes = await spawner.nodes()
        names = {_alt_name(host) for pair in nodes.items() for host in pair}
        if _class.get("subdomain_host"):
            names.add(f"DNS:{spawner.user.domain}")
        return sorted(names)

    c.Spawner.ssl_alt_names = _node_names
