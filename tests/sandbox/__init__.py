"""Tests of utils/sandbox/ (the bubblewrap sandbox of every grading kernel)."""
