"""A replication cycle (R-MT, R-EX, R-REL): plan on the driver, copy in one Spark
job (`spark_runner`, the only PySpark import), repair what a crash left behind.
"""
