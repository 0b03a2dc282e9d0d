"""The remote tier: an object store (S3 or a local directory), the objects of uploaded segments in
the layout of Aiven's open-source RemoteStorageManager, and compactlog's partition manifest.

Follows Kafka's ``RemoteStorageManager`` contract (copy, fetch by position range, idempotent
delete) and Aiven's tiered-storage-for-apache-kafka for object keys and formats.
"""
