"""Data in: readers and the text policy, the public grid domain, synthetic data, engines (numpy, DuckDB, Spark)."""
