"""Checks over observed events: the assertion kinds of assertions.yaml and `expect()`."""
