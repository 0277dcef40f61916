"""The Spark data sources. Imported only where pyspark is installed."""
