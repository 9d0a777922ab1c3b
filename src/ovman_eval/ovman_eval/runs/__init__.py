"""Run directories and their files: result records, checksummed array files, source fingerprints, the worker pool."""
