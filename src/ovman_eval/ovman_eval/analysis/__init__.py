"""What a finished run says: statistics, diagnostics, tables, the admissibility sweep,
stress comparisons, the report.
"""
