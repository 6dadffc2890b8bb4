"""Tests of utils/grading/ (the command, its steps, the gradebook, Dask, PostgreSQL); a package, so
that its conftest.py is grading.conftest and never takes the place of tests/conftest.py."""
