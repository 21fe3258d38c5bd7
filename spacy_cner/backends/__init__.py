"""Runtime machinery the layers call, as thinc's backends/: row-invariant products (rowwise_ops),
the precision of the products at prediction (precision), the one batcher by token budget (batching), the CRF's
forward-backward and Viterbi decoder (forward_backward, viterbi) and the device the ops run on (devices)."""
