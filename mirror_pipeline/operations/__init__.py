"""The verbs on mirrors: create, list, describe, pause, resume, delete, promote,
failover (R-LC) and the auto-create scan (R-AC).
"""
