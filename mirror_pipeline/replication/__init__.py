"""A replication cycle (R-MT, R-EX, R-REL): plan on the driver, copy in one Spark
job (`spark_runner`), repair what a crash left behind. Only `spark_runner` and
the daemon of its Python workers (`worker_daemon`) import PySpark.
"""
