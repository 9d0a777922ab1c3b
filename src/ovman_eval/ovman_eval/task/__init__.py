"""The task's semantics: episode records, the answer of each relation, admissibility, the failure
partition (TASK.md §1-2, §7).
"""
