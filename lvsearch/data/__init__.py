"""Data pipeline: corpus sources -> WordPiece tokenizer -> token shards -> masked batches."""
