"""The model: mirror states and their allowed moves, results, errors, the offset map, lag.

A leaf: pure values and decisions, no I/O, and no import of anything else of
the project. Everything above speaks this vocabulary.
"""
