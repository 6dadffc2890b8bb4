"""Tests of utils/bench/ (the benchmarks)."""
