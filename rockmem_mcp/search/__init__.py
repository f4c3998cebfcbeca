"""Search: the engine every store ranks with.

Owns: the tokenizer, BM25 (`bm25`, with MaxScore), vectors (`vectors`: the int8 matrix and the `.bin` cache), the
embedding providers (`embeddings`, `onnx_embeddings` the bundled transformer, `static_model` the static model),
ranking and fusion (`rank`, `facets`, `conversation_metadata`), salience and tiers, the long-term memory index
(`memory_index`) and the episode index (`episode_index`), and which stores a question is about (`routing`).
Imports: errors, text, tokens, models, openai_http and storage; never the settings object (a caller passes
what it chose) and never a store.
"""
