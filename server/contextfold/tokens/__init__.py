"""Counting tokens offline: encodings, exact counts of long texts, model limits."""
