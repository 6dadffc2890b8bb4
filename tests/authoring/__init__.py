"""Tests of utils/authoring/ (build, check, demo)."""
