"""Statistics: per-case and suite numbers of one run, the tests behind the gates, the gates.

Pure functions over plain values; nothing here knows report.json or pytest.
"""
