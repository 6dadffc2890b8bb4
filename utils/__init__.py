"""Instructor tools for the Prefill and Decode course (run as `python -m utils.<tool>`).

Each folder one job, each module here one thing the tools share:

    grading/      python -m utils.grading: autograde submissions (map in grading/__init__.py)
    sandbox/      the bubblewrap sandbox every grading kernel runs in
    classroom/    a class on one server: set-up, exchange, hub and student-lab configuration
    authoring/    build, check, demo and the sample submissions
    bench/        benchmarks: the toy model, grading throughput, the cluster, the GPU check

    errors.py     ToolError: a problem the instructor must fix, named in one message
    lessons.py    where the lessons are: REPO, lessons(), source_notebook(), resolve_lessons()
    notebooks.py  nbgrader cells: nbgrader_meta(), graded_cells(), the solution and hidden-test
                  markers, strip_markers(), submission_from() (a release with chosen solutions)
    processes.py  running nbgrader (nbgrader(), nbgrader_env()), BoundedLog (what a process
                  printed, bounded as it is read), kill_tree(), log_tail()
    scratch.py    throwaway courses with a gradebook of their own: scratch_config(), scratch_course()
    scores.py     a gradebook's scores: read_scores(), read_scores_url(), score_table(), and
                  alembic_on_path() for nbgrader's Gradebook
    escaping.py   names and text from submissions printed safely: shown(), escaped(), the one
                  helper at every door a student's text reaches a terminal or a log through
    signals.py    signals by handle, never by a PID alone: signal_process(), kill_cgroup()
"""
