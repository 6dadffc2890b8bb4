"""Instructor tools for the Prefill and Decode course (run as `python -m utils.<tool>`)."""
