# JupyterHub for a class on one Linux server, as `python -m utils.classroom setup` lays it out.
# setup copies this file to PREFIX/jupyterhub_config.py beside the class record classroom.json
# (instructor, students, environment, the hub's state folder and address); start the hub as root
# in its state folder:
#
#     cd PREFIX/hub && PREFIX/env/bin/jupyterhub -f PREFIX/jupyterhub_config.py
#
# Users log in with their Unix password (PAM); each user's server is a local process running as
# that user in the shared environment, in their home folder. The hub listens where the record
# says: loopback unless the setup was given an address with a TLS certificate and key.
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
c.Spawner.environment = {"PATH": os.pathsep.join([_bin, "/usr/local/bin", "/usr/bin", "/bin"])}
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

# Where the hub listens: loopback (default), or an address the setup accepted only with TLS.
# Behind a reverse proxy with TLS on this server (setup --behind-proxy) it stays on loopback.
c.JupyterHub.bind_url = _class.get("bind_url") or "http://127.0.0.1:8000"
if _class.get("ssl_cert"):
    c.JupyterHub.ssl_cert = _class["ssl_cert"]
    c.JupyterHub.ssl_key = _class["ssl_key"]
