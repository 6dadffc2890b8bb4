"""Shared helpers for the Prefill and Decode course.

Facts and tools only: hardware specs, model presets, plotting style, progress bars and the
checks that print what was expected against what a student returned. No exercise solution or
quiz answer lives here; students can read every line of this package.
"""

__version__ = "0.1.0"
