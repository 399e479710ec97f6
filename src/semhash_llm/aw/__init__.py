"""Attention-Weighted MinHash: word n-grams weighted by how central the transformer finds them."""
