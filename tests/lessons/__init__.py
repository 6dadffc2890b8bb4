"""Tests of the three lessons (source/): their text, figures, observations and gradings."""
