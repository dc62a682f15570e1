"""Compaction: older history → an anchored structured summary, updated on each compaction.

Pure parts (template, transcript rendering, facts, the extractive summarizer, pinning) do no I/O;
the Anthropic and sampling summarizers call out and are optional.
"""
