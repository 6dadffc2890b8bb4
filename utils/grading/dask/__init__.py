"""Grade on a Dask cluster: one task per submission and lesson, on workers the instructor runs.

    python -m utils.grading.run --scheduler tcp://HOST:8786        (or DASK_SCHEDULER_ADDRESS=... make grade)

`utils.grading.run` plans, records and reports as it does locally (utils/grading/run.py); only the run step
moves to the cluster. The workers share no disk with the grader (the machine running
utils.grading.run): every input travels with the tasks, every result comes back in them. Per lesson:

  - the scheduler runs nothing of the course's: every function sent to it, and every task's
    function, is pickled by value (a `dask scheduler` has Dask, not the course's tools);
  - the grader reads the submissions (preflight) and the lesson's nbgrader_config.py and source/
    folder, and hashes the code that grades: the `course` package and the course's tools
    (`utils/`). Every worker hashes its own and refuses, in one line, when they differ (before
    anything is graded: `Client.run` on every worker; again in every task, for workers that join
    later), or when the bubblewrap sandbox cannot run there;
  - one worker computes the reference's cache key (its libraries); the reference solution runs
    once as a task (unless the grader's .grading-cache/ holds it) and its observations come back
    to the grader's cache; every later task carries them, and refuses where its worker's key
    differs. The grader makes the lesson's SQLite gradebook template meanwhile; its bytes travel too;
  - one task per submission, carrying the submission's regular files (at most SUBMISSION_LIMIT
    bytes; a larger one scores zero with that reason), runs `utils.grading.run.run_worker` on a worker
    in a course folder made of what the task carries, in the worker's temporary folder: `nbgrader
    autograde` with every kernel in the bubblewrap sandbox, the verdicts judged there as locally,
    the kernels' numeric libraries given the worker's cores split between its threads. The task
    returns the graded notebook and its small gradebook; only the grader writes the course's
    gradebook (PostgreSQL for a cluster), once per submission, as results arrive. Never more tasks
    are out than the cluster has threads. A worker process that dies mid-submission never writes
    the course's gradebook: the scheduler sends the task to another worker, and after
    `distributed.scheduler.allowed-failures` (default 3) deaths the submission is marked failed
    with the reason and the rest are graded.

Each recorded submission is also written to a journal in .grading-cache/ (Journal). A run that
stops (scheduler lost, in one line; no workers left for WORKER_WAIT s) keeps it, and the next run
keeps those grades rather than grading them again; a run that grades every lesson removes it.
Progress (done, running, failed, on which worker) is printed as results arrive and every
STATUS_EVERY seconds, with the scheduler's dashboard link; the run ends with each worker's share.

One file per job, each importing what it needs at its top. The runner and the tasks use
utils.grading.run's planning and recording; utils.grading.run imports the runner only when it is given a
scheduler, and this package's __init__ imports nothing (the address check needs no Dask):

    address.py       the scheduler's address: checked, reached, Dask's log lines kept quiet
    worker_check.py  the code every worker must share with the grader (fingerprint), checked there
    payload.py       what a task carries, and the course folder a worker makes of it
    journal.py       what a run that stopped recorded; the grades the next run keeps
    tasks.py         the tasks, run on the workers (reference key, reference run, one submission)
    runner.py        the grader's side (Cluster): connect, plan, send, record, feedback
    loopback.py      a real cluster on this machine's loopback (tests, benchmarks, a rehearsal)
    bench.py         python -m utils.bench.cluster (__main__.py)
"""
