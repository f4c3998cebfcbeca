"""Search: the one tokenizer, the incremental BM25 index, and the long-term memory index built on it."""
