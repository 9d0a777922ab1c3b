"""The in-process benchmark: the runner, the per-group evaluator, the map cache, tracking, stress re-renders."""
