//! Texts to token ids with the checkpoint's `tokenizer.json` (the HF `tokenizers` crate),
//! truncated like sentence-transformers: at `max_tokens` including the special tokens, whatever
//! the file's own truncation/padding settings say; never padded (batches are packed).
