"""The configuration: the file (R-CFG), link settings, name filters, naming policies (R-TP), redaction.

Pure parsing and validation: nothing here talks to Kafka.
"""
