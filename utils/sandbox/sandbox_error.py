"""The error every part of the sandbox raises when a kernel cannot be sandboxed."""

from __future__ import annotations


class SandboxError(RuntimeError):
    """Grading cannot be sandboxed here; the message says why and how to opt out."""
