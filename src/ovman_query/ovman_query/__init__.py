"""OVMAN query answering: parser, grounding, cross-visit association, decision rules, arms."""
