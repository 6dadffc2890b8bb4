"""make validate: nbgrader validate on a lesson's notebooks, with an exit status that says how it went.

nbgrader validate prints "VALIDATION FAILED ON n CELL(S)!" (or that a test cell was changed) and
still exits 0, so a script or a Makefile cannot tell a failed notebook from a passing one. This
runs nbgrader's own ValidateApp, with the same configuration and output, and exits 1 where any
notebook did not validate (a test failed, a test cell was changed or changed type; with --invert,
a test passed), naming those notebooks in one last line on stderr.

    PYTHON utils/classroom/student-lab/validate_lesson.py NOTEBOOK... [nbgrader validate's options]
"""

from __future__ import annotations

import glob
import sys

from nbgrader.apps import validateapp


def main(argv: list[str] | None = None) -> int:
    not_valid: list[str] = []

    class Recording(validateapp.Validator):
        """nbgrader's Validator, noting each notebook whose results hold anything: its results are
        empty exactly where the notebook validated."""

        def validate(self, filename: str):
            results = super().validate(filename)
            if any(results.values()):
                not_valid.append(filename)
            return results

    app = validateapp.ValidateApp()
    validateapp.Validator = Recording  # ValidateApp.start makes its Validator by this name
    try:
        app.initialize(sys.argv[1:] if argv is None else argv)
        if not any(glob.glob(name) for name in app.extra_args):
            print(f"validate: no notebook matches {' '.join(app.extra_args) or '(none given)'}", file=sys.stderr)
            return 2
        app.start()  # an unreadable notebook or an error in nbgrader exits 1 from here (app.fail)
    finally:
        validateapp.Validator = Recording.__bases__[0]
    if not_valid:
        print(f"validate: {', '.join(not_valid)} did not validate (see above)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
