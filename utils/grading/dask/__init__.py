"""Grade on a Dask cluster: one task per submission and lesson, on workers the instructor runs.

    python -m utils.grading --scheduler tcp://HOST:8786        (or DASK_SCHEDULER_ADDRESS=... make grade)

DaskRunner (runner.py) is the runner of utils/grading/runner_interface.py on a cluster: the grader plans,
records and reports as for a local run (utils/grading/lesson.py); only the grading itself moves to
the workers, which share no disk with the grader (the machine running python -m utils.grading):
every input travels with the tasks, every result comes back in them. Per lesson:

  - the scheduler runs nothing of the course's: every function sent to it, and every task's
    function, is pickled by value (a `dask scheduler` has Dask, not the course's tools);
  - the workers are checked by a WorkerPlugin (worker_check.py), on the workers there and on every
    worker that joins later: a worker whose `course` package or grading tools (`utils/`) differ
    from the grader's, or where the bubblewrap sandbox cannot run, refuses in one line, and
    refusals there at the start stop the run before anything is graded;
  - one worker computes the reference's cache key (its libraries); the reference solution runs
    once as a task (unless the grader's .grading-cache/ holds it) and its observations come back
    to the grader's cache; every later task carries them, and refuses where its worker's key
    differs;
  - one task per submission carries everything its work folder is made of (the lesson's
    nbgrader_config.py and source/, the reference, the gradebook template) and the submission's
    regular files (at most SUBMISSION_LIMIT bytes; a larger one scores zero with that reason), and
    runs utils/grading/work.py on the worker as a local run does: `nbgrader autograde` with every
    kernel in the sandbox and the kernels' numeric libraries given the worker's cores split
    between its threads, then the feedback. It returns the result file, the graded notebook, its
    feedback and its small gradebook; the grader records them as they arrive (the course's
    gradebook, PostgreSQL for a cluster, has one writer). Never more tasks are out than the cluster
    has threads. A worker process that dies mid-submission never writes the course's gradebook:
    the scheduler sends the task to another worker, and after
    `distributed.scheduler.allowed-failures` (default 3) deaths the submission is marked failed
    with the reason and the rest are graded.

A run that stops (scheduler lost, in one line; no workers left for WORKER_WAIT s) keeps what it
recorded (utils/grading/journal.py), and the next run grades only the rest. Progress (done,
running, failed, on which worker) is printed as results arrive and every STATUS_EVERY seconds,
with the scheduler's dashboard link; the run ends with each worker's share.

    address.py       the scheduler's address: checked, reached, Dask's log lines kept quiet
    worker_check.py  the code every worker must share with the grader, checked there (WorkerPlugin)
    payload.py       what the reference's tasks carry, and the size limit of a submission's
    tasks.py         the tasks, run on the workers (reference key, reference run, one submission)
    cluster_runner.py  the grader's side (DaskRunner): connect, check, prepare, send, yield results
    loopback.py      a real cluster on this machine's loopback (tests, benchmarks, a rehearsal)
    slurm.py         --slurm: the workers as this run's own Slurm jobs (dask-jobqueue), cancelled at the end
"""
