"""One link at run time: its clients and naming (`context`), its state store
(mirror records by compare-and-set, offset-map segments), mirror partitions,
and what the source's health does to mirror states (R-LC-5).
"""
