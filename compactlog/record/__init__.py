"""The record codec: Kafka's RecordBatch v2 (and legacy v0/v1 for reading), sans-IO."""

from .batch import (BatchHeader, BatchSpec, ColumnarRecords, Header, Record, RecordBatch,
                    assemble_batch, columnar_records, empty_batch, encode_batch,
                    encode_columnar_batch, encode_marker, iter_batches)
from .control import ABORT, COMMIT, parse_control_key

__all__ = ["BatchHeader", "BatchSpec", "ColumnarRecords", "Header", "Record", "RecordBatch",
           "assemble_batch", "columnar_records", "empty_batch", "encode_batch",
           "encode_columnar_batch", "iter_batches", "ABORT", "COMMIT", "encode_marker",
           "parse_control_key"]
