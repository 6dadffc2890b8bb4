"""`teardown`: what the set-up wrote into the users' Jupyter configuration and the profile script
taken out; the course's exchange folder and the environment removed only when asked. Accounts,
homes and the course directory are kept."""

from __future__ import annotations

import shutil
from pathlib import Path

from utils.classroom.room import DEFAULT_PROFILE_SCRIPT, MARK, load_record, require_root
from utils.classroom.user_config import run_as, spec
from utils.classroom.users import exists


def teardown(prefix: Path, delete_exchange: bool, delete_env: bool) -> list[str]:
    require_root()
    state = load_record(prefix)
    done = []
    python = Path(state["env"]) / "bin" / "python"
    for name in [state["instructor"], *state["students"]]:
        if not exists(name) or not python.exists():
            continue
        res = run_as(name, python, "undo", spec(instructor=False))
        done += [f"{name}: {line}" for line in res.stdout.splitlines()]
        if res.returncode != 0:
            done.append(f"{name}: could not undo the configuration: {res.stderr.strip()[-300:]}")
    script = Path(state.get("profile_script", DEFAULT_PROFILE_SCRIPT))
    if script.is_file() and MARK in script.read_text():
        script.unlink()
        done.append(f"removed {script}")
    if delete_exchange:
        course = Path(state["exchange"]) / state["course_id"]
        if course.exists():
            shutil.rmtree(course)
            done.append(f"removed {course} (the submissions in it too)")
    if delete_env and Path(state["env"]).exists():
        shutil.rmtree(state["env"])
        done.append(f"removed {state['env']}")
    return done
