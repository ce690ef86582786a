"""From production to a case: the sampler, sample directories, and `nodeval promote`.

The production-side API is `pytest_nodeval.sampler`.
"""
