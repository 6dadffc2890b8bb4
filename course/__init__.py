"""Shared helpers for the Prefill and Decode course.

Facts and tools only: hardware specs, model presets, plotting style, progress bars and the
checks that print what was expected against what a student returned. No exercise solution or
quiz answer lives here; students can read every line of this package.

Importing it first (before torch) makes PyTorch's CPU worker threads sleep while they wait for
work instead of spinning (OMP_WAIT_POLICY=PASSIVE, unless the environment already says otherwise):
a spinning worker holds a core that a neighbour's program may need, and when that program holds
the worker's core, every operation waits for it. The OpenMP runtime reads the setting once, when
torch loads it, so it has no effect after `import torch`; course.threads.set_cpu_threads then still
keeps the thread count to the free cores.
"""

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

__version__ = "0.1.0"
