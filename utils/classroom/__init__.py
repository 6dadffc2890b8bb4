"""A class on one server: the set-up (python -m utils.classroom, as root), the exchange, the hub and
the students' Lab. One job a file:

    server_admin.py     python -m utils.classroom setup|add-student|teardown: options, summary
    provision.py        `setup` and `add-student`: the steps below, in order
    teardown.py         `teardown`: the users' configuration taken out; exchange, environment on request
    room.py             the class (who, where; its record PREFIX/classroom.json), names, root
    owned.py            a path with the owner and mode it must have: made, repaired or refused
    users.py            accounts, private homes, the instructor's group, running as a user
    environment.py      the shared environment: requirements-classroom.txt, its own copy of course/
    env_probe.py          run by that environment's Python: what is installed there, and where
    user_jupyter.py       run as each user from the environment: their ~/.jupyter written or undone
    exchange.py           the students' private submit, installed in the environment
    exchange_layout.py  nbgrader's exchange: the root and the course's folders, the instructor's
    course_folder.py    the checkout closed; the instructor's copy of the course
    user_config.py      each user's Jupyter configuration; the environment on PATH in login shells
    kernels.py          kernels on Unix sockets in each user's runtime folder; no debugger port
    hub.py              the hub's address and ports, its state, the record and its configuration
    disk.py             quotas: what the set-up cannot set, said
    jupyterhub_config.py  the hub's configuration (copied to PREFIX/)
    setup.sh, packages.txt  from a bare Debian or Ubuntu server: the system packages, then the above
    student-lab/        the students' Lab settings (make lab; copied into the class's environment)
    term.py             python -m utils.classroom.term: the instructor's term, one command each:
      roster.py           the class list into the gradebook
      release.py          a lesson built and released to the exchange
      collect.py          collect from the exchange: only what each student owns, capped
      lms_import.py       zip-collect: uploads attributed by the LMS's names, read under caps per student
      feedback.py         feedback generated and released
      course_commands.py  nbgrader run in the course, with the class's exchange
    rehearsal.py        a throwaway course of two tiny lessons to rehearse the term on

Everything the set-up runs uses the standard library alone: on a bare server it runs before the
environment that holds the rest exists.
"""
