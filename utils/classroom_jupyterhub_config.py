# JupyterHub for a class on one Linux server, as `python -m utils.classroom setup` lays it out.
# setup copies this file to PREFIX/jupyterhub_config.py beside the class record classroom.json
# (instructor, students, environment); start the hub as root from a folder only root can read:
#
#     cd /srv/jupyterhub && PREFIX/env/bin/jupyterhub -f PREFIX/jupyterhub_config.py
#
# Users log in with their Unix password (PAM); each user's server is a local process running as
# that user in the shared environment, in their home folder. Put TLS in front (below).
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

# Public address. Serve it over TLS, here or in a reverse proxy in front of the hub:
# c.JupyterHub.ssl_cert = "/etc/letsencrypt/live/HOST/fullchain.pem"
# c.JupyterHub.ssl_key = "/etc/letsencrypt/live/HOST/privkey.pem"
c.JupyterHub.bind_url = "http://:8000"
