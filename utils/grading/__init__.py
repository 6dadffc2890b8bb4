"""The course's grading: graded cells observe in the student's kernel, the grader judges outside it.

    python -m utils.grading [LESSON ...]        cli.py: the command (`make grade`)
      grade_course.py  per lesson: plan -> prepare -> run -> record -> report; then grades.csv
      submissions.py plan: read the submissions (zeros with reasons), hash their files
      student_id.py  the one rule for student ids, asked at every door (collect, grading, zip, roster)
      lesson.py      one run (Grading) and one lesson's grading (LessonGrading): records each result
      runner_interface.py  the runner interface: local_runner.py (work folders on this machine), dask/ (a cluster)
      work.py        one work folder: nbgrader autograde, then feedback; returns WorkDone (plain data)
      result_file.py the per-notebook result file the last step writes (verdicts, notes, score, reason)
      gradebook.py   the lesson's template, the merge into the course's gradebook, zeros: one writer
      reference_run.py  the reference solution's run, cached; fingerprint.py what grading code is in use
      journal.py     what a run that stopped recorded; pipeline.py the steps in nbgrader's pipelines
      steps/         one nbgrader step per file: the same in every work folder and plain nbgrader
      report.py      python -m utils.grading.report: which questions the class got wrong

nbgrader_config.py calls pipeline.install(c), so this command, plain `nbgrader autograde`, the
authoring check, the demo and the formgrader all grade through the same steps (steps/):

  sanitize   WellFormed (well_formed.py)        every cell rebuilt from well-typed parts: a
                                                notebook is hostile data, any type anywhere
             SafeOverwriteCells (overwrite.py)  nbgrader's OverwriteCells that survives copied or
                                                unknown cells and restores edited cell roles
  autograde  ReferenceObservations               the reference solution's observations
             (reference_observations.py)
             SafeExecute (execute.py)           each kernel in the bubblewrap sandbox; a dead or
                                                hung kernel costs only its cell
             Verdicts (verdicts.py)             judge each graded test cell against the reference
                                                and replace its outputs by one verdict line
             KernelFields (kernel_fields.py)    every field the kernel's messages set (execution
                                                counts, metadata, language_info) rewritten or dropped
             LimitOutputSize (limit_output.py)  cap what the other cells printed
             WriteResult (write_result.py)      the notebook's result file, last; any step that
                                                fails writes its reason there instead
  feedback   HideHiddenTests (hide_hidden.py)   hidden tests cut from the feedback's source, and
                                                the outputs of ungraded cells left out
  release    KernelLanguageInfo (language_info.py)
  HTML       safe_html.py                       student Markdown and outputs sanitised wherever
                                                nbconvert renders a submission (feedback, formgrader)

observations.py holds the judging itself (collect, judge), base.py what the steps share, images.py
the pixel cap and re-encoding of the images WellFormed and KernelFields keep.
"""
