"""Runtime machinery the layers call, as thinc's backends/: row-invariant products (rowwise_ops),
the precision of the products at prediction (precision) and the one batcher by token budget (batching)."""
