"""Tests of course/ (the package the notebooks import); not named course, which would shadow it."""
