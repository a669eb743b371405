// Package tensorarrow turns Arrow columns into tensors: the one place psiflow
// converts them (the to_tensors pipeline kind, Arrow and Parquet datasets).
//
// [Column] infers the tensor from the column's type (numbers and booleans to
// float32 [rows], lists of numbers to float32 [rows, n], binary to uint8
// [rows, n]); [Float32] and [Uint8] convert to a shape the caller names;
// [Record] converts named columns of a record batch. Every error names the
// column's type and the row that does not fit.
//
// It does not read files (package source) or write Arrow (package sink).
package tensorarrow
