"""Measured latency: a per-op latency table, a predictor built on it, and its validation.

HAT (Wang et al. 2020, section 3.3) and once-for-all (Cai et al. 2020, section 3.3) search
under a latency limit measured on the target device, predicted from a table of per-layer
latencies because timing every candidate end to end is too slow for a search. lvsearch does the
same:

* :mod:`lvsearch.latency.table` measures the table on the device it runs on
  (``lvsearch latency measure``): the forward time of every slot choice of a supernet's space
  (one op with its residual and LayerNorm), of mixing ``k`` inputs, and of the fixed parts
  (embeddings, output stage), at one batch size and sequence length, each the median over
  timed blocks after a warm-up. The table records the device, its name, the threads and the
  torch version it was measured with.
* :mod:`lvsearch.latency.predict` predicts an architecture's end-to-end latency as the table
  sum plus the measured overhead, and validates that against end-to-end latency measured on
  sampled architectures (``lvsearch latency validate``): median absolute percentage error and
  the worst case.

Latency here is the encoder's forward (embeddings, slots, output stage; no MLM head), in eval
mode under ``torch.inference_mode``, in milliseconds per batch.
"""
