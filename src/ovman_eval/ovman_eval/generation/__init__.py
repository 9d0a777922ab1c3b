"""Episode generation and certification (Algorithm 1), the dataset directory it fills, and the
validation of a dataset before it is run.
"""
