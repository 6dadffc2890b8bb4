"""A user's own Jupyter configuration for the class, written or taken out by that user.

The set-up copies this file into the class's environment as the module `prefill_decode_user_jupyter`
and runs it as each user (their uid, their home), so that root never writes through a link a user
planted in ~/.jupyter:

    python -I -m prefill_decode_user_jupyter write SPEC_JSON    # merge the class's settings in
    python -I -m prefill_decode_user_jupyter undo SPEC_JSON     # take them out again

SPEC_JSON: {"instructor": bool, "lab": [lab extensions], "server": [server extensions], "mark":
the line that marks the files the set-up wrote, "nbgrader_config": the text of nbgrader_config.py}.
`write` switches nbgrader's instructor extensions off for a student and on for the instructor,
writes ~/.jupyter/nbgrader_config.py unless the user wrote one of their own (then it prints
"KEPT PATH"), and prints, last, the JSON list of the files it changed. `undo` removes what `write`
added and leaves the user's other settings. Standard library only."""

from __future__ import annotations

import json
import os
import sys


def _load(path: str) -> dict:
    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError:
        return {}


def _save(path: str, text: str, changed: list[str]) -> None:
    try:
        with open(path) as f:
            if f.read() == text:
                return
    except FileNotFoundError:
        pass
    tmp = path + ".tmp-classroom"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)
    changed.append(path)


def _json(data: dict) -> str:
    return json.dumps(data, indent=2, sort_keys=True) + "\n"


def write(spec: dict) -> None:
    jdir = os.path.join(os.path.expanduser("~"), ".jupyter")
    os.makedirs(os.path.join(jdir, "labconfig"), exist_ok=True)
    changed: list[str] = []
    page = os.path.join(jdir, "labconfig", "page_config.json")
    data = _load(page)
    off = data.setdefault("disabledExtensions", {})
    for ext in spec["lab"]:
        if spec["instructor"]:
            off.pop(ext, None)
        else:
            off[ext] = True
    _save(page, _json(data), changed)
    server = os.path.join(jdir, "jupyter_server_config.json")
    data = _load(server)
    exts = data.setdefault("ServerApp", {}).setdefault("jpserver_extensions", {})
    for ext in spec["server"]:
        exts[ext] = bool(spec["instructor"])
    _save(server, _json(data), changed)
    nbcfg = os.path.join(jdir, "nbgrader_config.py")
    try:
        with open(nbcfg) as f:
            old = f.read()
    except FileNotFoundError:
        old = ""
    if old and spec["mark"] not in old:
        print("KEPT " + nbcfg)
    else:
        _save(nbcfg, spec["nbgrader_config"], changed)
    print(json.dumps(changed))


def undo(spec: dict) -> None:
    jdir = os.path.join(os.path.expanduser("~"), ".jupyter")
    nbcfg = os.path.join(jdir, "nbgrader_config.py")
    if os.path.exists(nbcfg):
        with open(nbcfg) as f:
            ours = spec["mark"] in f.read()
        if ours:
            os.remove(nbcfg)
            print("removed " + nbcfg)
    for path, keys in ((os.path.join(jdir, "labconfig", "page_config.json"), ("disabledExtensions",)),
                       (os.path.join(jdir, "jupyter_server_config.json"), ("ServerApp", "jpserver_extensions"))):
        try:
            with open(path) as f:
                data = json.load(f)
        except (FileNotFoundError, ValueError):
            continue
        inner = data
        for k in keys:
            inner = inner.get(k, {}) if isinstance(inner, dict) else {}
        names = spec["lab"] if keys[0] == "disabledExtensions" else spec["server"]
        if any(n in inner for n in names):
            for n in names:
                inner.pop(n, None)
            with open(path, "w") as f:
                json.dump(data, f, indent=2, sort_keys=True)
            print("restored nbgrader's extensions in " + path)


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("write", "undo"):
        print("usage: python -m prefill_decode_user_jupyter write|undo SPEC_JSON", file=sys.stderr)
        return 2
    (write if argv[0] == "write" else undo)(json.loads(argv[1]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
