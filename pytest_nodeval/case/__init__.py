"""A case directory, read and validated: case.yaml with its config, inputs, assertions and journal.

The names inside a case directory are here, in a module that imports nothing, so that
collection can test a file's name without loading the case format (`directory.py`).
"""

CASE_FILE = "case.yaml"
"""What makes a directory a case; pytest collects it."""
CONFIG_FILE = "input/config.yaml"
"""The reference engine's config; absent for a case of your own agent."""
INPUTS_FILE = "input/inputs.yaml"
ASSERTIONS_FILE = "assertions.yaml"
JOURNAL_DIR = "journal"
INPUT_DIR = "input"
