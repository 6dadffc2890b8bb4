"""Tests of utils/classroom/ (a class on one server, the term's commands, the student Lab's install)."""
