"""The error every instructor tool raises for a problem the instructor must fix."""


class ToolError(RuntimeError):
    """A problem the instructor must fix; the message names the lesson and cell."""
