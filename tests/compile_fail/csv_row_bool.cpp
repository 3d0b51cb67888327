// A bool passed to CsvWriter::row (which would print as a number or be ambiguous).
// first-error: oar: CsvWriter::row takes numbers
// expect: convert bool and char first
#include <oar/io/csv.hpp>

void log_row(oar::io::CsvWriter& csv) { csv.row(1, true); }
