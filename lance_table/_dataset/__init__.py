"""pylance's ``lance._dataset`` modules (``sharded_batch_iterator``), at the same paths."""
