"""Checkers: pure functions that judge a recorded history against a model and return violations."""
