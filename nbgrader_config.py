"""nbgrader configuration: the repository root is the course directory."""

c = get_config()  # noqa: F821 - provided by nbgrader

c.CourseDirectory.course_id = "prefill-decode"

# Per-cell execution limit while autograding. The slowest cell (lesson 3's sweeps on a 2-core
# CPU, shrunk under NBGRADER_EXECUTION) takes well under a minute; 300 s leaves a wide margin
# and still stops an endless loop. nbgrader reads Execute.timeout (not ExecutePreprocessor's).
c.Execute.timeout = 300

# A student who deletes a graded test cell gets it back before grading.
c.OverwriteCells.add_missing_cells = True

# The stub a student sees in place of each solution region.
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
