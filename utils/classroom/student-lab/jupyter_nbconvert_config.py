# jupyter nbconvert --execute's kernels on Unix sockets in the user's runtime folder, the same way
# as nbgrader validate's: nbgrader_config.py beside this file holds the one setting for both.
load_subconfig("nbgrader_config.py")  # noqa: F821 - provided by the loader
