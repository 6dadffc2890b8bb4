"""What the set-up needs to know about an environment, run by that environment's Python as a
program of its own, isolated (`python -I utils/classroom/env_probe.py PINS_JSON`: neither this
checkout nor the current folder is on its path, so `course` is found where the environment alone
puts it). Standard library only: it runs in an environment that may still be empty. Prints one
JSON object:

  course    the folder `course` is imported from, or null
  inside    whether that folder lies inside the environment (a copy, not an editable install)
  missing   the pins (NAME==VERSION) not installed at that version (a local label such as +cpu ignored)
  purelib   the environment's site-packages
  builds    whether setuptools can build a wheel there without downloading anything
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import sysconfig
from importlib.metadata import PackageNotFoundError, version


def missing(pins: list[str]) -> list[str]:
    out = []
    for pin in pins:
        name, want = pin.split("==")
        try:
            ok = version(name).split("+")[0] == want
        except PackageNotFoundError:
            ok = False
        if not ok:
            out.append(pin)
    return out


def builds_wheels() -> bool:
    for module in ("setuptools.command.bdist_wheel", "wheel.bdist_wheel"):
        try:
            if importlib.util.find_spec("setuptools") and importlib.util.find_spec(module):
                return True
        except ImportError:
            continue
    return False


def main() -> None:
    spec = importlib.util.find_spec("course")
    where = os.path.dirname(spec.origin) if spec and spec.origin else None
    inside = bool(where) and os.path.realpath(where).startswith(os.path.realpath(sys.prefix) + os.sep)
    print(json.dumps({"course": where, "inside": inside, "missing": missing(json.loads(sys.argv[1])),
                      "purelib": sysconfig.get_paths()["purelib"], "builds": builds_wheels()}))


if __name__ == "__main__":
    main()
