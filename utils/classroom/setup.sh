#!/usr/bin/env bash
# A class on one Debian or Ubuntu server, from a bare machine, in one command (as root, in a clone
# of this repository; needs only bash and Python 3.11 or later):
#
#   bash utils/classroom/setup.sh --instructor NAME --students FILE [--create-users] [options]
#
# 1. the class server's system packages, and only those (utils/system_deps.sh --class-server:
#    bubblewrap, python3-venv, PAM, passwd; JupyterHub's proxy from npm, with nodejs and npm
#    where npm is missing);
# 2. the shared environment PREFIX/env (default /opt/prefill-decode/env), created empty when
#    missing, from a Python every user can run;
# 3. `python -m utils.classroom setup` in it, which installs the pins and its own copy of the
#    course package, and lays out the homes, the exchange, the course and the hub's state.
# The options are those of `python -m utils.classroom setup` (--help lists them), plus --prefix
# and --python. Safe to run again: the second run changes nothing and says so.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(dirname "$(dirname "$here")")"
prefix=/opt/prefill-decode
env=""
python="${PYTHON:-}"
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --prefix) prefix="$2"; shift 2 ;;
    --prefix=*) prefix="${1#*=}"; shift ;;
    --env) env="$2"; shift 2 ;;
    --env=*) env="${1#*=}"; shift ;;
    --python) python="$2"; shift 2 ;;
    --python=*) python="${1#*=}"; shift ;;
    -h|--help)
      sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'
      cd "$repo" && exec python3 -m utils.classroom setup --help ;;
    *) args+=("$1"); shift ;;
  esac
done
env="${env:-$prefix/env}"
case " ${args[*]-} " in
  *" --instructor "*|*" --instructor="*) ;;
  *) echo "usage: bash $0 --instructor NAME --students FILE [options] (--help lists them)" >&2; exit 2 ;;
esac
if [ "$(id -u)" != 0 ]; then
  echo "run it as root (it installs packages, creates the class's folders and sets their owners)" >&2
  exit 1
fi
if [ -z "$python" ]; then
  python="$(command -v python3 || true)"
  # a Python under a private home (pyenv in /root) cannot be run by the students: the system's
  [ -x /usr/bin/python3 ] && case "$python" in /usr/bin/*|/usr/local/bin/*) ;; *) python=/usr/bin/python3 ;; esac
fi
if [ -z "$python" ] || ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  echo "needs Python 3.11 or later (found: ${python:-none}); install it (apt-get install python3) or pass --python" >&2
  exit 1
fi
echo "system packages"
if ! bash "$repo/utils/system_deps.sh" --class-server | sed 's/^/  /'; then
  echo "the class server's packages could not all be installed (above)" >&2
  exit 1
fi
if [ ! -x "$env/bin/python" ]; then
  echo "environment"
  mkdir -p "$(dirname "$env")"
  "$python" -m venv "$env"
  echo "  created $env from $python"
fi
cd "$repo"
exec "$env/bin/python" -m utils.classroom --prefix "$prefix" setup --env "$env" --python "$python" "${args[@]}"
