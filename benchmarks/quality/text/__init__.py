"""What the server does around the engine, without HTTP: `markup` (markup and placeholders
kept), `glossary` (glossaries enforced), over `pipeline` (the server's text path on an
engine)."""
