"""Redaction: the rules and their checks; `text` applies them to a text, `fields` to a sample."""
