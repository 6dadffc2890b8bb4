# A package, so that this folder's conftest.py is imported as browser.conftest and does not take
# the place of tests/conftest.py (imported as plain `conftest` by tests/authoring/test_tools.py).
