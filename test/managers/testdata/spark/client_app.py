"""A Spark application in client mode: the driver runs here, executors are Pods.

Started by spark-submit with two executors and dynamic allocation off. The executors never
start (the test control plane has no kubelet), so the application holds the SparkContext until
the test kills it.
"""
import threading

from pyspark.sql import SparkSession

spark = SparkSession.builder.getOrCreate()
print("spark-client: session started", spark.sparkContext.applicationId, flush=True)
threading.Event().wait()
