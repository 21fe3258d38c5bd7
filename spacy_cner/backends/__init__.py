"""Runtime machinery the layers call, as thinc's backends/: row-invariant products (rowwise_ops)
and the precision of the products at prediction (precision)."""
